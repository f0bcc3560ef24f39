"""Tests for ngu_jax.losses.retrace.

The transformed Retrace targets are checked against an independent float64
numpy implementation of NGU App. E, eq. (14)-(15), written below with explicit
loops over time in the paper's own indexing, and against `rlax` lane by lane.
"""

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from ngu_jax.losses import dice
from ngu_jax.losses import retrace

T, B, A = 6, 3, 4
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _call(fn, *args, jit, **static):
  """Calls fn(*args, **static), jitted over `args` if `jit` (static closed)."""
  f = functools.partial(fn, **static)
  return jax.jit(f)(*args) if jit else f(*args)


# ----------------------------------------------------------------------------
# Independent reference: NGU App. E, eq. (14)-(17), in the paper's indexing.


def h(x, eps):
  """Eq. (16)."""
  return np.sign(x) * (np.sqrt(np.abs(x) + 1.) - 1.) + eps * x


def h_inv(z, eps):
  """Eq. (17), closed-form inverse of h."""
  return np.sign(z) * (
      ((np.sqrt(1. + 4. * eps * (np.abs(z) + 1. + eps)) - 1.) / (2. * eps))**2
      - 1.)


def reference_targets(target_q, actions, rewards, discounts, pi, mu, lam, eps):
  """Eq. (14)-(15) on one lane, truncated at the end of the sequence.

  Args:
    target_q: Q(x_s, .; theta^-) for s = 0..T, shaped [T + 1, A].
    actions: a_s for s = 0..T, shaped [T + 1].
    rewards: r_s = r(x_s, a_s) for s = 0..T-1, shaped [T].
    discounts: gamma of the transition x_s -> x_{s+1}, shaped [T].
    pi: pi(. | x_s) for s = 0..T (row 0 unused), shaped [T + 1, A].
    mu: mu(a_s | x_s) for s = 0..T (entry 0 unused), shaped [T + 1].
    lam: lambda of the trace c_s at x_s, s = 0..T (entry 0 unused), [T + 1].
    eps: epsilon of h.

  Returns:
    Targets y_t for t = 0..T-1, shaped [T].
  """
  n = len(rewards)
  num_actions = target_q.shape[1]
  y = np.zeros(n)
  for t in range(n):
    total = h_inv(target_q[t, actions[t]], eps)
    coef = 1.
    for s in range(t, n):
      if s > t:
        c_s = lam[s] * min(1., pi[s, actions[s]] / mu[s])  # eq. (8)
        coef *= discounts[s - 1] * c_s
      v_next = sum(pi[s + 1, b] * h_inv(target_q[s + 1, b], eps)
                   for b in range(num_actions))
      delta = (rewards[s] + discounts[s] * v_next
               - h_inv(target_q[s, actions[s]], eps))  # eq. (15)
      total += coef * delta
    y[t] = h(total, eps)  # eq. (14)
  return y


def _sequence(seed=0, lam=0.95):
  """Random batch in sequence layout ([T + 1, B, ...]), float64."""
  rng = np.random.default_rng(seed)
  seq = dict(
      online_q=rng.normal(size=(T + 1, B, A)) * 5.,
      target_q=rng.normal(size=(T + 1, B, A)) * 5.,
      actions=rng.integers(0, A, size=(T + 1, B)),
      rewards=rng.normal(size=(T, B)) * 2.,
      discounts=rng.uniform(0.8, 1., size=(T, B)),
      pi=rng.dirichlet(np.ones(A), size=(T + 1, B)),
      mu=rng.uniform(0.05, 1., size=(T + 1, B)),
      lam=np.full((T + 1, B), lam),
  )
  seq["discounts"][2, 1] = 0.  # Lane 1: x_3 is terminal.
  return seq


