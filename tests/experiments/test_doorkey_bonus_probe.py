"""Tests of experiments.probes.doorkey_bonus: DoorKey's phases by hand."""

import jax
import jax.numpy as jnp
import pytest

from experiments.probes import doorkey_bonus
from ngu_jax import envs

pytest.importorskip("xminigrid")


def _state(position, pocket_tile):
  env = envs.make_functional("minigrid/MiniGrid-DoorKey-8x8-v0")
  state, _ = env.reset(jax.random.PRNGKey(3))
  agent = state.level.agent.replace(
      position=jnp.asarray(position, state.level.agent.position.dtype),
      pocket=jnp.asarray([pocket_tile, 0], state.level.agent.pocket.dtype))
  return state._replace(level=state.level.replace(agent=agent)), state


def test_phases_follow_the_wall_and_the_pocket():
  _, state = _state((1, 1), 0)
  grid = jax.device_get(state.level.grid[..., 0])
  is_door = (grid == 8) | (grid == 9) | (grid == 10)  # xminigrid's DOOR_*
  door_cols = [c for c in range(grid.shape[1]) if is_door[:, c].any()]
  assert len(door_cols) == 1
  col = door_cols[0]
  door_row = int(is_door[:, col].argmax())
  phase = lambda pos, pocket: int(doorkey_bonus._phase(_state(pos, pocket)[0]))
  assert phase((1, col - 1), 0) == 0  # room 1
  assert phase((1, col - 1), doorkey_bonus._KEY_TILE) == 1  # key carried
  assert phase((door_row, col), doorkey_bonus._KEY_TILE) == 2  # doorway
  assert phase((1, col + 1), doorkey_bonus._KEY_TILE) == 3  # room 2
  assert phase((1, col + 1), 0) == 3
