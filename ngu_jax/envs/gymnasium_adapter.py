"""A Gymnasium vector environment (gymnasium >= 1.1) as a `BatchedEnv`.

`GymnasiumVectorEnv(vector_env, seed)` runs the B sub-environments of a
`gymnasium.vector.VectorEnv` (e.g. `gymnasium.make_vec("CartPole-v1", 8)`
or a `SyncVectorEnv` / `AsyncVectorEnv` of a user's own `gymnasium.Env`)
behind `ngu_jax.envs.base`'s interface; `ngu_jax.envs.make("module:factory",
...)` wraps a factory's vector environment in it.

Auto-reset. gymnasium >= 1.1 declares its vector auto-reset mode in
`metadata["autoreset_mode"]`. Its default, `AutoresetMode.NEXT_STEP`, is
envpool's: the step after a lane's terminated / truncated one ignores that
lane's action, resets it and returns its first observation with reward 0 and
both flags false. So this adapter reuses `envpool_adapter.EnvpoolEnv`, which
marks that step FIRST, the ending step LAST, with discount 0 on
`terminated` and 1 on `truncated` only. The other modes are refused with a
ValueError, since they cannot be mapped exactly: `SAME_STEP` resets inside
the ending step (its observation is already the next episode's; the last one
is in `info["final_obs"]`), so the lane's FIRST would have to come one step
later while the lane has already moved on; `DISABLED` never resets. A vector
environment that does not declare its mode is refused too, and so is
gymnasium < 1.1 (0.x resets within the ending step; 1.0 declares no mode).

Spaces. Actions: `single_action_space` must be `Discrete(n, start=s)`; the
agent's actions are 0..n-1 (s is added before stepping). Observations:
`single_observation_space` a `Box` (spec: its shape, dtype and bounds) or a
`Discrete(n)` (a scalar code). Encoding (override with
`observation_encoding=`): `Discrete(n)` symbolic with n codes; a uint8
`Box` of rank 3 ([H, W, C] images) pixels; any other `Box` real features.
Float observations holding NaN/inf are refused, naming the lanes.

Extras: `env_id` int32 [B] (lane b is sub-environment b). Gymnasium's `info`
dict is not passed on.
"""

import types
from typing import Any, Optional

import numpy as np

from ngu_jax.envs import base
from ngu_jax.envs import envpool_adapter
from ngu_jax.types import ObservationEncoding

try:
  import gymnasium  # pylint: disable=g-import-not-at-top
except ImportError as e:  # pragma: no cover: envpool depends on gymnasium.
  gymnasium = None
  _IMPORT_ERROR = e

WHERE = "GymnasiumVectorEnv"


def _require_gymnasium(where: str):
  """gymnasium's `AutoresetMode`; raises unless gymnasium >= 1.1."""
  if gymnasium is None:
    raise ImportError(f"{where}: gymnasium is not installed "
                      f"({_IMPORT_ERROR}); `pip install 'gymnasium>=1.1'`.")
  mode = getattr(gymnasium.vector, "AutoresetMode", None)
  if mode is None:
    raise ValueError(
        f"{where}: needs gymnasium >= 1.1 (vector environments that declare "
        f"their auto-reset mode, `gymnasium.vector.AutoresetMode`); "
        f"gymnasium {gymnasium.__version__} is installed.")
  return mode


def is_vector_env(obj: Any) -> bool:
  """Whether `obj` is a `gymnasium.vector.VectorEnv` (False without
  gymnasium)."""
  return gymnasium is not None and isinstance(obj, gymnasium.vector.VectorEnv)


def is_single_env(obj: Any) -> bool:
  """Whether `obj` is a one-environment `gymnasium.Env` (not vectorised)."""
  return gymnasium is not None and isinstance(obj, gymnasium.Env)


def check_autoreset_mode(env: Any, where: str = WHERE) -> None:
  """Refuses a vector environment whose auto-reset is not NEXT_STEP.

  Raises:
    ValueError: gymnasium < 1.1, no declared mode, or a mode other than
      `AutoresetMode.NEXT_STEP` (the message says why and what to change).
  """
  autoreset_mode = _require_gymnasium(where)
  metadata = getattr(env, "metadata", None) or {}
  declared = metadata.get("autoreset_mode")
  fix = ("build it with autoreset_mode=gymnasium.vector.AutoresetMode."
         "NEXT_STEP (the default of gymnasium.make_vec, SyncVectorEnv and "
         "AsyncVectorEnv)")
  if declared is None:
    raise ValueError(
        f"{where}: {type(env).__name__} does not declare metadata"
        "['autoreset_mode'], so when its lanes reset is unknown; set it to "
        "gymnasium.vector.AutoresetMode.NEXT_STEP if the step after an "
        f"episode's end returns the next episode's first observation, or "
        f"{fix}.")
  try:
    mode = autoreset_mode(declared)
  except ValueError:
    raise ValueError(f"{where}: unknown metadata['autoreset_mode'] "
                     f"{declared!r}; {fix}.") from None
  if mode == autoreset_mode.SAME_STEP:
    raise ValueError(
        f"{where}: autoreset_mode SAME_STEP is not supported: the step that "
        "ends an episode already returns the next episode's first "
        "observation, and that lane's FIRST cannot be delayed a step while "
        f"the lane has already moved on; {fix}.")
  if mode != autoreset_mode.NEXT_STEP:
    raise ValueError(
        f"{where}: autoreset_mode {mode.name} is not supported (the lanes "
        f"must reset themselves after an episode's end); {fix}.")


