"""Tests for ngu_jax.agents.ngu.learning (NGU App. A learner, App. E).

The TD errors are checked against the float64 eq. (14)-(15) reference of
tests/losses/test_retrace.py, fed with Q-values from the network and the
target policy, rewards and discounts rebuilt here by hand from the batch.
"""

import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ngu_jax import mixtures
from ngu_jax.agents.ngu import learning
from ngu_jax.losses import retrace
from ngu_jax.networks import uvfa
from ngu_jax.types import SequenceBatch
from tests import helpers
from tests.losses.test_retrace import reference_targets

T, B, A, N = 5, 2, 3, 2  # T + 1 = 6 stored steps.
OBS = (4,)
LSTM = 8
BETAS = mixtures.betas(N, 0.3)    # [0, 0.3]
GAMMAS = mixtures.gammas(N)       # [0.997, 0.99]
KW = dict(betas=BETAS, gammas=GAMMAS)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


@functools.lru_cache(maxsize=None)
def _network():
  return uvfa.make_uvfa_network(OBS, A, N, lstm_size=LSTM, head_hidden=8,
                                mlp_hidden_sizes=(8,))


@functools.lru_cache(maxsize=None)
def _params(seed):
  net = _network()
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  return helpers.random_params(shapes, seed, bias_fan_in=4)


def _batch(seed=0, padded=False, terminal=True):
  """A hand-made batch; lane 0 starts an episode at step 0.

  With `padded`, lane 1's episode ends at x_3 (terminal, discount 0, or
  truncated, discount 1, if not `terminal`) and steps 4, 5 are padding.
  """
  rng = np.random.default_rng(seed)
  shape = (T + 1, B)
  action = rng.integers(0, A, size=shape).astype(np.int32)
  r_ext = rng.normal(size=shape).astype(np.float32)
  r_int = rng.uniform(size=shape).astype(np.float32)
  first = np.zeros(shape, bool)
  first[0, 0] = True
  r_ext[first] = 0.
  r_int[first] = 0.
  discount = np.ones(shape, np.float32)
  mask = np.ones(shape, np.float32)
  if padded:
    discount[3, 1] = 0. if terminal else 1.
    mask[4:, 1] = 0.
  prev_action = np.concatenate(
      [rng.integers(0, A, size=(1, B)), action[:-1]]).astype(np.int32)
  prev_action[first] = -1  # No previous action at an episode start.
  state = uvfa.LSTMState(
      hidden=(0.5 * rng.normal(size=(B, LSTM))).astype(np.float32),
      cell=(0.5 * rng.normal(size=(B, LSTM))).astype(np.float32))
  return SequenceBatch(
      observation=rng.normal(size=shape + OBS).astype(np.float32),
      action=action,
      extrinsic_reward=r_ext,
      intrinsic_reward=r_int,
      discount=discount,
      step_is_first=first,
      behaviour_prob=rng.uniform(0.2, 1., size=shape).astype(np.float32),
      mask=mask,
      prev_action=prev_action,
      prev_extrinsic_reward=r_ext.copy(),
      prev_intrinsic_reward=r_int.copy(),
      mixture_index=np.array([0, 1], np.int32),
      initial_state=state,
      importance_weights=np.array([1., 0.5], np.float32))


@functools.lru_cache(maxsize=None)
def _loss_fn(jit, burn_in=0):
  fn = functools.partial(learning.loss, _network(), burn_in=burn_in, **KW)
  return jax.jit(fn) if jit else fn


@functools.lru_cache(maxsize=None)
def _grad_fn(jit, burn_in=0):
  """Gradients w.r.t. (params, target_params); one compile serves all tests."""
  fn = jax.grad(functools.partial(learning.loss, _network(), burn_in=burn_in,
                                  **KW), argnums=(0, 1), has_aux=True)
  return jax.jit(fn) if jit else fn


def _call(batch, jit=True, burn_in=0, params_seed=0, target_seed=1):
  return _loss_fn(jit, burn_in)(_params(params_seed), _params(target_seed),
                                batch)


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


# ----------------------------------------------------------------------------
# Shapes and values.


@pytest.mark.parametrize("jit, burn_in", [(False, 0), (True, 0), (True, 2)])
def test_shapes(jit, burn_in):
  value, extras = _call(_batch(padded=True), jit, burn_in)
  assert value.shape == () and value.dtype == jnp.float32
  assert extras.priorities.shape == (B,)
  assert extras.td_errors.shape == extras.valid.shape == (T - burn_in, B)
  assert set(extras.metrics) == {"loss", "td_abs_mean", "q_mean"}
  for v in extras.metrics.values():
    assert v.shape == () and np.isfinite(v)
  np.testing.assert_allclose(extras.metrics["loss"], value)
  assert np.isfinite(value) and value > 0


@JIT
def test_td_errors_match_eq14_reference(jit):
  """Alignment: pi from the online net, Q^- from the target net, gamma_j,
  r^e + beta_j r^i of the transition x_t -> x_{t+1}, mu of a_{t+1}."""
  batch = _batch(seed=3)
  _, extras = _call(batch, jit)
  np.testing.assert_allclose(extras.td_errors, _reference_td(batch),
                             rtol=1e-4, atol=1e-4)


def _reference_td(batch, uncorrected=False, advantage_learning=0.):
  """The float64 eq. (14)-(15) TD errors [T, B] of `_call`'s networks
  (params 0, target params 1): mu the stored behaviour probability, or with
  `uncorrected` pi's own probability of the taken action; with
  `advantage_learning` alpha, each target less alpha (max_b Q^-(x_t, b) -
  Q^-(x_t, a_t)) (Bellemare et al., 2016)."""
  net = _network()
  inputs = uvfa.UVFAInputs(
      batch.observation, batch.prev_action, batch.prev_extrinsic_reward,
      batch.prev_intrinsic_reward,
      np.broadcast_to(batch.mixture_index, (T + 1, B)))
  online_q, target_q = (
      np.asarray(net.unroll(p, inputs, batch.initial_state,
                            batch.step_is_first)[0], np.float64)
      for p in (_params(0), _params(1)))
  out = np.zeros((T, B))
  for b in range(B):
    j = batch.mixture_index[b]
    rewards = batch.extrinsic_reward[1:, b] + BETAS[j] * (
        batch.intrinsic_reward[1:, b])
    discounts = GAMMAS[j] * batch.discount[1:, b]
    greedy = np.eye(A)[online_q[:, b].argmax(-1)]
    pi = 0.99 * greedy + 0.01 / A
    mu = (pi[np.arange(T + 1), batch.action[:, b]] if uncorrected
          else batch.behaviour_prob[:, b])
    y = reference_targets(target_q[:, b], batch.action[:, b], rewards,
                          discounts, pi, mu, np.full(T + 1, 0.95), 1e-3)
    steps = np.arange(T)
    gap = (target_q[:-1, b].max(-1)
           - target_q[steps, b, batch.action[:-1, b]])
    out[:, b] = (y - advantage_learning * gap
                 - online_q[steps, b, batch.action[:-1, b]])
  return out


