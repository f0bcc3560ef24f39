"""Tests for ngu_jax.losses.dice (DiCE Sec. 3, App. B-C).

References are independent float64 numpy code written from the formulas:
softmax / its gradient written out, Retrace (DiCE eq. 2, NGU eq. 14-15) and
V-trace (Espeholt et al. 2018, eq. 1) as explicit sums over time (not the
backward recursions the library uses), and rlax where it applies (c_bar = 1).
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from ngu_jax.losses import dice

T, B, A = 5, 3, 4
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _call(fn, *args, jit, **static):
  """fn(*args, **static), jitted over `args` if `jit` (static closed over)."""
  f = functools.partial(fn, **static)
  return jax.jit(f)(*args) if jit else f(*args)


# ----------------------------------------------------------------------------
# Independent float64 references.


def np_softmax(v, tau):
  z = np.asarray(v, np.float64) / np.asarray(tau, np.float64)[..., None]
  z = z - z.max(-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(-1, keepdims=True)


def h(x, eps):
  """NGU eq. (16); identity when eps is None."""
  if eps is None:
    return x
  return np.sign(x) * (np.sqrt(np.abs(x) + 1.) - 1.) + eps * x


def h_inv(z, eps):
  """NGU eq. (17), the closed-form inverse; identity when eps is None."""
  if eps is None:
    return z
  return np.sign(z) * (
      ((np.sqrt(1. + 4. * eps * (np.abs(z) + 1. + eps)) - 1.) / (2. * eps))**2
      - 1.)


def reference_retrace_td(q_tm1, q_t, a_tm1, a_t, r, d, pi, mu, lam, c_bar,
                         eps):
  """DiCE eq. (2) / NGU eq. (14) on one lane, as an explicit sum over s.

  y_t = Qr(x_t, a_t) + sum_{s=t}^{T-1} (prod_{i=t}^{s-1} d_i c_{i+1}) delta_s,
  delta_s = r_s + d_s sum_a pi(a|x_{s+1}) Qr(x_{s+1}, a) - Qr(x_s, a_s),
  c_{i+1} = lam_i min(pi(a_{i+1}|x_{i+1}) / mu_{i+1}, c_bar), with Qr the
  untransformed target-network values; Qr(x_t, a_t) cancels against delta_t,
  so x_0's target value is never needed (set to anything). Index t of every
  argument is the transition x_t -> x_{t+1}, as in the library.
  """
  n = len(r)
  qr_next = h_inv(np.asarray(q_t, np.float64), eps)        # Qr(x_{t+1}, .)
  # Qr(x_{t+1}, a_{t+1}).
  q_taken = np.array([qr_next[t, a_t[t]] for t in range(n)])
  # Qr(x_s, a_s) for s = 0..n-1; x_0's is arbitrary (cancels): use 123.
  qr_sa = np.concatenate([[123.], q_taken[:-1]])
  c = [lam[t] * min(pi[t, a_t[t]] / mu[t], c_bar) for t in range(n)]  # c_{t+1}
  tds = []
  for t in range(n):
    y = qr_sa[t]
    for s in range(t, n):
      weight = 1.
      for i in range(t, s):
        weight *= d[i] * c[i]
      delta = r[s] + d[s] * np.dot(pi[s], qr_next[s]) - qr_sa[s]
      y += weight * delta
    tds.append(h(y, eps) - q_tm1[t, a_tm1[t]])
  return np.array(tds)


def reference_vtrace(v_tm1, v_t, r, d, ratio, rho_bar, c_bar, lam, eps):
  """Espeholt et al. (2018) eq. (1) on one lane, as an explicit sum.

  v_s = V(x_s) + sum_{t=s}^{n-1} (prod_{i=s}^{t-1} d_i c_i) rho_t delta_t,
  delta_t = r_t + d_t V(x_{t+1}) - V(x_t), rho_t = min(ratio_t, rho_bar),
  c_i = lam_i min(ratio_i, c_bar); pg advantage rho_s (r_s + d_s v_{s+1} -
  V(x_s)) with v_n = V(x_n).

  Returns:
    (targets v_s, pg advantages), each shaped [n].
  """
  n = len(r)
  v0 = h_inv(np.asarray(v_tm1, np.float64), eps)
  v1 = h_inv(np.asarray(v_t, np.float64), eps)
  rho = np.minimum(ratio, rho_bar)
  c = lam * np.minimum(ratio, c_bar)
  vs = []
  for s in range(n):
    total = v0[s]
    for t in range(s, n):
      weight = np.prod([d[i] * c[i] for i in range(s, t)])
      total += weight * rho[t] * (r[t] + d[t] * v1[t] - v0[t])
    vs.append(total)
  vs = np.array(vs)
  vs_next = np.concatenate([vs[1:], v1[-1:]])
  return vs, rho * (r + d * vs_next - v0)


def _rng(seed=0):
  return np.random.default_rng(seed)


def _retrace_inputs(seed=0, c_bar_matters=True):
  """[T, B] Retrace arguments; mu is set so that pi / mu > 1.05 often."""
  rng = _rng(seed)
  q_tm1 = rng.normal(size=(T, B, A)).astype(np.float32)
  q_t = (3. * rng.normal(size=(T, B, A))).astype(np.float32)
  a_tm1 = rng.integers(0, A, size=(T, B)).astype(np.int32)
  a_t = rng.integers(0, A, size=(T, B)).astype(np.int32)
  r = rng.normal(size=(T, B)).astype(np.float32)
  d = (0.97 * (rng.uniform(size=(T, B)) > 0.1)).astype(np.float32)
  pi = np_softmax(rng.normal(size=(T, B, A)), np.full((T, B), 0.5))
  pi = pi.astype(np.float32)
  pi_a = np.take_along_axis(pi, a_t[..., None], -1)[..., 0]
  scale = rng.choice([0.5, 0.9, 1.2], size=(T, B)) if c_bar_matters else 1.
  mu = np.clip(pi_a * scale, 1e-3, 1.).astype(np.float32)
  return q_tm1, q_t, a_tm1, a_t, r, d, pi, mu


def _vtrace_inputs(seed=1):
  rng = _rng(seed)
  values = (2. * rng.normal(size=(T + 1, B))).astype(np.float32)
  v_tm1, v_t = values[:-1], values[1:]     # the sequence layout
  r = rng.normal(size=(T, B)).astype(np.float32)
  d = (0.97 * (rng.uniform(size=(T, B)) > 0.1)).astype(np.float32)
  ratio = rng.choice([0.3, 1.0, 1.03, 1.5, 4.0], size=(T, B)).astype(
      np.float32)
  return v_tm1, v_t, r, d, ratio


# ----------------------------------------------------------------------------
# The policy family.


@JIT
@pytest.mark.parametrize("tau", [0.02, 1., 50.])
def test_scaled_log_prob_gradient_is_onehot_minus_softmax(jit, tau):
  """d/dv [tau log softmax(v / tau)[a]] = onehot(a) - softmax(v / tau)."""
  v = np.array([0.3, -0.2, 0.25, 0.1], np.float32)
  for a in range(A):
    def f(v, a=a):
      return tau * dice.boltzmann_log_probs(v, tau)[a]
    grad = (jax.jit(jax.grad(f)) if jit else jax.grad(f))(jnp.asarray(v))
    expected = np.eye(A)[a] - np_softmax(v, np.float64(tau))
    np.testing.assert_allclose(grad, expected, atol=2e-6)


@JIT
def test_boltzmann_probs_match_reference_with_per_row_tau(jit):
  rng = _rng(2)
  v = (3. * rng.normal(size=(T, B, A))).astype(np.float32)
  tau = np.array([0.02, 1., 50.], np.float32)               # one per lane
  probs = _call(dice.boltzmann_probs, v, tau, jit=jit)
  expected = np_softmax(v, np.broadcast_to(tau, (T, B)))
  np.testing.assert_allclose(probs, expected, atol=1e-6)
  log_probs = _call(dice.boltzmann_log_probs, v, tau, jit=jit)
  np.testing.assert_allclose(np.exp(log_probs), expected, atol=1e-6)
  actions = rng.integers(0, A, size=(T, B)).astype(np.int32)
  mu = _call(dice.boltzmann_behaviour_probability, v, actions, tau, jit=jit)
  np.testing.assert_allclose(
      mu, np.take_along_axis(expected, actions[..., None], -1)[..., 0],
      atol=1e-6)


@JIT
def test_entropy_grows_with_tau_to_the_limits(jit):
  v = np.array([[1.0, 0.5, -0.3, 0.9, 0.2, -1.0]], np.float32)
  taus = np.logspace(-3, 6, 60).astype(np.float32)          # one per row
  probs = _call(dice.boltzmann_probs, np.repeat(v, len(taus), 0), taus,
                jit=jit)
  ent = np.asarray(_call(dice.policy_entropy, probs, jit=jit))
  assert np.all(np.diff(ent) > -1e-6), ent
  assert ent[-1] - ent[0] > 1.7
  # The limits: the argmax (entropy 0) and uniform (log |A|).
  np.testing.assert_allclose(ent[0], 0., atol=1e-6)
  np.testing.assert_allclose(ent[-1], np.log(6.), atol=1e-5)
  # Against the written-out formula at a middle tau.
  p = np_softmax(v, np.float64(0.7))
  np.testing.assert_allclose(
      dice.policy_entropy(dice.boltzmann_probs(v, 0.7)),
      -(p * np.log(p)).sum(-1), rtol=1e-5)


def test_policy_entropy_takes_zero_probabilities():
  probs = np.array([[0.5, 0.5, 0., 0.], [1., 0., 0., 0.]], np.float32)
  np.testing.assert_allclose(dice.policy_entropy(probs), [np.log(2.), 0.],
                             atol=1e-7)


@JIT
@pytest.mark.parametrize("tau", [1e-30, 1e-6, 0.02, 1e6, 1e30])
def test_boltzmann_probs_are_stable_for_extreme_tau(jit, tau):
  v = np.array([[1e3, -1e3, 999.5, 0.], [2., 2., -5., 1.]], np.float32)
  probs = np.asarray(_call(dice.boltzmann_probs, v, tau, jit=jit))
  log_probs = np.asarray(_call(dice.boltzmann_log_probs, v, tau, jit=jit))
  assert np.all(np.isfinite(probs))
  assert not np.any(np.isnan(log_probs))
  np.testing.assert_allclose(probs.sum(-1), 1., atol=1e-6)
  if tau <= 1e-6:
    np.testing.assert_allclose(probs, [[1., 0., 0., 0.], [.5, .5, 0., 0.]],
                               atol=1e-6)                   # ties share
  if tau >= 1e6:
    np.testing.assert_allclose(probs, np.full((2, 4), .25),
                               atol=1e-3 if tau == 1e6 else 1e-6)


def test_sample_boltzmann_frequencies_match_probs():
  v = np.array([[1., 0., -1., 0.5], [1., 0., -1., 0.5]], np.float32)
  tau = np.array([0.5, 5.], np.float32)                     # one per row
  n = 20000
  keys = jax.random.split(jax.random.PRNGKey(0), n)
  draws = jax.jit(jax.vmap(lambda k: dice.sample_boltzmann(k, v, tau)))(keys)
  assert draws.shape == (n, 2)
  expected = np_softmax(v, tau)
  for row in range(2):
    freq = np.bincount(np.asarray(draws[:, row]), minlength=A) / n
    sigma = np.sqrt(expected[row] * (1 - expected[row]) / n)
    assert np.all(np.abs(freq - expected[row]) < 5 * sigma + 1e-4), (
        freq, expected[row])


def test_shape_reward_table5():
  r = np.array([0., 1., -1., 3., -7.], np.float32)
  expected = [0., 2 * np.log(2.), -np.log(2.), 2 * np.log(4.), -np.log(8.)]
  np.testing.assert_allclose(dice.shape_reward(r), expected, rtol=1e-6)


# ----------------------------------------------------------------------------
# Q: Retrace with c_bar.


@JIT
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_retrace_matches_reference_with_c_bar(jit, eps):
  q_tm1, q_t, a_tm1, a_t, r, d, pi, mu = _retrace_inputs()
  lam = np.where(_rng(3).uniform(size=(T, B)) > 0.2, 0.9, 0.).astype(
      np.float32)
  td = _call(dice.dice_retrace, q_tm1, q_t, a_tm1, a_t, r, d, pi, mu, lam,
             jit=jit, c_bar=1.05, eps=eps)
  for b in range(B):
    expected = reference_retrace_td(
        q_tm1[:, b], q_t[:, b], a_tm1[:, b], a_t[:, b], r[:, b], d[:, b],
        pi[:, b].astype(np.float64), mu[:, b].astype(np.float64), lam[:, b],
        1.05, eps)
    # float32 h^{-1} of values ~20 (as tests/losses/test_retrace.py): 1e-4.
    tol = 1e-5 if eps is None else 1e-4
    np.testing.assert_allclose(td[:, b], expected, rtol=tol, atol=tol)
  # c_bar matters on these inputs (some ratios exceed 1).
  td_1 = dice.dice_retrace(q_tm1, q_t, a_tm1, a_t, r, d, pi, mu, lam,
                           c_bar=1., eps=eps)
  assert np.max(np.abs(np.asarray(td) - np.asarray(td_1))) > 1e-3


@JIT
def test_retrace_with_c_bar_one_and_no_transform_is_rlax_retrace(jit):
  q_tm1, q_t, a_tm1, a_t, r, d, pi, mu = _retrace_inputs(seed=4)
  td = _call(dice.dice_retrace, q_tm1, q_t, a_tm1, a_t, r, d, pi, mu,
             jit=jit, lambda_=0.9, c_bar=1., eps=None)
  expected = jax.vmap(
      functools.partial(rlax.retrace, lambda_=0.9), in_axes=1, out_axes=1)(
          q_tm1, q_t, a_tm1, a_t, r, d, pi, mu)
  np.testing.assert_allclose(td, expected, rtol=1e-5, atol=1e-5)


def test_retrace_default_lambda_is_one():
  args = _retrace_inputs(seed=5)
  np.testing.assert_array_equal(dice.dice_retrace(*args),
                                dice.dice_retrace(*args, lambda_=1.))


# ----------------------------------------------------------------------------
# V: V-trace with rho_bar = c_bar = 1.05.


@JIT
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_vtrace_matches_espeholt_eq1_reference(jit, eps):
  v_tm1, v_t, r, d, ratio = _vtrace_inputs()
  out = _call(dice.dice_vtrace, v_tm1, v_t, r, d, ratio, jit=jit,
              rho_bar=1.05, c_bar=1.05, eps=eps)
  for b in range(B):
    vs, adv = reference_vtrace(v_tm1[:, b], v_t[:, b], r[:, b], d[:, b],
                               ratio[:, b].astype(np.float64), 1.05, 1.05,
                               1., eps)
    tol = 1e-5 if eps is None else 1e-4
    np.testing.assert_allclose(out.targets[:, b], vs, rtol=tol, atol=tol)
    np.testing.assert_allclose(out.pg_advantages[:, b], adv, rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(out.errors[:, b], h(vs, eps) - v_tm1[:, b],
                               rtol=tol, atol=tol)


def test_on_policy_vtrace_is_the_n_step_return():
  """ratio = 1 (mu = pi): v_s = sum_k (prod d) r_{s+k} + (prod d) V(x_T)."""
  v_tm1, v_t, r, d, _ = _vtrace_inputs(seed=21)
  out = dice.dice_vtrace(v_tm1, v_t, r, d, np.ones((T, B), np.float32),
                         eps=None)
  for s in range(T):
    ret, disc = np.zeros(B), np.ones(B)
    for k in range(s, T):
      ret += disc * r[k]
      disc = disc * d[k]
    np.testing.assert_allclose(out.targets[s], ret + disc * v_t[-1],
                               rtol=1e-5, atol=1e-5)


def test_vtrace_c_bar_is_not_lambda_scaled_rlax():
  """rlax's c = lambda min(1, ratio) cannot give min(ratio, 1.05)."""
  v_tm1, v_t, r, d, ratio = _vtrace_inputs()
  ours = dice.dice_vtrace(v_tm1, v_t, r, d, ratio, eps=None).targets
  theirs = jax.vmap(
      functools.partial(rlax.vtrace, clip_rho_threshold=1.05), in_axes=1,
      out_axes=1)(v_tm1, v_t, r, d, ratio) + v_tm1
  assert np.max(np.abs(np.asarray(ours) - np.asarray(theirs))) > 1e-3


