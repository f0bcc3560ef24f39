"""Observation torsos shared by the NGU networks (Haiku modules).

Badia et al. (2020), "Never Give Up", App. H (network architectures) and
App. F Table 7 (Disco Maze filters); the Atari stack is the DQN / R2D2 one
(Mnih et al., 2015; Kapturowski et al., 2019).

Every torso takes a batch of observations and returns a batch of flat feature
vectors. `uint8` observations are scaled to [0, 1] by 1/255; floating-point
observations are used as they are (so a caller that already normalised its
observations, e.g. with the RND whitening, passes floats). Other dtypes are
rejected.

The modules must be called inside a Haiku transform. The public network
factories (`make_embedding_network`, `make_rnd_networks`) check observation
shapes against the shape they were built for; the modules themselves check
rank, dtype and the minimum spatial size their VALID convolutions need.
"""

from typing import Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp

from ngu_jax import _checks
from ngu_jax.networks import conv

TORSO_KINDS = ("atari", "grid", "mlp")

# Smallest image the three VALID convolutions of `AtariConvStack` accept:
# 36 -> 8 -> 3 -> 1.
ATARI_MIN_SIZE = 36
# `GridTorso` uses two VALID 3x3 convolutions: 5 -> 3 -> 1.
GRID_MIN_SIZE = 5
# `make_torso(kind="auto")` picks the Atari stack from this size up.
ATARI_AUTO_MIN_SIZE = 84


def scale_observation(observation: jax.Array,
                      where: str = "networks.scale_observation") -> jax.Array:
  """Converts observations to floats: uint8 is scaled by 1/255.

  Args:
    observation: observations of any shape, dtype uint8 or floating point.
    where: name of the calling public function, for the error message.

  Returns:
    Floating-point observations of the same shape: uint8 input divided by
    255 (as float32), floating-point input unchanged.

  Raises:
    ValueError: for any other dtype (e.g. int32 or bool observations).
  """
  dtype = observation.dtype
  if dtype == jnp.uint8:
    return observation.astype(jnp.float32) / 255.0
  if jnp.issubdtype(dtype, jnp.floating):
    return observation
  raise ValueError(
      f"{where}: observations must be uint8 (scaled by 1/255) or floating "
      f"point, got dtype {dtype}.")


def check_observation_batch(observation: jax.Array,
                            observation_shape: Tuple[int, ...],
                            name: str, where: str) -> None:
  """Checks a batch against the observation shape a network was built for.

  Args:
    observation: observations shaped [B, *observation_shape].
    observation_shape: shape of ONE observation the network was built for.
    name: argument name, for the error message.
    where: name of the calling public function, for the error message.

  Raises:
    ValueError: on a shape mismatch (naming expected and actual shapes), on a
      dtype other than uint8 / floating point, or on NaN/inf in floating
      observations (eagerly, or at run time under jit, see `ngu_jax._checks`).
  """
  _checks.check_shape(observation, (None,) + tuple(observation_shape), name,
                      where)
  dtype = observation.dtype
  if jnp.issubdtype(dtype, jnp.floating):
    _checks.check_finite(observation, name, where)
  elif dtype != jnp.uint8:
    raise ValueError(f"{where}: `{name}` must be uint8 or floating point, got "
                     f"dtype {dtype}.")


def _check_image(x: jax.Array, min_size: int, where: str) -> None:
  _checks.check_rank(x, 4, "observation", where)
  height, width = x.shape[1], x.shape[2]
  if height < min_size or width < min_size:
    raise ValueError(
        f"{where}: images must be at least {min_size}x{min_size} for this "
        f"torso's VALID convolutions, got {height}x{width} (observation shape "
        f"{tuple(x.shape)}).")


