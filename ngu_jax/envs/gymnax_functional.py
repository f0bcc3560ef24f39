"""One lane of a gymnax environment as a `FunctionalEnv`.

`GymnaxFunctional(env_id, **overrides)` gives a gymnax (>= 1.0) environment
with discrete actions, e.g. the bsuite exploration task "DeepSea-bsuite",
the pure `reset(key)` / `step(state, action)` of
`ngu_jax.envs.functional`, for the compiled loop. Its semantics are
`gymnax_adapter.GymnaxEnv`'s, lane by lane, through the same functions
(`gymnax_adapter.build`, `lane_reset`, `lane_step`):

* terminated -> LAST with discount 0 (also when the time limit is reached
  on the same step); truncated only -> LAST with discount 1; else MID;
* a LAST shows the episode's real final observation; the next `step`
  ignores its action and returns FIRST with the reset observation, reward
  0 and discount 1.

Extras: none, except for "DeepSea-bsuite": `position`, the diver's (row,
column), int32 [2]. A DeepSea episode ends when the diver leaves the last
row: that LAST reports row `size` (its observation is blank), so
`grid_shape` is (size + 1, size).
"""

from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.envs import base
from ngu_jax.envs import functional
from ngu_jax.envs import gymnax_adapter
from ngu_jax.types import ObservationEncoding

_DEEP_SEA = "DeepSea-bsuite"


class GymnaxFunctional(functional.FunctionalEnv):
  """One lane of a gymnax environment; see the module docstring.

  Observations keep the environment's shape and dtype (float32 [size, size]
  for DeepSea-bsuite); actions int32 [] in [0, num_actions). The state is a
  `gymnax_adapter.LaneCarry`.
  """

  def __init__(self, env_id: str, **env_params_overrides: Any):
    """Builds the lane's environment.

    Args:
      env_id: a gymnax id (`gymnax.registered_envs`), e.g. "DeepSea-bsuite".
      **env_params_overrides: `EnvParams` fields (e.g.
        `max_steps_in_episode=50`, DeepSea's `randomize_actions`), or else
        constructor keywords (DeepSea's `size=10`); as `GymnaxEnv`.

    Raises:
      ImportError: gymnax is not installed.
      ValueError: unknown id, bad overrides or a non-discrete action space.
    """
    where = f"GymnaxFunctional({env_id!r})"
    built = gymnax_adapter.build(env_id, where, env_params_overrides)
    self.env_id = env_id
    self.env = built.env
    self.params = built.params
    self._built = built
    self._deep_sea = env_id == _DEEP_SEA

  def observation_spec(self) -> base.Array:
    return self._built.obs_spec

  def observation_encoding(self) -> ObservationEncoding:
    """From the observation space (`gymnax_adapter.observation_encoding_of`)."""
    return self._built.obs_encoding

  def action_spec(self) -> base.DiscreteArray:
    return base.DiscreteArray(self._built.num_actions, dtype=jnp.int32,
                              name="action")

  @property
  def grid_shape(self) -> Optional[Tuple[int, int]]:
    if self._deep_sea:
      return (int(self.env.size) + 1, int(self.env.size))
    return None

  def preferred_actions(self) -> Optional[np.ndarray]:
    """DeepSea: the action that moves right in each cell, else None.

    int32 [size + 1, size] (`grid_shape`): bsuite hides "right" behind a
    fixed per-cell action mapping (`randomize_actions`); the last row (the
    blank final observation) repeats row size - 1. None for other
    environments and for DeepSea with `sample_action_map` (a new mapping
    every episode). For per-cell diagnostics (`diagnostics.cell_panels`).
    """
    if not self._deep_sea or bool(self.params.sample_action_map):
      return None
    size = int(self.env.size)
    if bool(self.params.randomize_actions):
      mapping = np.asarray(self.env.action_mapping, np.int32)
    else:
      mapping = np.ones((size, size), np.int32)
    return np.concatenate([mapping, mapping[-1:]], axis=0)

  @property
  def max_episode_steps(self) -> int:
    """The gymnax time limit, `params.max_steps_in_episode`."""
    return int(self.params.max_steps_in_episode)

  def _extras(self, env_state: Any) -> Dict[str, jax.Array]:
    if self._deep_sea:
      return {"position": jnp.stack([env_state.row, env_state.column]).astype(
          jnp.int32)}
    return {}

  def _timestep(self, outputs, extras) -> base.TimeStep:
    step_type, reward, discount, obs, _ = outputs
    return base.TimeStep(step_type=step_type, reward=reward,
                         discount=discount, observation=obs, extras=extras)

  def reset(self, key: jax.Array
            ) -> Tuple[gymnax_adapter.LaneCarry, base.TimeStep]:
    """A fresh episode: (state, FIRST timestep, reward 0, discount 1)."""
    carry, outputs = gymnax_adapter.lane_reset(self.env, self.params, key)
    return carry, self._timestep(outputs, self._extras(carry.env_state))

  def step(self, state: gymnax_adapter.LaneCarry, action: jax.Array
           ) -> Tuple[gymnax_adapter.LaneCarry, base.TimeStep]:
    """One agent step (auto-reset after LAST; module docstring).

    Args:
      state: `gymnax_adapter.LaneCarry`.
      action: int [] in [0, num_actions).

    Returns:
      (state, TimeStep): step_type int32 [], reward / discount float32 [],
      observation of the spec's shape and dtype, extras as documented.
    """
    action = jnp.asarray(action).astype(self._built.action_dtype)
    carry, outputs, step_key = gymnax_adapter.lane_step(
        self.env, self.params, state, action)
    extras = {}
    if self._deep_sea:
      # gymnax's `step` returns the reset state after a LAST: recompute the
      # final one (`Environment.step` gives `step_env` the first half of
      # its key; DeepSea's `step_env` is cheap).
      final = self.env.step_env(jax.random.split(step_key)[0],
                                state.env_state, action, self.params)[1]
      shown = jax.tree.map(lambda r, f: jnp.where(state.ended, r, f),
                           self._extras(carry.env_state), self._extras(final))
      extras = shown
    return carry, self._timestep(outputs, extras)
