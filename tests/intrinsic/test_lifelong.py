"""Tests for ngu_jax.intrinsic.lifelong (NGU Sec. 2, eq. 1)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.intrinsic import lifelong


def _maybe_jit(fn, jit):
  return jax.jit(fn) if jit else fn


@pytest.mark.parametrize("jit", [False, True])
def test_modulator_matches_numpy_over_all_errors_seen(jit):
  modulator = _maybe_jit(lifelong.modulator, jit)
  rng = np.random.default_rng(0)
  batches = [rng.gamma(2.0, 3.0, size=n).astype(np.float32)
             for n in (1, 5, 32, 7, 64)]
  stats = lifelong.init()
  seen = []
  for errors in batches:
    alpha, stats = modulator(stats, jnp.asarray(errors))
    seen.extend(errors.tolist())
    mean, std = np.mean(seen), np.std(seen)
    expected = 1.0 + (errors - mean) / std if std > 0 else np.ones_like(errors)
    np.testing.assert_allclose(alpha, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-5)
    np.testing.assert_allclose(stats.var, np.var(seen), rtol=1e-4)
    assert float(stats.count) == len(seen)


@pytest.mark.parametrize("jit", [False, True])
def test_first_calls_without_spread_give_alpha_one(jit):
  modulator = _maybe_jit(lifelong.modulator, jit)
  stats = lifelong.init()
  alpha, stats = modulator(stats, jnp.array([2.0]))  # One error: std 0.
  np.testing.assert_array_equal(alpha, [1.0])
  alpha, stats = modulator(stats, jnp.array([2.0, 2.0]))  # Still std 0.
  np.testing.assert_array_equal(alpha, [1.0, 1.0])
  assert np.isfinite(stats.mean) and np.isfinite(stats.var)


def test_stable_for_large_offsets():
  # Errors around 1e4 with unit spread: a naive sum-of-squares would lose
  # the variance in float32.
  rng = np.random.default_rng(1)
  stats = lifelong.init()
  seen = []
  for _ in range(50):
    errors = (1e4 + rng.normal(size=64)).astype(np.float32)
    _, stats = lifelong.modulator(stats, jnp.asarray(errors))
    seen.extend(errors.astype(np.float64).tolist())
  np.testing.assert_allclose(stats.var, np.var(seen), rtol=2e-2)


@pytest.mark.parametrize("jit", [False, True])
def test_ngu_intrinsic_reward_clips_alpha(jit):
  fn = _maybe_jit(lifelong.ngu_intrinsic_reward, jit)
  r_episodic = jnp.array([0.5, 0.5, 0.5, 2.0])
  alpha = jnp.array([-3.0, 0.9, 2.5, 7.0])
  # min(max(alpha, 1), 5) = [1, 1, 2.5, 5].
  np.testing.assert_allclose(fn(r_episodic, alpha), [0.5, 0.5, 1.25, 10.0])
  np.testing.assert_allclose(
      lifelong.ngu_intrinsic_reward(r_episodic, alpha, max_scale=2.0),
      [0.5, 0.5, 1.0, 4.0])


@pytest.mark.parametrize("jit", [False, True])
def test_bad_inputs(jit):
  modulator = _maybe_jit(lifelong.modulator, jit)
  stats = lifelong.init()
  with pytest.raises(ValueError, match="rank 1"):
    modulator(stats, jnp.ones((2, 3)))
  with pytest.raises(ValueError, match="empty"):
    modulator(stats, jnp.ones((0,)))
  with pytest.raises(ValueError, match="floating"):
    modulator(stats, jnp.ones((3,), jnp.int32))
  with pytest.raises(Exception, match=r"errors.*NaN or inf.*\[2\]"):
    alpha, _ = modulator(stats, jnp.array([1.0, 2.0, jnp.nan]))
    alpha.block_until_ready()
  with pytest.raises(ValueError, match="same shape"):
    lifelong.ngu_intrinsic_reward(jnp.ones(3), jnp.ones(2))
  with pytest.raises(ValueError, match="max_scale"):
    lifelong.ngu_intrinsic_reward(jnp.ones(3), jnp.ones(3), max_scale=0.5)


def test_init_leaves_are_distinct_buffers():
  # So that the statistics can be donated under jit.
  pointers = [x.unsafe_buffer_pointer()
              for x in jax.tree_util.tree_leaves(lifelong.init())]
  assert len(set(pointers)) == 3


@pytest.mark.parametrize("jit", [False, True])
def test_rnd_reward_is_error_over_std_of_all_errors_seen(jit):
  rnd_reward = _maybe_jit(lifelong.rnd_reward, jit)
  rng = np.random.default_rng(1)
  stats = lifelong.init()
  reward, stats = rnd_reward(stats, jnp.array([3.0]))  # std 0: reward 0.
  np.testing.assert_array_equal(reward, [0.0])
  seen = [3.0]
  for n in (4, 16, 3):
    errors = rng.gamma(2.0, 3.0, size=n).astype(np.float32)
    reward, stats = rnd_reward(stats, jnp.asarray(errors))
    seen.extend(errors.tolist())
    np.testing.assert_allclose(reward, errors / np.std(seen), rtol=1e-4)
  with pytest.raises(ValueError, match="errors"):
    rnd_reward(stats, jnp.zeros((2, 2)))