class AtariConvStack(hk.Module):
  """The DQN / R2D2 convolutional stack, flattened (NGU App. H.1-H.3).

  Conv 32 8x8 stride 4, ReLU, Conv 64 4x4 stride 2, ReLU, Conv 64 3x3
  stride 1, ReLU, all VALID padding, then flatten. For observations shaped
  [B, 84, 84, 1] the output is shaped [B, 3136] (7 * 7 * 64).
  """

  def __init__(self, name: Optional[str] = "atari_conv_stack"):
    super().__init__(name=name)

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the stack.

    Args:
      observation: images shaped [B, H, W, C] with H, W >= 36; uint8
        (scaled by 1/255) or floating point.

    Returns:
      Features shaped [B, H' * W' * 64], e.g. [B, 3136] for 84x84 input.
    """
    where = "networks.AtariConvStack"
    _check_image(observation, ATARI_MIN_SIZE, where)
    x = scale_observation(observation, where)
    for i, (channels, kernel, stride) in enumerate(
        ((32, 8, 4), (64, 4, 2), (64, 3, 1))):
      x = conv.Conv2D(channels, kernel, stride=stride, name=f"conv_{i}")(x)
      x = jax.nn.relu(x)
    return hk.Flatten()(x)


class AtariTorso(hk.Module):
  """R2D2 Atari torso: `AtariConvStack` -> Linear 512 -> ReLU (NGU App. H.3).

  For observations shaped [B, 84, 84, 1] the conv stack gives [B, 3136] and
  the torso returns [B, 512].
  """

  def __init__(self, output_size: int = 512,
               name: Optional[str] = "atari_torso"):
    super().__init__(name=name)
    self._output_size = output_size

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the torso.

    Args:
      observation: images shaped [B, H, W, C] with H, W >= 36, e.g.
        [B, 84, 84, 1]; uint8 (scaled by 1/255) or floating point.

    Returns:
      Features shaped [B, output_size] ([B, 512] by default).
    """
    x = AtariConvStack()(observation)
    return jax.nn.relu(hk.Linear(self._output_size, name="linear")(x))


class GridTorso(hk.Module):
  """Small-grid torso of the Disco Maze experiments (NGU Sec. 4.1, Table 7).

  Conv 16 3x3 stride 1, ReLU, Conv 32 3x3 stride 1, ReLU, flatten, then
  (unless `output_size` is None) Linear(output_size) -> ReLU. Table 7 lists
  only the filters (sizes (3, 3), strides (1, 1), counts (16, 32)); the
  padding and the dense layer are our choices: VALID padding as in the Atari
  stack, and a 256-unit dense layer (half of R2D2's 512, for the small
  grids). For observations shaped [B, 21, 21, 3] the conv part gives
  [B, 17 * 17 * 32] = [B, 9248].
  """

  def __init__(self, output_size: Optional[int] = 256,
               name: Optional[str] = "grid_torso"):
    """Builds the module.

    Args:
      output_size: width of the dense ReLU layer after the convolutions; None
        for no dense layer (the flattened conv features are returned).
      name: module name.
    """
    super().__init__(name=name)
    self._output_size = output_size

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the torso.

    Args:
      observation: images shaped [B, H, W, C] with H, W >= 5, e.g.
        [B, 21, 21, 3]; uint8 (scaled by 1/255) or floating point.

    Returns:
      Features shaped [B, output_size], or [B, (H - 4) * (W - 4) * 32] when
      `output_size` is None.
    """
    where = "networks.GridTorso"
    _check_image(observation, GRID_MIN_SIZE, where)
    x = scale_observation(observation, where)
    for i, channels in enumerate((16, 32)):
      x = conv.Conv2D(channels, 3, stride=1, name=f"conv_{i}")(x)
      x = jax.nn.relu(x)
    x = hk.Flatten()(x)
    if self._output_size is not None:
      x = jax.nn.relu(hk.Linear(self._output_size, name="linear")(x))
    return x


class MLPTorso(hk.Module):
  """MLP torso for vector observations, ReLU after every layer.

  Not in the NGU paper (which uses images only); provided so the components
  run on vector-observation tasks. Input shaped [B, D], output shaped
  [B, hidden_sizes[-1]] ([B, D] unchanged if `hidden_sizes` is empty).
  """

  def __init__(self, hidden_sizes: Sequence[int] = (256, 256),
               name: Optional[str] = "mlp_torso"):
    super().__init__(name=name)
    self._hidden_sizes = tuple(hidden_sizes)

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the MLP.

    Args:
      observation: vectors shaped [B, D]; uint8 (scaled by 1/255) or
        floating point.

    Returns:
      Features shaped [B, hidden_sizes[-1]].
    """
    where = "networks.MLPTorso"
    _checks.check_rank(observation, 2, "observation", where)
    x = scale_observation(observation, where)
    for i, size in enumerate(self._hidden_sizes):
      x = jax.nn.relu(hk.Linear(size, name=f"linear_{i}")(x))
    return x


