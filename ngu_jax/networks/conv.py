"""VALID 2-D convolutions: XLA's, with an im2col weight gradient, or GEMM.

The conv torsos (NGU App. H; DQN / R2D2) spend much of a learner update in
their convolutions. Three implementations of the same function (values and
both gradients equal `lax.conv_general_dilated` up to float32 rounding,
tests/networks/test_conv.py):

* "xla": `lax.conv_general_dilated` and its own gradients;
* "im2col": `conv2d_valid`, a `jax.custom_vjp` whose weight gradient is
  im2col (`lax.conv_general_dilated_patches`) then one matrix product;
* "gemm": `conv2d_gemm`, the K * K strided views of the input concatenated
  along channels, then one matrix product; JAX's own gradients (slices, a
  concatenation, a matmul), so no XLA convolution runs at all.

Measured on this project's 2-core CPU (jax 0.10):

* alone, im2col beat XLA only for the Atari stack's first layer (8x8
  stride 4 on 84x84x1, 1,280 frames: 81 against 169 ms); it was 1.1x slower
  for the Atari stack's other layers and 3-4x slower for the 3x3 stride-1
  convolutions of the grid torso on 7x7 MiniGrid views;
* inside a `lax.while_loop` or `scan` body -- where the compiled loop
  (`ngu_jax.loops.compiled`) runs every learner step, and where micro-batched
  updates accumulate their gradients -- XLA:CPU's convolutions are much
  slower again: forward + both gradients of the 7x7 MiniGrid layer take
  102 ms per call there against 16 ms alone, while matrix products keep
  their speed;
* "gemm" takes 12.5 ms for that layer in the loop (24 ms alone); for the
  whole Atari update (B = 64 x 80 frames,
  `experiments/benchmarks/learner_step.py`) 3.1 s in one batch and 2.4 s in
  4 micro-batches, against 6.0 s and 53.8 s with XLA's convolutions (im2col
  first layer), and 8.2-10.5 s and 7.3 s before either change.

So both torsos use "gemm"; "xla" and "im2col" remain as options.

`Conv2D` is a drop-in for `hk.Conv2D(..., padding="VALID")`: same parameter
names, shapes and default initialisers, so parameter trees do not change.
"""

import functools
from typing import Optional

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

_DIMENSION_NUMBERS = ("NHWC", "HWIO", "NHWC")


def _conv(x: jax.Array, w: jax.Array, stride: int) -> jax.Array:
  return jax.lax.conv_general_dilated(
      x, w, (stride, stride), "VALID", dimension_numbers=_DIMENSION_NUMBERS)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def conv2d_valid(x: jax.Array, w: jax.Array, stride: int) -> jax.Array:
  """VALID convolution of NHWC images with an HWIO kernel, square stride.

  Args:
    x: images shaped [B, H, W, C].
    w: kernel shaped [K, K, C, O].
    stride: the stride along both spatial axes.

  Returns:
    [B, (H - K) // stride + 1, (W - K) // stride + 1, O].
  """
  return _conv(x, w, stride)


def _conv2d_fwd(x, w, stride):
  return _conv(x, w, stride), (x, w)


def _conv2d_bwd(stride, residuals, g):
  x, w = residuals
  k1, k2, c, o = w.shape
  _, input_vjp = jax.vjp(lambda x_: _conv(x_, w, stride), x)
  (dx,) = input_vjp(g)  # Dropped by XLA when x needs no gradient.
  patches = jax.lax.conv_general_dilated_patches(
      x, (k1, k2), (stride, stride), "VALID",
      dimension_numbers=_DIMENSION_NUMBERS)  # [B, H', W', C*K1*K2], C slowest.
  dw = patches.reshape(-1, c * k1 * k2).T @ g.reshape(-1, o)
  dw = dw.reshape(c, k1, k2, o).transpose(1, 2, 0, 3).astype(w.dtype)
  return dx, dw


conv2d_valid.defvjp(_conv2d_fwd, _conv2d_bwd)


def conv2d_gemm(x: jax.Array, w: jax.Array, stride: int) -> jax.Array:
  """`conv2d_valid` as shifted slices of x concatenated, then one GEMM.

  The K * K strided views x[:, i::stride, j::stride, :] (each cut to the
  output size) are concatenated along channels in (i, j, c) order, which
  is the order of w [K, K, C, O] reshaped to [K * K * C, O]; the
  gradients are JAX's own (slices, a concatenation and a matmul), so no
  XLA convolution runs, forward or backward. Inside a `lax.while_loop` /
  `scan` body, where the compiled loop runs the learner, XLA:CPU's
  convolutions are 9x slower than outside one and this form 8x faster than
  them (module docstring).

  Args, returns: as `conv2d_valid`.
  """
  k1, k2, c, o = w.shape
  h_out = (x.shape[1] - k1) // stride + 1
  w_out = (x.shape[2] - k2) // stride + 1
  views = [x[:, i:i + stride * (h_out - 1) + 1:stride,
             j:j + stride * (w_out - 1) + 1:stride, :]
           for i in range(k1) for j in range(k2)]
  patches = jnp.concatenate(views, axis=-1)  # [B, H', W', K1 * K2 * C]
  return patches @ w.reshape(k1 * k2 * c, o)


IMPLEMENTATIONS = ("xla", "im2col", "gemm")


class Conv2D(hk.Module):
  """`hk.Conv2D` with VALID padding and a square kernel.

  Parameters: "w" [K, K, C, O] (truncated normal, stddev 1/sqrt(K*K*C), as
  Haiku's default) and "b" [O] (zeros). `implementation` (the same values
  and gradients, module docstring): "xla" (`lax.conv_general_dilated` and
  its own gradients), "im2col" (`conv2d_valid`: the weight gradient as one
  GEMM) or "gemm" (`conv2d_gemm`: no XLA convolution at all).
  """

  def __init__(self, output_channels: int, kernel_shape: int, stride: int = 1,
               name: Optional[str] = None, implementation: str = "xla"):
    super().__init__(name=name)
    if implementation not in IMPLEMENTATIONS:
      raise ValueError(f"networks.conv.Conv2D: `implementation` must be one "
                       f"of {IMPLEMENTATIONS}, got {implementation!r}.")
    self._output_channels = output_channels
    self._kernel = kernel_shape
    self._stride = stride
    self._conv = {"xla": _conv, "im2col": conv2d_valid,
                  "gemm": conv2d_gemm}[implementation]

  def __call__(self, x: jax.Array) -> jax.Array:
    """Applies the convolution to images shaped [B, H, W, C]."""
    w_shape = (self._kernel, self._kernel, x.shape[-1], self._output_channels)
    stddev = 1. / np.sqrt(np.prod(w_shape[:-1]))
    w = hk.get_parameter("w", w_shape, x.dtype,
                         init=hk.initializers.TruncatedNormal(stddev=stddev))
    b = hk.get_parameter("b", (self._output_channels,), x.dtype,
                         init=hk.initializers.Constant(0.))
    return self._conv(x, w, self._stride) + b