@JIT
def test_uncorrected_traces_are_lambda_on_every_step(jit):
  """traces="uncorrected": eq. (14)-(15) with c_s = lambda (Peng's
  Q(lambda)): the reference with mu(a_s | x_s) = pi(a_s | x_s), whose
  min(1, pi / mu) is 1 on every step; and not Retrace's targets, whose
  traces the stored mu cuts."""
  batch = _batch(seed=3)
  fn = functools.partial(learning.loss, _network(), traces="uncorrected",
                         **KW)
  _, extras = (jax.jit(fn) if jit else fn)(_params(0), _params(1), batch)
  _, retrace_extras = _call(batch, jit)
  np.testing.assert_allclose(extras.td_errors,
                             _reference_td(batch, uncorrected=True),
                             rtol=1e-4, atol=1e-4)
  assert np.max(np.abs(np.asarray(extras.td_errors)
                       - np.asarray(retrace_extras.td_errors))) > 1e-3


@JIT
def test_advantage_learning_subtracts_the_target_networks_gap(jit):
  """advantage_learning=alpha: each target is Retrace's less alpha (max_b
  Q^-(x_t, b) - Q^-(x_t, a_t)) -- the written-out float64 reference --
  and alpha = 0 is the plain loss, bit for bit."""
  batch = _batch(seed=3)
  fn = functools.partial(learning.loss, _network(), advantage_learning=0.9,
                         **KW)
  _, extras = (jax.jit(fn) if jit else fn)(_params(0), _params(1), batch)
  np.testing.assert_allclose(
      extras.td_errors, _reference_td(batch, advantage_learning=0.9),
      rtol=1e-4, atol=1e-4)
  _, plain = _call(batch, jit)
  assert np.max(np.abs(np.asarray(extras.td_errors)
                       - np.asarray(plain.td_errors))) > 1e-3
  zero = functools.partial(learning.loss, _network(), advantage_learning=0.,
                           **KW)
  _, same = (jax.jit(zero) if jit else zero)(_params(0), _params(1), batch)
  np.testing.assert_array_equal(same.td_errors, plain.td_errors)


@JIT
def test_loss_formula_and_priorities(jit):
  batch = _batch(seed=4, padded=True)
  value, extras = _call(batch, jit)
  td, valid = np.asarray(extras.td_errors), np.asarray(extras.valid)
  np.testing.assert_array_equal(valid[:, 1], [1, 1, 1, 0, 0])
  np.testing.assert_array_equal(valid[:, 0], np.ones(T))
  lane = [np.sum(0.5 * td[valid[:, b] > 0, b]**2) / valid[:, b].sum()
          for b in range(B)]
  expected = np.mean(batch.importance_weights * np.array(lane))
  np.testing.assert_allclose(value, expected, rtol=1e-5)
  np.testing.assert_allclose(extras.priorities,
                             retrace.priorities(td, valid), rtol=1e-6)
  abs_td = np.abs(td[valid > 0])
  np.testing.assert_allclose(extras.metrics["td_abs_mean"], abs_td.mean(),
                             rtol=1e-5)


@JIT
def test_importance_weights_scale_the_loss(jit):
  batch = _batch(seed=5)
  value, extras = _call(batch, jit)
  double = batch._replace(importance_weights=2. * batch.importance_weights)
  value2, extras2 = _call(double, jit)
  np.testing.assert_allclose(value2, 2. * value, rtol=1e-6)
  # Priorities do not depend on the weights.
  np.testing.assert_allclose(extras2.priorities, extras.priorities)
  # A zero weight removes the lane.
  only0 = batch._replace(importance_weights=np.array([1., 0.], np.float32))
  td = np.asarray(extras.td_errors)
  np.testing.assert_allclose(_call(only0, jit)[0],
                             np.mean(0.5 * td[:, 0]**2) / B, rtol=1e-5)


# ----------------------------------------------------------------------------
# Gradients.


@pytest.mark.parametrize("jit, burn_in", [(False, 0), (True, 0), (True, 2)])
def test_gradients_flow_only_through_online_params(jit, burn_in):
  (online, target), _ = _grad_fn(jit, burn_in)(_params(0), _params(1),
                                               _batch(seed=6))
  for g in _leaves(target):
    np.testing.assert_array_equal(g, np.zeros_like(g))
  assert all(np.all(np.isfinite(g)) for g in _leaves(online))
  assert sum(np.count_nonzero(g) for g in _leaves(online)) > 0


def test_loss_decreases_with_adam():
  batch = _batch(seed=7)
  params, target_params = _params(0), _params(1)
  optimiser = optax.adam(1e-2)
  grad_fn = _grad_fn(True)

  @jax.jit
  def step(params, opt_state):
    (grads, _), _ = grad_fn(params, target_params, batch)
    updates, opt_state = optimiser.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state

  opt_state = optimiser.init(params)
  initial = float(_call(batch, True)[0])
  for _ in range(30):
    params, opt_state = step(params, opt_state)
  final = float(_loss_fn(True)(params, target_params, batch)[0])
  assert final < 0.5 * initial, (initial, final)


