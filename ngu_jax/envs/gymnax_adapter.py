"""JAX-native gymnax environments behind the batched interface.

`GymnaxEnv(env_id, num_envs, seed)` runs B lanes of a gymnax (>= 1.0)
environment with discrete actions, e.g. the bsuite-style exploration task
"DeepSea-bsuite", "MountainCar-v0" or "CartPole-v1", as a
`ngu_jax.envs.base.BatchedEnv`: one jitted, vmapped call per `reset` /
`step`, numpy arrays out.

Episode ends. gymnax >= 1.0's `Environment.step` reports two flags:
`terminated` (the environment's natural end, `is_terminated`: DeepSea's
last row, CartPole's pole falling, MountainCar's goal) and `truncated`
(`is_truncated`: `state.time >= params.max_steps_in_episode`, the time
limit). This adapter maps them to `base`'s semantics:

* terminated -> LAST with discount 0, also when the time limit is reached
  on the same step (e.g. DeepSea, whose default limit equals its depth, so
  every DeepSea episode *terminates*);
* truncated only -> LAST with discount 1;
* otherwise MID with discount 1.

What it cannot tell apart: an environment that folds a time limit of its
own into `is_terminated` (no built-in gymnax >= 1.0 environment does; older
gymnax 0.0.x merged both into one `done`, hence the version floor), or one
whose `step` override drops the flags.

Auto-reset. gymnax's `step` resets a finished lane inside the same call and
returns the *reset* observation, with the real last one in
`info["final_observation"]`. The adapter instead returns that final
observation with LAST and keeps the reset observation and state; the
lane's next `step` ignores its action and returns FIRST with that
observation, reward 0 and discount 1, as `base` requires. Calling the
environment's own `step` (rather than `step_env` / `reset_env`) keeps
environment-specific overrides, e.g. DeepSea's cumulative bsuite metrics
(`total_bad_episodes`) carried across episodes.

Randomness: every lane has its own key chain, all derived from
`jax.random.key(seed)`, so the same seed and actions give the same
observations.

NOTE: `jax.jit` is called here, inside an environment *object* (not a pure
library function), once per instance.
"""

import dataclasses
import functools
from typing import Any, Dict, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.envs import base
from ngu_jax.types import BINARY
from ngu_jax.types import FEATURES
from ngu_jax.types import ObservationEncoding

# pylint: disable=g-import-not-at-top
try:
  import gymnax
  from gymnax.environments import spaces as gymnax_spaces
  _IMPORT_ERROR = None
except ImportError as e:  # pragma: no cover - depends on the environment.
  gymnax = None
  gymnax_spaces = None
  _IMPORT_ERROR = e
# pylint: enable=g-import-not-at-top


class LaneCarry(NamedTuple):
  """One lane's adapter state (a pytree); `GymnaxEnv` holds B of them, every
  leaf with a leading lane axis [B]."""
  env_state: Any  # gymnax state.
  next_obs: Any  # observation shown on the lane's next FIRST.
  ended: jax.Array  # bool []: the lane returned LAST on the last step.
  episode_step: jax.Array  # int32 []: agent steps in the current episode.
  key: jax.Array  # PRNG key.


# (step_type int32 [], reward float32 [], discount float32 [], observation,
#  episode_step int32 []) of one lane.
LaneOutputs = Tuple[jax.Array, jax.Array, jax.Array, Any, jax.Array]


def _require_gymnax(where: str) -> None:
  if gymnax is None:
    raise ImportError(
        f"{where}: gymnax is not installed ({_IMPORT_ERROR}); install it "
        "with `pip install 'ngu_jax[gymnax]'` (gymnax >= 1.0).")


# gymnax environments that fetch a data set (MNIST) from the network when they
# are constructed: refused, since nothing in ngu_jax may download at run time.
_DOWNLOADING_ENVS = frozenset({"MNISTBandit-bsuite"})


@functools.lru_cache(maxsize=1)
def gymnax_ids() -> Tuple[str, ...]:
  """The gymnax ids `GymnaxEnv` accepts, in gymnax's registry order.

  `gymnax.registered_envs` minus the environments that download data when
  built and those with non-discrete action spaces (e.g. Pendulum-v1), which
  `GymnaxEnv` refuses. Builds each environment once (about 2 s), cached.

  Raises:
    ImportError: gymnax is not installed.
  """
  _require_gymnax("gymnax_ids")
  ids = []
  for env_id in gymnax.registered_envs:
    if env_id in _DOWNLOADING_ENVS:
      continue
    env, params = gymnax.make(env_id)
    if isinstance(env.action_space(params), gymnax_spaces.Discrete):
      ids.append(env_id)
  return tuple(ids)


