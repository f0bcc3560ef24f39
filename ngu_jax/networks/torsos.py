"""Observation torsos shared by the NGU networks (Haiku modules).

Badia et al. (2020), "Never Give Up", App. H (network architectures) and
App. F Table 7 (Disco Maze filters); the Atari stack is the DQN / R2D2 one
(Mnih et al., 2015; Kapturowski et al., 2019).

Every torso takes a batch of observations and returns a batch of flat feature
vectors. Before its first layer a torso encodes the batch as the
environment's declared `ngu_jax.types.ObservationEncoding` says
(`encode_observation`; observations declare what they are, never guessed
from the dtype; docs/design.md#observation-encodings):

* "pixels" (default): uint8 scaled to [0, 1] by 1/255, floating point used as
  it is (so a caller that already normalised its observations, e.g. with the
  RND whitening, passes floats); other dtypes are rejected;
* "symbolic": integer codes one-hot encoded per channel and concatenated,
  [B, H, W, C] -> [B, H, W, sum(num_values)] (MiniGrid: (11, 6, 3) -> 20);
* "binary" / "features": cast to float32 as they are.

For all but "pixels", a grid [B, H, W] gets a channel axis [B, H, W, 1] (and
a scalar [B] becomes [B, 1]). The torso kind is resolved on the ENCODED
shape (`resolve_torso_kind`).

The modules must be called inside a Haiku transform. The public network
factories (`make_embedding_network`, `make_rnd_networks`,
`make_uvfa_network`) check observation shapes, dtypes and values
(`check_observation_batch`: NaN/inf, symbolic codes out of range) against
what they were built for; the modules themselves check rank, dtype and the
minimum spatial size their VALID convolutions need.
"""

from typing import Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks
from ngu_jax import types as ngu_types
from ngu_jax.networks import conv

TORSO_KINDS = ("atari", "grid", "mlp")

# Smallest image the three VALID convolutions of `AtariConvStack` accept:
# 36 -> 8 -> 3 -> 1.
ATARI_MIN_SIZE = 36
# `GridTorso` uses two VALID 3x3 convolutions: 5 -> 3 -> 1.
GRID_MIN_SIZE = 5
# Table 7's channel counts of the two convolutions of `GridTorso`.
GRID_FILTERS = (16, 32)


def check_grid_filters(filters: Sequence[int], where: str) -> Tuple[int, int]:
  """`filters` as a tuple of two positive ints, else ValueError."""
  filters = tuple(filters)
  if len(filters) != 2 or not all(
      isinstance(f, (int, np.integer)) and not isinstance(f, bool) and f >= 1
      for f in filters):
    raise ValueError(f"{where}: grid_filters must be two positive integers "
                     f"(the channels of the two 3x3 convolutions), got "
                     f"{filters}.")
  return tuple(int(f) for f in filters)
# `make_torso(kind="auto")` picks the Atari stack from this size up.
ATARI_AUTO_MIN_SIZE = 84


