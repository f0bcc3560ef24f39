"""Tests for ngu_jax.envs.functional (FunctionalBatchedEnv)."""

import functools

import numpy as np
import pytest

from ngu_jax.envs import disco_maze_jax
from ngu_jax.envs import functional
from tests.envs import conformance

# Instances are shared by the tests (each jits, and compiles, its own
# vmapped reset and step); every test resets them first. `copy` makes a twin.
@functools.lru_cache(maxsize=None)
def _maze(seed=0, copy=0):
  del copy
  return functional.FunctionalBatchedEnv(
      disco_maze_jax.DiscoMazeJax(size=7, max_episode_steps=5), 4, seed=seed)


@functools.lru_cache(maxsize=None)
def _deep_sea(seed=0, copy=0):
  del copy
  pytest.importorskip("gymnax")
  from ngu_jax.envs import gymnax_functional  # pylint: disable=g-import-not-at-top
  return functional.FunctionalBatchedEnv(
      gymnax_functional.GymnaxFunctional("DeepSea-bsuite"), 3, seed=seed)


def test_conformance_disco_maze_jax():
  rng = np.random.default_rng(0)
  stats = conformance.check_batched_env(_maze(), 60, rng,
                                        twin=_maze(copy=1),
                                        max_episode_steps=5)
  assert stats.num_terminated > 0 and stats.num_truncated > 0
  assert stats.reward_sum == 0


def test_conformance_deep_sea():
  rng = np.random.default_rng(1)
  stats = conformance.check_batched_env(_deep_sea(), 27, rng,
                                        twin=_deep_sea(copy=1),
                                        max_episode_steps=8)
  # Every DeepSea episode lasts 8 steps and terminates (then FIRST).
  assert stats.num_terminated == 3 * 3 and stats.num_truncated == 0


@pytest.mark.parametrize("make", [_maze, _deep_sea])
def test_rejects_bad_actions(make):
  fresh = functional.FunctionalBatchedEnv(make().functional_env, 2)
  with pytest.raises(RuntimeError, match="reset"):
    fresh.step(np.zeros(2, np.int32))
  with pytest.raises(RuntimeError, match="reset"):
    fresh.get_state()
  conformance.check_rejects_bad_actions(make())


def _run(env, actions):
  return [env.step(a) for a in actions]


def _assert_same(a, b):
  for x, y in zip(a, b):
    for name in ("step_type", "reward", "discount", "observation"):
      np.testing.assert_array_equal(getattr(x, name), getattr(y, name))
    assert x.extras.keys() == y.extras.keys()
    for k in x.extras:
      np.testing.assert_array_equal(x.extras[k], y.extras[k])


@pytest.mark.parametrize("make", [_maze, _deep_sea])
def test_get_state_set_state_continues_exactly(make):
  env = make()
  num_actions = env.action_spec().num_values
  actions = np.random.default_rng(2).integers(
      0, num_actions, (20, env.num_envs)).astype(np.int32)
  env.reset()
  _run(env, actions[:5])
  saved = env.get_state()
  assert all(isinstance(v, np.ndarray) for v in saved.values())
  copy = {k: v.copy() for k, v in saved.items()}
  first = _run(env, actions[5:])
  env.set_state(saved)
  _assert_same(first, _run(env, actions[5:]))
  # Onto another instance (another seed): the same future.
  other = make(seed=7)  # Not reset.
  other.set_state(saved)
  _assert_same(first, _run(other, actions[5:]))
  # Stepping never changed the saved arrays.
  for k, v in saved.items():
    np.testing.assert_array_equal(v, copy[k])


def test_set_state_rejects_other_layouts():
  env = _maze()
  env.reset()
  saved = env.get_state()
  fewer_lanes = dict(saved, leaf_0=saved["leaf_0"][:3])
  with pytest.raises(ValueError, match="expected"):
    env.set_state(fewer_lanes)
  with pytest.raises(ValueError, match="arrays"):
    env.set_state({k: v for k, v in list(saved.items())[:-1]})


def test_seeds_and_specs():
  a, b, c = _maze(seed=0), _maze(seed=0, copy=1), _maze(seed=7)
  ta, tb, tc = a.reset(), b.reset(), c.reset()
  np.testing.assert_array_equal(ta.observation, tb.observation)
  assert (ta.observation != tc.observation).any()
  assert a.num_envs == 4 and a.action_spec().num_values == 4
  assert a.observation_spec().shape == (7, 7, 3)
  assert a.observation_encoding().kind == "pixels"
  assert sorted(ta.extras) == ["coverage", "position"]
  assert ta.extras["position"].shape == (4, 2)
  assert ta.extras["coverage"].shape == (4,)
  with pytest.raises(ValueError, match="FunctionalEnv"):
    functional.FunctionalBatchedEnv(object(), 2)
  with pytest.raises(ValueError, match="num_envs"):
    functional.FunctionalBatchedEnv(disco_maze_jax.DiscoMazeJax(), 0)


def test_functional_envs_declare_no_coverage_by_default():
  env = functional.FunctionalBatchedEnv(
      disco_maze_jax.DiscoMazeJax(size=5), 2)
  assert env.make_coverage_tracker() is not None
  assert functional.FunctionalEnv.make_coverage_tracker(None, 2) is None
