"""Tests for ngu_jax.losses.split_values (Agent57 Sec. 3.1, App. B)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.losses import retrace
from ngu_jax.losses import split_values

T, B, A = 7, 3, 4
EPS = 1e-3
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def h(x):
  return np.sign(x) * (np.sqrt(np.abs(x) + 1.) - 1.) + EPS * x


def h_inv(z):
  return np.sign(z) * (
      ((np.sqrt(1. + 4. * EPS * (np.abs(z) + 1. + EPS)) - 1.) / (2. * EPS))**2
      - 1.)


@JIT
@pytest.mark.parametrize("transformed", [True, False])
def test_combine_q_written_out(jit, transformed):
  rng = np.random.default_rng(0)
  q_e = rng.normal(size=(B, A)).astype(np.float32) * 3
  q_i = rng.normal(size=(B, A)).astype(np.float32)
  beta = np.array([0., .1, .3], np.float32)
  tx = retrace.signed_hyperbolic_pair(EPS) if transformed else None
  f = functools.partial(split_values.combine_q, tx_pair=tx)
  got = (jax.jit(f) if jit else f)(q_e, q_i, beta)
  if transformed:
    expected = h(h_inv(q_e.astype(np.float64))
                 + beta[:, None] * h_inv(q_i.astype(np.float64)))
  else:
    expected = q_e + beta[:, None] * q_i
  # float32 h^{-1} loses about 1/eps-fold precision to cancellation (eq. 17).
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-4)
  # beta_0 = 0 is pure exploitation: the combination is Q_e itself (up to the
  # float32 round trip h(h^{-1}(q))).
  np.testing.assert_allclose(got[0], q_e[0], rtol=1e-4, atol=2e-4)


def test_combine_q_round_trip_and_monotone():
  tx = retrace.signed_hyperbolic_pair(EPS)
  q = jnp.linspace(-50., 50., 101)
  # Q_i = 0 gives Q_e back (h(h^-1(Q_e)) round trip).
  np.testing.assert_allclose(
      split_values.combine_q(q[:, None], jnp.zeros((101, 1)), .3, tx)[:, 0],
      q, rtol=1e-5, atol=1e-4)
  # Increasing in Q_e, and in Q_i for beta > 0.
  grid = split_values.combine_q(q[:, None] + 0. * q[None, :],
                                q[None, :] + 0. * q[:, None], .5, tx)
  assert np.all(np.diff(np.asarray(grid), axis=0) > 0)
  assert np.all(np.diff(np.asarray(grid), axis=1) > 0)


def _retrace_target(online, target, actions, rewards, discounts, pi, mu):
  """y_t from `retrace.transformed_retrace` (TD error + online Q(x_t, a_t))."""
  td = retrace.transformed_retrace(
      online[:-1], target[1:], actions[:-1], actions[1:], rewards, discounts,
      pi, mu, lambda_=0.95, eps=EPS)
  q_taken = jnp.take_along_axis(online[:-1], actions[:-1, ..., None],
                                axis=-1)[..., 0]
  return td + q_taken


def _streams(seed):
  rng = np.random.default_rng(seed)
  f = lambda *s: rng.normal(size=s).astype(np.float32)
  online_e, target_e = f(T + 1, B, A) * 2, f(T + 1, B, A) * 2
  online_i, target_i = f(T + 1, B, A), f(T + 1, B, A)
  actions = rng.integers(A, size=(T + 1, B)).astype(np.int32)
  r_e, r_i = f(T, B), np.abs(f(T, B))
  discounts = np.full((T, B), .99, np.float32)
  mu = rng.uniform(.2, 1., size=(T, B)).astype(np.float32)
  return online_e, target_e, online_i, target_i, actions, r_e, r_i, discounts, mu


def test_app_b_one_target_policy_equals_the_single_stream_target():
  tx = retrace.signed_hyperbolic_pair(EPS)
  beta = np.array([0., .2, .5], np.float32)
  (online_e, target_e, online_i, target_i, actions, r_e, r_i, discounts,
   mu) = _streams(1)
  combine = lambda q_e, q_i: split_values.combine_q(
      q_e, q_i, np.broadcast_to(beta, q_e.shape[:-1]), tx)
  online, target = combine(online_e, online_i), combine(target_e, target_i)
  # ONE target policy: epsilon-greedy on the combined online Q.
  pi = retrace.epsilon_greedy_probs(online[1:], 0.01)
  y_e = _retrace_target(online_e, target_e, actions, r_e, discounts, pi, mu)
  y_i = _retrace_target(online_i, target_i, actions, r_i, discounts, pi, mu)
  y = _retrace_target(online, target, actions, r_e + beta * r_i, discounts,
                      pi, mu)
  combined = tx.apply_inv(y_e) + beta * tx.apply_inv(y_i)
  np.testing.assert_allclose(combined, tx.apply_inv(y), rtol=1e-4, atol=1e-3)

  # With each stream greedy on its own Q, the identity breaks.
  pi_e = retrace.epsilon_greedy_probs(online_e[1:], 0.01)
  pi_i = retrace.epsilon_greedy_probs(online_i[1:], 0.01)
  y_e = _retrace_target(online_e, target_e, actions, r_e, discounts, pi_e, mu)
  y_i = _retrace_target(online_i, target_i, actions, r_i, discounts, pi_i, mu)
  separate = tx.apply_inv(y_e) + beta * tx.apply_inv(y_i)
  err = np.abs(np.asarray(separate) - np.asarray(tx.apply_inv(y)))[:, 1:]
  assert err.max() > 0.1


@JIT
def test_combined_td_error(jit):
  td_e = np.arange(6, dtype=np.float32).reshape(2, 3)
  td_i = np.ones((2, 3), np.float32)
  f = jax.jit(split_values.combined_td_error) if jit else (
      split_values.combined_td_error)
  np.testing.assert_allclose(f(td_e, td_i, np.array([0., .5, 2.], np.float32)),
                             td_e + np.array([0., .5, 2.]))


@pytest.mark.parametrize("call,match", [
    (lambda: split_values.combine_q(np.zeros(3), np.zeros(4), .1), "shape"),
    (lambda: split_values.combine_q(np.zeros((2, 3)), np.zeros((2, 3)),
                                    np.zeros(3, np.float32)), "beta"),
    (lambda: split_values.combine_q(np.zeros((2, 3), np.int32),
                                    np.zeros((2, 3), np.int32), .1),
     "floating"),
    (lambda: split_values.combined_td_error(np.zeros((2, 3)), np.zeros((2, 3)),
                                            np.zeros(2)), "beta"),
])
def test_rejects_bad_input(call, match):
  with pytest.raises(ValueError, match=match):
    call()
