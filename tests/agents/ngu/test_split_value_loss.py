"""Agent57's split values in the NGU learner (Sec. 3.1, App. B).

`value_loss.loss` on the network of `ngu_jax.networks.split_uvfa`: the TD
errors of each stream against the float64 eq. (14)-(15) reference of
tests/losses/test_retrace.py, with the target policy epsilon-greedy on the
combined online Q rebuilt here by hand.
"""

import functools

import jax
import numpy as np
import pytest
import rlax

from ngu_jax.agents.ngu import learning
from ngu_jax.losses import retrace
from ngu_jax.networks import split_uvfa
from ngu_jax.networks import uvfa
from tests import helpers
from tests.agents.ngu import test_learning as base_tests
from tests.losses.test_retrace import h
from tests.losses.test_retrace import h_inv
from tests.losses.test_retrace import reference_targets

OBS = base_tests.OBS
T, B, A, N, LSTM = (base_tests.T, base_tests.B, base_tests.A, base_tests.N,
                    base_tests.LSTM)
BETAS, GAMMAS = base_tests.BETAS, base_tests.GAMMAS
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


@functools.lru_cache(maxsize=None)
def _network(transformed=True):
  tx = retrace.signed_hyperbolic_pair(1e-3) if transformed else None
  return split_uvfa.make_split_uvfa_network(base_tests._network(), BETAS, tx)


@functools.lru_cache(maxsize=None)
def _params(seed):
  shapes = jax.eval_shape(_network().init, jax.random.PRNGKey(0))
  return helpers.random_params(shapes, seed, bias_fan_in=4)


def _batch(seed, padded=True):
  batch = base_tests._batch(seed=seed, padded=padded)
  rng = np.random.default_rng(seed + 100)
  state = uvfa.LSTMState(
      *(0.5 * rng.normal(size=(2, B, 2 * LSTM))).astype(np.float32))
  return batch._replace(initial_state=state)


def _loss(jit, transformed=True):
  fn = functools.partial(
      learning.loss, _network(transformed), betas=BETAS, gammas=GAMMAS,
      value_transform="signed_hyperbolic" if transformed else "identity")
  return jax.jit(fn) if jit else fn


@JIT
@pytest.mark.parametrize("transformed", [True, False])
def test_each_stream_matches_the_reference(jit, transformed):
  # The identity case compares with rlax.retrace, which takes one lambda:
  # no padding there.
  batch = _batch(5, padded=transformed)
  net = _network(transformed)
  params, target_params = _params(0), _params(1)
  value, extras = _loss(jit, transformed)(params, target_params, batch)
  inputs = uvfa.UVFAInputs(
      batch.observation, batch.prev_action, batch.prev_extrinsic_reward,
      batch.prev_intrinsic_reward,
      np.broadcast_to(batch.mixture_index, (T + 1, B)))
  f64 = lambda x: np.asarray(x, np.float64)
  online_e, online_i = map(f64, net.unroll_streams(
      params, inputs, batch.initial_state, batch.step_is_first)[:2])
  target_e, target_i = map(f64, net.unroll_streams(
      target_params, inputs, batch.initial_state, batch.step_is_first)[:2])
  eps = 1e-3
  tx, tx_inv = ((lambda x: h(x, eps)), (lambda x: h_inv(x, eps))) if (
      transformed) else ((lambda x: x), (lambda x: x))
  valid = np.asarray(extras.valid)
  lane_losses = []
  for b in range(B):
    j = batch.mixture_index[b]
    combined = tx(tx_inv(online_e[:, b]) + BETAS[j] * tx_inv(online_i[:, b]))
    pi = 0.99 * np.eye(A)[combined.argmax(-1)] + 0.01 / A
    lam = np.full(T + 1, 0.95)
    lam[1:] *= np.concatenate([valid[1:, b], valid[-1:, b]])
    tds = []
    for online, target, reward in ((online_e, target_e,
                                    batch.extrinsic_reward),
                                   (online_i, target_i,
                                    batch.intrinsic_reward)):
      if transformed:
        y = reference_targets(target[:, b], batch.action[:, b], reward[1:, b],
                              GAMMAS[j] * batch.discount[1:, b], pi,
                              batch.behaviour_prob[:, b], lam, eps)
      else:  # Plain Retrace (eq. 10-13), rlax's independent implementation.
        y = np.asarray(rlax.retrace(
            online[:-1, b], target[1:, b], batch.action[:-1, b],
            batch.action[1:, b], reward[1:, b],
            GAMMAS[j] * batch.discount[1:, b], pi[1:],
            batch.behaviour_prob[1:, b], 0.95), np.float64) + online[
                np.arange(T), b, batch.action[:-1, b]]
      tds.append(y - online[np.arange(T), b, batch.action[:-1, b]])
    td_e, td_i = tds
    ok = valid[:, b] > 0
    np.testing.assert_allclose(np.asarray(extras.td_errors)[ok, b],
                               (td_e + BETAS[j] * td_i)[ok], rtol=1e-4,
                               atol=1e-4)
    lane_losses.append(
        (0.5 * (td_e[ok] ** 2).sum() + 0.5 * (td_i[ok] ** 2).sum())
        / max(1, ok.sum()))
  expected = np.mean(batch.importance_weights * np.array(lane_losses))
  np.testing.assert_allclose(value, expected, rtol=1e-4)
  assert {"q_extrinsic_mean", "q_intrinsic_mean"} <= set(extras.metrics)