def _retrace_args(seq):
  """The alignment of the module docstring: sequence -> rlax arguments."""
  f32 = lambda x: np.asarray(x, np.float32)
  return (f32(seq["online_q"][:-1]), f32(seq["target_q"][1:]),
          seq["actions"][:-1].astype(np.int32),
          seq["actions"][1:].astype(np.int32), f32(seq["rewards"]),
          f32(seq["discounts"]), f32(seq["pi"][1:]), f32(seq["mu"][1:]))


def _reference_td(seq, eps):
  out = np.zeros((T, B))
  for b in range(B):
    y = reference_targets(seq["target_q"][:, b], seq["actions"][:, b],
                          seq["rewards"][:, b], seq["discounts"][:, b],
                          seq["pi"][:, b], seq["mu"][:, b], seq["lam"][:, b],
                          eps)
    q_a = seq["online_q"][np.arange(T), b, seq["actions"][:-1, b]]
    out[:, b] = y - q_a
  return out


def test_reference_transform_pair_is_inverse():
  x = np.linspace(-500., 500., 101)
  for eps in (1e-3, 1e-2):
    np.testing.assert_allclose(h_inv(h(x, eps), eps), x, rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------
# transformed_retrace


@JIT
@pytest.mark.parametrize("eps", [1e-3, 1e-2])
def test_matches_eq14_reference_and_rlax_per_lane(jit, eps):
  seq = _sequence()
  args = _retrace_args(seq)
  td = _call(retrace.transformed_retrace, *args, jit=jit, lambda_=0.95,
             eps=eps)
  assert td.shape == (T, B)
  np.testing.assert_allclose(td, _reference_td(seq, eps), rtol=1e-4,
                             atol=1e-4)

  for b in range(B):
    lane = _rlax_lane(eps)(*(x[:, b] for x in args))
    np.testing.assert_allclose(td[:, b], lane, rtol=1e-5, atol=1e-5)


@functools.lru_cache(maxsize=None)
def _rlax_lane(eps):
  """rlax.transformed_retrace on one lane (jitted once per eps, for speed)."""
  tx = rlax.TxPair(functools.partial(rlax.signed_hyperbolic, eps=eps),
                   functools.partial(rlax.signed_parabolic, eps=eps))
  return jax.jit(functools.partial(rlax.transformed_retrace, lambda_=0.95,
                                   tx_pair=tx))


@JIT
def test_eps_is_honoured(jit):
  seq = _sequence(seed=1)
  args = _retrace_args(seq)
  td = {eps: np.asarray(_call(retrace.transformed_retrace, *args, jit=jit,
                              lambda_=0.95, eps=eps))
        for eps in (1e-3, 1e-2)}
  assert np.max(np.abs(td[1e-3] - td[1e-2])) > 1e-2
  for eps, value in td.items():
    np.testing.assert_allclose(value, _reference_td(seq, eps), rtol=1e-4,
                               atol=1e-4)


@JIT
def test_per_step_lambda_matches_reference(jit):
  seq = _sequence(seed=2)
  rng = np.random.default_rng(3)
  seq["lam"] = rng.uniform(0., 1., size=(T + 1, B))
  seq["lam"][3, 0] = 0.  # Cut the trace at x_3 in lane 0.
  td = _call(retrace.transformed_retrace, *_retrace_args(seq),
             seq["lam"][1:].astype(np.float32), jit=jit)
  np.testing.assert_allclose(td, _reference_td(seq, 1e-3), rtol=1e-4,
                             atol=1e-4)


@JIT
def test_on_policy_lambda_one_is_transformed_n_step_return(jit):
  # pi_t[t] is pi(. | x_{t+1}): one-hot on the action taken there, a_t[t]
  # (not a_tm1[t]). Then pi(a_s|x_s) = 1 = mu(a_s|x_s), so c_s = lambda = 1,
  # E_pi h^{-1}Q(x_{s+1}) = h^{-1}Q(x_{s+1}, a_{s+1}) and eq. (14) telescopes
  # into the n-step return bootstrapped on Q(x_T, a_T).
  seq = _sequence(seed=4, lam=1.)
  seq["pi"] = np.eye(A)[seq["actions"]]
  seq["mu"] = np.ones((T + 1, B))
  eps = 1e-3
  td = _call(retrace.transformed_retrace, *_retrace_args(seq), jit=jit,
             lambda_=1., eps=eps)

  expected = np.zeros((T, B))
  for b in range(B):
    bootstrap = h_inv(seq["target_q"][T, b, seq["actions"][T, b]], eps)
    for t in range(T):
      g, disc = 0., 1.
      for s in range(t, T):
        g += disc * seq["rewards"][s, b]
        disc *= seq["discounts"][s, b]
      g += disc * bootstrap
      expected[t, b] = h(g, eps) - seq["online_q"][t, b, seq["actions"][t, b]]
  np.testing.assert_allclose(td, expected, rtol=1e-4, atol=1e-4)


@JIT
def test_truncation_recipe_bootstraps_last_real_step(jit):
  # Lane 0 is real up to x_3 (truncated: discount 1 into x_3), then padding
  # with arbitrary finite values. With the `valid_mask` recipe the target of
  # the last real transition (t = 2) is h(r + gamma E_pi h^{-1} Q(x_3)).
  seq = _sequence(seed=5)
  seq_mask = np.ones((T + 1, B), np.float32)
  seq_mask[4:, 0] = 0.
  seq["discounts"][2, 0] = 1.
  args = list(_retrace_args(seq))
  valid = retrace.valid_mask(seq_mask)
  lam = 0.95 * jnp.concatenate([valid[1:], valid[-1:]], axis=0)
  eps = 1e-3

  def target_at_2(padding_reward):
    args[4] = args[4].copy()
    args[4][3:, 0] = padding_reward
    td = _call(retrace.transformed_retrace, *args, lam, jit=jit)
    return float(td[2, 0]) + args[0][2, 0, args[2][2, 0]]

  v3 = np.sum(seq["pi"][3, 0] * h_inv(seq["target_q"][3, 0], eps))
  expected = h(seq["rewards"][2, 0] + 1. * v3, eps)
  np.testing.assert_allclose(target_at_2(0.), expected, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(target_at_2(100.), expected, rtol=1e-4,
                             atol=1e-4)
  np.testing.assert_array_equal(valid[:, 0], [1, 1, 1, 0, 0, 0])


@JIT
@pytest.mark.parametrize("stop", [True, False])
def test_target_gradients(jit, stop):
  args = _retrace_args(_sequence(seed=6))

  def loss(q_tm1, q_t):
    td = retrace.transformed_retrace(q_tm1, q_t, *args[2:], lambda_=0.95,
                                     stop_target_gradients=stop)
    return 0.5 * jnp.sum(td**2)

  grad_fn = jax.grad(loss, argnums=(0, 1))
  g_tm1, g_t = (jax.jit(grad_fn) if jit else grad_fn)(args[0], args[1])
  assert np.count_nonzero(np.asarray(g_tm1)) > 0
  if stop:
    np.testing.assert_array_equal(g_t, np.zeros_like(g_t))
  else:
    assert np.count_nonzero(np.asarray(g_t)) > 0


# ----------------------------------------------------------------------------
# Policies.


@JIT
def test_epsilon_greedy_probs_hand_computed(jit):
  q = np.array([[1., 3., 2., 0.],     # Greedy action 1.
                [2., 2., 0., 1.]],    # Tie between actions 0 and 1.
               np.float32)
  probs = _call(retrace.epsilon_greedy_probs, q, jit=jit, epsilon=0.2)
  np.testing.assert_allclose(probs, [[0.05, 0.85, 0.05, 0.05],
                                     [0.45, 0.45, 0.05, 0.05]], rtol=1e-6)
  # Per-lane epsilons, shaped [B] for q shaped [B, A].
  probs = _call(retrace.epsilon_greedy_probs, q, np.array([0., 1.]), jit=jit)
  np.testing.assert_allclose(probs, [[0., 1., 0., 0.],
                                     [0.25, 0.25, 0.25, 0.25]], rtol=1e-6)


@JIT
def test_epsilon_greedy_probs_rows_sum_to_one_and_match_rlax(jit):
  q = np.random.default_rng(7).normal(size=(T, B, A)).astype(np.float32)
  q[0, 0] = [1., 1., 1., 0.]  # A three-way tie.
  probs = _call(retrace.epsilon_greedy_probs, q, jit=jit, epsilon=0.01)
  assert probs.shape == (T, B, A)
  np.testing.assert_allclose(np.sum(probs, -1), 1., rtol=1e-6)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", PendingDeprecationWarning)
    expected = rlax.epsilon_greedy(0.01).probs(q)
  np.testing.assert_allclose(probs, expected, rtol=1e-6, atol=1e-7)


@JIT
def test_behaviour_probability_hand_computed(jit):
  q = np.array([[1., 3., 2., 0.], [2., 2., 0., 1.], [0., 0., 0., 5.]],
               np.float32)
  actions = np.array([1, 0, 2], np.int32)
  mu = _call(retrace.behaviour_probability, q, actions, np.array([0.2, 0.2,
                                                                  0.4]),
             jit=jit)
  np.testing.assert_allclose(mu, [0.85, 0.45, 0.1], rtol=1e-6)


# ----------------------------------------------------------------------------
# Mixtures, masks, priorities.


@JIT
def test_mixture_discounts_and_rewards(jit):
  gammas = np.array([0.997, 0.99, 0.98], np.float32)
  betas = np.array([0., 0.1, 0.3], np.float32)
  j = np.array([2, 0, 1], np.int32)
  np.testing.assert_allclose(
      _call(retrace.mixture_discounts, j, gammas, jit=jit), [0.98, 0.997, 0.99])
  r_ext = np.array([[1., 2., 3.], [0., 0., -1.]], np.float32)
  r_int = np.array([[10., 10., 10.], [1., 2., 3.]], np.float32)
  np.testing.assert_allclose(
      _call(retrace.mixture_rewards, r_ext, r_int, j, betas, jit=jit),
      [[4., 2., 4.], [0.3, 0., -0.7]], rtol=1e-6)


@JIT
def test_valid_mask(jit):
  seq_mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]], np.float32)
  np.testing.assert_array_equal(
      _call(retrace.valid_mask, seq_mask, jit=jit),
      [[1, 1, 0], [1, 0, 0], [0, 0, 0]])
  out = _call(retrace.valid_mask, seq_mask.astype(bool), jit=jit)
  assert out.dtype == jnp.bool_


