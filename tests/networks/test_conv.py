"""Tests for ngu_jax.networks.conv (the GEMM weight-gradient convolution)."""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.networks import conv

# (input shape, kernel, stride, output channels): the Atari stack's three
# layers at reduced batch, a grid-torso layer, and a non-square image.
_CASES = [
    ((2, 36, 36, 1), 8, 4, 8),
    ((2, 9, 9, 6), 4, 2, 5),
    ((3, 5, 5, 4), 3, 1, 7),
    ((2, 13, 10, 3), 3, 1, 4),
]


def _reference(x, w, stride):
  return jax.lax.conv_general_dilated(
      x, w, (stride, stride), "VALID",
      dimension_numbers=("NHWC", "HWIO", "NHWC"))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("conv_fn", [conv.conv2d_valid, conv.conv2d_gemm])
@pytest.mark.parametrize("shape, kernel, stride, out", _CASES)
def test_values_and_gradients_match_lax(jit, conv_fn, shape, kernel, stride,
                                        out):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=shape), jnp.float32)
  w = jnp.asarray(rng.normal(size=(kernel, kernel, shape[-1], out)),
                  jnp.float32)

  def loss(fn, x, w):
    y = fn(x, w, stride)
    return jnp.sum(jnp.sin(y) * jnp.arange(y.size).reshape(y.shape) / y.size)

  ours = jax.value_and_grad(lambda x, w: loss(conv_fn, x, w),
                            argnums=(0, 1))
  ref = jax.value_and_grad(lambda x, w: loss(_reference, x, w),
                           argnums=(0, 1))
  if jit:
    ours, ref = jax.jit(ours), jax.jit(ref)
  (v1, (dx1, dw1)), (v2, (dx2, dw2)) = ours(x, w), ref(x, w)
  np.testing.assert_allclose(v1, v2, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dx1, dx2, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(dw1, dw2, rtol=1e-4, atol=1e-4)
  assert np.abs(np.asarray(dw1)).max() > 0  # Not a vacuous comparison.


def test_module_is_a_drop_in_for_haiku_conv2d():
  x = jnp.asarray(np.random.default_rng(1).random((2, 20, 20, 3)),
                  jnp.float32)
  ours = hk.without_apply_rng(hk.transform(
      lambda x: conv.Conv2D(16, 4, stride=2, name="c")(x)))
  theirs = hk.without_apply_rng(hk.transform(
      lambda x: hk.Conv2D(16, 4, stride=2, padding="VALID", name="c")(x)))
  key = jax.random.PRNGKey(3)
  p_ours, p_theirs = ours.init(key, x), theirs.init(key, x)
  # Same names, shapes and initial values (same initialisers, same order).
  jax.tree_util.tree_map(np.testing.assert_array_equal, p_ours, p_theirs)
  p = jax.tree_util.tree_map(lambda a: a + 0.1, p_theirs)  # Non-zero bias.
  np.testing.assert_allclose(ours.apply(p, x), theirs.apply(p, x),
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("implementation", conv.IMPLEMENTATIONS)
def test_module_gradients_equal_for_every_implementation(implementation):
  x = jnp.asarray(np.random.default_rng(2).random((3, 9, 9, 4)), jnp.float32)
  ours = hk.without_apply_rng(hk.transform(
      lambda x: conv.Conv2D(6, 3, name="c",
                            implementation=implementation)(x)))
  theirs = hk.without_apply_rng(hk.transform(
      lambda x: hk.Conv2D(6, 3, padding="VALID", name="c")(x)))
  p = theirs.init(jax.random.PRNGKey(0), x)

  def grads(net):
    return jax.grad(lambda p: jnp.sum(jnp.cos(net.apply(p, x))))(p)

  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
      grads(ours), grads(theirs))


def test_module_rejects_unknown_implementation():
  with pytest.raises(ValueError, match="implementation"):
    hk.transform(lambda x: conv.Conv2D(4, 3, implementation="fft")(x)).init(
        jax.random.PRNGKey(0), jnp.ones((1, 5, 5, 1)))
