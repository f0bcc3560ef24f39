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


@pytest.mark.parametrize("jit", [False, True])
def test_standardize_is_the_z_score_over_all_values_seen(jit):
  standardize = _maybe_jit(lifelong.standardize, jit)
  rng = np.random.default_rng(2)
  stats = lifelong.init()
  z, stats = standardize(stats, jnp.array([3.0]))  # std 0: 0.
  np.testing.assert_array_equal(z, [0.0])
  seen = [3.0]
  for n in (4, 16, 3):
    values = rng.gamma(2.0, 3.0, size=n).astype(np.float32)
    valid = np.ones(n, bool)
    valid[0] = False  # not counted, and 0
    z, stats = standardize(stats, jnp.asarray(values), valid=jnp.asarray(valid))
    seen.extend(values[valid].tolist())
    want = (values - np.mean(seen)) / np.std(seen)
    np.testing.assert_allclose(z[1:], want[1:], rtol=1e-4, atol=1e-5)
    assert z[0] == 0.0
  # The modulator is 1 + the z-score of the same statistics.
  alpha, _ = lifelong.modulator(lifelong.init(), jnp.array([1., 2., 4.]))
  z, _ = lifelong.standardize(lifelong.init(), jnp.array([1., 2., 4.]))
  np.testing.assert_allclose(alpha, 1. + z, rtol=1e-6)
  with pytest.raises(ValueError, match="lifelong.standardize"):
    standardize(stats, jnp.zeros((2, 2)))


def _ema_reference(batches, horizon):
  """Plain-numpy statistics: exact until `horizon` values, then each batch of
  n values gets weight n / (min(count, horizon) + n), written out as a
  weighted mean / second moment (float64)."""
  mean = var = count = 0.0
  for x in batches:
    x = np.asarray(x, np.float64)
    n_b = len(x)
    if n_b == 0:
      continue
    n_a = min(count, horizon) if horizon else count
    w = n_b / (n_a + n_b)
    # Mixture of the two distributions with weights (1 - w, w).
    new_mean = (1 - w) * mean + w * x.mean()
    second = (1 - w) * (var + mean ** 2) + w * np.mean(x ** 2)
    mean, var, count = new_mean, second - new_mean ** 2, count + n_b
  return mean, var, count


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("horizon", [0, 50, 200])
def test_update_stats_horizon_matches_numpy(jit, horizon):
  update = _maybe_jit(
      lambda s, v: lifelong.update_stats(s, v, horizon=horizon), jit)
  rng = np.random.default_rng(3)
  batches = [rng.gamma(2.0, 3.0 + i, size=n).astype(np.float32)
             for i, n in enumerate((1, 5, 32, 7, 64, 16, 40, 3))]
  stats = lifelong.init()
  for i, errors in enumerate(batches):
    stats = update(stats, jnp.asarray(errors))
    mean, var, count = _ema_reference(batches[:i + 1], horizon)
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-5)
    np.testing.assert_allclose(stats.var, var, rtol=1e-4)
    assert float(stats.count) == count


@pytest.mark.parametrize("jit", [False, True])
def test_invalid_errors_do_not_count(jit):
  modulator = _maybe_jit(
      lambda s, e, v: lifelong.modulator(s, e, horizon=100, valid=v), jit)
  stats = lifelong.init()
  errors = jnp.array([1., 2., 3., 1000.])
  valid = jnp.array([True, True, True, False])
  alpha, stats = modulator(stats, errors, valid)
  np.testing.assert_allclose(stats.mean, 2.0, rtol=1e-6)
  np.testing.assert_allclose(stats.var, 2. / 3., rtol=1e-5)
  assert float(stats.count) == 3.
  assert float(alpha[3]) == 1.0  # Invalid: alpha = 1.
  np.testing.assert_allclose(alpha[:3], 1. + (np.array([1., 2., 3.]) - 2.)
                             / np.sqrt(2. / 3.), rtol=1e-5)
  # A batch with no valid error leaves the statistics unchanged; its errors
  # may even be NaN (computed on an uninitialised normaliser, say).
  before = stats
  alpha, stats = modulator(stats, jnp.array([jnp.nan, 5.]), jnp.array(False))
  np.testing.assert_array_equal(alpha, [1., 1.])
  for a, b in zip(before, stats):
    np.testing.assert_array_equal(a, b)
  reward, _ = lifelong.rnd_reward(before, jnp.array([3., 4.]),
                                  valid=jnp.array([True, False]))
  assert float(reward[1]) == 0. and float(reward[0]) > 0.


def test_invalid_valid_argument_rejected():
  with pytest.raises(ValueError, match="valid"):
    lifelong.modulator(lifelong.init(), jnp.ones(3), valid=jnp.ones(3))
  with pytest.raises(ValueError, match="valid"):
    lifelong.modulator(lifelong.init(), jnp.ones(3),
                       valid=jnp.ones(2, bool))
  with pytest.raises(ValueError, match="horizon"):
    lifelong.modulator(lifelong.init(), jnp.ones(3), horizon=-1)


def _warm_up_then_novel(horizon):
  """Errors ~300 for 100 batches (e.g. before the RND observation normaliser
  is initialised), then ~8 for 300 batches (the normalised regime: 30x
  smaller), then a batch of novel inputs (error 12, 4 sigma above the recent
  ones). Returns their alpha."""
  rng = np.random.default_rng(0)
  stats = lifelong.init()
  modulator = jax.jit(lambda s, e: lifelong.modulator(s, e, horizon=horizon))
  for _ in range(100):
    _, stats = modulator(stats, jnp.asarray(
        rng.normal(300., 30., 32).astype(np.float32)))
  for _ in range(300):
    _, stats = modulator(stats, jnp.asarray(
        rng.normal(8., 1., 32).astype(np.float32)))
  alpha, _ = modulator(stats, jnp.full((32,), 12., jnp.float32))
  return np.asarray(alpha)


def test_novel_inputs_get_alpha_above_one_after_a_large_warm_up():
  # The failure of the all-time statistics: the warm-up phase
  # dominates mu_e and sigma_e for the rest of the run, and a clearly novel
  # input gets alpha < 1, i.e. min(max(alpha, 1), L) = 1: no modulation.
  assert np.all(_warm_up_then_novel(horizon=0) < 1.0)
  # Statistics over a horizon (here 500 errors, about 16 batches) forget the
  # warm-up: novel inputs get alpha > 1. (The variance forgets more slowly
  # than the mean: a residual weight w of the warm-up adds w (1 - w) 292^2.)
  alpha = _warm_up_then_novel(horizon=500)
  assert np.all(alpha > 2.0), alpha
