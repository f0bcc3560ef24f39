"""Tests for ngu_jax.networks.torsos."""

import functools

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import types as ngu_types
from ngu_jax.networks import torsos
from tests import helpers


# Haiku's initialisers compile slowly on CPU (~0.2 s per parameter shape), so
# most tests take parameter SHAPES from `jax.eval_shape(init)` (tracing only)
# and fill them with numpy random values; `test_init_matches_eval_shape`
# covers the real initialiser.
_CASES = {
    "atari_84": (torsos.AtariTorso, (84, 84, 1)),
    "atari_stack_36": (torsos.AtariConvStack, (36, 36, 2)),
    "atari_stack_44x40": (torsos.AtariConvStack, (44, 40, 1)),
    "atari_torso_36": (torsos.AtariTorso, (36, 36, 2)),
    "grid": (torsos.GridTorso, (12, 12, 3)),
    "grid_conv_only": (lambda: torsos.GridTorso(None), (12, 12, 3)),
    "grid_7x9_linear_8": (lambda: torsos.GridTorso(8), (7, 9, 2)),
    "mlp": (torsos.MLPTorso, (7,)),
    "mlp_6_3": (lambda: torsos.MLPTorso((6, 3)), (5,)),
}


def _transform(module_fn):
  return hk.without_apply_rng(hk.transform(lambda x: module_fn()(x)))


@functools.lru_cache(maxsize=None)
def _net_and_params(case):
  module_fn, obs_shape = _CASES[case]
  net = _transform(module_fn)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0),
                          jnp.zeros((1,) + obs_shape))
  return net, helpers.random_params(shapes)


def _apply(case, x, jit):
  net, params = _net_and_params(case)
  apply = jax.jit(net.apply) if jit else net.apply
  return params, np.asarray(apply(params, x))


def _np_conv_valid(x, w, b, stride):
  """Independent VALID conv: x [B, H, W, C], kernel w [k, k, C, O], bias b."""
  k = w.shape[0]
  out_h = (x.shape[1] - k) // stride + 1
  out_w = (x.shape[2] - k) // stride + 1
  out = np.zeros((x.shape[0], out_h, out_w, w.shape[-1]))
  for i in range(out_h):
    for j in range(out_w):
      patch = x[:, i * stride:i * stride + k, j * stride:j * stride + k, :]
      out[:, i, j, :] = np.einsum("bhwc,hwco->bo", patch, w)
  return out + b


def _relu(x):
  return np.maximum(x, 0.0)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case, expected", [
    ("atari_84", (2, 512)),
    ("atari_stack_36", (2, 1 * 1 * 64)),
    ("atari_stack_44x40", (2, 2 * 1 * 64)),
    ("grid", (2, 256)),
    ("grid_conv_only", (2, 8 * 8 * 32)),
    ("grid_7x9_linear_8", (2, 8)),
    ("mlp", (2, 256)),
    ("mlp_6_3", (2, 3)),
])
def test_output_shapes(case, expected, jit):
  obs_shape = _CASES[case][1]
  x = jax.random.uniform(jax.random.PRNGKey(1), (2,) + obs_shape)
  _, out = _apply(case, x, jit)
  assert out.shape == expected
  assert out.dtype == np.float32
  assert np.all(np.isfinite(out))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", ["atari_stack_36", "grid", "mlp"])
def test_uint8_equals_float_divided_by_255(case, jit):
  obs_shape = _CASES[case][1]
  rng = np.random.default_rng(0)
  x_uint8 = rng.integers(0, 256, size=(3,) + obs_shape).astype(np.uint8)
  x_float = x_uint8.astype(np.float32) / 255.0
  _, out_uint8 = _apply(case, x_uint8, jit)
  _, out_float = _apply(case, x_float, jit)
  np.testing.assert_allclose(out_uint8, out_float, rtol=1e-6, atol=1e-6)
  # Neither scaled twice nor left unscaled: the raw values cast to float
  # give a different result.
  _, out_raw = _apply(case, x_uint8.astype(np.float32), jit)
  assert not np.allclose(out_raw, out_uint8)


