"""Tests for ngu_jax.envs.gymnax_adapter (gymnax environments)."""

import numpy as np
import pytest

gymnax = pytest.importorskip(
    "gymnax", reason="gymnax is not installed: pip install 'ngu_jax[gymnax]'")

# pylint: disable=g-import-not-at-top,wrong-import-position
from ngu_jax import envs
from ngu_jax.envs import base
from ngu_jax.envs import gymnax_adapter
from tests.envs import conformance

FIRST, MID, LAST = (int(base.StepType.FIRST), int(base.StepType.MID),
                    int(base.StepType.LAST))


def _deep_sea(num_envs, **kwargs):
  # Unshuffled actions: action 1 always moves right (bsuite debug mode).
  return gymnax_adapter.GymnaxEnv("DeepSea-bsuite", num_envs, seed=0,
                                  randomize_actions=False, **kwargs)


def test_deep_sea_termination_reward_and_auto_reset():
  env = _deep_sea(2)
  assert env.observation_spec().shape == (8, 8)
  assert env.action_spec().num_values == 2
  ts = env.reset()
  assert ts.observation.shape == (2, 8, 8)
  assert ts.observation.dtype == np.float32
  np.testing.assert_array_equal(ts.observation[:, 0, 0], 1)  # Top left.
  rewards = []
  for t in range(1, 9):
    ts = env.step(np.array([1, 0], np.int32))  # Lane 0 right, lane 1 left.
    rewards.append(ts.reward)
    np.testing.assert_array_equal(ts.extras["episode_step"], t)
    if t < 8:
      np.testing.assert_array_equal(ts.step_type, MID)
      np.testing.assert_array_equal(ts.discount, 1)
      # The diver is on row t: column t (always right) or 0 (always left).
      assert ts.observation[0, t, t] == 1 and ts.observation[1, t, 0] == 1
      assert ts.observation.sum() == 2
  # Depth 8 reached at step 8 (also the default time limit): termination.
  np.testing.assert_array_equal(ts.step_type, LAST)
  np.testing.assert_array_equal(ts.discount, 0)
  np.testing.assert_array_equal(ts.observation, 0)  # bsuite's end frame.
  rewards = np.array(rewards)
  # Right moves cost 0.01 / 8 each; the treasure (+1) comes with the LAST.
  np.testing.assert_allclose(rewards[:, 0].sum(), 1 - 0.01, rtol=1e-5)
  np.testing.assert_allclose(rewards[-1, 0], 1 - 0.01 / 8, rtol=1e-5)
  np.testing.assert_allclose(rewards[:, 1], 0, atol=1e-7)
  ts = env.step(np.array([1, 1], np.int32))  # Ignored: fresh episode.
  np.testing.assert_array_equal(ts.step_type, FIRST)
  np.testing.assert_array_equal(ts.reward, 0)
  np.testing.assert_array_equal(ts.discount, 1)
  np.testing.assert_array_equal(ts.extras["episode_step"], 0)
  np.testing.assert_array_equal(ts.observation[:, 0, 0], 1)
  assert ts.observation.sum() == 2
  ts = env.step(np.array([1, 1], np.int32))
  np.testing.assert_array_equal(ts.step_type, MID)
  assert ts.observation[0, 1, 1] == 1 and ts.observation[1, 1, 1] == 1


def test_deep_sea_truncation_has_discount_one():
  env = _deep_sea(3, max_steps_in_episode=3)
  env.reset()
  for t in range(1, 4):
    ts = env.step(np.ones(3, np.int32))
    np.testing.assert_array_equal(ts.step_type, LAST if t == 3 else MID)
    np.testing.assert_array_equal(ts.discount, 1)
  # The LAST observation is the real one (row 3), not the reset one.
  np.testing.assert_array_equal(ts.observation[:, 3, 3], 1)
  ts = env.step(np.zeros(3, np.int32))
  np.testing.assert_array_equal(ts.step_type, FIRST)
  np.testing.assert_array_equal(ts.observation[:, 0, 0], 1)