@JIT
def test_priorities_hand_computed(jit):
  td = np.array([[1., 5., -1.],
                 [-3., 5., 1.],
                 [2., 5., -1.],
                 [np.nan, 5., 4.]], np.float32)  # NaN at a masked step.
  mask = np.array([[1, 0, 1], [1, 0, 1], [1, 0, 1], [0, 0, 1]], np.float32)
  # Lane 0: max 3, mean 2 -> .9*3 + .1*2 = 2.9. Lane 1: all masked -> 0.
  # Lane 2: max 4, mean 7/4 -> 3.6 + 0.175 = 3.775.
  p = _call(retrace.priorities, td, mask, jit=jit)
  np.testing.assert_allclose(p, [2.9, 0., 3.775], rtol=1e-6)
  p = _call(retrace.priorities, td, mask.astype(bool), jit=jit, eta=0.5)
  np.testing.assert_allclose(p, [2.5, 0., 2.875], rtol=1e-6)


# ----------------------------------------------------------------------------
# Bad inputs.


def _replace(args, index, value):
  args = list(args)
  args[index] = value
  return args


def _with(index, fn):
  def edit(args):
    args = [np.array(x) for x in args]
    fn(args[index])
    return args
  return edit


_GOOD = _retrace_args(_sequence(seed=8))
_F32 = np.float32