class Built(NamedTuple):
  """A validated gymnax environment and what the adapters need of it."""
  env: Any  # gymnax Environment.
  params: Any  # its EnvParams, overrides applied.
  num_actions: int
  action_dtype: Any
  obs_spec: base.Array  # one lane's observation.
  obs_encoding: ObservationEncoding


def build(env_id: str, where: str, env_params_overrides: Dict[str, Any]
          ) -> Built:
  """Makes and checks a gymnax environment (shared by the adapters).

  Args:
    env_id: a gymnax id, e.g. "DeepSea-bsuite".
    where: the caller, for messages.
    env_params_overrides: `EnvParams` fields, or else constructor keywords
      (see `GymnaxEnv.__init__`).

  Raises:
    ImportError: gymnax is not installed.
    ValueError: unknown or downloading id, bad overrides, a non-discrete
      action space, or a gymnax older than 1.0.
  """
  _require_gymnax(where)
  if env_id not in gymnax.registered_envs:
    raise ValueError(f"{where}: unknown gymnax environment; known ids: "
                     f"{', '.join(gymnax.registered_envs)}.")
  if env_id in _DOWNLOADING_ENVS:
    raise ValueError(f"{where}: this environment downloads a data set when "
                     "it is built, and ngu_jax never downloads at run "
                     "time; use another gymnax environment.")
  _, default_params = gymnax.make(env_id)
  fields = sorted(f.name for f in dataclasses.fields(default_params))
  param_kw = {k: v for k, v in env_params_overrides.items() if k in fields}
  ctor_kw = {k: v for k, v in env_params_overrides.items()
             if k not in fields}
  try:
    env, params = gymnax.make(env_id, **ctor_kw)
  except TypeError as e:
    raise ValueError(
        f"{where}: overrides {sorted(ctor_kw)} are neither EnvParams "
        f"fields {fields} nor constructor arguments ({e}).") from e
  params = params.replace(**param_kw)
  action_space = env.action_space(params)
  if not isinstance(action_space, gymnax_spaces.Discrete):
    raise ValueError(f"{where}: only discrete action spaces are supported, "
                     f"got {action_space!r}.")
  obs_shape = jax.eval_shape(
      lambda k: env.reset(k, params)[0], jax.random.key(0))
  obs_space = env.observation_space(params)
  # Check that the gymnax step has the >= 1.0 signature this relies on.
  step_shape = jax.eval_shape(
      lambda k: env.step(k, env.reset(k, params)[1],
                         jnp.zeros((), action_space.dtype), params),
      jax.random.key(0))
  if len(step_shape) != 6 or "final_observation" not in step_shape[5]:
    raise ValueError(
        f"{where}: needs gymnax >= 1.0 (`step` returning obs, state, "
        "reward, terminated, truncated, info with 'final_observation').")
  return Built(
      env=env, params=params, num_actions=int(action_space.n),
      action_dtype=action_space.dtype,
      obs_spec=_observation_spec(obs_space, obs_shape.shape, obs_shape.dtype),
      obs_encoding=observation_encoding_of(obs_space, obs_shape.shape))


def lane_reset(env: Any, params: Any, key: jax.Array
               ) -> Tuple[LaneCarry, LaneOutputs]:
  """A fresh episode of one lane: FIRST, reward 0, discount 1 (pure).

  Args:
    env, params: a gymnax environment and its params (`build`).
    key: PRNG key; split into the lane's key chain and the reset key.

  Returns:
    (carry, (step_type, reward, discount, observation, episode_step)).
  """
  key, reset_key = jax.random.split(key)
  obs, state = env.reset(reset_key, params)
  carry = LaneCarry(env_state=state, next_obs=obs, ended=jnp.bool_(False),
                    episode_step=jnp.int32(0), key=key)
  return carry, (jnp.int32(base.StepType.FIRST), jnp.float32(0),
                 jnp.float32(1), obs, jnp.int32(0))