def scale_observation(observation: jax.Array,
                      where: str = "networks.scale_observation") -> jax.Array:
  """Converts observations to floats: uint8 is scaled by 1/255.

  The "pixels" encoding of `encode_observation`.

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


def as_encoding(encoding: Optional[ngu_types.ObservationEncoding],
                where: str) -> ngu_types.ObservationEncoding:
  """`encoding`, or "pixels" for None; ValueError for anything else."""
  if encoding is None:
    return ngu_types.PIXELS
  if not isinstance(encoding, ngu_types.ObservationEncoding):
    raise ValueError(f"{where}: `encoding` must be an ngu_jax.types."
                     f"ObservationEncoding (or None for pixels), got "
                     f"{encoding!r}.")
  return encoding


def check_observation_dtype(dtype, encoding: ngu_types.ObservationEncoding,
                            name: str, where: str) -> None:
  """Checks that an observation dtype fits the encoding (static, no values).

  "pixels": uint8 or floating point. "symbolic": integer (not bool).
  "binary" / "features": bool, integer or floating point.

  Raises:
    ValueError: naming the dtype and the encoding.
  """
  dtype = jnp.dtype(dtype)
  floating = jnp.issubdtype(dtype, jnp.floating)
  integer = jnp.issubdtype(dtype, jnp.integer)
  kind = encoding.kind
  if kind == "pixels":
    if dtype != jnp.uint8 and not floating:
      raise ValueError(
          f"{where}: `{name}` must be uint8 or floating point, got dtype "
          f"{dtype} (observation encoding 'pixels'; integer codes or binary "
          "grids need an ObservationEncoding that says so).")
  elif kind == "symbolic":
    if not integer:
      raise ValueError(
          f"{where}: `{name}` must hold integer codes for the 'symbolic' "
          f"observation encoding, got dtype {dtype}.")
  elif not (floating or integer or dtype == jnp.bool_):
    raise ValueError(f"{where}: `{name}` must be bool, integer or floating "
                     f"point for the {kind!r} observation encoding, got "
                     f"dtype {dtype}.")


def check_observation_values(observation: jax.Array,
                             encoding: ngu_types.ObservationEncoding,
                             name: str, where: str,
                             runtime_code_check: bool = True) -> None:
  """Checks dtype and values of observations whose leading axis is lanes.

  Floating point: no NaN/inf. "symbolic": every code of channel c in
  [0, num_values[c]). Values are checked eagerly, or at run time under jit
  (see `ngu_jax._checks`); messages name the lanes.

  Args:
    observation: observations shaped [B, ...] (already shape-checked).
    encoding: the encoding the network was built for.
    name: argument name, for the error message.
    where: name of the calling public function, for the error message.
    runtime_code_check: whether symbolic codes are also checked under jit
      (else only eagerly). The Q-network checks them at run time; the
      embedding and RND networks, which the actor and learner call on the
      same observations (the embedding vmapped over lanes, where a host
      callback would run once per lane: +35% of a 32-lane MiniGrid actor
      step), check them eagerly only.

  Raises:
    ValueError: on a dtype that does not fit the encoding, NaN/inf, or
      codes out of range.
  """
  dtype = observation.dtype
  check_observation_dtype(dtype, encoding, name, where)
  if jnp.issubdtype(dtype, jnp.floating):
    _checks.check_finite(observation, name, where)
  elif encoding.kind == "symbolic":
    # One count per channel (the last axis, already shape-checked), or one
    # count for a single channel, which may have no axis of its own.
    high = encoding.num_values
    high = high[0] if len(high) == 1 else high
    if _checks.is_traced(observation):
      if not (runtime_code_check and _checks.runtime_checks_enabled()):
        return
      x = observation.astype(jnp.int32)
      high = jnp.asarray(high, jnp.int32)
    else:
      x = np.asarray(observation).astype(np.int64)
      high = np.asarray(high, np.int64)
    _checks.check_values(
        (x < 0) | (x >= high),
        f"has codes outside [0, num_values[c]) (num_values "
        f"{encoding.num_values} per channel c)", name, where)


def check_observation_batch(observation: jax.Array,
                            observation_shape: Tuple[int, ...],
                            name: str, where: str,
                            encoding: Optional[
                                ngu_types.ObservationEncoding] = None,
                            runtime_code_check: bool = True) -> None:
  """Checks a batch against the observation shape a network was built for.

  Args:
    observation: observations shaped [B, *observation_shape].
    observation_shape: shape of ONE observation the network was built for.
    name: argument name, for the error message.
    where: name of the calling public function, for the error message.
    encoding: the network's `ObservationEncoding` (None: "pixels").
    runtime_code_check: see `check_observation_values`.

  Raises:
    ValueError: on a shape mismatch (naming expected and actual shapes), on a
      dtype the encoding does not take (pixels: uint8 / floating point), on
      NaN/inf in floating observations or on symbolic codes out of range
      (eagerly, or at run time under jit, see `ngu_jax._checks`).
  """
  encoding = as_encoding(encoding, where)
  _checks.check_shape(observation, (None,) + tuple(observation_shape), name,
                      where)
  check_observation_values(observation, encoding, name, where,
                           runtime_code_check)


def dummy_observation(observation_shape: Tuple[int, ...],
                      encoding: Optional[
                          ngu_types.ObservationEncoding] = None
                      ) -> jax.Array:
  """Zeros shaped [1, *observation_shape] for tracing a network's `init`.

  float32, except int32 for "symbolic" (codes are integers). Parameters
  depend only on shapes, so the values do not matter.
  """
  encoding = as_encoding(encoding, "networks.dummy_observation")
  dtype = jnp.int32 if encoding.kind == "symbolic" else jnp.float32
  return jnp.zeros((1,) + tuple(observation_shape), dtype)


def encode_observation(observation: jax.Array,
                       encoding: Optional[
                           ngu_types.ObservationEncoding] = None,
                       where: str = "networks.encode_observation"
                       ) -> jax.Array:
  """Encodes a batch of observations as its declared encoding says.

  Observations declare what they are (docs/design.md#observation-encodings);
  see `ngu_jax.types.ObservationEncoding` for the kinds.

  Args:
    observation: a batch shaped [B, *observation_shape] (one leading axis).
    encoding: None or "pixels": `scale_observation` (uint8 / 255, floats
      unchanged). "symbolic": per-channel one-hot, concatenated. "binary" /
      "features": float32 as they are. Except for "pixels", [B, H, W] and
      [B] get a trailing channel axis first.
    where: name of the calling public function, for error messages.

  Returns:
    Floating-point observations shaped
    [B, *encoding.encoded_shape(observation_shape)]; float32 except
    "pixels" float input, which is returned unchanged.

  Raises:
    ValueError: on a dtype the encoding does not take, or (symbolic) a
      channel count other than len(num_values). Code values are not checked
      here (see `check_observation_batch`): a code out of range one-hot
      encodes as zeros.
  """
  encoding = as_encoding(encoding, where)
  check_observation_dtype(observation.dtype, encoding, "observation", where)
  if encoding.kind == "pixels":
    return scale_observation(observation, where)
  x = observation
  if x.ndim in (1, 3):  # [B] or [B, H, W]: add the channel axis.
    x = x[..., None]
  if encoding.kind != "symbolic":
    return x.astype(jnp.float32)
  num_values = encoding.num_values
  if x.shape[-1] != len(num_values):
    raise ValueError(
        f"{where}: the 'symbolic' encoding has {len(num_values)} channel(s) "
        f"(num_values {num_values}), got observations shaped "
        f"{tuple(observation.shape)}.")
  x = x.astype(jnp.int32)
  return jnp.concatenate(
      [jax.nn.one_hot(x[..., c], n, dtype=jnp.float32)
       for c, n in enumerate(num_values)], axis=-1)


def _check_image(x: jax.Array, min_size: int, where: str) -> None:
  _checks.check_rank(x, 4, "observation", where)
  height, width = x.shape[1], x.shape[2]
  if height < min_size or width < min_size:
    raise ValueError(
        f"{where}: images must be at least {min_size}x{min_size} for this "
        f"torso's VALID convolutions, got {height}x{width} (observation shape "
        f"{tuple(x.shape)}).")


def _torso_input(observation: jax.Array,
                 encoding: ngu_types.ObservationEncoding,
                 min_size: Optional[int], where: str) -> jax.Array:
  """Encodes a torso's input and checks the encoded rank / image size.

  min_size None: vectors [B, D]; else images [B, H, W, C], H, W >= min_size.
  For "pixels" the raw batch is checked first (it is not reshaped).
  """
  def check(x):
    if min_size is None:
      _checks.check_rank(x, 2, "observation", where)
    else:
      _check_image(x, min_size, where)

  if encoding.kind == "pixels":
    check(observation)
    return scale_observation(observation, where)
  x = encode_observation(observation, encoding, where)
  check(x)
  return x


class AtariConvStack(hk.Module):
  """The DQN / R2D2 convolutional stack, flattened (NGU App. H.1-H.3).

  Conv 32 8x8 stride 4, ReLU, Conv 64 4x4 stride 2, ReLU, Conv 64 3x3
  stride 1, ReLU, all VALID padding, then flatten. For observations shaped
  [B, 84, 84, 1] the output is shaped [B, 3136] (7 * 7 * 64).
  """

  def __init__(self, name: Optional[str] = "atari_conv_stack", *,
               encoding: Optional[ngu_types.ObservationEncoding] = None):
    """Builds the module.

    Args:
      name: module name.
      encoding: the observations' `ObservationEncoding` (None: "pixels").
    """
    super().__init__(name=name)
    self._encoding = as_encoding(encoding, "networks.AtariConvStack")

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the stack.

    Args:
      observation: a batch whose encoding (`encode_observation`) is shaped
        [B, H, W, C] with H, W >= 36; pixels: uint8 (scaled by 1/255) or
        floating point.

    Returns:
      Features shaped [B, H' * W' * 64], e.g. [B, 3136] for 84x84 input.
    """
    where = "networks.AtariConvStack"
    x = _torso_input(observation, self._encoding, ATARI_MIN_SIZE, where)
    for i, (channels, kernel, stride) in enumerate(
        ((32, 8, 4), (64, 4, 2), (64, 3, 1))):
      # Strided slices + one GEMM: 1.9x faster than XLA's convolutions for
      # the whole update, 3x inside the micro-batch scan (`networks.conv`).
      x = conv.Conv2D(channels, kernel, stride=stride, name=f"conv_{i}",
                      implementation="gemm")(x)
      x = jax.nn.relu(x)
    return hk.Flatten()(x)


class AtariTorso(hk.Module):
  """R2D2 Atari torso: `AtariConvStack` -> Linear 512 -> ReLU (NGU App. H.3).

  For observations shaped [B, 84, 84, 1] the conv stack gives [B, 3136] and
  the torso returns [B, 512].
  """

  def __init__(self, output_size: int = 512,
               name: Optional[str] = "atari_torso", *,
               encoding: Optional[ngu_types.ObservationEncoding] = None):
    """Builds the module.

    Args:
      output_size: width of the dense ReLU layer (512 in R2D2).
      name: module name.
      encoding: the observations' `ObservationEncoding` (None: "pixels").
    """
    super().__init__(name=name)
    self._output_size = output_size
    self._encoding = as_encoding(encoding, "networks.AtariTorso")

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the torso.

    Args:
      observation: a batch whose encoding is shaped [B, H, W, C] with
        H, W >= 36, e.g. [B, 84, 84, 1]; pixels: uint8 (scaled by 1/255) or
        floating point.

    Returns:
      Features shaped [B, output_size] ([B, 512] by default).
    """
    x = AtariConvStack(encoding=self._encoding)(observation)
    return jax.nn.relu(hk.Linear(self._output_size, name="linear")(x))


class GridTorso(hk.Module):
  """Small-grid torso of the Disco Maze experiments (NGU Sec. 4.1, Table 7).

  Conv 16 3x3 stride 1, ReLU, Conv 32 3x3 stride 1, ReLU, flatten, then
  (unless `output_size` is None) Linear(output_size) -> ReLU. Table 7 lists
  only the filters (sizes (3, 3), strides (1, 1), counts (16, 32): the
  default `filters`, which laptop-scale runs may shrink); the
  padding and the dense layer are our choices: VALID padding as in the Atari
  stack, and a 256-unit dense layer (half of R2D2's 512, for the small
  grids). For observations shaped [B, 21, 21, 3] the conv part gives
  [B, 17 * 17 * 32] = [B, 9248].
  """

  def __init__(self, output_size: Optional[int] = 256,
               name: Optional[str] = "grid_torso", *,
               encoding: Optional[ngu_types.ObservationEncoding] = None,
               filters: Sequence[int] = GRID_FILTERS):
    """Builds the module.

    Args:
      output_size: width of the dense ReLU layer after the convolutions; None
        for no dense layer (the flattened conv features are returned).
      name: module name.
      encoding: the observations' `ObservationEncoding` (None: "pixels"),
        e.g. symbolic (11, 6, 3) for MiniGrid, binary for DeepSea.
      filters: the channel counts of the two 3x3 convolutions (Table 7:
        (16, 32)).
    """
    super().__init__(name=name)
    self._filters = check_grid_filters(filters, "networks.GridTorso")
    self._output_size = output_size
    self._encoding = as_encoding(encoding, "networks.GridTorso")

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the torso.

    Args:
      observation: a batch whose encoding is shaped [B, H, W, C] with
        H, W >= 5, e.g. [B, 21, 21, 3] pixels (uint8 scaled by 1/255, or
        floating point), [B, 7, 7, 3] symbolic codes (encoded to
        [B, 7, 7, sum(num_values)]) or a [B, 10, 10] binary grid (encoded to
        [B, 10, 10, 1]).

    Returns:
      Features shaped [B, output_size], or [B, (H - 4) * (W - 4) * filters[1]] when
      `output_size` is None.
    """
    where = "networks.GridTorso"
    x = _torso_input(observation, self._encoding, GRID_MIN_SIZE, where)
    for i, channels in enumerate(self._filters):
      # Without XLA convolutions, which are 9x slower inside the compiled
      # loop's while loop on CPU (`ngu_jax.networks.conv`, measured).
      x = conv.Conv2D(channels, 3, stride=1, name=f"conv_{i}",
                      implementation="gemm")(x)
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
               name: Optional[str] = "mlp_torso", *,
               encoding: Optional[ngu_types.ObservationEncoding] = None):
    """Builds the module.

    Args:
      hidden_sizes: layer widths.
      name: module name.
      encoding: the observations' `ObservationEncoding` (None: "pixels").
    """
    super().__init__(name=name)
    self._hidden_sizes = tuple(hidden_sizes)
    self._encoding = as_encoding(encoding, "networks.MLPTorso")

  def __call__(self, observation: jax.Array) -> jax.Array:
    """Applies the MLP.

    Args:
      observation: a batch whose encoding is shaped [B, D], e.g. [B, 4]
        features (CartPole), or a declared grid encoding (binary grids,
        symbolic codes) shaped [B, H, W, C], flattened to [B, H * W * C]
        (e.g. bsuite DeepSea's one-hot [B, N, N]); pixels: [B, D], uint8
        (scaled by 1/255) or floating point.

    Returns:
      Features shaped [B, hidden_sizes[-1]].
    """
    where = "networks.MLPTorso"
    if self._encoding.kind == "pixels":
      x = _torso_input(observation, self._encoding, None, where)
    else:  # Declared encodings: vectors [B, D] or grids [B, H, W, C].
      x = encode_observation(observation, self._encoding, where)
      if x.ndim not in (2, 4):
        raise ValueError(f"{where}: the encoded `observation` must have rank "
                         f"2 or 4, got shape {x.shape}.")
      x = x.reshape((x.shape[0], -1))
    for i, size in enumerate(self._hidden_sizes):
      x = jax.nn.relu(hk.Linear(size, name=f"linear_{i}")(x))
    return x