_STATIC_ERRORS = {
    "T mismatch": (lambda a: _replace(a, 1, np.zeros((T + 1, B, A), _F32)),
                   "`q_t` must have shape [6, 3, 4], got (7, 3, 4)"),
    "B mismatch": (lambda a: _replace(a, 4, np.zeros((T, B + 1), _F32)),
                   "`r_t` must have shape [6, 3], got (6, 4)"),
    "A mismatch": (lambda a: _replace(a, 6, np.ones((T, B, A + 1), _F32)),
                   "`pi_t` must have shape [6, 3, 4]"),
    "rank q_tm1": (lambda a: _replace(a, 0, a[0][0]),
                   "`q_tm1` must have rank 3, got shape (3, 4)"),
    "rank a_tm1": (lambda a: _replace(a, 2, a[2][:, 0]),
                   "`a_tm1` must have rank 2, got shape (6,)"),
    "float actions": (lambda a: _replace(a, 3, a[3].astype(_F32)),
                      "`a_t` must be an integer array"),
}

_VALUE_ERRORS = {
    "action too large": (_with(3, lambda x: x.__setitem__((1, 2), A)),
                         "`a_t` has values outside [0, 4) in lane(s) [2]"),
    "negative action": (_with(2, lambda x: x.__setitem__((0, 0), -1)),
                        "`a_tm1` has values outside [0, 4) in lane(s) [0]"),
    "NaN q_tm1": (_with(0, lambda x: x.__setitem__((2, 1, 3), np.nan)),
                  "`q_tm1` contains NaN or inf in lane(s) [1]"),
    "inf r_t": (_with(4, lambda x: x.__setitem__((5, 0), np.inf)),
                "`r_t` contains NaN or inf in lane(s) [0]"),
    "NaN mu_t": (_with(7, lambda x: x.__setitem__((0, 2), np.nan)),
                 "`mu_t` contains NaN or inf in lane(s) [2]"),
    "mu_t > 1": (_with(7, lambda x: x.__setitem__((0, 1), 1.5)),
                 "`mu_t` has values outside [0.0, 1.0] in lane(s) [1]"),
    "pi_t not normalised": (_with(6, lambda x: x.__setitem__((3, 0), 0.5)),
                            "`pi_t` has rows (over actions) that do not sum "
                            "to 1 in lane(s) [0]"),
    "discount < 0": (_with(5, lambda x: x.__setitem__((1, 1), -0.1)),
                     "`discount_t` has values outside [0.0, 1.0]"),
}