def test_init_matches_eval_shape():
  net = _transform(lambda: torsos.GridTorso(8))
  x = jnp.zeros((1, 7, 9, 2))
  params = net.init(jax.random.PRNGKey(0), x)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0), x)
  assert jax.tree_util.tree_map(lambda p: p.shape, params) == (
      jax.tree_util.tree_map(lambda s: s.shape, shapes))
  again = net.init(jax.random.PRNGKey(0), x)
  other = net.init(jax.random.PRNGKey(1), x)
  w = params["grid_torso/conv_0"]["w"]
  np.testing.assert_array_equal(w, again["grid_torso/conv_0"]["w"])
  assert not np.allclose(w, other["grid_torso/conv_0"]["w"])
  assert np.all(np.isfinite(w)) and np.std(w) > 0


def _param_count(module_fn, obs_shape):
  net = _transform(module_fn)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0),
                          jnp.zeros((1,) + obs_shape, jnp.float32))
  return sum(int(np.prod(s.shape)) for s in jax.tree_util.tree_leaves(shapes))


def test_atari_torso_parameter_count():
  # 84x84x1 -> conv 8x8/4 -> 20x20x32 -> conv 4x4/2 -> 9x9x64 -> conv 3x3/1
  # -> 7x7x64 = 3136 -> Linear 512.
  conv1 = 8 * 8 * 1 * 32 + 32  # 2,080
  conv2 = 4 * 4 * 32 * 64 + 64  # 32,832
  conv3 = 3 * 3 * 64 * 64 + 64  # 36,928
  linear = 3136 * 512 + 512  # 1,606,144
  assert conv1 + conv2 + conv3 + linear == 1_677_984
  assert _param_count(torsos.AtariTorso, (84, 84, 1)) == 1_677_984
  assert _param_count(torsos.AtariConvStack, (84, 84, 1)) == 71_840


def test_grid_torso_parameter_count():
  # 21x21x3 -> conv 3x3 -> 19x19x16 -> conv 3x3 -> 17x17x32 = 9248 -> 256.
  conv1 = 3 * 3 * 3 * 16 + 16  # 448
  conv2 = 3 * 3 * 16 * 32 + 32  # 4,640
  linear = 9248 * 256 + 256  # 2,367,744
  assert _param_count(torsos.GridTorso, (21, 21, 3)) == conv1 + conv2 + linear
  assert _param_count(lambda: torsos.GridTorso(None),
                      (21, 21, 3)) == conv1 + conv2


def test_grid_torso_filters():
  # 11x11x3 -> conv 3x3 -> 9x9x4 -> conv 3x3 -> 7x7x8 = 392 -> 16.
  conv1 = 3 * 3 * 3 * 4 + 4
  conv2 = 3 * 3 * 4 * 8 + 8
  linear = 392 * 16 + 16
  assert _param_count(lambda: torsos.GridTorso(16, filters=(4, 8)),
                      (11, 11, 3)) == conv1 + conv2 + linear
  module = lambda: torsos.make_torso((11, 11, 3), "grid", conv_only=True,
                                     grid_filters=(4, 8))
  assert _param_count(module, (11, 11, 3)) == conv1 + conv2
  for bad in [(4,), (4, 0), (4, 8, 16)]:
    with pytest.raises(ValueError, match="grid_filters must be two positive"):
      _param_count(lambda: torsos.GridTorso(16, filters=bad), (11, 11, 3))


@pytest.mark.parametrize("jit", [False, True])
def test_atari_torso_matches_numpy_reference(jit):
  x = np.random.default_rng(1).uniform(size=(2, 36, 36, 2)).astype(np.float32)
  params, out = _apply("atari_torso_36", x, jit)
  p = jax.tree_util.tree_map(np.asarray, params)
  h = x.astype(np.float64)
  for i, stride in enumerate((4, 2, 1)):
    conv = p[f"atari_torso/atari_conv_stack/conv_{i}"]
    h = _relu(_np_conv_valid(h, conv["w"], conv["b"], stride))
  assert h.shape == (2, 1, 1, 64)
  lin = p["atari_torso/linear"]
  expected = _relu(h.reshape(2, -1) @ lin["w"] + lin["b"])
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_grid_torso_matches_numpy_reference(jit):
  x = np.random.default_rng(2).uniform(size=(2, 7, 9, 2)).astype(np.float32)
  params, out = _apply("grid_7x9_linear_8", x, jit)
  p = jax.tree_util.tree_map(np.asarray, params)
  h = x.astype(np.float64)
  for i in range(2):
    conv = p[f"grid_torso/conv_{i}"]
    h = _relu(_np_conv_valid(h, conv["w"], conv["b"], 1))
  assert h.shape == (2, 3, 5, 32)
  lin = p["grid_torso/linear"]
  expected = _relu(h.reshape(2, -1) @ lin["w"] + lin["b"])
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_mlp_torso_matches_numpy_reference(jit):
  x = np.random.default_rng(3).normal(size=(4, 5)).astype(np.float32)
  params, out = _apply("mlp_6_3", x, jit)
  p = jax.tree_util.tree_map(np.asarray, params)
  h = x.astype(np.float64)
  for i in range(2):
    layer = p[f"mlp_torso/linear_{i}"]
    h = _relu(h @ layer["w"] + layer["b"])
  np.testing.assert_allclose(out, h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, expected", [
    ((84, 84, 1), "atari"),
    ((210, 160, 3), "atari"),
    ((84, 60, 3), "grid"),
    ((21, 21, 3), "grid"),
    ((12, 12, 3), "grid"),
    ((8,), "mlp"),
])
def test_resolve_torso_kind_auto(shape, expected):
  assert torsos.resolve_torso_kind(shape) == expected


