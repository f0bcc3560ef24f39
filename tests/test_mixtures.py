"""Tests for ngu_jax.mixtures (NGU App. A; Ape-X epsilons)."""

import math

import jax
import numpy as np
import pytest

from ngu_jax import mixtures


def _sigmoid(x):
  return 1.0 / (1.0 + math.exp(-x))


def test_betas_formula_n32():
  n, beta = 32, 0.3
  got = mixtures.betas(n, beta)
  assert got.shape == (n,) and got.dtype == np.float32
  expected = [0.0] + [beta * _sigmoid(10 * (2 * i - (n - 2)) / (n - 2))
                      for i in range(1, n - 1)] + [beta]
  np.testing.assert_allclose(got, expected, rtol=1e-6)
  # Fig. 7a: monotone, concentrated at the extremes.
  assert np.all(np.diff(got) >= 0)
  assert got[1] < 0.01 and got[-2] > 0.29


@pytest.mark.parametrize("n,expected", [(1, [0.5]), (2, [0.0, 0.5]),
                                        (3, [0.0, 0.25, 0.5])])
def test_betas_small_n(n, expected):
  # N = 3: beta_1 = beta * sigmoid(10 * (2 - 1) / 1) = 0.5 * sigmoid(10).
  if n == 3:
    expected = [0.0, 0.5 * _sigmoid(10.0), 0.5]
  np.testing.assert_allclose(mixtures.betas(n, 0.5), expected, rtol=1e-6)


def test_gammas_eq4():
  n = 8
  got = mixtures.gammas(n, 0.997, 0.99)
  expected = [1 - math.exp(((n - 1 - i) * math.log(1 - 0.997)
                            + i * math.log(1 - 0.99)) / (n - 1))
              for i in range(n)]
  np.testing.assert_allclose(got, expected, rtol=1e-6)
  np.testing.assert_allclose([got[0], got[-1]], [0.997, 0.99], rtol=1e-6)
  # 1 - gamma is evenly spaced in log space.
  logs = np.log(1.0 - got.astype(np.float64))
  np.testing.assert_allclose(np.diff(logs), np.diff(logs)[0], rtol=1e-3)


def test_single_policy_is_exploratory_beta_and_gamma():
  # NGU Sec. 4.1: NGU(N=1) is "a single exploratory policy": beta_0 = beta
  # paired with the exploratory discount gamma_min (App. A; Table 6
  # "Discount r^i 0.99"), not the exploitative gamma_max.
  np.testing.assert_allclose(mixtures.betas(1, 0.5), [0.5])
  np.testing.assert_allclose(mixtures.gammas(1), [0.99], rtol=1e-7)
  np.testing.assert_allclose(mixtures.gammas(1, 0.997, 0.95), [0.95],
                             rtol=1e-7)
  # The pairing of the most exploratory mixture holds for every N.
  for n in (1, 2, 8, 32):
    assert mixtures.betas(n, 0.3)[-1] == np.float32(0.3)
    np.testing.assert_allclose(mixtures.gammas(n)[-1], 0.99, rtol=1e-6)


def test_actor_epsilons():
  got = mixtures.actor_epsilons(8)
  expected = [0.4 ** (1 + 7 * l / 7) for l in range(8)]
  np.testing.assert_allclose(got, expected, rtol=1e-6)
  np.testing.assert_allclose(got[[0, -1]], [0.4, 0.4 ** 8], rtol=1e-6)
  np.testing.assert_allclose(mixtures.actor_epsilons(1), [0.4])


def test_actor_mixtures_mod_n():
  np.testing.assert_array_equal(mixtures.actor_mixtures(7, 3),
                                [0, 1, 2, 0, 1, 2, 0])
  # Every mixture, the most exploratory N - 1 included, gets an actor.
  assert set(mixtures.actor_mixtures(32, 32)) == set(range(32))


def test_bad_arguments():
  for bad in (0, -1, 2.0, True):
    with pytest.raises(ValueError, match="positive integer"):
      mixtures.betas(bad)
  with pytest.raises(ValueError, match="beta"):
    mixtures.betas(4, -0.1)
  with pytest.raises(ValueError, match="gamma_min"):
    mixtures.gammas(4, 0.99, 0.997)
  with pytest.raises(ValueError, match="base_epsilon"):
    mixtures.actor_epsilons(4, base_epsilon=1.5)