def test_burn_in_warms_the_state_without_gradient():
  """burn_in=k == loss on steps k.. from the (stopped) warmed state."""
  k, batch = 2, _batch(seed=8)
  net, params = _network(), _params(0)
  # With target_params == params both networks warm up to the same state.
  inputs = uvfa.UVFAInputs(
      batch.observation[:k], batch.prev_action[:k],
      batch.prev_extrinsic_reward[:k], batch.prev_intrinsic_reward[:k],
      np.broadcast_to(batch.mixture_index, (k, B)))
  _, warm = net.unroll(params, inputs, batch.initial_state,
                       batch.step_is_first[:k])
  tail = jax.tree_util.tree_map(lambda x: x[k:], batch._replace(
      mixture_index=None, initial_state=None, importance_weights=None))
  tail = tail._replace(mixture_index=batch.mixture_index, initial_state=warm,
                       importance_weights=batch.importance_weights)
  value, extras = _loss_fn(True, k)(params, params, batch)
  value_tail, extras_tail = _loss_fn(True, 0)(params, params, tail)
  np.testing.assert_allclose(value, value_tail, rtol=1e-5)
  np.testing.assert_allclose(extras.td_errors, extras_tail.td_errors,
                             rtol=1e-5, atol=1e-6)
  # No gradient through the burn-in: the gradients are those of the tail
  # loss, whose initial state is a constant.
  (g_burn, _), _ = _grad_fn(True, k)(params, params, batch)
  (g_tail, _), _ = _grad_fn(True, 0)(params, params, tail)
  for a, b in zip(_leaves(g_burn), _leaves(g_tail)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  # The burn-in matters: starting at k from the stored state differs.
  cold = tail._replace(initial_state=batch.initial_state)
  assert abs(float(_loss_fn(True, 0)(params, params, cold)[0])
             - float(value)) > 1e-5


# ----------------------------------------------------------------------------
# Padding.


def _scramble_padding(batch, seed):
  """New finite values at the padded steps (4, 5) of lane 1."""
  rng = np.random.default_rng(seed)
  fields = {}
  for name in ("observation", "extrinsic_reward", "intrinsic_reward",
               "prev_extrinsic_reward", "prev_intrinsic_reward"):
    x = np.array(getattr(batch, name))
    x[4:, 1] = 10. * rng.normal(size=x[4:, 1].shape)
    fields[name] = x
  for name in ("action", "prev_action"):
    x = np.array(getattr(batch, name))
    x[4:, 1] = (x[4:, 1] + 1) % A
    fields[name] = x
  for name in ("discount", "behaviour_prob"):
    x = np.array(getattr(batch, name))
    x[4:, 1] = rng.uniform(0.01, 1., size=2)
    fields[name] = x
  return batch._replace(**fields)


@pytest.mark.parametrize("jit, terminal", [(False, True), (True, True),
                                            (True, False)])
def test_masked_steps_do_not_change_loss(jit, terminal):
  # Truncated (not terminal): only cutting the trace at the padding keeps it
  # out of the last real targets.
  batch = _batch(seed=9, padded=True, terminal=terminal)
  scrambled = _scramble_padding(batch, seed=10)
  value, extras = _call(batch, jit)
  value2, extras2 = _call(scrambled, jit)
  np.testing.assert_allclose(value2, value, rtol=1e-6)
  np.testing.assert_allclose(extras2.priorities, extras.priorities, rtol=1e-6)
  if jit:  # (Eager gradients are covered by the gradient test.)
    (grads, _), _ = _grad_fn(jit)(_params(0), _params(1), batch)
    (grads2, _), _ = _grad_fn(jit)(_params(0), _params(1), scrambled)
    for a, b in zip(_leaves(grads), _leaves(grads2)):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  # Control: the same edit without the mask does change the loss.
  unmasked = batch._replace(mask=np.ones((T + 1, B), np.float32))
  scrambled_unmasked = scrambled._replace(mask=unmasked.mask)
  assert abs(float(_call(unmasked, jit)[0])
             - float(_call(scrambled_unmasked, jit)[0])) > 1e-4


# ----------------------------------------------------------------------------
# Bad inputs.


def _set(name, index, value):
  def edit(batch):
    x = np.array(getattr(batch, name))
    x[index] = value
    return batch._replace(**{name: x})
  return edit


_STATIC_ERRORS = {
    "T mismatch": (lambda b: b._replace(action=b.action[:-1]),
                   "`batch.action` must have shape [6, 2], got (5, 2)"),
    "B mismatch": (lambda b: b._replace(
        mixture_index=np.zeros(3, np.int32)),
                   "`batch.mixture_index` must have shape [2], got (3,)"),
    "observation shape": (lambda b: b._replace(
        observation=b.observation[..., :2]),
                          "`batch.observation` must have shape [?, ?, 4]"),
    "float actions": (lambda b: b._replace(
        action=b.action.astype(np.float32)),
                      "`batch.action` must be an integer array"),
    "state batch": (lambda b: b._replace(initial_state=uvfa.LSTMState(
        b.initial_state.hidden[:1], b.initial_state.cell[:1])),
                    "`batch.initial_state.hidden` must have shape [2, 8], "
                    "got (1, 8)"),
    "weights shape": (lambda b: b._replace(
        importance_weights=np.ones((B, 1), np.float32)),
                      "`batch.importance_weights` must have shape [2]"),
}

_VALUE_ERRORS = {
    "action too large": (_set("action", (2, 1), A),
                         "`batch.action` has values outside [0, 3) in "
                         "lane(s) [1]"),
    "negative action": (_set("action", (0, 0), -1),
                        "`batch.action` has values outside [0, 3) in "
                        "lane(s) [0]"),
    "mixture too large": (_set("mixture_index", 1, N),
                          "`batch.mixture_index` has values outside [0, 2) "
                          "in lane(s) [1]"),
    "NaN reward": (_set("extrinsic_reward", (3, 1), np.nan),
                   "`batch.extrinsic_reward` contains NaN or inf in "
                   "lane(s) [1]"),
    "NaN observation": (_set("observation", (1, 0, 2), np.nan),
                        "`batch.observation` contains NaN or inf in "
                        "lane(s) [0]"),
    "mu > 1": (_set("behaviour_prob", (1, 1), 1.5),
               "`batch.behaviour_prob` has values outside [0.0, 1.0]"),
    "negative weight": (_set("importance_weights", 0, -1.),
                        "`batch.importance_weights` has values outside"),
    "mask not binary": (_set("mask", (1, 0), 0.5),
                        "`batch.mask` has values other than 0 and 1"),
}


@JIT
@pytest.mark.parametrize("case", list(_STATIC_ERRORS))
def test_rejects_bad_shapes_and_types(jit, case):
  edit, message = _STATIC_ERRORS[case]
  with pytest.raises(ValueError, match=re.escape(message)):
    _call(edit(_batch()), jit)


@JIT
@pytest.mark.parametrize("case", list(_VALUE_ERRORS))
def test_rejects_bad_values(jit, case):
  edit, message = _VALUE_ERRORS[case]
  # Under jit the batch's checks run as one host callback that raises the
  # first failing check (`ngu_jax._checks.one_callback`): the same field
  # and message as eagerly.
  with pytest.raises(ValueError if not jit else Exception,
                     match=re.escape(message)):
    jax.block_until_ready(_call(edit(_batch()), jit))


@pytest.mark.parametrize("kwargs, message", [
    (dict(burn_in=T), "`burn_in` must be in [0, T - 1] = [0, 4]"),
    (dict(burn_in=-1), "`burn_in` must be in [0, T - 1]"),
    (dict(betas=np.zeros(3, np.float32)), "`betas` must have shape [2]"),
    (dict(retrace_lambda=1.5), "`retrace_lambda` must be in [0.0, 1.0]"),
    (dict(traces="peng"), "`traces` must be one of"),
    (dict(traces="uncorrected", target_epsilon=0.),
     "`traces` 'uncorrected' needs `target_epsilon` > 0"),
    (dict(advantage_learning=1.), "`advantage_learning` must be in [0, 1)"),
    (dict(advantage_learning=-0.1), "`advantage_learning` must be in [0, 1)"),
    (dict(advantage_learning=float("nan")),
     "`advantage_learning` must be in [0, 1)"),
])
def test_rejects_bad_hyperparameters(kwargs, message):
  kw = dict(KW, **kwargs)
  with pytest.raises(ValueError, match=re.escape(message)):
    learning.loss(_network(), _params(0), _params(1), _batch(), **kw)


def test_rejects_non_batch():
  with pytest.raises(ValueError, match="must be a SequenceBatch"):
    learning.loss(_network(), _params(0), _params(1), tuple(_batch()), **KW)


# ----------------------------------------------------------------------------
# Identity value transform (Table 7, Disco Maze).


def test_identity_transform_is_plain_retrace():
  """value_transform="identity" gives rlax.retrace's TD errors (an
  independent implementation of untransformed Retrace, eq. 10-13)."""
  import rlax  # pylint: disable=g-import-not-at-top
  batch = _batch(seed=11)
  fn = jax.jit(functools.partial(learning.loss, _network(),
                                 value_transform="identity", **KW))
  _, extras = fn(_params(0), _params(1), batch)
  _, hyperbolic = _call(batch)
  inputs = uvfa.UVFAInputs(
      batch.observation, batch.prev_action, batch.prev_extrinsic_reward,
      batch.prev_intrinsic_reward,
      np.broadcast_to(batch.mixture_index, (T + 1, B)))
  net = _network()
  online_q = net.unroll(_params(0), inputs, batch.initial_state,
                        batch.step_is_first)[0]
  target_q = net.unroll(_params(1), inputs, batch.initial_state,
                        batch.step_is_first)[0]
  for b in range(B):
    j = batch.mixture_index[b]
    rewards = batch.extrinsic_reward[1:, b] + BETAS[j] * (
        batch.intrinsic_reward[1:, b])
    pi = retrace.epsilon_greedy_probs(online_q[1:, b], 0.01)
    expected = rlax.retrace(online_q[:-1, b], target_q[1:, b],
                            batch.action[:-1, b], batch.action[1:, b],
                            rewards, GAMMAS[j] * batch.discount[1:, b], pi,
                            batch.behaviour_prob[1:, b], 0.95)
    np.testing.assert_allclose(extras.td_errors[:, b], expected, rtol=1e-4,
                               atol=1e-5)
  assert np.abs(np.asarray(extras.td_errors)
                - np.asarray(hyperbolic.td_errors)).max() > 1e-2
  with pytest.raises(ValueError, match="`value_transform` must be one of"):
    learning.loss(_network(), _params(0), _params(1), batch,
                  value_transform="log", **KW)


# ----------------------------------------------------------------------------
# The learner: sgd_step.

from ngu_jax.agents.ngu import networks as networks_lib  # noqa: E402
from ngu_jax.agents.ngu.config import NGUConfig  # noqa: E402
from ngu_jax.losses import inverse_dynamics  # noqa: E402
from ngu_jax.networks import rnd as rnd_lib  # noqa: E402

AUX_K = 3  # Fewer than the 5 of App. A, so that T + 1 = 6 has earlier steps.
CONFIG = NGUConfig(
    num_mixtures=N, torso="mlp", lstm_size=LSTM, head_hidden=8,
    embedding_dim=4, rnd_output_dim=4, inverse_dynamics_hidden=8,
    mlp_hidden_sizes=(8,), aux_loss_steps=AUX_K, target_update_period=3,
    aux_loss_step_selection="last",  # Deterministic; "uniform" tested below.
    learning_rate=3e-3, action_prediction_learning_rate=3e-3,
    rnd_learning_rate=3e-3, batch_size=B, trace_length=T + 1,
    replay_period=3, replay_capacity=100, min_replay_size=10)


@functools.lru_cache(maxsize=None)
def _ngu_networks():
  return networks_lib.make_networks(CONFIG, OBS, A)


@functools.lru_cache(maxsize=None)
def _ngu_params(seed=0):
  net = _ngu_networks()
  shapes = jax.eval_shape(functools.partial(networks_lib.init_params, net),
                          jax.random.PRNGKey(0))
  other = helpers.random_params(
      (shapes.embedding, shapes.rnd_predictor, shapes.rnd_target), seed + 5,
      bias_fan_in=4)
  return networks_lib.NGUParams(
      q=_params(seed), embedding=other[0], rnd_predictor=other[1],
      rnd_target=other[2],
      rnd_observation_stats=rnd_lib.observation_normalizer_init(OBS))


def _learner(seed=0):
  return learning.learner_state_from_params(CONFIG, _ngu_params(seed),
                                            jax.random.PRNGKey(seed))


@functools.lru_cache(maxsize=None)
def _sgd_fn(jit):
  fn = functools.partial(learning.sgd_step, CONFIG, _ngu_networks())
  return jax.jit(fn) if jit else fn


# `make test` runs the jitted comparison (16 s on one core each); the eager
# one and burn-in 2 are `make test-slow`'s.
@pytest.mark.parametrize("burn_in, jit", [
    pytest.param(0, False, marks=pytest.mark.slow, id="0-eager"),
    pytest.param(0, True, id="0-jit"),
    pytest.param(2, False, marks=pytest.mark.slow, id="2-eager"),
    pytest.param(2, True, marks=pytest.mark.slow, id="2-jit")])
def test_sgd_step_fused_lstm_equals_the_plain_unroll(jit, burn_in):
  # The fast path (`networks.lstm`: input projection out of the scan, a
  # hand-written backward pass) against hk.dynamic_unroll(hk.ResetCore(
  # hk.LSTM)) on the same batch: loss, priorities, every gradient and the
  # updated parameters agree within float32 tolerance.
  config = dataclasses.replace(CONFIG, burn_in=burn_in)
  fused = networks_lib.make_networks(config, OBS, A)
  ref_q = uvfa.make_uvfa_network(
      OBS, A, config.num_mixtures, config.torso, config.lstm_size,
      config.head_hidden, grid_output_size=config.grid_output_size,
      grid_filters=config.grid_filters,
      mlp_hidden_sizes=config.mlp_hidden_sizes, lstm_unroll="reference")
  reference = fused._replace(uvfa=ref_q)
  batch = _batch(padded=True)
  outs = []
  for networks in (fused, reference):
    fn = functools.partial(learning.sgd_step, config, networks)
    outs.append((jax.jit(fn) if jit else fn)(_learner(), batch))
  (s1, p1, m1), (s2, p2, m2) = outs
  for name in ("loss", "q_grad_norm", "td_abs_mean", "q_mean"):
    np.testing.assert_allclose(m1[name], m2[name], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(p1, p2, rtol=1e-5, atol=1e-6)
  assert float(m1["q_grad_norm"]) > 0
  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
      s1.params.q, s2.params.q)


@pytest.mark.parametrize("overrides, loss_kwargs", [
    (dict(advantage_learning=0.9), dict(advantage_learning=0.9)),
    (dict(retrace_traces="uncorrected"), dict(traces="uncorrected"))])
def test_sgd_step_passes_the_configs_retrace_options(overrides, loss_kwargs):
  # The priorities sgd_step returns are those of `loss` called with the
  # config's options (and not those of the plain loss).
  config = dataclasses.replace(CONFIG, **overrides)
  networks = networks_lib.make_networks(config, OBS, A)
  batch = _batch(seed=3)
  learner = _learner()
  _, priorities, _ = jax.jit(functools.partial(
      learning.sgd_step, config, networks))(learner, batch)
  kwargs = dict(betas=config.mixture_betas(), gammas=config.mixture_gammas(),
                retrace_lambda=config.retrace_lambda,
                target_epsilon=config.target_epsilon,
                retrace_eps=config.value_transform_eps,
                priority_eta=config.priority_eta)
  results = [learning.loss(networks.uvfa, learner.params.q,
                           learner.target_q_params, batch, **kwargs, **extra)
             for extra in (loss_kwargs, {})]
  np.testing.assert_allclose(priorities, results[0][1].priorities,
                             rtol=1e-5, atol=1e-6)
  assert np.max(np.abs(np.asarray(priorities)
                       - np.asarray(results[1][1].priorities))) > 1e-4


def test_sgd_step_checks_its_batch_in_one_host_callback():
  # Each host callback under jit is a sync point (~0.15 ms or more): the
  # learner checks the batch once and its networks do not check it again.
  text = _sgd_fn(True).lower(_learner(), _batch()).as_text()
  assert text.count("callback") == 1


@pytest.mark.parametrize("case", ["action too large", "NaN observation",
                                  "mask not binary"])
def test_sgd_step_still_rejects_bad_values(case):
  edit, message = _VALUE_ERRORS[case]
  if case == "NaN observation":
    # sgd_step zeroes non-finite values (its NaN guard skips the step).
    state, _, metrics = _sgd_fn(True)(_learner(), edit(_batch()))
    assert int(metrics["step_skipped"]) == 1
    return
  with pytest.raises(Exception, match=re.escape(message)):
    jax.block_until_ready(_sgd_fn(True)(_learner(), edit(_batch())))


def test_last_valid_indices():
  mask = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 0], [1, 0, 0]], np.float32)
  idx, w = learning.last_valid_indices(mask, 3)
  np.testing.assert_array_equal(idx, [[3, 2, 1], [2, 1, 0], [0, 0, 0]])
  np.testing.assert_array_equal(w, [[1, 1, 1], [1, 1, 1], [1, 0, 0]])
  idx, w = learning.last_valid_indices(mask, 5)  # More than S = 4 steps.
  np.testing.assert_array_equal(w.sum(axis=1), [4, 3, 1])