@pytest.mark.parametrize("kind, conv_only, expected_type", [
    ("atari", False, torsos.AtariTorso),
    ("atari", True, torsos.AtariConvStack),
    ("grid", False, torsos.GridTorso),
    ("grid", True, torsos.GridTorso),
    ("auto", False, torsos.AtariTorso),
])
def test_make_torso_builds_the_requested_module(kind, conv_only,
                                                expected_type):
  built = []

  def forward(x):
    module = torsos.make_torso((84, 84, 1), kind, conv_only=conv_only)
    built.append(module)
    return x

  hk.transform(forward).init(jax.random.PRNGKey(0), jnp.zeros(()))
  assert type(built[0]) is expected_type


def test_make_torso_conv_only_grid_has_no_dense_layer():
  net = _transform(lambda: torsos.make_torso((12, 12, 3), conv_only=True))
  params = jax.eval_shape(net.init, jax.random.PRNGKey(0),
                          jnp.zeros((1, 12, 12, 3)))
  assert sorted(params) == ["grid_torso/conv_0", "grid_torso/conv_1"]


@pytest.mark.parametrize("shape, kind, match", [
    ((84, 84), "auto", r"\[D\] \(vectors\) or \[H, W, C\].*\(84, 84\)"),
    ((2, 3, 4, 5), "auto", r"\[H, W, C\]"),
    ((12, 12, 3), "atari", r"at least 36x36, got observation_shape"),
    ((4, 4, 3), "grid", r"at least 5x5"),
    ((12, 12, 3), "mlp", r"mlp torso needs observation_shape \[D\]"),
    ((8,), "grid", r"grid torso needs observation_shape \[H, W, C\]"),
    ((8,), "resnet", r"unknown torso kind 'resnet'"),
])
def test_resolve_torso_kind_errors(shape, kind, match):
  with pytest.raises(ValueError, match=match):
    torsos.resolve_torso_kind(shape, kind)


