"""Tests for ngu_jax.envs.gymnax_functional (one gymnax lane)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

gymnax = pytest.importorskip(
    "gymnax", reason="gymnax is not installed: pip install 'ngu_jax[gymnax]'")

# pylint: disable=g-import-not-at-top,wrong-import-position
from ngu_jax.envs import base
from ngu_jax.envs import gymnax_adapter
from ngu_jax.envs import gymnax_functional

FIRST, MID, LAST = (int(base.StepType.FIRST), int(base.StepType.MID),
                    int(base.StepType.LAST))


@pytest.mark.parametrize("env_id,overrides", [
    ("DeepSea-bsuite", {}),
    ("CartPole-v1", {"max_steps_in_episode": 20}),
])
def test_matches_gymnax_env_lane_by_lane(env_id, overrides):
  """vmapped GymnaxFunctional == GymnaxEnv given the same keys and actions."""
  num_envs, seed, num_steps = 3, 4, 60
  batched = gymnax_adapter.GymnaxEnv(env_id, num_envs, seed=seed,
                                     **overrides)
  env = gymnax_functional.GymnaxFunctional(env_id, **overrides)
  # GymnaxEnv.reset splits its key chain once, then one key per lane.
  _, key = jax.random.split(jax.random.key(seed))
  state, ts = jax.jit(jax.vmap(env.reset))(jax.random.split(key, num_envs))
  expected = batched.reset()
  step = jax.jit(jax.vmap(env.step))
  rng = np.random.default_rng(0)
  ends = set()
  for t in range(num_steps + 1):
    np.testing.assert_array_equal(ts.step_type, expected.step_type)
    np.testing.assert_array_equal(ts.reward, expected.reward)
    np.testing.assert_array_equal(ts.discount, expected.discount)
    np.testing.assert_array_equal(ts.observation, expected.observation)
    np.testing.assert_array_equal(state.episode_step,
                                  expected.extras["episode_step"])
    ends |= {float(d) for d, s in zip(expected.discount, expected.step_type)
             if s == LAST}
    actions = rng.integers(0, env.num_actions, num_envs).astype(np.int32)
    state, ts = step(state, jnp.asarray(actions))
    expected = batched.step(actions)
    del t
  assert ends == ({0.0} if env_id == "DeepSea-bsuite" else {0.0, 1.0})


def test_deep_sea_positions_hand_checked():
  env = gymnax_functional.GymnaxFunctional("DeepSea-bsuite",
                                           randomize_actions=False)
  assert env.grid_shape == (9, 8) and env.max_episode_steps == 8
  assert env.observation_spec().shape == (8, 8) and env.num_actions == 2
  state, ts = jax.jit(jax.vmap(env.reset))(
      jax.random.split(jax.random.key(0), 2))
  np.testing.assert_array_equal(ts.extras["position"], [[0, 0], [0, 0]])
  assert ts.extras["position"].dtype == jnp.int32
  step = jax.jit(jax.vmap(env.step))
  actions = jnp.array([1, 0], jnp.int32)  # Lane 0 right, lane 1 left.
  for t in range(1, 9):
    state, ts = step(state, actions)
    # Right moves saturate at the last column (7).
    np.testing.assert_array_equal(ts.extras["position"],
                                  [[t, min(t, 7)], [t, 0]])
    np.testing.assert_array_equal(ts.step_type, LAST if t == 8 else MID)
    if t < 8:  # The diver is drawn where `position` says.
      for lane in range(2):
        r, c = np.asarray(ts.extras["position"][lane])
        assert ts.observation[lane, r, c] == 1
  np.testing.assert_array_equal(ts.discount, 0)
  state, ts = step(state, actions)  # Ignored: a fresh episode.
  np.testing.assert_array_equal(ts.step_type, FIRST)
  np.testing.assert_array_equal(ts.extras["position"], [[0, 0], [0, 0]])
  state, ts = step(state, actions)
  np.testing.assert_array_equal(ts.extras["position"], [[1, 1], [1, 0]])


def test_deep_sea_preferred_actions_move_right():
  env = gymnax_functional.GymnaxFunctional("DeepSea-bsuite", size=5)
  right = env.preferred_actions()
  assert right.shape == env.grid_shape == (6, 5) and right.dtype == np.int32
  np.testing.assert_array_equal(right[-1], right[-2])
  step = jax.jit(env.step)
  state, ts = env.reset(jax.random.key(0))
  for t in range(5):  # Right in every cell: the diagonal, then the treasure.
    row, col = np.asarray(ts.extras["position"])
    assert (row, col) == (t, t)
    state, ts = step(state, jnp.int32(right[row, col]))
  assert float(ts.reward) == pytest.approx(1. - 0.01 / 5)
  fixed = gymnax_functional.GymnaxFunctional("DeepSea-bsuite", size=5,
                                             randomize_actions=False)
  np.testing.assert_array_equal(fixed.preferred_actions(), 1)
  assert gymnax_functional.GymnaxFunctional(
      "DeepSea-bsuite", size=5, sample_action_map=True).preferred_actions(
      ) is None
  assert gymnax_functional.GymnaxFunctional(
      "CartPole-v1").preferred_actions() is None


def test_scan_is_deterministic_and_unjitted_matches():
  env = gymnax_functional.GymnaxFunctional("CartPole-v1",
                                           max_steps_in_episode=5)
  assert env.grid_shape is None and env.max_episode_steps == 5

  def run(key, actions):
    state, ts0 = env.reset(key)
    state, ts = jax.lax.scan(env.step, state, actions)
    return ts0, ts

  actions = jnp.asarray(np.random.default_rng(0).integers(0, 2, 12),
                        jnp.int32)
  a = jax.jit(run)(jax.random.key(1), actions)
  b = jax.jit(run)(jax.random.key(1), actions)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)
  assert a[0].extras == {} and a[1].extras == {}
  assert (np.asarray(a[1].step_type) == FIRST).sum() >= 1
  # Un-jitted, step by step: the same.
  state, ts0 = env.reset(jax.random.key(1))
  np.testing.assert_array_equal(ts0.observation, a[0].observation)
  for t in range(3):
    state, ts = env.step(state, actions[t])
    np.testing.assert_allclose(ts.observation, a[1].observation[t],
                               rtol=1e-6)
    assert int(ts.step_type) == int(a[1].step_type[t])


def test_bad_ids_and_overrides():
  with pytest.raises(ValueError, match="known ids: .*DeepSea-bsuite"):
    gymnax_functional.GymnaxFunctional("NoSuchEnv-v0")
  with pytest.raises(ValueError, match="EnvParams fields"):
    gymnax_functional.GymnaxFunctional("DeepSea-bsuite", no_such_field=1)
  with pytest.raises(ValueError, match="discrete action"):
    gymnax_functional.GymnaxFunctional("Pendulum-v1")
  env = gymnax_functional.GymnaxFunctional("DeepSea-bsuite", size=5)
  assert env.observation_spec().shape == (5, 5) and env.grid_shape == (6, 5)
  assert env.observation_encoding() == gymnax_adapter.GymnaxEnv(
      "DeepSea-bsuite", 1).observation_encoding()