@JIT
def test_vtrace_with_clips_one_is_rlax_vtrace(jit):
  v_tm1, v_t, r, d, ratio = _vtrace_inputs(seed=6)
  out = _call(dice.dice_vtrace, v_tm1, v_t, r, d, ratio, jit=jit,
              rho_bar=1., c_bar=1., eps=None)
  lanes = functools.partial(jax.vmap, in_axes=1, out_axes=1)
  errors = lanes(rlax.vtrace)(v_tm1, v_t, r, d, ratio)
  np.testing.assert_allclose(out.errors, errors, rtol=1e-5, atol=1e-5)
  rlax_out = lanes(rlax.vtrace_td_error_and_advantage)(v_tm1, v_t, r, d,
                                                       ratio)
  np.testing.assert_allclose(out.pg_advantages, rlax_out.pg_advantage,
                             rtol=1e-5, atol=1e-5)


def test_vtrace_mask_bootstraps_last_real_step():
  v_tm1, v_t, r, d, ratio = _vtrace_inputs(seed=7)
  mask = np.ones((T, B), np.float32)
  mask[3:, 0] = 0.                       # lane 0: transitions 3, 4 padding
  out = dice.dice_vtrace(v_tm1, v_t, r, d, ratio, eps=None, mask=mask)
  vs, adv = reference_vtrace(v_tm1[:3, 0], v_t[:3, 0], r[:3, 0], d[:3, 0],
                             ratio[:3, 0].astype(np.float64), 1.05, 1.05, 1.,
                             None)
  np.testing.assert_allclose(out.targets[:3, 0], vs, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(out.pg_advantages[:3, 0], adv, rtol=1e-5,
                             atol=1e-5)


def test_vtrace_gradient_reaches_only_v_tm1():
  v_tm1, v_t, r, d, ratio = _vtrace_inputs()
  def loss(v_tm1, v_t):
    out = dice.dice_vtrace(v_tm1, v_t, r, d, ratio)
    return jnp.sum(out.errors) + jnp.sum(out.pg_advantages)
  g_tm1, g_t = jax.grad(loss, argnums=(0, 1))(jnp.asarray(v_tm1),
                                              jnp.asarray(v_t))
  np.testing.assert_allclose(g_tm1, -1.)
  np.testing.assert_allclose(g_t, 0.)


# ----------------------------------------------------------------------------
# pi: eq. (8).


@JIT
def test_policy_gradient_loss_gradient_is_the_formula(jit):
  rng = _rng(8)
  logits = rng.normal(size=(T, B, A)).astype(np.float32)
  actions = rng.integers(0, A, size=(T, B)).astype(np.int32)
  adv = rng.normal(size=(T, B)).astype(np.float32)
  tau = np.array([0.02, 1., 50.], np.float32)
  def total(logits, adv):
    return jnp.sum(dice.dice_policy_gradient_loss(logits, actions, adv, tau))
  grad_fn = jax.grad(total, argnums=(0, 1))
  g_logits, g_adv = (jax.jit(grad_fn) if jit else grad_fn)(
      jnp.asarray(logits), jnp.asarray(adv))
  pi = np_softmax(logits, np.broadcast_to(tau, (T, B)))
  expected = -adv[..., None] * (np.eye(A)[actions] - pi)
  np.testing.assert_allclose(g_logits, expected, atol=2e-5)
  np.testing.assert_allclose(g_adv, 0.)                      # stop-gradient
  values = _call(dice.dice_policy_gradient_loss, logits, actions, adv, tau,
                 jit=jit)
  log_pi_a = np.log(np.take_along_axis(pi, actions[..., None], -1)[..., 0])
  np.testing.assert_allclose(values, -tau * adv * log_pi_a, rtol=1e-4,
                             atol=1e-5)


# ----------------------------------------------------------------------------
# The combined loss.


def _sequences(seed=9, t1=T + 1):
  rng = _rng(seed)
  online_q = (2. * rng.normal(size=(t1, B, A))).astype(np.float32)
  online_v = rng.normal(size=(t1, B)).astype(np.float32)
  target_q = (2. * rng.normal(size=(t1, B, A))).astype(np.float32)
  actions = rng.integers(0, A, size=(t1, B)).astype(np.int32)
  rewards = rng.normal(size=(t1, B)).astype(np.float32)
  discounts = np.ones((t1, B), np.float32)
  mask = np.ones((t1, B), np.float32)
  if t1 > 4:
    discounts[3, 2] = 0.                                    # a terminal
    mask[4:, 2] = 0.                                        # padded tail
  mu = rng.uniform(0.05, 1., size=(t1, B)).astype(np.float32)
  tau = np.array([0.3, 1., 20.], np.float32)
  return dict(online_q=online_q, online_v=online_v, target_q=target_q,
              actions=actions, rewards=rewards, discounts=discounts,
              behaviour_prob=mu, tau=tau, sequence_mask=mask)


def _loss(jit=False, **kwargs):
  arrays = {k: v for k, v in kwargs.items() if isinstance(v, np.ndarray)}
  static = {k: v for k, v in kwargs.items() if k not in arrays}
  def f(arrays):
    return dice.dice_loss(**arrays, **static)
  return (jax.jit(f) if jit else f)(arrays)


def _lane_mean(x, valid):
  return (valid * x).sum(0) / np.maximum(valid.sum(0), 1.)


@JIT
def test_dice_loss_is_the_weighted_sum_of_its_parts(jit):
  s = _sequences()
  gamma, eps = 0.997, 1e-3
  loss, extras = _loss(jit=jit, **s, gamma=gamma)
  m = extras.metrics
  np.testing.assert_allclose(
      loss, 10. * m["q_loss"] + 1. * m["v_loss"] + 10. * m["pi_loss"],
      rtol=1e-6)
  loss_w, extras_w = _loss(**s, gamma=gamma, q_weight=2., v_weight=3.,
                           pi_weight=0.5)
  np.testing.assert_allclose(extras_w.metrics["q_loss"], m["q_loss"],
                             rtol=1e-6)
  np.testing.assert_allclose(
      loss_w, 2. * m["q_loss"] + 3. * m["v_loss"] + 0.5 * m["pi_loss"],
      rtol=1e-5)

  # The parts, rebuilt from the low-level functions and the layout.
  valid = s["sequence_mask"][:-1] * s["sequence_mask"][1:]
  cut = np.concatenate([valid[1:], valid[-1:]])
  q, a, tau = s["online_q"], s["actions"], s["tau"]
  pi = np_softmax(q, np.broadcast_to(tau, q.shape[:-1])).astype(np.float32)
  r, disc = s["rewards"][1:], gamma * s["discounts"][1:]
  td = dice.dice_retrace(q[:-1], s["target_q"][1:], a[:-1], a[1:], r, disc,
                         pi[1:], s["behaviour_prob"][1:], cut, eps=eps)
  ratio = (np.take_along_axis(pi[:-1], a[:-1, ..., None], -1)[..., 0]
           / s["behaviour_prob"][:-1])
  vt = dice.dice_vtrace(s["online_v"][:-1], s["online_v"][1:], r, disc,
                        ratio, cut, eps=eps, mask=valid)
  pg = dice.dice_policy_gradient_loss(q[:-1], a[:-1], vt.pg_advantages, tau)
  np.testing.assert_allclose(extras.td_errors, td, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(
      m["q_loss"], _lane_mean(0.5 * np.square(td), valid).mean(), rtol=1e-4)
  np.testing.assert_allclose(
      m["v_loss"], _lane_mean(0.5 * np.square(vt.errors), valid).mean(),
      rtol=1e-4)
  np.testing.assert_allclose(m["pi_loss"], _lane_mean(pg, valid).mean(),
                             rtol=1e-4, atol=1e-6)
  ent = -(pi[:-1] * np.log(pi[:-1])).sum(-1)
  np.testing.assert_allclose(m["entropy"], (valid * ent).sum() / valid.sum(),
                             rtol=1e-4)
  np.testing.assert_allclose(
      m["tau_mean"], (valid * tau[None]).sum() / valid.sum(), rtol=1e-6)
  np.testing.assert_array_equal(extras.valid, valid)
  assert extras.priorities.shape == (B,)


@JIT
def test_entropy_weight_subtracts_the_lane_weighted_entropy(jit):
  """Table 4's "entropy" ablation: loss - c * mean_b w_b mean_t H[pi_tau]."""
  s = _sequences(seed=17)
  w = np.array([0.5, 2., 1.], np.float32)
  loss0, _ = _loss(jit=jit, **s, importance_weights=w)
  loss1, extras1 = _loss(jit=jit, **s, importance_weights=w,
                         entropy_weight=1.5)
  valid = s["sequence_mask"][:-1] * s["sequence_mask"][1:]
  pi = np_softmax(s["online_q"], np.broadcast_to(s["tau"],
                                                 s["online_q"].shape[:-1]))
  ent = -(pi[:-1] * np.log(pi[:-1])).sum(-1)                 # [T, B]
  expected = loss0 - 1.5 * (w * _lane_mean(ent, valid)).mean()
  np.testing.assert_allclose(loss1, expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(extras1.metrics["entropy"],
                             (valid * ent).sum() / valid.sum(), rtol=1e-4)


def test_entropy_term_gradient_is_the_entropy_gradient_and_raises_entropy():
  """jax's gradient of -c H equals the closed form dH/dv = -(1/tau) pi (log pi
  + H), lane-weighted; underflowing probabilities give finite gradients."""
  s = _sequences(seed=18)
  rest = {k: s[k] for k in s if k != "online_q"}
  def part(q, c):
    return dice.dice_loss(q, **rest, q_weight=0., v_weight=0., pi_weight=0.,
                          entropy_weight=c)[0]
  g = np.asarray(jax.grad(part)(s["online_q"], 1.))
  valid = s["sequence_mask"][:-1] * s["sequence_mask"][1:]
  tau = np.broadcast_to(s["tau"], s["online_q"].shape[:-1])
  pi = np_softmax(s["online_q"], tau)[:-1]
  logp = np.log(pi)
  ent = -(pi * logp).sum(-1, keepdims=True)
  # dH/dv_k = -(1/tau) pi_k (log pi_k + H).
  d_ent = -(pi * (logp + ent)) / tau[:-1, ..., None]
  lane_w = valid / np.maximum(valid.sum(0), 1.) / B          # [T, B]
  expected = np.zeros_like(g)
  expected[:-1] = -lane_w[..., None] * d_ent
  np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-6)
  # Tiny tau: pi_tau is one-hot in float32; the gradient stays finite.
  tiny = dict(rest, tau=np.array([1e-4, 1e-4, 1e-4], np.float32))
  g_tiny = jax.grad(lambda q: dice.dice_loss(
      q, **tiny, q_weight=0., v_weight=0., pi_weight=0.,
      entropy_weight=1.)[0])(s["online_q"])
  assert np.all(np.isfinite(np.asarray(g_tiny)))
  with pytest.raises(ValueError, match="entropy_weight"):
    dice.dice_loss(**s, entropy_weight=-1.)


def test_dice_loss_jit_matches_eager_with_gradients():
  s = _sequences(seed=10)
  def grads(jit):
    def f(q, v):
      return dice.dice_loss(q, v, *[s[k] for k in (
          "target_q", "actions", "rewards", "discounts", "behaviour_prob",
          "tau", "sequence_mask")])[0]
    g = jax.grad(f, argnums=(0, 1))
    return (jax.jit(g) if jit else g)(s["online_q"], s["online_v"])
  for eager, jitted in zip(grads(False), grads(True)):
    assert np.all(np.isfinite(eager))
    # float32, fused differently under jit.
    np.testing.assert_allclose(eager, jitted, rtol=1e-4, atol=1e-5)


def test_policy_loss_sends_no_gradient_to_v_and_v_loss_none_to_q():
  s = _sequences(seed=11)
  def grads(**weights):
    def f(q, v):
      rest = {k: s[k] for k in s if k not in ("online_q", "online_v")}
      return dice.dice_loss(q, v, **rest, **weights)[0]
    return jax.grad(f, argnums=(0, 1))(s["online_q"], s["online_v"])
  g_q, g_v = grads(q_weight=0., v_weight=0., pi_weight=1.)
  np.testing.assert_array_equal(g_v, 0.)                    # stop-gradient
  assert np.abs(g_q).max() > 1e-3
  g_q, g_v = grads(q_weight=0., v_weight=1., pi_weight=0.)
  np.testing.assert_array_equal(g_q, 0.)
  assert np.abs(g_v).max() > 1e-3


def test_dice_loss_ignores_padding_and_bootstraps_truncated_sequences():
  s = _sequences(seed=12)
  s["discounts"][3, 2] = 1.        # lane 2 is truncated at step 3, not ended
  loss, extras = dice.dice_loss(**s)
  garbage = dict(s)
  rng = _rng(13)
  for k in ("online_q", "online_v", "target_q", "rewards", "behaviour_prob"):
    garbage[k] = s[k].copy()
    garbage[k][4:, 2] = 100. * rng.uniform(0.01, 1.,
                                           size=garbage[k][4:, 2].shape)
  garbage["behaviour_prob"][4:, 2] = 0.       # mu = 0 at padding is fine
  garbage["actions"] = s["actions"].copy()
  garbage["actions"][4:, 2] = (s["actions"][4:, 2] + 1) % A
  loss_g, extras_g = dice.dice_loss(**garbage)
  np.testing.assert_allclose(loss_g, loss, rtol=1e-6)
  np.testing.assert_allclose(extras_g.priorities, extras.priorities,
                             rtol=1e-6)
  # The last real transition (2 -> 3 of lane 2) bootstraps on E_pi Q(x_3).
  q, tq, tau = s["online_q"], s["target_q"], s["tau"]
  pi3 = np_softmax(q[3, 2], tau[2])
  y = h(s["rewards"][3, 2] + 0.997 * pi3 @ h_inv(tq[3, 2].astype(np.float64),
                                                 1e-3), 1e-3)
  np.testing.assert_allclose(extras.td_errors[2, 2],
                             y - q[2, 2, s["actions"][2, 2]], rtol=1e-4)


def test_fully_masked_lane_contributes_zero():
  s = _sequences(seed=14)
  s["sequence_mask"][:, 1] = 0.
  loss, _ = dice.dice_loss(**s)
  s2 = dict(s, importance_weights=np.array([1., 5., 1.], np.float32))
  loss2, _ = dice.dice_loss(**s2)
  np.testing.assert_allclose(loss2, loss, rtol=1e-6)


def test_importance_weights_scale_lanes():
  s = _sequences(seed=15)
  w = np.array([0.5, 2., 1.], np.float32)
  _, per_lane = zip(*[dice.dice_loss(**dict(
      s, importance_weights=np.eye(B, dtype=np.float32)[b]))
                      for b in range(B)])
  loss_w, _ = dice.dice_loss(**s, importance_weights=w)
  lanes = np.array([e.metrics["loss"] for e in per_lane])
  np.testing.assert_allclose(loss_w, (w * lanes).sum(), rtol=1e-5)


def test_per_step_tau_equals_per_sequence_tau():
  s = _sequences(seed=16)
  loss, extras = dice.dice_loss(**s)
  per_step = np.broadcast_to(s["tau"], (T + 1, B)).copy()
  loss2, extras2 = dice.dice_loss(**dict(s, tau=per_step))
  np.testing.assert_allclose(loss2, loss, rtol=1e-6)
  # A different tau changes the loss (the tau is used).
  loss3, _ = dice.dice_loss(**dict(s, tau=s["tau"] * 3.))
  assert abs(float(loss3) - float(loss)) > 1e-3
  np.testing.assert_allclose(extras2.metrics["entropy"],
                             extras.metrics["entropy"], rtol=1e-6)


def test_policy_terms_see_only_the_advantage():
  """pi_tau = softmax(Q / tau) = softmax(A / tau): a per-row shift of Q
  (i.e. V) changes neither the policy loss nor the entropy."""
  s = _sequences(seed=19)
  _, extras = dice.dice_loss(**s)
  shift = 5. * _rng(20).normal(size=(T + 1, B, 1)).astype(np.float32)
  _, shifted = dice.dice_loss(**dict(s, online_q=s["online_q"] + shift))
  for k in ("pi_loss", "v_loss", "entropy"):
    np.testing.assert_allclose(shifted.metrics[k], extras.metrics[k],
                               rtol=1e-5, atol=1e-6)
  assert abs(float(shifted.metrics["q_loss"] - extras.metrics["q_loss"])) > 1e-3


def test_intrinsic_reward_composes_like_ngu():
  s = _sequences(seed=17)
  r_int = _rng(18).uniform(size=(T + 1, B)).astype(np.float32)
  beta = np.array([0., 0.3, 0.1], np.float32)
  loss, _ = dice.dice_loss(**s, intrinsic_rewards=r_int, beta=beta)
  loss2, _ = dice.dice_loss(**dict(s, rewards=s["rewards"] + beta * r_int))
  np.testing.assert_allclose(loss, loss2, rtol=1e-5)
  loss_ext, _ = dice.dice_loss(**s)
  assert abs(float(loss) - float(loss_ext)) > 1e-4
  # Extrinsic alone by default: beta is ignored without intrinsic rewards.
  np.testing.assert_array_equal(dice.dice_loss(**s, beta=0.5)[0], loss_ext)


# ----------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize("call, message", [
    (lambda: dice.boltzmann_probs(np.zeros((2, 3), np.float32),
                                  np.zeros((3,), np.float32) + 1.),
     "`tau` must be a scalar or broadcastable to (2,)"),
    (lambda: dice.boltzmann_probs(np.float32(1.), 1.),
     "`logits` must have an action axis"),
    (lambda: dice.boltzmann_probs(np.zeros((2, 3), np.int32), 1.),
     "`logits` must be floating point"),
    (lambda: dice.boltzmann_behaviour_probability(
        np.zeros((2, 3), np.float32), np.zeros((3,), np.int32), 1.),
     "`actions` must have shape [2]"),
    (lambda: dice.dice_retrace(*_retrace_inputs(), c_bar=0.9),
     "`c_bar` must be a finite number >= 1.0, got 0.9"),
    (lambda: dice.dice_retrace(*_retrace_inputs(), lambda_=1.5),
     "`lambda_` must be in [0.0, 1.0], got 1.5"),
    (lambda: dice.dice_retrace(*_retrace_inputs(), eps=0.),
     "`eps` must be a finite number > 0 (or None"),
    (lambda: dice.dice_retrace(*_retrace_inputs()[:-1],
                               np.ones((T, B + 1), np.float32)),
     "`mu_t` must have shape [5, 3]"),
    (lambda: dice.dice_vtrace(*_vtrace_inputs(), c_bar=0.5),
     "`c_bar` must be a finite number >= 1.0, got 0.5"),
    (lambda: dice.dice_vtrace(*_vtrace_inputs(), rho_bar=1.01, c_bar=1.05),
     "`rho_bar` must be a finite number >= 1.05, got 1.01"),
    (lambda: dice.dice_vtrace(*_vtrace_inputs()[:-1],
                              np.ones((T,), np.float32)),
     "`rho_tm1` must have shape [5, 3]"),
    (lambda: dice.dice_loss(**dict(_sequences(), tau=np.ones((2,),
                                                             np.float32))),
     "`tau` must have shape [3] (one per sequence) or [6, 3]"),
    (lambda: dice.dice_loss(**_sequences(), c_bar=0.99),
     "`c_bar` must be a finite number >= 1.0, got 0.99"),
    (lambda: dice.dice_loss(**_sequences(), lambda_=1.2),
     "`lambda_` must be in [0.0, 1.0], got 1.2"),
    (lambda: dice.dice_loss(**_sequences(), rho_bar=1.),
     "`rho_bar` must be a finite number >= 1.05, got 1.0"),
    (lambda: dice.dice_loss(**_sequences(), pi_weight=-1.),
     "`pi_weight` must be a finite number >= 0"),
    (lambda: dice.dice_loss(**dict(_sequences(), online_v=np.zeros(
        (T + 1, B, 1), np.float32))),
     "`online_v` must have shape [6, 3]"),
    (lambda: dice.dice_loss(**_sequences(t1=1)),
     "sequences need at least 2 steps"),
])
def test_rejects_bad_shapes_and_hyperparameters(call, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    call()


@pytest.mark.parametrize("jit, case", [
    (False, "tau_zero"), (True, "tau_zero"), (False, "tau_negative"),
    (False, "tau_nan"), (False, "mu_above_one"),
    (False, "action_out_of_range"), (True, "action_out_of_range")])
def test_rejects_bad_values(jit, case):
  s = _sequences()
  if case == "tau_zero":
    s["tau"] = np.array([0.3, 0., 1.], np.float32)
    message = "`tau` has values <= 0 (tau must be > 0) in lane(s) [1]"
  elif case == "tau_negative":
    s["tau"] = np.array([0.3, 1., -2.], np.float32)
    message = "`tau` has values <= 0 (tau must be > 0) in lane(s) [2]"
  elif case == "tau_nan":
    s["tau"] = np.array([np.nan, 1., 2.], np.float32)
    message = "`tau` contains NaN or inf in lane(s) [0]"
  elif case == "mu_above_one":
    s["behaviour_prob"][2, 1] = 1.5
    message = "`behaviour_prob` has values outside [0.0, 1.0] in lane(s) [1]"
  else:
    s["actions"][0, 2] = A
    message = "`a_tm1` has values outside [0, 4) in lane(s) [2]"
  with pytest.raises(ValueError if not jit else Exception,
                     match=re.escape(message)):
    jax.block_until_ready(_loss(jit=jit, **s))


@JIT
def test_boltzmann_probs_rejects_non_positive_tau(jit):
  with pytest.raises(ValueError if not jit else Exception,
                     match=re.escape("`tau` has values <= 0")):
    jax.block_until_ready(_call(dice.boltzmann_probs,
                                np.zeros((2, 3), np.float32),
                                np.array([1., 0.], np.float32), jit=jit))