def observation_encoding_of(space: Any) -> ObservationEncoding:
  """The default encoding of a gymnasium observation space (module
  docstring): Discrete symbolic, uint8 [H, W, C] Box pixels, else
  features."""
  if isinstance(space, gymnasium.spaces.Discrete):
    return ObservationEncoding("symbolic", (int(space.n),))
  if np.dtype(space.dtype) == np.uint8 and len(space.shape) == 3:
    return ObservationEncoding("pixels")
  return ObservationEncoding("features")


def _observation_spec(space: Any, where: str) -> base.Array:
  if isinstance(space, gymnasium.spaces.Discrete):
    if int(space.start) != 0:
      raise ValueError(f"{where}: a Discrete observation space must start at "
                       f"0, got {space}.")
    return base.DiscreteArray(int(space.n), dtype=np.dtype(space.dtype),
                              name="observation")
  if not isinstance(space, gymnasium.spaces.Box):
    raise ValueError(f"{where}: the observation space must be a Box or a "
                     f"Discrete, got {space}.")
  try:
    return base.BoundedArray(space.shape, space.dtype, space.low, space.high,
                             name="observation")
  except (ValueError, TypeError):
    return base.Array(space.shape, space.dtype, name="observation")


class _VectorPool:
  """A gymnasium `VectorEnv` with the parts of envpool's API that
  `EnvpoolEnv` reads: `config`, `spec.action_spec()`, `reset()`, `step()`
  with `info["env_id"]`, `close()`."""

  def __init__(self, env: Any, seed: Optional[int], num_actions: int,
               action_start: int):
    num_envs = int(env.num_envs)
    self.env = env
    self.config = {"num_envs": num_envs, "batch_size": num_envs}
    action_spec = base.DiscreteArray(num_actions, dtype=np.int32,
                                     name="action")
    self.spec = types.SimpleNamespace(action_spec=lambda: action_spec)
    self._seed = seed
    self._start = np.int64(action_start)
    self._env_ids = np.arange(num_envs, dtype=np.int32)

  def reset(self):
    # Seeded once: later resets continue the sub-environments' generators.
    obs, info = self.env.reset(seed=self._seed)
    self._seed = None
    return obs, dict(info, env_id=self._env_ids)

  def step(self, actions):
    obs, reward, terminated, truncated, info = self.env.step(
        actions.astype(np.int64) + self._start)
    return (obs, reward, np.asarray(terminated, bool),
            np.asarray(truncated, bool), dict(info, env_id=self._env_ids))

  def close(self):
    self.env.close()


class GymnasiumVectorEnv(envpool_adapter.EnvpoolEnv):
  """B lanes of a gymnasium vector environment; see the module docstring.

  Observations [B, *single_observation_space.shape] in the space's dtype
  (float32 [B, 4] for CartPole-v1); actions int32 [B] in [0, n).
  """

  def __init__(self, vector_env: Any, seed: Optional[int] = 0,
               observation_encoding: Optional[ObservationEncoding] = None):
    """Wraps `vector_env`.

    Args:
      vector_env: a `gymnasium.vector.VectorEnv` in auto-reset mode
        NEXT_STEP; this adapter closes it on `close()`.
      seed: passed to the first `reset` (sub-environment b gets seed + b,
        gymnasium's rule); None leaves it unseeded.
      observation_encoding: what the observations are; default from the
        observation space (module docstring).

    Raises:
      ValueError: not a vector environment, an auto-reset mode other than
        NEXT_STEP, a non-Discrete action space, or an observation space that
        is neither Box nor Discrete.
    """
    _require_gymnasium(WHERE)
    if not is_vector_env(vector_env):
      hint = (" (one environment: vectorise it, e.g. gymnasium.vector."
              "SyncVectorEnv([make_env] * num_envs))"
              if is_single_env(vector_env) else "")
      raise ValueError(f"{WHERE}: expected a gymnasium.vector.VectorEnv, got "
                       f"{type(vector_env).__name__}{hint}.")
    check_autoreset_mode(vector_env)
    action_space = vector_env.single_action_space
    if not isinstance(action_space, gymnasium.spaces.Discrete):
      raise ValueError(f"{WHERE}: the action space must be Discrete (NGU "
                       f"picks among discrete actions), got {action_space}.")
    obs_space = vector_env.single_observation_space
    self._obs_spec = _observation_spec(obs_space, WHERE)
    self._obs_encoding = (observation_encoding
                          or observation_encoding_of(obs_space))
    self._obs_dtype = np.dtype(obs_space.dtype)
    self._vector_env = vector_env
    super().__init__(_VectorPool(vector_env, seed, int(action_space.n),
                                 int(action_space.start)), where=WHERE)

  @property
  def vector_env(self) -> Any:
    """The wrapped gymnasium vector environment."""
    return self._vector_env

  def observation_spec(self) -> base.Array:
    return self._obs_spec

  def observation_encoding(self) -> ObservationEncoding:
    return self._obs_encoding

  def _observation(self, obs) -> np.ndarray:
    # A copy: a vector env built with copy=False reuses its buffer.
    obs = np.array(obs, dtype=self._obs_dtype)
    base.check_observation_finite(obs, self._where)
    return obs