@JIT
def test_random_valid_indices_are_distinct_valid_and_uniform(jit):
  mask = np.zeros((10, 3), np.float32)
  mask[:7, 0] = 1.  # 7 valid steps, K = 3 of them.
  mask[:2, 1] = 1.  # Fewer valid steps than K.
  fn = functools.partial(learning.random_valid_indices, num_steps=3)
  fn = jax.jit(fn) if jit else fn
  counts = np.zeros(10)
  draws = 600
  for i in range(draws):
    idx, w = map(np.asarray, fn(jax.random.PRNGKey(i), mask))
    assert idx.shape == w.shape == (3, 3)
    np.testing.assert_array_equal(w, [[1, 1, 1], [1, 1, 0], [0, 0, 0]])
    assert len(set(idx[0])) == 3 and np.all(mask[idx[0], 0] == 1)
    assert sorted(idx[1, :2]) == [0, 1]
    counts[idx[0]] += 1
  # Each of the 7 valid steps is drawn with probability 3/7 (binomial, 600
  # draws: std 12, so +-60 is 5 sigma); the padding never.
  np.testing.assert_allclose(counts[:7], draws * 3 / 7, atol=60)
  assert counts[7:].sum() == 0


def test_aux_steps_selection():
  batch = _batch(seed=20, padded=True)
  last = learning.aux_steps(CONFIG, batch)
  np.testing.assert_array_equal(last.observation_indices,
                                [[5, 4, 3], [3, 2, 1]])
  uniform = NGUConfig(**{**CONFIG.to_dict(),
                         "aux_loss_step_selection": "uniform"})
  with pytest.raises(ValueError, match="needs a PRNG key"):
    learning.aux_steps(uniform, batch)
  a = learning.aux_steps(uniform, batch, jax.random.PRNGKey(0))
  b = learning.aux_steps(uniform, batch, jax.random.PRNGKey(0))
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  # Lane 1 has 4 real steps (3 real transitions): all within them.
  assert np.all(np.asarray(a.observation_indices)[1] <= 3)
  assert np.all(np.asarray(a.transition_indices)[1] <= 2)
  with pytest.raises(ValueError, match="aux_loss_step_selection"):
    NGUConfig(aux_loss_step_selection="first")


