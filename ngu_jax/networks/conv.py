"""A VALID 2-D convolution, optionally with a one-GEMM weight gradient.

The conv torsos (NGU App. H; DQN / R2D2) spend much of a learner update in
the backward pass of their convolutions. `conv2d_valid` computes the same
function as `lax.conv_general_dilated` with a `jax.custom_vjp` whose weight
gradient is im2col (`lax.conv_general_dilated_patches`) followed by one
matrix product, patches^T @ grad; the input gradient is XLA's own. Forward
values and both gradients equal `lax.conv_general_dilated` up to float32
rounding (tests/networks/test_conv.py).

Which is faster depends on the layer, measured on this project's 2-core CPU
(jax 0.10, 1,280 frames; `experiments/benchmarks/learner_step.py --profile`
times the torsos in the update): im2col is 2.1x faster than XLA for the
Atari stack's first layer (8x8 stride 4 on 84x84x1: 81 against 169 ms) but
slower for every other layer we use -- 1.1x for the Atari stack's second and
third layers, 3-4x for the 3x3 stride-1 convolutions of the grid torso on
7x7 MiniGrid views (15.5 against 5.0 ms), where building the patches costs
more than the product. So `Conv2D(weight_gradient=...)` chooses per layer,
and only the Atari torso's first layer uses "im2col".

`Conv2D` is a drop-in for `hk.Conv2D(..., padding="VALID")`: same parameter
names, shapes and default initialisers, so parameter trees do not change.
"""

import functools
from typing import Optional

import haiku as hk
import jax
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


WEIGHT_GRADIENTS = ("xla", "im2col")


class Conv2D(hk.Module):
  """`hk.Conv2D` with VALID padding and a square kernel.

  Parameters: "w" [K, K, C, O] (truncated normal, stddev 1/sqrt(K*K*C), as
  Haiku's default) and "b" [O] (zeros). `weight_gradient`: "xla"
  (`lax.conv_general_dilated` and its own gradients) or "im2col"
  (`conv2d_valid`: the same values, the weight gradient as one GEMM; faster
  only for large strided kernels on few channels, module docstring).
  """

  def __init__(self, output_channels: int, kernel_shape: int, stride: int = 1,
               name: Optional[str] = None, weight_gradient: str = "xla"):
    super().__init__(name=name)
    if weight_gradient not in WEIGHT_GRADIENTS:
      raise ValueError(f"networks.conv.Conv2D: `weight_gradient` must be one "
                       f"of {WEIGHT_GRADIENTS}, got {weight_gradient!r}.")
    self._output_channels = output_channels
    self._kernel = kernel_shape
    self._stride = stride
    self._conv = conv2d_valid if weight_gradient == "im2col" else _conv

  def __call__(self, x: jax.Array) -> jax.Array:
    """Applies the convolution to images shaped [B, H, W, C]."""
    w_shape = (self._kernel, self._kernel, x.shape[-1], self._output_channels)
    stddev = 1. / np.sqrt(np.prod(w_shape[:-1]))
    w = hk.get_parameter("w", w_shape, x.dtype,
                         init=hk.initializers.TruncatedNormal(stddev=stddev))
    b = hk.get_parameter("b", (self._output_channels,), x.dtype,
                         init=hk.initializers.Constant(0.))
    return self._conv(x, w, self._stride) + b
