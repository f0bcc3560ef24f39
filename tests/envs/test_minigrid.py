"""Tests for ngu_jax.envs.minigrid: envpool MiniGrid behind base.BatchedEnv."""

import envpool
import numpy as np
import pytest

from ngu_jax.envs import minigrid
from tests.envs import conformance

IDS = ("MiniGrid-DoorKey-8x8-v0", "MiniGrid-FourRooms-v0",
       "MiniGrid-MultiRoom-N4-S5-v0", "MiniGrid-KeyCorridorS3R3-v0")


def test_ids_available():
  ids = minigrid.minigrid_ids()
  for env_id in IDS:
    assert env_id in ids


@pytest.mark.parametrize("env_id", IDS)
def test_specs_and_unchanged_time_limit(env_id):
  with minigrid.make_minigrid(env_id, 2, seed=5) as env:
    default = envpool.make_spec(env_id).config.max_episode_steps
    assert env.envpool_config["max_episode_steps"] == default
    assert env.envpool_config["seed"] == 5
    assert env.observation_spec().shape == (7, 7, 3)
    assert env.observation_spec().dtype == np.uint8
    assert env.action_spec().num_values == 7
    ts = env.reset()
    assert ts.observation.shape == (2, 7, 7, 3)
    assert ts.extras["direction"].shape == (2,)
    assert ts.extras["agent_pos"].shape == (2, 2)
    assert ts.extras["mission"].shape[0] == 2


def test_documented_time_limits():
  # MiniGrid's max_steps, as documented in ngu_jax.envs.minigrid
  # (DoorKey: 10 * size^2).
  for env_id, limit in zip(IDS, (640, 100, 120, 270)):
    assert envpool.make_spec(env_id).config.max_episode_steps == limit


def test_conformance_doorkey():
  make = lambda: minigrid.make_minigrid("MiniGrid-DoorKey-5x5-v0", 4, seed=2)
  with make() as env, make() as twin:
    stats = conformance.check_batched_env(
        env, 300, np.random.default_rng(0), twin=twin,
        max_episode_steps=env.envpool_config["max_episode_steps"])
  assert stats.num_last >= 4


def test_termination_and_truncation():
  # Empty-5x5 with a 20-step limit under random actions: reaching the goal
  # is LAST with discount 0 and reward 1 - 0.9 t / 20 (MiniGrid's reward);
  # the limit is LAST with discount 1 and reward 0 at exactly 20 steps.
  limit = 20
  with minigrid.make_minigrid("MiniGrid-Empty-5x5-v0", 16, seed=0,
                              max_episode_steps=limit) as env:
    stats = conformance.check_batched_env(env, 100, np.random.default_rng(1),
                                          max_episode_steps=limit)
    assert stats.num_terminated > 0 and stats.num_truncated > 0
    ts = env.reset()
    rng = np.random.default_rng(2)
    terminated = truncated = 0
    for _ in range(60):
      prev = ts
      ts = env.step(rng.integers(0, 3, size=16).astype(np.int32))
      steps = ts.extras["elapsed_step"]
      term = ts.last() & (ts.discount == 0)
      trunc = ts.last() & (ts.discount == 1)
      np.testing.assert_allclose(ts.reward[term],
                                 1 - 0.9 * steps[term] / limit, rtol=1e-6)
      assert (steps[trunc] == limit).all()
      assert (ts.reward[trunc] == 0).all()
      assert (ts.reward[ts.mid()] == 0).all()
      assert (ts.first() == prev.last()).all()
      assert (steps[ts.first()] == 0).all()
      terminated += int(term.sum())
      truncated += int(trunc.sum())
    assert terminated > 0 and truncated > 0


def test_rewarded_last_step_is_a_termination():
  # envpool calls a goal reached on the limit's step "truncated"; the
  # adapter returns it as a termination since MiniGrid rewards only ends.
  # Empty-5x5: the agent starts at (1, 1) facing east, the goal is at
  # (3, 3): forward, forward, turn right, forward, forward = 5 steps.
  plan = [2, 2, 1, 2, 2]
  with minigrid.make_minigrid("MiniGrid-Empty-5x5-v0", 1,
                              max_episode_steps=len(plan)) as env:
    env.reset()
    for action in plan:
      ts = env.step(np.array([action], np.int32))
    assert ts.last()[0]
    assert ts.reward[0] == pytest.approx(0.1)
    assert ts.discount[0] == 0


def test_async_mode():
  with minigrid.make_minigrid("MiniGrid-Empty-5x5-v0", 6, batch_size=2,
                              max_episode_steps=15) as env:
    assert env.is_async and env.num_envs == 2 and env.pool_size == 6
    stats = conformance.check_batched_env(env, 200, np.random.default_rng(0),
                                          max_episode_steps=15)
    assert stats.num_last >= 6


def test_bad_input():
  with minigrid.make_minigrid("MiniGrid-FourRooms-v0", 2) as env:
    conformance.check_rejects_bad_actions(env)
  with pytest.raises(ValueError, match="unknown MiniGrid id"):
    minigrid.make_minigrid("MiniGrid-Nope-v0", 2)
  with pytest.raises(ValueError, match="max_episode_steps"):
    minigrid.make_minigrid("MiniGrid-FourRooms-v0", 2, max_episode_steps=0)
  with pytest.raises(ValueError, match="batch_size"):
    minigrid.make_minigrid("MiniGrid-FourRooms-v0", 2, batch_size=3)



def test_sync_rows_are_env_ids():
  # Sync mode tracks auto-resets by row: envpool must return env b in row b.
  with minigrid.make_minigrid("MiniGrid-Empty-5x5-v0", 8,
                              max_episode_steps=7) as env:
    ts = env.reset()
    rng = np.random.default_rng(0)
    for _ in range(50):
      np.testing.assert_array_equal(ts.extras["env_id"], np.arange(8))
      ts = env.step(rng.integers(0, 7, size=8).astype(np.int32))