def test_uniform_aux_steps_train_on_early_steps():
  """Short episodes padded to the sequence (DeepSea): with "last" the RND
  statistics and losses never see the steps before the last K valid ones;
  "uniform" (the default) reaches them."""
  early = np.zeros((T + 1, B), bool)
  early[:3, 0] = True  # Lane 0's real steps 0-2: not among its last 3.
  early[:1, 1] = True  # Lane 1 (real steps 0-3): step 0.

  def marked(seed):
    batch = _batch(seed=seed, padded=True)
    obs = np.array(batch.observation)
    obs[..., 0] = np.where(early, 100., 0.)
    return batch._replace(observation=obs)

  def mean_after(selection):
    config = NGUConfig(**{**CONFIG.to_dict(),
                          "aux_loss_step_selection": selection})
    step = jax.jit(functools.partial(learning.sgd_step, config,
                                     _ngu_networks()))
    state = _learner()
    state, _, _ = step(state, _batch(seed=21, padded=True))  # Initialises.
    before = float(state.params.rnd_observation_stats.mean[0])
    for seed in range(22, 27):
      state, _, _ = step(state, marked(seed))
    return float(state.params.rnd_observation_stats.mean[0]) - before

  assert abs(mean_after("last")) < 1.  # Marked steps never merged.
  assert mean_after("uniform") > 10.