def resolve_torso_kind(observation_shape: Tuple[int, ...],
                       kind: str = "auto") -> str:
  """Resolves `kind` ("atari" | "grid" | "mlp" | "auto") for a shape.

  "auto" picks "mlp" for rank-1 observation shapes [D], "atari" for rank-3
  shapes [H, W, C] with H and W >= 84, and "grid" for smaller rank-3 shapes.

  Args:
    observation_shape: shape of ONE observation (no batch axis), e.g.
      (84, 84, 1) or (21, 21, 3) or (8,).
    kind: requested kind.

  Returns:
    One of "atari", "grid", "mlp".

  Raises:
    ValueError: for an unknown kind, an observation rank other than 1 or 3,
      a kind that does not fit the rank, or an image too small for the kind.
  """
  where = "networks.resolve_torso_kind"
  shape = tuple(int(s) for s in observation_shape)
  if kind not in TORSO_KINDS + ("auto",):
    raise ValueError(f"{where}: unknown torso kind {kind!r}; expected one of "
                     f"{TORSO_KINDS + ('auto',)}.")
  if len(shape) not in (1, 3):
    raise ValueError(
        f"{where}: observation_shape must be [D] (vectors) or [H, W, C] "
        f"(images), got {shape}. For single-channel images add a channel "
        "axis, e.g. (84, 84, 1).")
  if kind == "auto":
    if len(shape) == 1:
      kind = "mlp"
    elif min(shape[0], shape[1]) >= ATARI_AUTO_MIN_SIZE:
      kind = "atari"
    else:
      kind = "grid"
  if kind == "mlp" and len(shape) != 1:
    raise ValueError(f"{where}: the mlp torso needs observation_shape [D], "
                     f"got {shape}.")
  if kind in ("atari", "grid"):
    if len(shape) != 3:
      raise ValueError(f"{where}: the {kind} torso needs observation_shape "
                       f"[H, W, C], got {shape}.")
    min_size = ATARI_MIN_SIZE if kind == "atari" else GRID_MIN_SIZE
    if min(shape[0], shape[1]) < min_size:
      raise ValueError(f"{where}: the {kind} torso needs images of at least "
                       f"{min_size}x{min_size}, got observation_shape {shape}.")
  return kind


def make_torso(observation_shape: Tuple[int, ...],
               kind: str = "auto",
               *,
               conv_only: bool = False,
               grid_output_size: int = 256,
               mlp_hidden_sizes: Sequence[int] = (256, 256),
               name: Optional[str] = None) -> hk.Module:
  """Builds the torso for an observation shape (call inside a Haiku transform).

  Args:
    observation_shape: shape of ONE observation, e.g. (84, 84, 1).
    kind: "atari" | "grid" | "mlp" | "auto" (see `resolve_torso_kind`).
    conv_only: if True, image torsos stop at the flattened conv features
      (`AtariConvStack`, `GridTorso(output_size=None)`), as the embedding and
      RND networks put their own linear output on the conv stack (NGU App.
      H.1, H.2). The MLP torso is the same either way.
    grid_output_size: dense width of `GridTorso` when `conv_only` is False.
    mlp_hidden_sizes: layer widths of `MLPTorso`.
    name: optional module name (defaults to the class default).

  Returns:
    An `hk.Module` mapping [B, *observation_shape] to [B, F].
  """
  kind = resolve_torso_kind(observation_shape, kind)
  kwargs = {} if name is None else {"name": name}
  if kind == "atari":
    return AtariConvStack(**kwargs) if conv_only else AtariTorso(**kwargs)
  if kind == "grid":
    return GridTorso(None if conv_only else grid_output_size, **kwargs)
  return MLPTorso(mlp_hidden_sizes, **kwargs)
