"""MiniGrid on envpool as a `BatchedEnv`: cheap exploration tasks.

Environments are envpool's MiniGrid ids (`minigrid_ids()`), e.g.
MiniGrid-DoorKey-8x8-v0, MiniGrid-FourRooms-v0, MiniGrid-MultiRoom-N4-S5-v0,
MiniGrid-KeyCorridorS3R3-v0. Reward and time limit are envpool's (= MiniGrid's):
reward 1 - 0.9 * (step / max_steps) on reaching the goal, 0 otherwise; the
episode is cut after `max_episode_steps` agent steps (envpool's per-id
default, e.g. 640 for DoorKey-8x8, 100 for FourRooms, 120 for MultiRoom-N4-S5,
270 for KeyCorridorS3R3). Overriding `max_episode_steps` also changes
MiniGrid's `max_steps` in the reward formula, as in MiniGrid itself.

Observation: envpool's `image`, the agent's egocentric partial view,
uint8 [B, 7, 7, 3] (agent_view_size 7) holding MiniGrid's (object type,
colour, state) index triples, not RGB pixels. Declared as
`ObservationEncoding("symbolic", num_values=MINIGRID_NUM_VALUES)`, (11, 6,
3): envpool's `minigrid::Type` has 11 object codes (kUnseen 0 ... kAgent 10),
`minigrid::Color` 6 colours (kRed 0 ... kGrey 5; kUnassigned is resolved when
an object is built and never observed) and `WorldObj::GetState` 3 door states
(open 0, closed 1, locked 2; 0 for other objects) (envpool
minigrid/impl/utils.h; random episodes of all 177 envpool MiniGrid / BabyAI
ids showed objects 0-9, colours 0-5, states 0-2, envpool 1.2.5). The
networks one-hot encode each channel: [B, 7, 7, 20].
Extras (all from envpool): `direction` int32 [B] in [0, 4), `agent_pos`
int32 [B, 2] (x, y grid cell), `mission` uint8 [B, mission_bytes] (the
mission string, zero-padded bytes), `mission_id` int32 [B], `elapsed_step`
int32 [B] (agent steps in the episode; 0 on FIRST), `env_id` int32 [B].

Termination (goal, lava, ...) is LAST with discount 0; the time limit is
LAST with discount 1. NOTE: envpool reports an episode that terminates on
exactly the last allowed step as truncated (its `terminated = done &
~truncated`). MiniGrid pays a non-zero reward only on terminating steps, so
a rewarded truncation is returned as a termination (discount 0); an
unrewarded termination on that step (e.g. lava) cannot be told apart and is
returned as a truncation (discount 1).
"""

from typing import Any, Dict, Optional, Sequence, Tuple

import envpool
import numpy as np

from ngu_jax.envs import base
from ngu_jax.envs import envpool_adapter
from ngu_jax.types import ObservationEncoding


# Codes per channel of the observation: object type, colour, state.
MINIGRID_NUM_VALUES = (11, 6, 3)


class MiniGridEnv(envpool_adapter.EnvpoolEnv):
  """Envpool MiniGrid as a `BatchedEnv`; build it with `make_minigrid`.

  See the module docstring for the observation and extras, and
  `ngu_jax.envs.envpool_adapter.EnvpoolEnv` for the auto-reset and async semantics.
  """

  def __init__(self, pool: Any, env_id: str):
    super().__init__(pool, where=f"MiniGridEnv({env_id})")
    self.env_id = env_id
    # The gymnasium space: envpool's dm_env spec fails on numpy 1.26.
    self._obs_shape = tuple(pool.observation_space["image"].shape)

  def observation_spec(self) -> base.BoundedArray:
    return base.BoundedArray(self._obs_shape, np.uint8, minimum=0,
                             maximum=255, name="observation")

  def observation_encoding(self) -> ObservationEncoding:
    """Symbolic (object, colour, state) codes: counts (11, 6, 3)."""
    return ObservationEncoding("symbolic", MINIGRID_NUM_VALUES)

  def visit_grid_shape(self) -> Tuple[int, int]:
    """(0, 0): MiniGrid's grid size is not in its spec; the visit counts
    grow to the cells visited (`base.BatchedEnv.visit_grid_shape`)."""
    return (0, 0)

  def _observation(self, obs) -> np.ndarray:
    return obs["image"]

  def _extras(self, obs, info) -> Dict[str, np.ndarray]:
    return {
        "direction": obs["direction"],
        "agent_pos": info["agent_pos"],
        "mission": obs["mission"],
        "mission_id": info["mission_id"],
        "elapsed_step": info["elapsed_step"],
    }

  def _terminated(self, terminated, truncated, reward, info) -> np.ndarray:
    del info
    # MiniGrid pays a non-zero reward only on a terminating step (goal,
    # collision), so a rewarded "truncation" is a termination.
    return terminated | (truncated & (reward != 0))


def minigrid_ids() -> Sequence[str]:
  """envpool's MiniGrid ids, e.g. "MiniGrid-DoorKey-8x8-v0"."""
  return [e for e in envpool.list_all_envs() if e.startswith("MiniGrid-")]


def make_minigrid(
    env_id: str,
    num_envs: int,
    seed: int = 0,
    *,
    max_episode_steps: Optional[int] = None,
    batch_size: Optional[int] = None,
    num_threads: int = 0,
    thread_affinity_offset: int = -1,
) -> MiniGridEnv:
  """Builds B lanes of an envpool MiniGrid environment.

  Args:
    env_id: an envpool MiniGrid id (`minigrid_ids()`), e.g.
      "MiniGrid-DoorKey-8x8-v0".
    num_envs: number of envpool envs.
    seed: env i is seeded with `seed + i` (envpool's convention).
    max_episode_steps: time limit in agent steps; None (default) keeps
      envpool's default for `env_id` (MiniGrid's own max_steps).
    batch_size: envpool async mode when smaller than `num_envs` (see
      `ngu_jax.envs.envpool_adapter.EnvpoolEnv`); None: sync mode.
    num_threads: envpool worker threads (0: envpool chooses).
    thread_affinity_offset: envpool thread pinning (-1: no pinning).

  Returns:
    A `MiniGridEnv`: observation uint8 [B, 7, 7, 3], 7 actions.

  Raises:
    ValueError: unknown id or invalid setting.
  """
  where = "make_minigrid"
  ids = minigrid_ids()
  if env_id not in ids:
    raise ValueError(
        f"{where}: unknown MiniGrid id {env_id!r}; envpool has {len(ids)}, "
        "e.g. MiniGrid-DoorKey-8x8-v0, MiniGrid-FourRooms-v0, "
        "MiniGrid-MultiRoom-N4-S5-v0, MiniGrid-KeyCorridorS3R3-v0 "
        "(ngu_jax.envs.minigrid.minigrid_ids() lists all).")
  num_envs, batch_size = envpool_adapter.check_pool_sizes(num_envs,
                                                         batch_size, where)
  kwargs = {}
  if max_episode_steps is not None:
    kwargs["max_episode_steps"] = base.check_positive_int(
        max_episode_steps, "max_episode_steps", where)
  pool = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs,
                      batch_size=batch_size, seed=int(seed),
                      num_threads=int(num_threads),
                      thread_affinity_offset=int(thread_affinity_offset),
                      **kwargs)
  return MiniGridEnv(pool, env_id)