def resolve_torso_kind(observation_shape: Tuple[int, ...],
                       kind: str = "auto",
                       encoding: Optional[
                           ngu_types.ObservationEncoding] = None) -> str:
  """Resolves `kind` ("atari" | "grid" | "mlp" | "auto") for a shape.

  The kind is resolved on the ENCODED shape,
  `encoding.encoded_shape(observation_shape)` (e.g. a binary DeepSea grid
  (10, 10) -> (10, 10, 1), MiniGrid codes (7, 7, 3) -> (7, 7, 20)): "auto"
  picks "mlp" for rank-1 shapes [D], "atari" for rank-3 shapes [H, W, C] with
  H and W >= 84, and "grid" for smaller rank-3 shapes. "mlp" also takes a
  declared grid encoding of rank 3 (flattened, `MLPTorso`), not pixels.

  Args:
    observation_shape: shape of ONE raw observation (no batch axis), e.g.
      (84, 84, 1) or (21, 21, 3) or (8,).
    kind: requested kind.
    encoding: the observations' `ObservationEncoding` (None: "pixels", whose
      encoded shape is the raw shape).

  Returns:
    One of "atari", "grid", "mlp".

  Raises:
    ValueError: for an unknown kind, an encoded rank other than 1 or 3, a
      kind that does not fit the rank, an image too small for the kind, or
      an encoding that does not fit the shape (symbolic: one `num_values`
      entry per channel).
  """
  where = "networks.resolve_torso_kind"
  encoding = as_encoding(encoding, where)
  raw = tuple(int(s) for s in observation_shape)
  if kind not in TORSO_KINDS + ("auto",):
    raise ValueError(f"{where}: unknown torso kind {kind!r}; expected one of "
                     f"{TORSO_KINDS + ('auto',)}.")
  try:
    shape = encoding.encoded_shape(raw)
  except ValueError as e:
    raise ValueError(f"{where}: {e}") from e
  if encoding.kind == "pixels":
    shown = f"observation_shape {shape}"
  else:
    shown = (f"observation_shape {raw} (encoded as {encoding.kind!r}: "
             f"{shape})")
  if len(shape) not in (1, 3):
    if encoding.kind == "pixels":
      raise ValueError(
          f"{where}: observation_shape must be [D] (vectors) or [H, W, C] "
          f"(images), got {shape}. For single-channel images add a channel "
          "axis, e.g. (84, 84, 1); for codes, binary grids or features "
          "declare their ObservationEncoding.")
    raise ValueError(
        f"{where}: observations encoded as {encoding.kind!r} must have shape "
        f"[], [D], [H, W] or [H, W, C], got {shown}.")
  if kind == "auto":
    if len(shape) == 1:
      kind = "mlp"
    elif min(shape[0], shape[1]) >= ATARI_AUTO_MIN_SIZE:
      kind = "atari"
    else:
      kind = "grid"
  if kind == "mlp" and len(shape) != 1 and encoding.kind == "pixels":
    raise ValueError(f"{where}: the mlp torso needs observation_shape [D], "
                     f"got {shown}.")
  if kind in ("atari", "grid"):
    if len(shape) != 3:
      raise ValueError(f"{where}: the {kind} torso needs observation_shape "
                       f"[H, W, C], got {shown}.")
    min_size = ATARI_MIN_SIZE if kind == "atari" else GRID_MIN_SIZE
    if min(shape[0], shape[1]) < min_size:
      raise ValueError(f"{where}: the {kind} torso needs images of at least "
                       f"{min_size}x{min_size}, got {shown}.")
  return kind


