"""Tests for ngu_jax.networks.split_uvfa (Agent57 Sec. 3.1)."""

import functools

import jax
import numpy as np
import pytest

from ngu_jax.losses import retrace
from ngu_jax.networks import split_uvfa
from ngu_jax.networks import uvfa
from tests import helpers

T, B, A, N = 5, 3, 3, 2
OBS = (4,)
LSTM = 8
BETAS = np.array([0., .4], np.float32)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _maybe_jit(fn, jit):
  return jax.jit(fn) if jit else fn


@functools.lru_cache(maxsize=None)
def _nets(transformed=True):
  base = uvfa.make_uvfa_network(OBS, A, N, lstm_size=LSTM, head_hidden=8,
                                mlp_hidden_sizes=(6,))
  tx = retrace.signed_hyperbolic_pair(1e-3) if transformed else None
  split = split_uvfa.make_split_uvfa_network(base, BETAS, tx)
  shapes = jax.eval_shape(split.init, jax.random.PRNGKey(0))
  params = helpers.random_params(shapes, 0, bias_fan_in=4)
  return base, split, params


def _inputs(lead, seed=0):
  rng = np.random.default_rng(seed)
  return uvfa.UVFAInputs(
      observation=rng.normal(size=lead + OBS).astype(np.float32),
      prev_action=rng.integers(0, A, size=lead).astype(np.int32),
      prev_extrinsic_reward=rng.normal(size=lead).astype(np.float32),
      prev_intrinsic_reward=rng.uniform(size=lead).astype(np.float32),
      mixture_index=rng.integers(0, N, size=lead).astype(np.int32))


def _state(batch, width, seed=1):
  rng = np.random.default_rng(seed)
  return uvfa.LSTMState(
      hidden=rng.normal(size=(batch, width)).astype(np.float32),
      cell=rng.normal(size=(batch, width)).astype(np.float32))


def test_params_state_and_sizes():
  base, split, params = _nets()
  assert set(params) == set(split_uvfa.STREAMS)
  assert split.lstm_size == 2 * LSTM and split.unroll_streams is not None
  assert base.unroll_streams is None
  state = split.initial_state(B)
  assert state.hidden.shape == state.cell.shape == (B, 2 * LSTM)
  keys = jax.random.PRNGKey(3)
  fresh = split.init(keys)
  # Two independent initialisations, each of the base's structure.
  assert (jax.tree_util.tree_structure(fresh["extrinsic"])
          == jax.tree_util.tree_structure(base.init(keys)))
  assert not np.allclose(fresh["extrinsic"]["lstm/linear"]["w"],
                         fresh["intrinsic"]["lstm/linear"]["w"])


@JIT
@pytest.mark.parametrize("transformed", [True, False])
def test_unroll_combines_the_two_base_networks(jit, transformed):
  base, split, params = _nets(transformed)
  inputs, state = _inputs((T, B)), _state(B, 2 * LSTM)
  first = np.zeros((T, B), bool)
  first[2, 1] = True
  q, final = _maybe_jit(split.unroll, jit)(params, inputs, state, first)
  q_e, q_i, final2 = _maybe_jit(split.unroll_streams, jit)(params, inputs,
                                                           state, first)
  half = lambda s, lo: uvfa.LSTMState(s.hidden[:, lo:lo + LSTM],
                                      s.cell[:, lo:lo + LSTM])
  ref_e, fin_e = base.unroll(params["extrinsic"], inputs, half(state, 0),
                             first)
  ref_i, fin_i = base.unroll(params["intrinsic"], inputs, half(state, LSTM),
                             first)
  np.testing.assert_allclose(q_e, ref_e, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(q_i, ref_i, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(final.hidden[:, :LSTM], fin_e.hidden, atol=1e-6)
  np.testing.assert_allclose(final.cell[:, LSTM:], fin_i.cell, atol=1e-6)
  np.testing.assert_allclose(final2.hidden, final.hidden, atol=1e-6)
  beta = BETAS[inputs.mixture_index][..., None]
  if transformed:
    tx = retrace.signed_hyperbolic_pair(1e-3)
    expected = tx.apply(tx.apply_inv(ref_e) + beta * tx.apply_inv(ref_i))
  else:
    expected = ref_e + beta * ref_i
  # float32 h^{-1} loses about 1/eps-fold precision to cancellation (eq. 17):
  # jitted, XLA's fusion moves the combination by up to 2.5e-5 (jax 0.4.30).
  np.testing.assert_allclose(q, expected, rtol=1e-4, atol=1e-4)
  # Mixture 0 (beta 0) acts on Q_e alone.
  zero = np.asarray(inputs.mixture_index) == 0
  np.testing.assert_allclose(np.asarray(q)[zero], np.asarray(ref_e)[zero],
                             rtol=1e-4, atol=2e-4)


@JIT
def test_apply_steps_match_unroll(jit):
  _, split, params = _nets()
  inputs, state = _inputs((T, B), 2), _state(B, 2 * LSTM, 3)
  q_seq, final = split.unroll(params, inputs, state, np.zeros((T, B), bool))
  apply = _maybe_jit(split.apply, jit)
  for t in range(T):
    q, state = apply(params, jax.tree_util.tree_map(lambda x: x[t], inputs),
                     state)
    # Through h^{-1} (see above): agreement to float32's ~1e-4 there.
    np.testing.assert_allclose(q, q_seq[t], rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(state.hidden, final.hidden, rtol=1e-5, atol=1e-6)


def test_rejects_bad_arguments():
  base, split, params = _nets()
  with pytest.raises(ValueError, match="betas"):
    split_uvfa.make_split_uvfa_network(base, [0.])
  with pytest.raises(ValueError, match="split already"):
    split_uvfa.make_split_uvfa_network(split, BETAS)
  with pytest.raises(ValueError, match=r"\[3, 16\]"):
    split.apply(params, _inputs((B,)), _state(B, LSTM))
