"""Tests for ngu_jax.networks.torsos."""

import functools

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