def test_both_streams_get_gradients_and_the_target_none():
  batch = _batch(6)
  grads = jax.grad(
      lambda p, tp: _loss(True)(p, tp, batch)[0], argnums=(0, 1))(
          _params(0), _params(1))
  for stream in split_uvfa.STREAMS:
    norm = sum(float(np.abs(x).sum())
               for x in jax.tree_util.tree_leaves(grads[0][stream]))
    assert norm > 0, stream
  assert all(float(np.abs(x).sum()) == 0
             for x in jax.tree_util.tree_leaves(grads[1]))


def test_microbatches_equal_the_full_batch():
  batch = _batch(7)
  kw = dict(betas=BETAS, gammas=GAMMAS)
  (full, extras), grads = learning.loss_and_grad(
      _network(), _params(0), _params(1), batch, **kw)
  (chunked, extras2), grads2 = learning.loss_and_grad(
      _network(), _params(0), _params(1), batch, num_microbatches=2, **kw)
  tol = dict(rtol=1e-4, atol=1e-5)  # As test_learning's: float rounding.
  np.testing.assert_allclose(chunked, full, **tol)
  np.testing.assert_allclose(extras2.priorities, extras.priorities, **tol)
  np.testing.assert_allclose(extras2.td_errors, extras.td_errors, **tol)
  for name in ("q_extrinsic_mean", "q_intrinsic_mean", "q_mean"):
    np.testing.assert_allclose(extras2.metrics[name], extras.metrics[name],
                               **tol)
  for x, y in zip(jax.tree_util.tree_leaves(grads),
                  jax.tree_util.tree_leaves(grads2)):
    # Two transformed streams: a gradient entry of 5e-3 differed by 2e-6.
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# The learner with `split_values=True`.

import dataclasses  # noqa: E402

from ngu_jax.agents.ngu import networks as networks_lib  # noqa: E402

SPLIT_CONFIG = dataclasses.replace(base_tests.CONFIG, split_values=True)


@functools.lru_cache(maxsize=None)
def _split_networks(config=SPLIT_CONFIG):
  return networks_lib.make_networks(config, OBS, A)


def test_config_switch_builds_two_networks_with_two_optimisers():
  nets = _split_networks()
  assert nets.uvfa.unroll_streams is not None
  assert nets.uvfa.lstm_size == 2 * SPLIT_CONFIG.lstm_size
  state = learning.init_learner(SPLIT_CONFIG, nets, jax.random.PRNGKey(0))
  assert set(state.params.q) == set(split_uvfa.STREAMS)
  # One optimiser per network: the extrinsic network's Adam moments do not
  # move when only the intrinsic network has gradients.
  opt = learning.make_optimisers(SPLIT_CONFIG).q
  grads = jax.tree_util.tree_map(np.zeros_like, state.params.q)
  grads["intrinsic"] = jax.tree_util.tree_map(np.ones_like,
                                              grads["intrinsic"])
  updates, _ = opt.update(grads, state.q_opt_state, state.params.q)
  assert all(float(np.abs(x).max()) == 0
             for x in jax.tree_util.tree_leaves(updates["extrinsic"]))
  assert all(float(np.abs(x).max()) > 0
             for x in jax.tree_util.tree_leaves(updates["intrinsic"]))
  # Each clips its own gradient norm: huge extrinsic gradients leave the
  # intrinsic step as large as alone.
  big = jax.tree_util.tree_map(lambda x: 1e6 * np.ones_like(x),
                               grads["intrinsic"])
  both, _ = opt.update({"extrinsic": big, "intrinsic": grads["intrinsic"]},
                       state.q_opt_state, state.params.q)
  for x, y in zip(jax.tree_util.tree_leaves(both["intrinsic"]),
                  jax.tree_util.tree_leaves(updates["intrinsic"])):
    np.testing.assert_allclose(x, y, rtol=1e-6)


def test_split_config_off_is_ngu():
  nets = networks_lib.make_networks(base_tests.CONFIG, OBS, A)
  assert nets.uvfa.unroll_streams is None


def test_sgd_step_trains_both_networks():
  nets = _split_networks()
  state = learning.init_learner(SPLIT_CONFIG, nets, jax.random.PRNGKey(1))
  batch = base_tests._batch(seed=8)
  rng = np.random.default_rng(8)
  batch = batch._replace(initial_state=uvfa.LSTMState(
      *(0.1 * rng.normal(size=(2, B, 2 * SPLIT_CONFIG.lstm_size))).astype(
          np.float32)))
  step = jax.jit(functools.partial(learning.sgd_step, SPLIT_CONFIG, nets))
  new_state, _, metrics = step(state, batch)
  for stream in split_uvfa.STREAMS:
    moved = [float(np.abs(a - b).max()) for a, b in zip(
        jax.tree_util.tree_leaves(new_state.params.q[stream]),
        jax.tree_util.tree_leaves(state.params.q[stream]))]
    assert max(moved) > 0, stream
  assert np.isfinite(float(metrics["q_extrinsic_mean"]))
  assert np.isfinite(float(metrics["q_intrinsic_mean"]))