def test_actor_epsilons_per_mixture():
  eps = mixtures.actor_epsilons_per_mixture(16, 8)
  # Lanes j and j + 8 of mixture j: App. A's whole range, 0.4 and 0.4^8.
  np.testing.assert_allclose(eps[:8], 0.4, rtol=1e-6)
  np.testing.assert_allclose(eps[8:], 0.4 ** 8, rtol=1e-5)
  # With App. A's epsilons over all lanes, mixture 7 acts almost greedily.
  assert mixtures.actor_epsilons(16)[[7, 15]].max() < 0.021
  # N = 1: the schedule over all lanes.
  np.testing.assert_allclose(mixtures.actor_epsilons_per_mixture(5, 1),
                             mixtures.actor_epsilons(5))
  # Unequal groups (L = 5, N = 2): mixture 0 has lanes 0, 2, 4.
  eps = mixtures.actor_epsilons_per_mixture(5, 2)
  np.testing.assert_allclose(eps[[0, 2, 4]], mixtures.actor_epsilons(3))
  np.testing.assert_allclose(eps[[1, 3]], mixtures.actor_epsilons(2))
  # The paper's L = 256, N = 32: every mixture spans 0.4 .. 0.4^8 and its
  # median epsilon is within a factor 2.3 of App. A's for that mixture.
  eps = mixtures.actor_epsilons_per_mixture(256, 32)
  paper = mixtures.actor_epsilons(256)
  for j in range(32):
    mine = eps[j::32]
    np.testing.assert_allclose([mine.max(), mine.min()], [0.4, 0.4 ** 8],
                               rtol=1e-5)
    ratio = np.median(mine) / np.median(paper[j::32])
    assert 1 / 2.3 < ratio < 2.3, (j, ratio)


def test_agent57_gammas_ladder_app_g1():
  g = mixtures.agent57_gammas(32)
  assert g.shape == (32,) and g.dtype == np.float32
  # The endpoints of Sec. 4's range, and the fixed rungs j = 7, 8.
  assert g[0] == np.float32(0.9999)
  assert g[7] == np.float32(0.997) and g[8] == np.float32(0.997)
  assert g[31] == np.float32(0.99)
  # j = 1..6, written out: 0.997 + 0.0029 sigmoid(10 (2j - 6) / 6).
  for j in range(1, 7):
    x = 10. * (2 * j - 6) / 6
    assert g[j] == pytest.approx(0.997 + 0.0029 / (1. + math.exp(-x)),
                                 abs=1e-7)
  # j = 8..31: 1 - gamma log-linear from 0.003 to 0.01.
  for j in range(8, 32):
    expected = 1. - 0.003 ** ((31 - j) / 23) * 0.01 ** ((j - 8) / 23)
    assert g[j] == pytest.approx(expected, abs=1e-7)
  assert np.all(np.diff(g[8:]) < 0)
  assert g.min() >= np.float32(0.99) and g.max() <= np.float32(0.9999)


def test_agent57_gammas_bad_arguments():
  with pytest.raises(ValueError, match=">= 10"):
    mixtures.agent57_gammas(9)
  with pytest.raises(ValueError, match="gamma_2 <= gamma_1"):
    mixtures.agent57_gammas(32, gamma_0=0.99, gamma_1=0.997)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("ratio, batch, n", [(0.5, 64, 4), (0.25, 7, 2),
                                             (1.0, 16, 3), (0.0, 8, 1)])
def test_cross_mixture_indices(jit, ratio, batch, n):
  """NGU's CMR: exactly round(ratio B) sequences get another mixture, drawn
  from the N - 1 others; the rest keep their own."""
  fn = lambda key, j: mixtures.cross_mixture_indices(key, j, n, ratio)
  fn = jax.jit(fn) if jit else fn
  own = np.arange(batch) % n
  counts = np.zeros((n, n))
  for seed in range(30):
    out = np.asarray(fn(jax.random.PRNGKey(seed), own))
    assert out.dtype == np.int32 and out.shape == (batch,)
    moved = out != own
    assert moved.sum() == round(ratio * batch)
    assert np.all((out >= 0) & (out < n))
    np.add.at(counts, (own[moved], out[moved]), 1)
  if ratio and n > 2:  # Every other mixture is drawn, about equally.
    off = counts[~np.eye(n, dtype=bool)]
    assert off.min() > 0.5 * off.mean()


def test_cross_mixture_indices_bad_arguments():
  key = jax.random.PRNGKey(0)
  j = np.zeros(4, np.int32)
  with pytest.raises(ValueError, match="num_mixtures >= 2"):
    mixtures.cross_mixture_indices(key, j, 1, 0.5)
  for bad in (-0.1, 1.5, True, "0.5"):
    with pytest.raises(ValueError, match="ratio"):
      mixtures.cross_mixture_indices(key, j, 2, bad)
  with pytest.raises(ValueError, match=r"shaped \[B\]"):
    mixtures.cross_mixture_indices(key, np.zeros((2, 2), np.int32), 2, 0.5)