def lane_step(env: Any, params: Any, carry: LaneCarry, action: jax.Array
              ) -> Tuple[LaneCarry, LaneOutputs, Any]:
  """One agent step of one lane with `base`'s semantics (module docstring).

  Args:
    env, params: a gymnax environment and its params (`build`).
    carry: the lane's `LaneCarry`.
    action: the action, scalar of the action space's dtype (ignored after
      LAST).

  Returns:
    (carry, (step_type, reward, discount, observation, episode_step),
     key_step): the last is the key the environment's `step` split (its
    first half is `step_env`'s key), e.g. to recompute the final state.
  """
  key, step_key = jax.random.split(carry.key)
  obs, state, reward, terminated, truncated, info = env.step(
      step_key, carry.env_state, action, params)
  restart = carry.ended  # The lane shows its stored FIRST observation.
  terminated = jnp.asarray(terminated, bool)
  done = terminated | jnp.asarray(truncated, bool)

  def select(mask, on_true, on_false):
    return jax.tree.map(lambda x, y: _select(mask, x, y), on_true, on_false)

  shown = select(done, info["final_observation"], obs)
  shown = select(restart, carry.next_obs, shown)
  new_state = select(restart, carry.env_state, state)
  next_obs = select(restart, carry.next_obs, obs)
  step_type = jnp.where(
      restart, base.StepType.FIRST,
      jnp.where(done, base.StepType.LAST, base.StepType.MID)).astype(
          jnp.int32)
  discount = jnp.where(terminated & ~restart, 0.0, 1.0).astype(jnp.float32)
  reward = jnp.where(restart, 0.0, reward).astype(jnp.float32)
  episode_step = jnp.where(restart, 0, carry.episode_step + 1).astype(
      jnp.int32)
  new_carry = LaneCarry(env_state=new_state, next_obs=next_obs,
                        ended=done & ~restart, episode_step=episode_step,
                        key=key)
  return new_carry, (step_type, reward, discount, shown, episode_step), \
      step_key


class GymnaxEnv(base.BatchedEnv):
  """B lanes of a gymnax environment; see the module docstring.

  Observations keep the environment's shape and dtype, [B, *obs_shape]
  (e.g. float32 [B, 8, 8] for DeepSea-bsuite); actions are int [B] in
  [0, num_actions). Extras: `episode_step`, the agent steps taken in the
  current episode (int32 [B]; 0 on FIRST).
  """

  def __init__(self, env_id: str, num_envs: int, seed: int = 0,
               **env_params_overrides: Any):
    """Builds B lanes of `env_id`.

    Args:
      env_id: a gymnax id (`gymnax.registered_envs`), e.g. "DeepSea-bsuite".
      num_envs: B, the number of lanes.
      seed: integer seed of every lane's key chain.
      **env_params_overrides: fields of the environment's `EnvParams`
        (e.g. `max_steps_in_episode=50`, DeepSea's `randomize_actions`)
        replace the defaults; any other keyword goes to the environment's
        constructor via `gymnax.make` (e.g. DeepSea's `size=10`).

    Raises:
      ImportError: gymnax is not installed.
      ValueError: unknown id (lists the known ones), bad overrides, a
        non-discrete action space, or a bad `num_envs` / `seed`.
    """
    where = f"GymnaxEnv({env_id!r})"
    _require_gymnax(where)
    if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
      raise ValueError(f"{where}: `num_envs` must be a positive integer, got "
                       f"{num_envs!r}.")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
      raise ValueError(f"{where}: `seed` must be a non-negative integer, got "
                       f"{seed!r}.")
    built = build(env_id, where, env_params_overrides)
    self.env_id = env_id
    self.env = built.env
    self.params = built.params
    self._where = where
    self._num_envs = int(num_envs)
    self._num_actions = built.num_actions
    self._key = jax.random.key(int(seed))
    self._obs_spec = built.obs_spec
    self._obs_encoding = built.obs_encoding
    self._action_dtype = built.action_dtype
    self._reset_fn = jax.jit(self._reset_impl)
    self._step_fn = jax.jit(self._step_impl)
    self._carry = None
    self._closed = False

  @property
  def num_actions(self) -> int:
    return self._num_actions

  def observation_spec(self) -> base.Array:
    return self._obs_spec

  def observation_encoding(self) -> ObservationEncoding:
    """Derived from the environment's declared observation space.

    See `observation_encoding_of`: e.g. DeepSea's Box(0, 1, (size, size))
    is a binary grid, CartPole's float vector real features, FrozenLake's
    Discrete(16) a symbolic code.
    """
    return self._obs_encoding

  def action_spec(self) -> base.DiscreteArray:
    return base.DiscreteArray(self._num_actions, dtype=np.int32,
                              name="action")

  # Pure functions of the carry (jitted once in __init__).
  def _reset_impl(self, key: jax.Array):
    return jax.vmap(lambda k: lane_reset(self.env, self.params, k))(
        jax.random.split(key, self._num_envs))

  def _step_impl(self, carry: LaneCarry, actions: jax.Array):
    carry, outputs, _ = jax.vmap(
        lambda c, a: lane_step(self.env, self.params, c, a))(
            carry, actions.astype(self._action_dtype))
    return carry, outputs

  def _timestep(self, outputs, where: str) -> base.TimeStep:
    step_type, reward, discount, obs, episode_step = jax.device_get(outputs)
    obs = np.asarray(obs)
    base.check_observation_finite(obs, where)
    return base.TimeStep(step_type=np.asarray(step_type),
                         reward=np.asarray(reward),
                         discount=np.asarray(discount), observation=obs,
                         extras={"episode_step": np.asarray(episode_step)})

  def reset(self) -> base.TimeStep:
    """Starts a fresh episode in every lane: all FIRST, reward 0, discount 1.

    Successive calls continue one key chain from `seed` (new episodes, the
    same sequence for every instance built with that seed).
    """
    self._check_open("reset")
    self._key, key = jax.random.split(self._key)
    self._carry, outputs = self._reset_fn(key)
    return self._timestep(outputs, f"{self._where}.reset")

  def step(self, actions) -> base.TimeStep:
    """Advances every lane by one agent step (see the module docstring).

    Args:
      actions: integer actions in [0, num_actions), shaped [B]; ignored for
        lanes that returned LAST on the previous step.

    Returns:
      TimeStep with observation [B, *obs_shape], reward / discount float32
      [B], extras `episode_step` int32 [B].

    Raises:
      ValueError: actions of the wrong shape, dtype or range (naming the
        lanes), an observation with NaN/inf (naming the lanes), a call
        before `reset()` or after `close()`.
    """
    where = f"{self._where}.step"
    self._check_open("step")
    actions = base.validate_actions(actions, self._num_envs,
                                    self._num_actions, where)
    if self._carry is None:
      raise ValueError(f"{where}: call reset() before the first step().")
    self._carry, outputs = self._step_fn(self._carry, jnp.asarray(actions))
    return self._timestep(outputs, where)

  def _check_open(self, method: str) -> None:
    if self._closed:
      raise ValueError(f"{self._where}.{method}: the environment is closed.")

  def close(self) -> None:
    self._closed = True
    self._carry = None