@JIT
@pytest.mark.parametrize("case", list(_STATIC_ERRORS))
def test_rejects_bad_shapes_and_types(jit, case):
  edit, message = _STATIC_ERRORS[case]
  with pytest.raises(ValueError, match=re.escape(message)):
    _call(retrace.transformed_retrace, *edit(_GOOD), jit=jit, lambda_=0.95)


@JIT
@pytest.mark.parametrize("case", list(_VALUE_ERRORS))
def test_rejects_bad_values(jit, case):
  edit, message = _VALUE_ERRORS[case]
  with pytest.raises(ValueError if not jit else Exception,
                     match=re.escape(message)):
    jax.block_until_ready(_call(retrace.transformed_retrace, *edit(_GOOD),
                                jit=jit, lambda_=0.95))


@JIT
@pytest.mark.parametrize("kwargs, message", [
    (dict(lambda_=1.5), "`lambda_` must be in [0.0, 1.0], got 1.5"),
    (dict(lambda_=0.95, eps=0.), "`eps` must be a finite number > 0"),
])
def test_rejects_bad_hyperparameters(jit, kwargs, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    _call(retrace.transformed_retrace, *_GOOD, jit=jit, **kwargs)


# The validation path shared by `transformed_retrace` and `dice.dice_retrace`:
# `_check_retrace_inputs` (static) and `_check_retrace_values` (run time).

_LAMBDA = np.full((T, B), 0.95, _F32)


def _check_inputs(*args, lambda_=0.95):
  return retrace._check_retrace_inputs(*args, lambda_, "where")


def _check_values(*args):
  """Runs the value checks; returns a value to block on."""
  retrace._check_retrace_values(*args, "where")
  return args[0].sum()


@JIT
@pytest.mark.parametrize("lambda_", [0.95, _LAMBDA], ids=["scalar", "array"])
def test_check_retrace_inputs_returns_the_inputs(jit, lambda_):
  if jit:
    out = jax.jit(_check_inputs)(*_GOOD, lambda_=jnp.asarray(lambda_))
  else:
    out = _check_inputs(*_GOOD, lambda_=lambda_)
  assert len(out) == 9
  np.testing.assert_allclose(out[8], lambda_, rtol=1e-7)
  for got, want in zip(out[:8], _GOOD):
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
  if not jit:
    assert all(isinstance(x, jax.Array) for x in out[:8])
    assert isinstance(out[8], jax.Array) == (np.ndim(lambda_) > 0)


@JIT
@pytest.mark.parametrize("case", list(_STATIC_ERRORS) + ["lambda_ shape",
                                                         "lambda_ > 1"])
def test_check_retrace_inputs_rejects_bad_shapes_and_types(jit, case):
  kwargs = {}
  if case == "lambda_ shape":
    args, kwargs = _GOOD, dict(lambda_=_LAMBDA[:, :2])
    message = "`lambda_` must have shape [6, 3], got (6, 2)"
  elif case == "lambda_ > 1":
    args, kwargs, jit = _GOOD, dict(lambda_=1.5), False  # Concrete only.
    message = "`lambda_` must be in [0.0, 1.0], got 1.5"
  else:
    edit, message = _STATIC_ERRORS[case]
    args = edit(_GOOD)
  with pytest.raises(ValueError, match=re.escape("where: " + message)):
    _call(_check_inputs, *args, jit=jit, **kwargs)


@JIT
def test_check_retrace_values_accepts_good_inputs(jit):
  jax.block_until_ready(_call(_check_values, *_GOOD, _LAMBDA, jit=jit))
  jax.block_until_ready(_call(lambda *a: _check_values(*a, 0.95), *_GOOD,
                              jit=jit))


@JIT
@pytest.mark.parametrize("case", list(_VALUE_ERRORS) + ["NaN lambda_",
                                                        "lambda_ < 0"])
def test_check_retrace_values_rejects_bad_values(jit, case):
  lambda_ = _LAMBDA.copy()
  args = _GOOD
  if case == "NaN lambda_":
    lambda_[4, 2] = np.nan
    message = "`lambda_` contains NaN or inf in lane(s) [2]"
  elif case == "lambda_ < 0":
    lambda_[0, 1] = -0.5
    message = "`lambda_` has values outside [0.0, 1.0] in lane(s) [1]"
  else:
    edit, message = _VALUE_ERRORS[case]
    args = edit(_GOOD)
  with pytest.raises(ValueError if not jit else Exception,
                     match=re.escape("where: " + message)):
    jax.block_until_ready(_call(_check_values, *args, lambda_, jit=jit))


@JIT
def test_check_per_row_broadcasts_and_checks(jit):
  """The per-row parameter check of epsilon here and of DiCE's tau."""
  def check(x, lead=(2, 3)):
    return retrace._check_per_row(x, lead, "p", "q's", "w")
  np.testing.assert_array_equal(_call(check, np.float32(0.5), jit=jit),
                                np.full((2, 3), 0.5, _F32))
  row = np.array([0.1, 0.2, 0.3], _F32)
  np.testing.assert_array_equal(_call(check, row, jit=jit),
                                np.stack([row, row]))
  np.testing.assert_array_equal(_call(check, np.float32(0.5), jit=jit,
                                      lead=()), [0.5])
  with pytest.raises(ValueError, match=re.escape(
      "w: `p` must be a scalar or broadcastable to (2, 3) (q's shape without "
      "the action axis), got shape (2,).")):
    _call(check, np.ones(2, _F32), jit=jit)
  with pytest.raises(ValueError if not jit else Exception, match=re.escape(
      "w: `p` contains NaN or inf in lane(s) [1]")):
    jax.block_until_ready(_call(check, np.array([[1.], [np.nan]], _F32),
                                jit=jit))


@pytest.mark.parametrize("case", list(_STATIC_ERRORS) + list(_VALUE_ERRORS))
def test_dice_retrace_raises_the_same_errors(case):
  edit, message = {**_STATIC_ERRORS, **_VALUE_ERRORS}[case]
  with pytest.raises(ValueError,
                     match=re.escape("dice.dice_retrace: " + message)):
    dice.dice_retrace(*edit(_GOOD), lambda_=0.95)


_Q = np.zeros((B, A), _F32)
_HELPER_ERRORS = {
    "behaviour action out of range": (
        lambda: (retrace.behaviour_probability,
                 (_Q, np.array([0, 4, 1], np.int32), np.float32(0.1))),
        "`actions` has values outside [0, 4) in lane(s) [1]"),
    "behaviour epsilon > 1": (
        lambda: (retrace.behaviour_probability,
                 (_Q, np.zeros(B, np.int32), np.array([0.1, 1.2, 0.1], _F32))),
        "`epsilon` has values outside [0.0, 1.0] in lane(s) [1]"),
    "NaN q": (
        lambda: (retrace.epsilon_greedy_probs,
                 (np.where(np.eye(B, A) > 0, np.nan, _Q).astype(_F32),)),
        "`q` contains NaN or inf in lane(s) [0, 1, 2]"),
    "mixture index out of range": (
        lambda: (retrace.mixture_discounts,
                 (np.array([0, 3, 1], np.int32), np.ones(3, _F32))),
        "`mixture_index` has values outside [0, 3) in lane(s) [1]"),
    "mask not binary": (
        lambda: (retrace.priorities,
                 (np.ones((T, B), _F32), np.full((T, B), 0.5, _F32))),
        "`mask` has values other than 0 and 1"),
    "NaN td at valid step": (
        lambda: (retrace.priorities,
                 (np.where(np.eye(T, B) > 0, np.nan, 1.).astype(_F32),
                  np.ones((T, B), _F32))),
        "`td_errors` contains NaN or inf in lane(s) [0, 1, 2]"),
    "sequence mask not binary": (
        lambda: (retrace.valid_mask, (np.full((T + 1, B), 2., _F32),)),
        "`sequence_mask` has values other than 0 and 1"),
}


@JIT
@pytest.mark.parametrize("case", list(_HELPER_ERRORS))
def test_helpers_reject_bad_values(jit, case):
  make, message = _HELPER_ERRORS[case]
  fn, args = make()
  with pytest.raises(ValueError if not jit else Exception,
                     match=re.escape(message)):
    jax.block_until_ready(_call(fn, *args, jit=jit))


@JIT
def test_helpers_reject_bad_shapes(jit):
  with pytest.raises(ValueError, match=re.escape("`mask` must have shape")):
    _call(retrace.priorities, np.ones((T, B), _F32), np.ones((T, B + 1), _F32),
          jit=jit)
  with pytest.raises(ValueError, match=re.escape("`r_int` must have shape")):
    _call(retrace.mixture_rewards, np.ones((T, B), _F32),
          np.ones((T + 1, B), _F32), np.zeros(B, np.int32), np.ones(2, _F32),
          jit=jit)
  with pytest.raises(ValueError, match=re.escape("`actions` must have shape")):
    _call(retrace.behaviour_probability, _Q, np.zeros(B + 1, np.int32),
          jit=jit, epsilon=0.1)
  with pytest.raises(ValueError, match=re.escape("`epsilon` must be a scalar")):
    _call(retrace.epsilon_greedy_probs, _Q, np.full(A, 0.1, _F32), jit=jit)
