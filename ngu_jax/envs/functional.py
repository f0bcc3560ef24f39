"""Functional (pure-JAX) environments for the compiled loop.

A `FunctionalEnv` is ONE environment lane as two pure functions over an
explicit state, in the style of gymnax / xland-minigrid, but with the
library's TimeStep semantics (`ngu_jax.envs.base`):

  state, timestep = env.reset(key)
  state, timestep = env.step(state, action)

* `timestep` is a `base.TimeStep` of JAX arrays for one lane: step_type
  int32 [], reward float32 [], discount float32 [], observation shaped
  `observation_spec().shape` in its dtype, extras a dict of arrays whose
  structure never changes between calls (e.g. `{"position": int32 [2]}` for
  grid worlds).
* Auto-reset lives in the state: after a LAST, the next `step` ignores the
  action and returns FIRST of a fresh episode (reward 0, discount 1), drawn
  with a key carried in the state. Termination is LAST with discount 0,
  truncation (a time limit) LAST with discount 1; MID and FIRST have
  discount 1.
* Both functions are pure: no Python side effects, no host callbacks, so the
  caller can `jax.jit`, `jax.vmap` (over lanes and over seeds) and
  `jax.lax.scan` them. B lanes are `jax.vmap(env.reset)(keys)` and
  `jax.vmap(env.step)(states, actions)`.
* Actions are trusted inside a compiled program (no host check can run
  there); `FunctionalBatchedEnv` checks them at its boundary.

`FunctionalBatchedEnv` runs B lanes of a functional environment behind the
`base.BatchedEnv` interface (one jitted, vmapped call per step, numpy out),
so the Python loop can run exactly the environments the compiled loop runs:
that is how the two loops are compared (experiments/benchmarks/loops.py).
"""

import abc
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.envs import base
from ngu_jax.types import ObservationEncoding


class FunctionalEnv(abc.ABC):
  """One environment lane as pure `reset` / `step` (module docstring).

  Subclasses are immutable after construction (their attributes are static
  configuration: sizes, time limits), so instances can be closed over by
  jitted functions.
  """

  @abc.abstractmethod
  def observation_spec(self) -> base.Array:
    """Spec of one lane's observation."""

  @abc.abstractmethod
  def observation_encoding(self) -> ObservationEncoding:
    """What the observations are (`ngu_jax.types.ObservationEncoding`)."""

  @abc.abstractmethod
  def action_spec(self) -> base.DiscreteArray:
    """Spec of one lane's action: `DiscreteArray(num_values=A)`."""

  @abc.abstractmethod
  def reset(self, key: jax.Array) -> Tuple[Any, base.TimeStep]:
    """A fresh episode: (state, FIRST timestep with reward 0, discount 1)."""

  @abc.abstractmethod
  def step(self, state: Any, action: jax.Array
           ) -> Tuple[Any, base.TimeStep]:
    """One agent step (auto-reset after LAST; module docstring)."""

  @property
  def num_actions(self) -> int:
    """A, the number of discrete actions."""
    return int(self.action_spec().num_values)

  @property
  def grid_shape(self) -> Optional[Tuple[int, int]]:
    """(height, width) of a grid world whose timesteps carry
    `extras["position"]` (row, col) int32 [2]; None otherwise."""
    return None

  def make_coverage_tracker(self, num_envs: int) -> Any:
    """A host tracker of the coverage of `num_envs` lanes, or None.

    `base.BatchedEnv.make_coverage_tracker`, for B lanes of this
    environment (`FunctionalBatchedEnv`); default None.
    """
    del num_envs
    return None

  @property
  def max_episode_steps(self) -> int:
    """An upper bound on the agent steps of one episode (its time limit)."""
    raise NotImplementedError(
        f"{type(self).__name__}.max_episode_steps: not declared.")