def test_mlp_torso_flattens_a_declared_binary_grid():
  """bsuite DeepSea's one-hot [N, N] grid: the MLP sees N * N inputs."""
  binary = ngu_types.ObservationEncoding("binary")
  assert torsos.resolve_torso_kind((6, 6), "mlp", binary) == "mlp"
  net = _transform(lambda: torsos.make_torso((6, 6), "mlp", encoding=binary,
                                             mlp_hidden_sizes=(5,)))
  x = np.zeros((3, 6, 6), np.float32)
  x[np.arange(3), [0, 2, 5], [0, 1, 5]] = 1.
  params = net.init(jax.random.PRNGKey(0), x)
  assert params["mlp_torso/linear_0"]["w"].shape == (36, 5)
  out = net.apply(params, x)
  w, b = (params["mlp_torso/linear_0"][k] for k in ("w", "b"))
  np.testing.assert_allclose(
      out, np.maximum(x.reshape(3, 36) @ np.asarray(w) + np.asarray(b), 0.),
      rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("module_fn, x, match", [
    (torsos.AtariTorso, np.zeros((84, 84, 1), np.float32),
     r"AtariConvStack: `observation` must have rank 4, got shape "
     r"\(84, 84, 1\)"),
    (torsos.AtariTorso, np.zeros((1, 30, 84, 1), np.float32),
     r"at least 36x36.*got 30x84"),
    (torsos.GridTorso, np.zeros((1, 12, 12, 3), np.int32),
     r"uint8 \(scaled by 1/255\) or floating point, got dtype int32"),
    (torsos.MLPTorso, np.zeros((1, 2, 3), np.float32),
     r"MLPTorso: `observation` must have rank 2"),
])
def test_module_input_errors(module_fn, x, match):
  net = _transform(module_fn)
  with pytest.raises(ValueError, match=match):
    net.init(jax.random.PRNGKey(0), x)


def test_check_observation_batch():
  good = np.zeros((2, 12, 12, 3), np.float32)
  torsos.check_observation_batch(good, (12, 12, 3), "obs", "here")
  with pytest.raises(ValueError,
                     match=r"here: `obs` must have shape \[\?, 12, 12, 3\], "
                     r"got \(2, 12, 12, 1\)"):
    torsos.check_observation_batch(good[..., :1], (12, 12, 3), "obs", "here")
  bad = good.copy()
  bad[1, 3, 3, 0] = np.nan
  with pytest.raises(ValueError,
                     match=r"`obs` contains NaN or inf in lane\(s\) \[1\]"):
    torsos.check_observation_batch(bad, (12, 12, 3), "obs", "here")
  with pytest.raises(ValueError,
                     match=r"uint8 or floating point, got dtype bool"):
    torsos.check_observation_batch(good.astype(bool), (12, 12, 3), "obs",
                                   "here")


# --- Observation encodings (ngu_jax.types.ObservationEncoding) -------------

_MINIGRID = ngu_types.symbolic((11, 6, 3))


def _encode(jit, encoding):
  fn = functools.partial(torsos.encode_observation, encoding=encoding)
  return jax.jit(fn) if jit else fn


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("shape", [(3, 84, 84, 1), (2, 7, 7, 3), (4, 5)])
def test_pixels_encoding_is_the_old_scaling_bit_for_bit(jit, shape):
  x = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)

  def old_formula(obs):  # The former `scale_observation` path, verbatim.
    return obs.astype(jnp.float32) / 255.0

  # Compared on the same input under the same transformation: XLA may
  # compile the division into a multiplication, whose results differ from
  # numpy's in the last bit (as they always did).
  for obs in (x, jnp.asarray(x)):
    old = np.asarray((jax.jit(old_formula) if jit else old_formula)(obs))
    np.testing.assert_allclose(old, x.astype(np.float32) / np.float32(255),
                               rtol=1e-6)
    for encoding in (None, ngu_types.PIXELS):
      out = np.asarray(_encode(jit, encoding)(obs))
      assert out.dtype == np.float32
      np.testing.assert_array_equal(out, old)
  # Floats pass as they are, any float dtype.
  f = np.random.default_rng(1).normal(size=shape).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(_encode(jit, None)(f)), f)


@pytest.mark.parametrize("jit", [False, True])
def test_pixels_torsos_unchanged_bit_for_bit(jit):
  # The same parameters give the same features with the encoding left out
  # (the previous API) and with ObservationEncoding("pixels").
  x = np.random.default_rng(0).integers(0, 256, (2, 12, 12, 3), np.uint8)
  outs = []
  for kwargs in ({}, {"encoding": ngu_types.PIXELS}):
    net = _transform(lambda kw=kwargs: torsos.GridTorso(16, **kw))
    shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0), x)
    params = helpers.random_params(shapes)
    apply = jax.jit(net.apply) if jit else net.apply
    outs.append(np.asarray(apply(params, x)))
  np.testing.assert_array_equal(outs[0], outs[1])


def _numpy_one_hot(x, num_values):
  """Hand-written reference: per channel one-hot, concatenated."""
  out = np.zeros(x.shape[:-1] + (sum(num_values),), np.float32)
  offset = 0
  for c, n in enumerate(num_values):
    for code in range(n):
      out[..., offset + code] = (x[..., c] == code)
    offset += n
  return out


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.int32])
def test_symbolic_encoding_matches_numpy_one_hot(jit, dtype):
  rng = np.random.default_rng(0)
  x = np.stack([rng.integers(0, n, (4, 7, 7)) for n in (11, 6, 3)],
               axis=-1).astype(dtype)
  out = np.asarray(_encode(jit, _MINIGRID)(x))
  assert out.shape == (4, 7, 7, 20) and out.dtype == np.float32
  np.testing.assert_array_equal(out, _numpy_one_hot(x, (11, 6, 3)))
  # A hand-checked cell: object 10 (agent), colour 0, state 2.
  cell = np.asarray(_encode(jit, _MINIGRID)(
      np.array([[[[10, 0, 2]]]], dtype)))[0, 0, 0]
  expected = np.zeros(20, np.float32)
  expected[[10, 11 + 0, 17 + 2]] = 1
  np.testing.assert_array_equal(cell, expected)