def test_sgd_step_lowers_the_losses():
  batch = _batch(seed=12, padded=True)
  state = _learner()
  step = _sgd_fn(True)
  first_metrics = None
  for _ in range(12):
    state, priorities, metrics = step(state, batch)
    first_metrics = first_metrics or metrics
  assert priorities.shape == (B,) and np.all(np.asarray(priorities) > 0)
  assert int(state.steps) == 12 and int(metrics["skipped_steps"]) == 0
  for name in ("action_prediction_loss", "rnd_loss"):
    assert float(metrics[name]) < float(first_metrics[name]), name
  assert float(metrics["loss"]) < 0.7 * float(first_metrics["loss"])


def test_fixed_random_projection_keeps_the_embedding():
  config = NGUConfig(**{**CONFIG.to_dict(), "learn_embedding": False})
  step = jax.jit(functools.partial(learning.sgd_step, config,
                                   _ngu_networks()))
  state = _learner()
  initial = _leaves(state.params.embedding)
  initial_rnd = _leaves(state.params.rnd_predictor)
  for seed in (16, 17):
    state, _, metrics = step(state, _batch(seed=seed))
  for a, b in zip(_leaves(state.params.embedding), initial):
    np.testing.assert_array_equal(a, b)
  assert float(metrics["action_prediction_grad_norm"]) == 0.
  assert np.isfinite(float(metrics["action_prediction_loss"]))
  # The RND predictor and the Q-network still learn.
  assert any(np.any(a != b) for a, b in zip(
      _leaves(state.params.rnd_predictor), initial_rnd))
  assert int(state.steps) == 2


def test_no_intrinsic_reward_trains_only_the_q_network():
  """intrinsic_reward="none": f, the RND predictor, their optimisers and the
  RND statistics are left as they are (nothing reads them); Q learns."""
  config = NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "none",
                        "use_rnd": False, "beta": 0.})
  step = jax.jit(functools.partial(learning.sgd_step, config,
                                   _ngu_networks()))
  state = _learner()
  frozen = (state.params.embedding, state.params.rnd_predictor,
            state.params.rnd_observation_stats, state.embedding_opt_state,
            state.rnd_opt_state)
  initial_q = _leaves(state.params.q)
  for seed in (16, 17):
    state, _, metrics = step(state, _batch(seed=seed))
  after = (state.params.embedding, state.params.rnd_predictor,
           state.params.rnd_observation_stats, state.embedding_opt_state,
           state.rnd_opt_state)
  for a, b in zip(_leaves(after), _leaves(frozen)):
    np.testing.assert_array_equal(a, b)
  for name in ("action_prediction_loss", "rnd_loss",
               "action_prediction_grad_norm", "rnd_grad_norm"):
    assert float(metrics[name]) == 0., name
  assert any(np.any(a != b) for a, b in zip(_leaves(state.params.q),
                                            initial_q))
  assert int(state.steps) == 2


def test_target_updates_exactly_at_the_period():
  batch, state = _batch(seed=13), _learner(seed=1)
  initial_target = _leaves(state.target_q_params)
  step = _sgd_fn(True)
  online_after = []
  for i in range(1, 6):
    state, _, metrics = step(state, batch)
    online_after.append(_leaves(state.params.q))
    target = _leaves(state.target_q_params)
    expected = initial_target if i < 3 else online_after[2]
    for a, b in zip(target, expected):
      np.testing.assert_array_equal(a, b)
    assert int(metrics["target_updated"]) == (i == 3)
  # The online parameters did move away from the copied target.
  assert any(np.any(a != b) for a, b in zip(online_after[-1],
                                           online_after[2]))


# The eager run (40 s on one core) is `make test-slow`'s.
@pytest.mark.parametrize("jit", [
    pytest.param(False, marks=pytest.mark.slow, id="eager"),
    pytest.param(True, id="jit")])
def test_nan_batch_skips_the_step(jit):
  state = _learner()
  step = _sgd_fn(jit)
  state, _, _ = step(state, _batch(seed=14))  # Non-trivial optimiser state.
  bad = _set("intrinsic_reward", (2, 1), np.nan)(_batch(seed=15))
  new_state, priorities, metrics = step(state, bad)
  assert int(metrics["step_skipped"]) == 1
  assert int(metrics["skipped_steps"]) == 1 == int(new_state.skipped_steps)
  assert int(metrics["nonfinite_lanes"]) == 1
  assert int(new_state.steps) == int(state.steps) == 1
  # Everything but the counter of skips and the PRNG key (which advances at
  # every step) is unchanged.
  for a, b in zip(_leaves(new_state._replace(skipped_steps=0, key=0)),
                  _leaves(state._replace(skipped_steps=0, key=0))):
    np.testing.assert_array_equal(a, b)
  assert np.any(np.asarray(new_state.key) != np.asarray(state.key))
  assert float(priorities[1]) == 0. and float(priorities[0]) > 0.
  # A NaN observation too; a clean batch afterwards trains again.
  bad_obs = _set("observation", (0, 0, 1), np.inf)(_batch(seed=15))
  new_state, _, metrics = step(new_state, bad_obs)
  assert int(metrics["skipped_steps"]) == 2
  new_state, _, metrics = step(new_state, _batch(seed=15))
  assert int(metrics["step_skipped"]) == 0 and int(new_state.steps) == 2


def _aux_grads(batch):
  params = _ngu_params()
  net = _ngu_networks()

  def id_loss(p):
    return learning.aux_losses(CONFIG, net, p, params.rnd_predictor,
                               params.rnd_target,
                               params.rnd_observation_stats, batch)[0][0]

  def rnd_loss(p):
    return learning.aux_losses(CONFIG, net, params.embedding, p,
                               params.rnd_target,
                               params.rnd_observation_stats, batch)[1][0]

  return jax.jit(lambda: (jax.grad(id_loss)(params.embedding),
                          jax.grad(rnd_loss)(params.rnd_predictor)))()