def make_torso(observation_shape: Tuple[int, ...],
               kind: str = "auto",
               *,
               encoding: Optional[ngu_types.ObservationEncoding] = None,
               conv_only: bool = False,
               grid_output_size: int = 256,
               grid_filters: Sequence[int] = GRID_FILTERS,
               mlp_hidden_sizes: Sequence[int] = (256, 256),
               name: Optional[str] = None) -> hk.Module:
  """Builds the torso for an observation shape (call inside a Haiku transform).

  Args:
    observation_shape: shape of ONE raw observation, e.g. (84, 84, 1).
    kind: "atari" | "grid" | "mlp" | "auto" (see `resolve_torso_kind`; the
      kind is resolved on the encoded shape).
    encoding: the observations' `ObservationEncoding` (None: "pixels");
      the torso encodes its input with it (`encode_observation`).
    conv_only: if True, image torsos stop at the flattened conv features
      (`AtariConvStack`, `GridTorso(output_size=None)`), as the embedding and
      RND networks put their own linear output on the conv stack (NGU App.
      H.1, H.2). The MLP torso is the same either way.
    grid_output_size: dense width of `GridTorso` when `conv_only` is False.
    grid_filters: channels of `GridTorso`'s two convolutions.
    mlp_hidden_sizes: layer widths of `MLPTorso`.
    name: optional module name (defaults to the class default).

  Returns:
    An `hk.Module` mapping [B, *observation_shape] to [B, F].
  """
  encoding = as_encoding(encoding, "networks.make_torso")
  kind = resolve_torso_kind(observation_shape, kind, encoding)
  kwargs = {"encoding": encoding}
  if name is not None:
    kwargs["name"] = name
  if kind == "atari":
    return AtariConvStack(**kwargs) if conv_only else AtariTorso(**kwargs)
  if kind == "grid":
    return GridTorso(None if conv_only else grid_output_size,
                     filters=grid_filters, **kwargs)
  return MLPTorso(mlp_hidden_sizes, **kwargs)
