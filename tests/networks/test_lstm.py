"""Tests for ngu_jax.networks.lstm against Haiku's plain LSTM unroll."""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.networks import lstm

T, B, F, H = 7, 5, 6, 4


def _reference(params, x, first, state):
  """The straightforward unroll: hk.ResetCore(hk.LSTM) step by step."""
  def fn(x, first, state):
    core = hk.LSTM(H, name="lstm")
    return hk.dynamic_unroll(hk.ResetCore(core), (x, first), state)
  return hk.without_apply_rng(hk.transform(fn)).apply(params, x, first, state)


def _ours(params, x, first, state):
  p = params["lstm/linear"]
  return lstm.unroll(p["w"], p["b"], x, first, state)


def _inputs(seed=0):
  rng = np.random.default_rng(seed)
  first = rng.random((T, B)) < 0.25
  first[0, 0] = True   # A reset at the very first step,
  first[3, 1] = True   # and mid-sequence.
  first[0, 2] = False  # A lane that continues its stored state.
  x = jnp.asarray(rng.normal(size=(T, B, F)), jnp.float32)
  state = hk.LSTMState(
      hidden=jnp.asarray(rng.normal(size=(B, H)), jnp.float32),
      cell=jnp.asarray(rng.normal(size=(B, H)), jnp.float32))
  params = {"lstm/linear": {
      "w": jnp.asarray(rng.normal(size=(F + H, 4 * H)) / 2, jnp.float32),
      "b": jnp.asarray(rng.normal(size=(4 * H,)) / 2, jnp.float32)}}
  return params, x, jnp.asarray(first), state


def _loss(fn, params, x, first, state):
  out, final = fn(params, x, first, state)
  weights = jnp.arange(out.size, dtype=jnp.float32).reshape(out.shape)
  return (jnp.sum(jnp.sin(out) * weights) / out.size
          + jnp.sum(final.hidden ** 2) + jnp.sum(jnp.cos(final.cell)))


@pytest.mark.parametrize("jit", [False, True])
def test_values_equal_the_plain_unroll(jit):
  params, x, first, state = _inputs()
  ours, ref = (jax.jit(_ours), jax.jit(_reference)) if jit else (_ours,
                                                                 _reference)
  (o1, s1), (o2, s2) = ours(params, x, first, state), ref(params, x, first,
                                                          state)
  np.testing.assert_allclose(o1, o2, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(s1.hidden, s2.hidden, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(s1.cell, s2.cell, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_gradients_equal_the_plain_unroll(jit):
  params, x, first, state = _inputs(1)
  grad = jax.grad(_loss, argnums=(1, 2, 4))
  if jit:
    grad = jax.jit(grad, static_argnums=0)
  ours = grad(_ours, params, x, first, state)
  ref = grad(_reference, params, x, first, state)
  for a, b in zip(jax.tree_util.tree_leaves(ours),
                  jax.tree_util.tree_leaves(ref)):
    assert np.abs(np.asarray(b)).max() > 0  # Not a vacuous comparison.
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  # A reset cuts the gradient to the stored state of the lane that resets
  # at step 0.
  np.testing.assert_array_equal(ours[2].hidden[0], 0.)


def test_vmapped_over_parameter_sets():
  params, x, first, state = _inputs(2)
  stacked = jax.tree_util.tree_map(lambda a: jnp.stack([a, 2 * a]), params)
  out = jax.vmap(lambda p: _ours(p, x, first, state)[0])(stacked)
  ref = jax.vmap(lambda p: _reference(p, x, first, state)[0])(stacked)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
  g = jax.vmap(jax.grad(lambda p: _loss(_ours, p, x, first, state)))(stacked)
  g_ref = jax.vmap(jax.grad(lambda p: _loss(_reference, p, x, first,
                                            state)))(stacked)
  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
      g, g_ref)