@pytest.mark.parametrize("jit", [False, True])
def test_symbolic_scalars_and_grids_get_a_channel_axis(jit):
  # FrozenLake-like scalar codes [B] -> one-hot [B, n].
  out = np.asarray(_encode(jit, ngu_types.symbolic((4,)))(
      np.array([0, 3, 1], np.int32)))
  np.testing.assert_array_equal(out, np.eye(4, dtype=np.float32)[[0, 3, 1]])
  # A grid of codes [B, H, W] -> [B, H, W, n].
  grid = np.array([[[0, 1], [2, 0]]], np.int32)
  out = np.asarray(_encode(jit, ngu_types.symbolic((3,)))(grid))
  np.testing.assert_array_equal(out, np.eye(3, dtype=np.float32)[grid])


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", [bool, np.int32, np.float32])
def test_binary_grid_gets_a_channel_axis(jit, dtype):
  x = np.random.default_rng(0).integers(0, 2, (3, 10, 10)).astype(dtype)
  out = np.asarray(_encode(jit, ngu_types.BINARY)(x))
  assert out.shape == (3, 10, 10, 1) and out.dtype == np.float32
  np.testing.assert_array_equal(out[..., 0], x.astype(np.float32))
  # [H, W, C] grids (MinAtar) keep their shape.
  x = np.ones((2, 10, 10, 4), dtype)
  assert _encode(jit, ngu_types.BINARY)(x).shape == (2, 10, 10, 4)


@pytest.mark.parametrize("jit", [False, True])
def test_features_are_used_as_they_are(jit):
  x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
  np.testing.assert_array_equal(
      np.asarray(_encode(jit, ngu_types.FEATURES)(x)), x)
  ints = np.array([[1, 9, 3, 4]], np.int32)  # FourRooms-misc: not scaled.
  np.testing.assert_array_equal(
      np.asarray(_encode(jit, ngu_types.FEATURES)(ints)),
      ints.astype(np.float32))
  assert _encode(jit, ngu_types.FEATURES)(np.zeros(3, np.float32)).shape == (
      3, 1)


@pytest.mark.parametrize("encoding, x, match", [
    (ngu_types.PIXELS, np.zeros((1, 4), bool),
     r"uint8 or floating point, got dtype bool"),
    (ngu_types.PIXELS, np.zeros((1, 4), np.int32),
     r"uint8 or floating point, got dtype int32"),
    (_MINIGRID, np.zeros((1, 7, 7, 3), np.float32),
     r"integer codes for the 'symbolic' observation encoding, got dtype "
     r"float32"),
    (_MINIGRID, np.zeros((1, 7, 7, 2), np.uint8),
     r"'symbolic' encoding has 3 channel\(s\)"),
])
def test_encode_observation_errors(encoding, x, match):
  with pytest.raises(ValueError, match=match):
    torsos.encode_observation(x, encoding)


@pytest.mark.parametrize("shape, encoding, kind", [
    ((10, 10), ngu_types.BINARY, "grid"),  # DeepSea: [10, 10, 1].
    ((10, 10, 4), ngu_types.BINARY, "grid"),  # MinAtar.
    ((7, 7, 3), _MINIGRID, "grid"),
    ((), ngu_types.symbolic((16,)), "mlp"),  # FrozenLake: one-hot [16].
    ((4,), ngu_types.FEATURES, "mlp"),  # CartPole.
    ((84, 84, 1), ngu_types.FEATURES, "atari"),  # Whitened Atari frames.
    ((84, 84), ngu_types.BINARY, "atari"),
])
def test_resolve_torso_kind_on_the_encoded_shape(shape, encoding, kind):
  assert torsos.resolve_torso_kind(shape, "auto", encoding) == kind


@pytest.mark.parametrize("shape, encoding, match", [
    # Pixels are not reshaped: a [H, W] image still needs its channel axis.
    ((10, 10), None, r"must be \[D\] \(vectors\) or \[H, W, C\]"),
    ((7, 7, 3), ngu_types.symbolic((11, 6)),
     r"one `num_values` entry per channel"),
    ((4, 4), ngu_types.BINARY,
     r"grid torso needs images of at least 5x5, got observation_shape "
     r"\(4, 4\) \(encoded as 'binary': \(4, 4, 1\)\)"),
    ((2, 3, 4, 5), ngu_types.FEATURES, r"encoded as 'features' must have"),
])
def test_resolve_torso_kind_encoding_errors(shape, encoding, match):
  with pytest.raises(ValueError, match=match):
    torsos.resolve_torso_kind(shape, "auto", encoding)