def test_aux_losses_use_only_the_last_valid_steps():
  """Lane 0 (6 real steps): ID uses transitions 2..4 (x_2..x_5), RND x_3..x_5;
  lane 1 (real steps 0..3): ID transitions 0..2, RND x_1..x_3."""
  batch = _batch(seed=16, padded=True)
  base = _aux_grads(batch)
  obs = np.array(batch.observation)
  action = np.array(batch.action)
  obs[:2, 0] += 3.  # Lane 0, steps 0-1: outside both windows.
  action[:2, 0] = (action[:2, 0] + 1) % A
  obs[0, 1] += 3.  # Lane 1, step 0: used by ID, not by RND.
  obs[4:, 1] += 3.  # Lane 1 padding.
  edited = batch._replace(observation=obs, action=action)
  id_g, rnd_g = _aux_grads(edited)
  for a, b in zip(_leaves(rnd_g), _leaves(base[1])):
    np.testing.assert_array_equal(a, b)
  edited_lane0 = batch._replace(
      observation=np.where(np.arange(B)[None, :, None] == 0, obs,
                           batch.observation), action=action)
  id_g0, _ = _aux_grads(edited_lane0)
  for a, b in zip(_leaves(id_g0), _leaves(base[0])):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
  # Controls: lane 1's step 0 does change the ID gradient, and step 3 of
  # lane 0 changes both.
  assert any(np.any(a != b) for a, b in zip(_leaves(id_g), _leaves(base[0])))
  obs3 = np.array(batch.observation)
  obs3[3, 0] += 3.
  id_g3, rnd_g3 = _aux_grads(batch._replace(observation=obs3))
  assert any(np.any(a != b) for a, b in zip(_leaves(id_g3), _leaves(base[0])))
  assert any(np.any(a != b) for a, b in zip(_leaves(rnd_g3),
                                           _leaves(base[1])))


def test_action_prediction_loss_matches_component():
  """Without padding, the weighted loss is inverse_dynamics_loss on the last
  K transitions of every lane."""
  batch = _batch(seed=17)
  net, params = _ngu_networks(), _ngu_params()
  (loss_value, metrics), _ = learning.aux_losses(
      CONFIG, net, params.embedding, params.rnd_predictor, params.rnd_target,
      params.rnd_observation_stats, batch)
  steps = np.arange(T - AUX_K, T)  # Transitions 2, 3, 4.
  x_t = batch.observation[steps].transpose(1, 0, 2).reshape(-1, *OBS)
  x_tp1 = batch.observation[steps + 1].transpose(1, 0, 2).reshape(-1, *OBS)
  a_t = batch.action[steps].T.reshape(-1)
  logits = net.embedding.inverse_logits(params.embedding, x_t, x_tp1)
  expected, expected_metrics = inverse_dynamics.inverse_dynamics_loss(
      logits, a_t, params.embedding, CONFIG.action_prediction_l2)
  np.testing.assert_allclose(loss_value, expected, rtol=1e-5)
  np.testing.assert_allclose(metrics["action_prediction_accuracy"],
                             expected_metrics["accuracy"])


