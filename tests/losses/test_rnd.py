"""Tests for ngu_jax.losses.rnd."""

import jax
import numpy as np
import pytest

from ngu_jax.losses import rnd

_PREDICTED = np.array([[1.0, 2.0], [0.0, 0.0], [0.5, -0.5]], np.float32)
_TARGET = np.array([[0.0, 0.0], [3.0, 4.0], [0.5, 0.5]], np.float32)
# ||ĝ - g||²: 1 + 4 = 5, 9 + 16 = 25, 0 + 1 = 1; mean 31 / 3.
_ERRORS = np.array([5.0, 25.0, 1.0])


def _maybe_jit(fn, jit):
  return jax.jit(fn) if jit else fn


@pytest.mark.parametrize("jit", [False, True])
def test_error_and_loss_values(jit):
  error = _maybe_jit(rnd.rnd_error, jit)(_PREDICTED, _TARGET)
  np.testing.assert_allclose(error, _ERRORS, rtol=1e-6)
  loss, per_example = _maybe_jit(rnd.rnd_loss, jit)(_PREDICTED, _TARGET)
  np.testing.assert_allclose(per_example, _ERRORS, rtol=1e-6)
  np.testing.assert_allclose(loss, 31.0 / 3.0, rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_error_matches_numpy_on_random_inputs(jit):
  rng = np.random.default_rng(0)
  predicted = rng.normal(size=(7, 128)).astype(np.float32)
  target = rng.normal(size=(7, 128)).astype(np.float32)
  expected = np.sum((predicted.astype(np.float64) - target)**2, axis=-1)
  np.testing.assert_allclose(_maybe_jit(rnd.rnd_error, jit)(predicted, target),
                             expected, rtol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_loss_gradients(jit):
  grad_fn = _maybe_jit(
      jax.grad(lambda p, t: rnd.rnd_loss(p, t)[0], argnums=(0, 1)), jit)
  grad_predicted, grad_target = grad_fn(_PREDICTED, _TARGET)
  np.testing.assert_allclose(grad_predicted, 2 * (_PREDICTED - _TARGET) / 3,
                             rtol=1e-6)
  np.testing.assert_array_equal(grad_target, np.zeros_like(_TARGET))


@pytest.mark.parametrize("jit", [False, True])
def test_error_gradients(jit):
  grad_fn = _maybe_jit(
      jax.grad(lambda p, t: rnd.rnd_error(p, t).sum(), argnums=(0, 1)), jit)
  grad_predicted, grad_target = grad_fn(_PREDICTED, _TARGET)
  np.testing.assert_allclose(grad_predicted, 2 * (_PREDICTED - _TARGET),
                             rtol=1e-6)
  np.testing.assert_array_equal(grad_target, np.zeros_like(_TARGET))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("fn", [rnd.rnd_error, rnd.rnd_loss])
def test_non_finite_inputs(fn, jit):
  target = _TARGET.copy()
  target[1, 1] = np.inf
  with pytest.raises(Exception, match=r"`target` contains NaN or inf in "
                     r"lane\(s\) \[1\]"):
    jax.block_until_ready(_maybe_jit(fn, jit)(_PREDICTED, target))
  predicted = _PREDICTED.copy()
  predicted[0, 0] = np.nan
  with pytest.raises(Exception, match=r"`predicted` contains NaN or inf in "
                     r"lane\(s\) \[0\]"):
    jax.block_until_ready(_maybe_jit(fn, jit)(predicted, _TARGET))


@pytest.mark.parametrize("fn", [rnd.rnd_error, rnd.rnd_loss])
@pytest.mark.parametrize("predicted, target, match", [
    (_PREDICTED[0], _TARGET[0], r"`predicted` must have rank 2"),
    (_PREDICTED, _TARGET[:, :1], r"`target` must have shape \[3, 2\], got "
     r"\(3, 1\)"),
    (_PREDICTED, _TARGET[:2], r"`target` must have shape \[3, 2\]"),
    (_PREDICTED.astype(np.int32), _TARGET, r"`predicted` must be floating"),
])
def test_bad_shapes(fn, predicted, target, match):
  with pytest.raises(ValueError, match=match):
    fn(predicted, target)
