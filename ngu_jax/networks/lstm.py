"""A time-major LSTM unroll with its input projection out of the time loop.

The same function as `hk.dynamic_unroll(hk.ResetCore(hk.LSTM(H)), (x,
step_is_first), state)` with the `hk.LSTM`'s own parameters (one Linear
"w" [F + H, 4H], "b" [4H] on concat([x_t, h_{t-1}])), arranged for
throughput (the recurrent core of NGU Sec. 3 / R2D2's learner unroll):

* forward: the input part of every step's gates, x_t @ W_x + b, is one
  matrix product over all T * B steps before the loop; the loop carries only
  the recurrent product h_{t-1} @ W_h [B, H] x [H, 4H] and the gates'
  elementwise arithmetic;
* backward (`jax.custom_vjp`): the loop runs backwards through the gates
  only (dh_{t-1} = dgates_t @ W_h^T), and the four parameter and input
  gradients are each one product over all T * B steps after it: dW_x =
  X^T dG, dW_h = H_prev^T dG, db = sum dG, dX = dG W_x^T. Differentiating
  the plain unroll instead accumulates a [F + H, B] x [B, 4H] product into
  dW at every step.

Gates, in `hk.LSTM`'s order and with its forget bias: [i, g, f, o] =
split(x_t W_x + h_{t-1} W_h + b), c_t = sigmoid(f + 1) c_{t-1} + sigmoid(i)
tanh(g), h_t = sigmoid(o) tanh(c_t). Where `step_is_first[t]` is True the
incoming state is replaced by zeros (`hk.LSTM.initial_state`) before step t,
as `hk.ResetCore` does. Values and gradients equal the plain unroll up to
float32 rounding (tests/networks/test_lstm.py checks both against
`hk.dynamic_unroll`).
"""

from typing import Tuple

import haiku as hk
import jax
import jax.numpy as jnp

LSTMState = hk.LSTMState


def _gates(pre: jax.Array) -> Tuple[jax.Array, jax.Array, jax.Array,
                                     jax.Array]:
  """Activated gates (sigmoid(i), tanh(g), sigmoid(f + 1), sigmoid(o))."""
  i, g, f, o = jnp.split(pre, 4, axis=-1)
  return (jax.nn.sigmoid(i), jnp.tanh(g), jax.nn.sigmoid(f + 1.),
          jax.nn.sigmoid(o))


def _reset(first: jax.Array, x: jax.Array) -> jax.Array:
  return jnp.where(first[:, None], jnp.zeros_like(x), x)


def _input_gates(w: jax.Array, b: jax.Array, x: jax.Array) -> jax.Array:
  """x @ W_x + b for all steps: [T, B, F] -> [T, B, 4H]."""
  t, batch, f = x.shape
  return (x.reshape(t * batch, f) @ w[:f] + b).reshape(t, batch, -1)


def _forward(w, b, x, step_is_first, state, keep_residuals: bool):
  f = x.shape[-1]
  w_h = w[f:]
  gx = _input_gates(w, b, x)

  def body(carry, inputs):
    h, c = carry
    gx_t, first = inputs
    h, c = _reset(first, h), _reset(first, c)
    si, tg, sf, so = _gates(gx_t + h @ w_h)
    c_new = sf * c + si * tg
    h_new = so * jnp.tanh(c_new)
    saved = (h, c, si, tg, sf, so, c_new) if keep_residuals else None
    return (h_new, c_new), (h_new, saved)

  (h, c), (out, saved) = jax.lax.scan(
      body, (state.hidden, state.cell), (gx, step_is_first))
  return out, LSTMState(hidden=h, cell=c), saved


@jax.custom_vjp
def _unroll(w, b, x, step_is_first, state):
  out, final, _ = _forward(w, b, x, step_is_first, state, False)
  return out, final


def _unroll_fwd(w, b, x, step_is_first, state):
  out, final, saved = _forward(w, b, x, step_is_first, state, True)
  return (out, final), (w, x, step_is_first, saved)


def _unroll_bwd(residuals, cotangents):
  w, x, step_is_first, saved = residuals
  d_out, d_final = cotangents
  f = x.shape[-1]
  w_h = w[f:]

  def body(carry, inputs):
    dh, dc = carry  # Cotangents of the state after step t.
    d_out_t, first, (h_prev, c_prev, si, tg, sf, so, c_new) = inputs
    dh = dh + d_out_t
    tc = jnp.tanh(c_new)
    dc = dc + dh * so * (1. - jnp.square(tc))
    d_pre = jnp.concatenate([
        dc * tg * si * (1. - si),                # i
        dc * si * (1. - jnp.square(tg)),         # g
        dc * c_prev * sf * (1. - sf),            # f
        dh * tc * so * (1. - so),                # o
    ], axis=-1)
    dh_prev = d_pre @ w_h.T
    dc_prev = dc * sf
    # The reset replaced the incoming state by constants at episode starts.
    return (_reset(first, dh_prev), _reset(first, dc_prev)), d_pre

  (dh0, dc0), d_pre = jax.lax.scan(
      body, (d_final.hidden, d_final.cell), (d_out, step_is_first, saved),
      reverse=True)
  t, batch, _ = x.shape
  h_prev = saved[0]
  d_pre2 = d_pre.reshape(t * batch, -1)
  dw = jnp.concatenate([x.reshape(t * batch, f).T @ d_pre2,
                        h_prev.reshape(t * batch, -1).T @ d_pre2], axis=0)
  db = jnp.sum(d_pre2, axis=0)
  dx = (d_pre2 @ w[:f].T).reshape(x.shape)
  return (dw.astype(w.dtype), db, dx.astype(x.dtype), None,
          LSTMState(hidden=dh0, cell=dc0))


_unroll.defvjp(_unroll_fwd, _unroll_bwd)


def unroll(w: jax.Array, b: jax.Array, x: jax.Array, step_is_first: jax.Array,
           state: LSTMState) -> Tuple[jax.Array, LSTMState]:
  """LSTM over T steps (module docstring), with state resets.

  Args:
    w: the `hk.LSTM`'s "linear/w", shaped [F + H, 4H] (input rows first).
    b: its "linear/b", shaped [4H].
    x: inputs, time-major [T, B, F], floating point.
    step_is_first: bool [T, B]: reset the state to zeros before step t.
    state: `LSTMState` of [B, H] arrays, the state before step 0.

  Returns:
    (outputs h_1 .. h_T shaped [T, B, H], the final `LSTMState`).
  """
  state = LSTMState(hidden=jnp.asarray(state.hidden, x.dtype),
                    cell=jnp.asarray(state.cell, x.dtype))
  return _unroll(w, b, x, jnp.asarray(step_is_first, bool), state)