class FunctionalBatchedEnv(base.BatchedEnv):
  """B lanes of a `FunctionalEnv` as a `base.BatchedEnv` (numpy out).

  Lane l's keys derive from `jax.random.fold_in(PRNGKey(seed), l)`, so the
  same seed and actions give the same timesteps. The lanes' state can be
  saved and restored exactly (`get_state` / `set_state`: arrays only).

  NOTE: jits the vmapped `reset` / `step` once per instance.
  """

  def __init__(self, env: FunctionalEnv, num_envs: int, seed: int = 0):
    where = "FunctionalBatchedEnv"
    if not isinstance(env, FunctionalEnv):
      raise ValueError(f"{where}: `env` must be a FunctionalEnv, got "
                       f"{type(env).__name__}.")
    self._env = env
    self._num_envs = base.check_positive_int(num_envs, "num_envs", where)
    self._seed = int(seed)
    self._reset_fn = jax.jit(jax.vmap(env.reset))
    self._step_fn = jax.jit(jax.vmap(env.step))
    self._state = None
    self._num_actions = env.num_actions

  @property
  def functional_env(self) -> FunctionalEnv:
    """The wrapped single-lane environment."""
    return self._env

  def observation_spec(self) -> base.Array:
    return self._env.observation_spec()

  def observation_encoding(self) -> ObservationEncoding:
    return self._env.observation_encoding()

  def action_spec(self) -> base.DiscreteArray:
    return self._env.action_spec()

  def make_coverage_tracker(self) -> Any:
    return self._env.make_coverage_tracker(self._num_envs)

  def visit_grid_shape(self) -> Optional[Tuple[int, int]]:
    """The functional environment's `grid_shape` (None if it has none)."""
    shape = self._env.grid_shape
    return None if shape is None else tuple(int(n) for n in shape)

  def _timestep(self, timestep: base.TimeStep, where: str) -> base.TimeStep:
    timestep = jax.device_get(timestep)
    base.check_observation_finite(timestep.observation, where)
    return base.TimeStep(
        step_type=np.asarray(timestep.step_type, base.STEP_TYPE_DTYPE),
        reward=np.asarray(timestep.reward, np.float32),
        discount=np.asarray(timestep.discount, np.float32),
        observation=np.asarray(timestep.observation),
        extras={k: np.asarray(v) for k, v in timestep.extras.items()})

  def reset(self) -> base.TimeStep:
    keys = jax.vmap(lambda l: jax.random.fold_in(
        jax.random.PRNGKey(self._seed), l))(jnp.arange(self._num_envs))
    self._state, timestep = self._reset_fn(keys)
    return self._timestep(timestep, "FunctionalBatchedEnv.reset")

  def step(self, actions) -> base.TimeStep:
    where = "FunctionalBatchedEnv.step"
    if self._state is None:
      raise RuntimeError(f"{where}: call reset() first.")
    actions = base.validate_actions(actions, self._num_envs,
                                    self._num_actions, where)
    self._state, timestep = self._step_fn(self._state, jnp.asarray(actions))
    return self._timestep(timestep, where)

  def get_state(self) -> Dict[str, np.ndarray]:
    """The lanes' state as a flat dict of numpy arrays (no pickle)."""
    if self._state is None:
      raise RuntimeError("FunctionalBatchedEnv.get_state: call reset() "
                         "first.")
    leaves = jax.tree_util.tree_leaves(jax.device_get(self._state))
    return {f"leaf_{i}": np.asarray(x) for i, x in enumerate(leaves)}

  def set_state(self, state: Dict[str, Any]) -> None:
    """Restores `get_state`'s arrays (shapes and dtypes must match)."""
    where = "FunctionalBatchedEnv.set_state"
    if self._state is None:
      self.reset()
    leaves, treedef = jax.tree_util.tree_flatten(self._state)
    if len(state) != len(leaves):
      raise ValueError(f"{where}: expected {len(leaves)} arrays, got "
                       f"{len(state)}.")
    new = []
    for i, leaf in enumerate(leaves):
      value = np.asarray(state[f"leaf_{i}"])
      if value.shape != leaf.shape or value.dtype != leaf.dtype:
        raise ValueError(f"{where}: array {i} is {value.shape} "
                         f"{value.dtype}, expected {leaf.shape} "
                         f"{leaf.dtype}.")
      new.append(jnp.asarray(value))
    self._state = jax.tree_util.tree_unflatten(treedef, new)