def test_init_learner():
  net = _ngu_networks()
  state = learning.init_learner(CONFIG, net, jax.random.PRNGKey(0))
  for a, b in zip(_leaves(state.target_q_params), _leaves(state.params.q)):
    np.testing.assert_array_equal(a, b)
  assert int(state.steps) == 0 == int(state.skipped_steps)
  batch = _batch(seed=18)
  new_state, _, metrics = _sgd_fn(True)(state, batch)
  assert int(metrics["step_skipped"]) == 0
  # The first step initialises the RND observation statistics from every
  # valid observation of the batch (the RND paper's warm-up) ...
  stats = new_state.params.rnd_observation_stats
  valid = np.asarray(batch.mask, bool)
  obs = np.asarray(batch.observation, np.float64)[valid]
  assert float(stats.count) == valid.sum()
  np.testing.assert_allclose(stats.mean, obs.mean(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(stats.var, obs.var(0), rtol=1e-4, atol=1e-6)
  # ... later steps merge the observations of the RND loss: 2 lanes x K.
  newer_state, _, _ = _sgd_fn(True)(new_state, _batch(seed=19))
  assert float(newer_state.params.rnd_observation_stats.count) == (
      valid.sum() + B * AUX_K)


# The eager run (30 s on one core) is `make test-slow`'s.
@pytest.mark.parametrize("jit", [
    pytest.param(False, marks=pytest.mark.slow), True])
def test_microbatched_loss_and_grad_equals_full_batch(jit):
  net, params, target = _network(), _params(0), _params(1)
  # Four lanes (two 2-lane batches side by side), so that chunks of two lanes
  # also test the order in which lanes are split and put back together.
  halves = (_batch(seed=3, padded=True), _batch(seed=4))
  lane_fields = ("mixture_index", "importance_weights", "initial_state")
  batch = SequenceBatch(**{
      name: jax.tree_util.tree_map(
          lambda *x, axis=(0 if name in lane_fields else 1):
          np.concatenate(x, axis=axis), *[getattr(h, name) for h in halves])
      for name in SequenceBatch._fields})
  batch = batch._replace(
      importance_weights=np.array([0.5, 1.5, 1., 2.], np.float32))

  def run(m):
    fn = functools.partial(learning.loss_and_grad, net, num_microbatches=m,
                           **KW)
    return (jax.jit(fn) if jit else fn)(params, target, batch)

  (loss1, ex1), g1 = run(1)
  (loss2, ex2), g2 = run(2)  # Two chunks of two lanes.
  # Chunks change matmul shapes, hence float32 rounding, which h^{-1}
  # amplifies (~2e-5 relative; see the tolerance note in test_retrace.py).
  tol = dict(rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(loss2, loss1, **tol)
  np.testing.assert_allclose(ex2.priorities, ex1.priorities, **tol)
  np.testing.assert_allclose(ex2.td_errors, ex1.td_errors, **tol)
  np.testing.assert_array_equal(ex2.valid, ex1.valid)
  for name in ("loss", "td_abs_mean", "q_mean"):
    np.testing.assert_allclose(ex2.metrics[name], ex1.metrics[name], **tol)
  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
      g2, g1)
  with pytest.raises(ValueError, match="divisor of the batch size 4"):
    learning.loss_and_grad(net, params, target, batch, num_microbatches=3,
                           **KW)


# ----------------------------------------------------------------------------
# CASM (RECODE Sec. 4) as the embedding loss.

CASM_CONFIG = dataclasses.replace(
    CONFIG, embedding_loss="casm", casm_num_layers=1, casm_width=8,
    casm_num_heads=2, casm_mlp_hidden=8, casm_num_masks=2)


@functools.lru_cache(maxsize=None)
def _casm_networks():
  return networks_lib.make_networks(CASM_CONFIG, OBS, A)


def _casm_learner(config=CASM_CONFIG, seed=0):
  params = _ngu_params(seed)
  net = _casm_networks()
  shapes = jax.eval_shape(net.embedding.init, jax.random.PRNGKey(0))
  embedding_params = helpers.random_params(shapes, seed + 7, bias_fan_in=4)
  return learning.learner_state_from_params(
      config, params._replace(embedding=embedding_params),
      jax.random.PRNGKey(seed))


def test_casm_config_validated():
  assert NGUConfig().embedding_loss == "inverse_dynamics"
  for kwargs, name in ((dict(embedding_loss="cpc"), "embedding_loss"),
                       (dict(casm_width=10, casm_num_heads=4), "casm_width"),
                       (dict(casm_num_masks=0), "casm_num_masks"),
                       (dict(casm_action_shown_probability=1.), "casm_action"),
                       (dict(casm_num_layers=0), "casm_num_layers")):
    with pytest.raises(ValueError, match=name):
      NGUConfig(**kwargs)


def test_casm_networks_keep_embed():
  net = _casm_networks()
  assert net.embedding.max_length == CASM_CONFIG.burn_in + T + 1
  params = _casm_learner().params.embedding
  assert any(k.startswith("casm_transformer/") for k in params)
  obs = _batch(seed=30).observation[0]
  assert net.embedding.embed(params, obs).shape == (B, CASM_CONFIG.embedding_dim)


def test_casm_sgd_step_trains_on_whole_sequences():
  config = CASM_CONFIG
  net = _casm_networks()
  step = jax.jit(functools.partial(learning.sgd_step, config, net))
  batch = _batch(seed=31, padded=True)
  state = _casm_learner()
  # The metric is `auxiliary.casm_action_prediction` with the mask key the
  # step derives from the state's key.
  _, aux_key = jax.random.split(state.key)
  _, mask_key = jax.random.split(aux_key)
  expected, _ = learning.auxiliary.casm_action_prediction(
      config, net, state.params.embedding, batch, mask_key)
  first = None
  for _ in range(15):
    state, _, metrics = step(state, batch)
    first = first or metrics
  np.testing.assert_allclose(float(first["action_prediction_loss"]),
                             float(expected), rtol=1e-5)
  assert int(metrics["skipped_steps"]) == 0
  assert float(first["action_prediction_grad_norm"]) > 0.
  assert 0. <= float(metrics["action_prediction_accuracy"]) <= 1.
  assert (float(metrics["action_prediction_loss"])
          < float(first["action_prediction_loss"]))


@pytest.mark.slow  # Eager sgd_step; the network and loss tests cover both.
def test_casm_sgd_step_eager_equals_jit():
  config, net = CASM_CONFIG, _casm_networks()
  step = jax.jit(functools.partial(learning.sgd_step, config, net))
  batch = _batch(seed=31, padded=True)
  state0 = _casm_learner()
  eager_state, _, eager_metrics = learning.sgd_step(config, net, state0, batch)
  jit_state, _, jit_metrics = step(state0, batch)
  np.testing.assert_allclose(float(eager_metrics["action_prediction_loss"]),
                             float(jit_metrics["action_prediction_loss"]),
                             rtol=1e-5)
  for a, b in zip(_leaves(eager_state.params.embedding),
                  _leaves(jit_state.params.embedding)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_casm_loss_ignores_padding_and_steps_of_other_episodes():
  # Lane 1 is padded after step 3: its padded observations and actions do
  # not change the CASM loss.
  net, config = _casm_networks(), CASM_CONFIG
  params = _casm_learner().params.embedding
  batch = _batch(seed=32, padded=True)
  key = jax.random.PRNGKey(3)
  base, _ = learning.auxiliary.casm_action_prediction(config, net, params,
                                                      batch, key)
  obs, action = np.array(batch.observation), np.array(batch.action)
  obs[4:, 1] += 5.
  action[4:, 1] = (action[4:, 1] + 1) % A
  same, _ = learning.auxiliary.casm_action_prediction(
      config, net, params, batch._replace(observation=obs, action=action), key)
  np.testing.assert_allclose(float(same), float(base), rtol=1e-6)
  obs[1, 1] += 5.  # A real step does.
  changed, _ = learning.auxiliary.casm_action_prediction(
      config, net, params, batch._replace(observation=obs), key)
  assert float(changed) != float(base)


def test_casm_fixed_random_projection_keeps_the_embedding():
  config = dataclasses.replace(CASM_CONFIG, learn_embedding=False)
  step = jax.jit(functools.partial(learning.sgd_step, config,
                                   _casm_networks()))
  state = _casm_learner(config)
  initial = _leaves(state.params.embedding)
  state, _, metrics = step(state, _batch(seed=33))
  for a, b in zip(_leaves(state.params.embedding), initial):
    np.testing.assert_array_equal(a, b)
  assert float(metrics["action_prediction_grad_norm"]) == 0.
  assert np.isfinite(float(metrics["action_prediction_loss"]))


def test_inverse_dynamics_default_is_unchanged_by_casm_fields():
  # embedding_loss="inverse_dynamics" (default) ignores every casm_* field
  # and keeps the step's key use: outputs are bit-identical, and the
  # action-prediction metric is `aux_losses` on `aux_steps` drawn with the
  # key `sgd_step` derived before CASM existed (split(state.key)[1]).
  base = dataclasses.replace(CONFIG, aux_loss_step_selection="uniform")
  other = dataclasses.replace(base, casm_num_layers=3, casm_width=32,
                              casm_num_masks=7,
                              casm_action_shown_probability=0.3)
  batch = _batch(seed=34, padded=True)
  outs = []
  for config in (base, other):
    step = jax.jit(functools.partial(learning.sgd_step, config,
                                     networks_lib.make_networks(config, OBS,
                                                                A)))
    outs.append(step(learning.learner_state_from_params(
        config, _ngu_params(), jax.random.PRNGKey(4)), batch))
  for a, b in zip(_leaves(outs[0]), _leaves(outs[1])):
    np.testing.assert_array_equal(a, b)
  state = learning.learner_state_from_params(base, _ngu_params(),
                                             jax.random.PRNGKey(4))
  _, aux_key = jax.random.split(state.key)
  steps = learning.aux_steps(base, batch, aux_key)
  p = state.params
  (expected, _), _ = learning.aux_losses(
      base, _ngu_networks(), p.embedding, p.rnd_predictor, p.rnd_target,
      p.rnd_observation_stats, batch, steps)
  np.testing.assert_allclose(float(outs[0][2]["action_prediction_loss"]),
                             float(expected), rtol=1e-5)
