"""Tests for ngu_jax.losses.inverse_dynamics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.losses import inverse_dynamics

_LOGITS = np.array([[1.0, 2.0, 3.0, 4.0],
                    [0.0, 0.0, 0.0, 0.0],
                    [2.0, -1.0, 0.5, 0.0]], np.float32)
_ACTIONS = np.array([3, 1, 1], np.int32)
# Sum of squares: 1 + 4 + 9 + 16 + 1 + 0.25 = 31.25.
_PARAMS = {"layer": {"w": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)},
           "bias": np.array([-1.0, 0.5], np.float32)}


def _np_log_softmax(logits):
  logits = logits.astype(np.float64)
  shifted = logits - logits.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _maybe_jit(fn, jit, **static):
  fn_with_kwargs = lambda *args: fn(*args, **static)
  return jax.jit(fn_with_kwargs) if jit else fn_with_kwargs


@pytest.mark.parametrize("jit", [False, True])
def test_nll_matches_numpy_softmax(jit):
  loss, metrics = _maybe_jit(inverse_dynamics.inverse_dynamics_loss,
                             jit)(_LOGITS, _ACTIONS)
  expected = -np.mean(_np_log_softmax(_LOGITS)[np.arange(3), _ACTIONS])
  np.testing.assert_allclose(metrics["nll"], expected, rtol=1e-6)
  # Row 1 is uniform: its NLL is log(4).
  np.testing.assert_allclose(-_np_log_softmax(_LOGITS)[1, 1], np.log(4.0))
  # Without params there is no L2 term.
  np.testing.assert_allclose(loss, expected, rtol=1e-6)
  assert float(metrics["l2_penalty"]) == 0.0


@pytest.mark.parametrize("jit", [False, True])
def test_l2_term_matches_hand_computed_sum(jit):
  fn = _maybe_jit(inverse_dynamics.inverse_dynamics_loss, jit, l2_weight=0.1)
  loss, metrics = fn(_LOGITS, _ACTIONS, _PARAMS)
  np.testing.assert_allclose(metrics["l2_penalty"], 0.1 * 31.25, rtol=1e-6)
  np.testing.assert_allclose(loss, metrics["nll"] + 3.125, rtol=1e-6)
  np.testing.assert_allclose(inverse_dynamics.l2_penalty(_PARAMS), 31.25)


def test_default_l2_weight_is_table_6_value():
  _, metrics = inverse_dynamics.inverse_dynamics_loss(_LOGITS, _ACTIONS,
                                                      _PARAMS)
  np.testing.assert_allclose(metrics["l2_penalty"], 1e-5 * 31.25, rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_accuracy(jit):
  # Argmaxes: 3 (taken 3, right), 0 (tie: first index; taken 1, wrong),
  # 0 (taken 1, wrong).
  _, metrics = _maybe_jit(inverse_dynamics.inverse_dynamics_loss,
                          jit)(_LOGITS, _ACTIONS)
  np.testing.assert_allclose(metrics["accuracy"], 1.0 / 3.0, rtol=1e-6)
  _, metrics = _maybe_jit(inverse_dynamics.inverse_dynamics_loss, jit)(
      _LOGITS, np.array([3, 0, 0], np.int32))
  np.testing.assert_allclose(metrics["accuracy"], 1.0)


@pytest.mark.parametrize("jit", [False, True])
def test_gradients(jit):
  def loss_fn(logits, params):
    return inverse_dynamics.inverse_dynamics_loss(logits, _ACTIONS, params,
                                                  l2_weight=0.1)[0]

  grad_fn = _maybe_jit(jax.grad(loss_fn, argnums=(0, 1)), jit)
  grad_logits, grad_params = grad_fn(_LOGITS, _PARAMS)
  probs = np.exp(_np_log_softmax(_LOGITS))
  expected = (probs - np.eye(4)[_ACTIONS]) / 3.0
  np.testing.assert_allclose(grad_logits, expected, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(grad_params["layer"]["w"],
                             2 * 0.1 * _PARAMS["layer"]["w"], rtol=1e-6)
  np.testing.assert_allclose(grad_params["bias"], 2 * 0.1 * _PARAMS["bias"],
                             rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("actions, match", [
    (np.array([3, 4, 0], np.int32),
     r"`actions` has values outside \[0, 4\) in lane\(s\) \[1\]"),
    (np.array([-1, 0, 0], np.int32),
     r"`actions` has values outside \[0, 4\) in lane\(s\) \[0\]"),
])
def test_actions_out_of_range(actions, match, jit):
  with pytest.raises(Exception, match=match):
    loss, _ = _maybe_jit(inverse_dynamics.inverse_dynamics_loss,
                         jit)(_LOGITS, actions)
    loss.block_until_ready()


@pytest.mark.parametrize("jit", [False, True])
def test_nan_logits(jit):
  logits = _LOGITS.copy()
  logits[2, 0] = np.nan
  with pytest.raises(Exception, match=r"`logits` contains NaN or inf in "
                     r"lane\(s\) \[2\]"):
    loss, _ = _maybe_jit(inverse_dynamics.inverse_dynamics_loss,
                         jit)(logits, _ACTIONS)
    loss.block_until_ready()


@pytest.mark.parametrize("logits, actions, kwargs, match", [
    (_LOGITS[0], _ACTIONS, {}, r"`logits` must have rank 2"),
    (_LOGITS, _ACTIONS[:2], {}, r"`actions` must have shape \[3\], got \(2,\)"),
    (_LOGITS, _ACTIONS[:, None], {}, r"`actions` must have shape \[3\]"),
    (_LOGITS, _ACTIONS.astype(np.float32), {}, r"`actions` must be integers"),
    (_LOGITS.astype(np.int32), _ACTIONS, {}, r"`logits` must be floating"),
    (_LOGITS, _ACTIONS, {"l2_weight": -1.0}, r"`l2_weight` must be >= 0"),
])
def test_bad_arguments(logits, actions, kwargs, match):
  with pytest.raises(ValueError, match=match):
    inverse_dynamics.inverse_dynamics_loss(logits, actions, **kwargs)


@pytest.mark.parametrize("jit", [False, True])
def test_mask_keeps_only_its_examples(jit):
  """With `mask`, the NLL and the accuracy are those of the masked-in
  examples alone; all False gives 0 (not NaN)."""
  rng = np.random.default_rng(2)
  logits = jnp.asarray(rng.normal(size=(6, 4)), jnp.float32)
  actions = jnp.asarray(rng.integers(0, 4, size=6), jnp.int32)
  mask = jnp.asarray([True, False, True, True, False, True])
  loss_fn = inverse_dynamics.inverse_dynamics_loss
  fn = jax.jit(loss_fn) if jit else loss_fn
  loss, metrics = fn(logits, actions, None, mask=mask)
  sub_loss, sub_metrics = loss_fn(logits[mask], actions[mask])
  np.testing.assert_allclose(loss, sub_loss, rtol=1e-6)
  np.testing.assert_allclose(metrics["accuracy"], sub_metrics["accuracy"])
  none, _ = fn(logits, actions, None, mask=jnp.zeros(6, bool))
  assert float(none) == 0.
  with pytest.raises(ValueError, match="`mask` must be bool"):
    loss_fn(logits, actions, None, mask=jnp.ones(6))