def _select(mask: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
  """Per lane (leading axis), `x` where `mask` else `y`; typed keys too."""
  if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
    impl = jax.random.key_impl(x)
    data = _select(mask, jax.random.key_data(x), jax.random.key_data(y))
    return jax.random.wrap_key_data(data, impl=impl)
  return jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y)


def observation_encoding_of(space: Any,
                            shape: Tuple[int, ...]) -> ObservationEncoding:
  """The `ObservationEncoding` a gymnax observation space declares.

  * `Discrete(n)` with scalar observations: symbolic, one channel of n codes
    (the networks see a one-hot vector [n]);
  * `Box` bounded in [0, 1] with grid observations (rank 2 or 3: DeepSea's
    [size, size], Catch, the MinAtar games' [10, 10, C] channels): binary
    grids (DeepSea [size, size] -> [size, size, 1] in the networks);
  * any other `Box` (CartPole, MountainCar, Acrobot, [0, 1]-bounded vectors
    that hold fractions, e.g. UmbrellaChain's time, Pong-misc's [0, 2]
    grid) and any other space: real features, used as they are.

  Args:
    space: the environment's `observation_space(params)`.
    shape: the shape of ONE real observation.

  Returns:
    An `ngu_jax.types.ObservationEncoding`.
  """
  shape = tuple(int(s) for s in shape)
  if isinstance(space, gymnax_spaces.Discrete) and shape == ():
    return ObservationEncoding("symbolic", (int(space.n),))
  if isinstance(space, gymnax_spaces.Box) and len(shape) in (2, 3):
    try:
      low = np.asarray(space.low, np.float64)
      high = np.asarray(space.high, np.float64)
    except (TypeError, ValueError):
      return FEATURES
    if low.size and high.size and low.min() >= 0 and high.max() <= 1:
      return BINARY
  return FEATURES


def _observation_spec(space: Any, shape: Tuple[int, ...],
                      dtype: Any) -> base.Array:
  """Per-lane spec: shape and dtype of real observations, bounds if known."""
  dtype = np.dtype(dtype)
  if isinstance(space, gymnax_spaces.Discrete) and shape == ():
    return base.DiscreteArray(int(space.n), dtype=dtype, name="observation")
  if isinstance(space, gymnax_spaces.Box):
    try:
      return base.BoundedArray(shape, dtype, np.asarray(space.low),
                               np.asarray(space.high), name="observation")
    except (ValueError, TypeError):
      pass  # Bounds that do not fit the real dtype: no bounds.
  return base.Array(shape, dtype, name="observation")