@pytest.mark.parametrize("jit", [False, True])
def test_symbolic_grid_torso_matches_one_hot_floats(jit):
  # The symbolic torso is the grid torso on the numpy one-hot input.
  rng = np.random.default_rng(0)
  x = np.stack([rng.integers(0, n, (2, 7, 7)) for n in (11, 6, 3)],
               axis=-1).astype(np.uint8)
  symbolic = _transform(lambda: torsos.make_torso((7, 7, 3), "grid",
                                                  encoding=_MINIGRID))
  plain = _transform(lambda: torsos.GridTorso())
  params = helpers.random_params(
      jax.eval_shape(symbolic.init, jax.random.PRNGKey(0), x))
  apply = jax.jit(symbolic.apply) if jit else symbolic.apply
  np.testing.assert_allclose(
      np.asarray(apply(params, x)),
      np.asarray(plain.apply(params, _numpy_one_hot(x, (11, 6, 3)))),
      rtol=1e-6, atol=1e-6)


def test_minigrid_torso_output_norm_is_order_one():
  # Real MiniGrid codes (random DoorKey-5x5 episodes) through the grid
  # torso with Haiku's own initialisers. Measured (5 seeds, dense 256): mean
  # feature norm 1.6 one-hot encoded vs 0.016 when the codes were scaled as
  # pixels (codes / 255), which left the networks all but blind to them.
  from ngu_jax import envs  # pylint: disable=g-import-not-at-top
  with envs.make("minigrid/MiniGrid-DoorKey-5x5-v0", 8, seed=0) as env:
    encoding = env.observation_encoding()
    obs = [env.reset().observation]
    rng = np.random.default_rng(0)
    for _ in range(10):
      obs.append(env.step(rng.integers(0, 7, 8).astype(np.int32)).observation)
  x = np.concatenate(obs)
  assert encoding == _MINIGRID

  def norm(enc):
    net = _transform(lambda: torsos.make_torso((7, 7, 3), "grid",
                                               encoding=enc))
    params = net.init(jax.random.PRNGKey(0), x[:1])
    return float(np.linalg.norm(np.asarray(net.apply(params, x)),
                                axis=-1).mean())

  symbolic, pixels = norm(encoding), norm(ngu_types.PIXELS)
  assert 0.3 < symbolic < 10, symbolic
  assert pixels < 0.05, pixels


@pytest.mark.parametrize("jit", [False, True])
def test_check_observation_batch_with_encodings(jit):
  codes = np.zeros((3, 7, 7, 3), np.uint8)
  codes[..., 0] = 10
  codes[..., 1] = 5
  codes[..., 2] = 2

  def check(x, encoding=_MINIGRID):
    def fn(x):
      torsos.check_observation_batch(x, x.shape[1:], "obs", "here", encoding)
      return x
    out = jax.jit(fn)(x) if jit else fn(x)
    jax.block_until_ready(out)

  check(codes)  # The largest valid code of every channel.
  bad = codes.copy()
  bad[2, 0, 0, 1] = 6  # Colour 6 does not exist.
  # Under jit the ValueError is raised by a host callback and re-raised by
  # JAX as a runtime error whose message contains ours.
  error = ValueError if not jit else Exception
  with pytest.raises(error, match=r"`obs` has codes outside \[0, "
                     r"num_values\[c\]\) \(num_values \(11, 6, 3\) per channel "
                     r"c\) in lane\(s\) \[2\]"):
    check(bad)
  # One channel without a channel axis (a grid of codes).
  check(np.full((2, 4, 4), 4, np.int32), ngu_types.symbolic((5,)))
  with pytest.raises(error, match=r"lane\(s\) \[1\]"):
    check(np.array([[0], [-1]], np.int32)[:, 0], ngu_types.symbolic((5,)))
  # Binary grids may be bool; pixels may not.
  check(np.zeros((2, 10, 10), bool), ngu_types.BINARY)
  with pytest.raises(ValueError, match="got dtype bool"):
    check(np.zeros((2, 10, 10), bool), ngu_types.PIXELS)
  nan = np.zeros((2, 4), np.float32)
  nan[1, 0] = np.nan
  with pytest.raises(error, match=r"NaN or inf in lane\(s\) \[1\]"):
    check(nan, ngu_types.FEATURES)