def test_cartpole_termination_vs_truncation():
  # Lane 0 always pushes right: the pole falls (termination, discount 0)
  # within ~10 steps. Lane 1 alternates and survives the 30-step limit.
  env = gymnax_adapter.GymnaxEnv("CartPole-v1", 2, seed=0,
                                 max_steps_in_episode=30)
  env.reset()
  ends = {0: [], 1: []}
  for t in range(1, 31):
    ts = env.step(np.array([1, t % 2], np.int32))
    for b in range(2):
      if ts.last()[b]:
        ends[b].append((int(ts.extras["episode_step"][b]),
                        float(ts.discount[b])))
  assert ends[0] and ends[0][0][0] < 30 and ends[0][0][1] == 0.0
  assert ends[1] == [(30, 1.0)]


def test_conformance_deep_sea_and_make():
  rng = np.random.default_rng(0)
  make = lambda: envs.make("gymnax/DeepSea-bsuite", 4, seed=2)
  stats = conformance.check_batched_env(make(), 40, rng, twin=make())
  # Every DeepSea episode lasts exactly 8 steps and terminates.
  assert stats.num_terminated == 4 * 4 and stats.num_truncated == 0
  assert stats.num_first == 4 * 4


def test_conformance_cartpole_with_truncations():
  rng = np.random.default_rng(1)
  make = lambda: gymnax_adapter.GymnaxEnv("CartPole-v1", 3, seed=5,
                                          max_steps_in_episode=12)
  stats = conformance.check_batched_env(make(), 60, rng, twin=make())
  assert stats.num_truncated > 0 and stats.num_terminated > 0


def test_seeds():
  a, b, c = (gymnax_adapter.GymnaxEnv("CartPole-v1", 2, seed=seed)
             for seed in (0, 0, 1))
  a1, b1, c1 = a.reset(), b.reset(), c.reset()
  np.testing.assert_array_equal(a1.observation, b1.observation)
  assert (a1.observation != c1.observation).any()
  assert (a1.observation[0] != a1.observation[1]).any()  # Lanes differ.
  # A second reset starts new episodes, identically for equal seeds.
  a2, b2 = a.reset(), b.reset()
  np.testing.assert_array_equal(a2.observation, b2.observation)
  assert (a2.observation != a1.observation).any()


def test_bad_input():
  env = _deep_sea(3)
  with pytest.raises(ValueError, match="reset"):
    env.step(np.zeros(3, np.int32))
  conformance.check_rejects_bad_actions(env)
  env.close()
  with pytest.raises(ValueError, match="closed"):
    env.step(np.zeros(3, np.int32))
  with pytest.raises(ValueError, match="known ids: .*DeepSea-bsuite"):
    gymnax_adapter.GymnaxEnv("NoSuchEnv-v0", 2)
  with pytest.raises(ValueError, match="EnvParams fields"):
    gymnax_adapter.GymnaxEnv("DeepSea-bsuite", 2, no_such_field=1)
  with pytest.raises(ValueError, match="discrete action"):
    gymnax_adapter.GymnaxEnv("Pendulum-v1", 2)


def test_constructor_overrides():
  env = gymnax_adapter.GymnaxEnv("DeepSea-bsuite", 2, size=5,
                                 max_steps_in_episode=4)
  assert env.observation_spec().shape == (5, 5)
  assert env.params.max_steps_in_episode == 4


def test_nan_observation_is_reported():
  # A NaN gravity makes MountainCar's velocity NaN after one step.
  env = gymnax_adapter.GymnaxEnv("MountainCar-v0", 3, gravity=float("nan"))
  env.reset()
  with pytest.raises(ValueError, match=r"NaN or inf in lane\(s\) \[0, 1, 2\]"):
    env.step(np.ones(3, np.int32))


def test_missing_gymnax_gives_install_hint(monkeypatch):
  monkeypatch.setattr(gymnax_adapter, "gymnax", None)
  with pytest.raises(ImportError, match=r"ngu_jax\[gymnax\]"):
    gymnax_adapter.GymnaxEnv("DeepSea-bsuite", 2)


def test_environments_that_download_data_are_refused():
  with pytest.raises(ValueError, match="downloads a data set"):
    gymnax_adapter.GymnaxEnv("MNISTBandit-bsuite", 2)
