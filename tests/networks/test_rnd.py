"""Tests for ngu_jax.networks.rnd."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import types as ngu_types
from ngu_jax.networks import rnd
from tests import helpers

_CASES = {
    "grid": (12, 12, 3),
    "atari": (36, 36, 1),  # Smallest image the Atari stack accepts.
    "mlp": (6,),
}


@functools.lru_cache(maxsize=None)
def _net_and_params(case):
  net = rnd.make_rnd_networks(_CASES[case])
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  return net, rnd.RNDParams(
      target=helpers.random_params(shapes.target, 0),
      predictor=helpers.random_params(shapes.predictor, 1))


def _observations(obs_shape, batch, seed):
  rng = np.random.default_rng(seed)
  return rng.integers(0, 256, size=(batch,) + obs_shape).astype(np.uint8)


def _maybe_jit(fn, jit):
  return jax.jit(fn) if jit else fn


def _shapes(tree):
  return jax.tree_util.tree_map(lambda p: tuple(p.shape), tree)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", sorted(_CASES))
def test_output_shapes(case, jit):
  net, params = _net_and_params(case)
  assert net.observation_shape == _CASES[case] and net.output_dim == 128
  obs = _observations(_CASES[case], 3, seed=0)
  target = _maybe_jit(net.target, jit)(params.target, obs)
  predicted = _maybe_jit(net.predictor, jit)(params.predictor, obs)
  assert target.shape == (3, 128) and predicted.shape == (3, 128)
  assert np.all(np.isfinite(target)) and np.all(np.isfinite(predicted))


def test_parameter_layout():
  """Both networks: conv stack -> Linear(128), no dense layer in between."""
  net, _ = _net_and_params("grid")
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  expected = lambda name: {  # pylint: disable=g-long-lambda
      f"{name}_torso/conv_0": {"w": (3, 3, 3, 16), "b": (16,)},
      f"{name}_torso/conv_1": {"w": (3, 3, 16, 32), "b": (32,)},
      f"{name}_output": {"w": (8 * 8 * 32, 128), "b": (128,)},
  }
  assert _shapes(shapes.target) == expected("target")
  assert _shapes(shapes.predictor) == expected("predictor")


def test_predictor_hidden_layers_option():
  net = rnd.make_rnd_networks((6,), output_dim=16,
                              predictor_hidden_sizes=(64, 32),
                              mlp_hidden_sizes=(8,))
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  assert _shapes(shapes.target) == {
      "target_torso/linear_0": {"w": (6, 8), "b": (8,)},
      "target_output": {"w": (8, 16), "b": (16,)},
  }
  assert _shapes(shapes.predictor) == {
      "predictor_torso/linear_0": {"w": (6, 8), "b": (8,)},
      "predictor_hidden_0": {"w": (8, 64), "b": (64,)},
      "predictor_hidden_1": {"w": (64, 32), "b": (32,)},
      "predictor_output": {"w": (32, 16), "b": (16,)},
  }


def test_init_gives_independent_target_and_predictor():
  net = rnd.make_rnd_networks((12, 12, 3))
  params = net.init(jax.random.PRNGKey(0))
  again = net.init(jax.random.PRNGKey(0))
  assert isinstance(params, rnd.RNDParams)
  w_target = params.target["target_output"]["w"]
  w_predictor = params.predictor["predictor_output"]["w"]
  assert w_target.shape == w_predictor.shape
  assert not np.allclose(w_target, w_predictor)
  np.testing.assert_array_equal(w_target, again.target["target_output"]["w"])
  obs = _observations((12, 12, 3), 4, seed=1)
  error = np.sum((net.predictor(params.predictor, obs) -
                  net.target(params.target, obs))**2, axis=-1)
  assert np.all(error > 0.0)


@pytest.mark.parametrize("jit", [False, True])
def test_mlp_target_matches_numpy(jit):
  net, params = _net_and_params("mlp")
  x = np.random.default_rng(2).normal(size=(3, 6)).astype(np.float32)
  p = params.target
  h = x.astype(np.float64)
  for i in range(2):
    layer = p[f"target_torso/linear_{i}"]
    h = np.maximum(h @ layer["w"] + layer["b"], 0.0)
  expected = h @ p["target_output"]["w"] + p["target_output"]["b"]
  np.testing.assert_allclose(_maybe_jit(net.target, jit)(p, x), expected,
                             rtol=1e-5, atol=1e-6)


def test_bad_inputs():
  net, params = _net_and_params("grid")
  obs = _observations((12, 12, 3), 2, seed=0)
  with pytest.raises(ValueError, match=r"networks.rnd.target: `observation` "
                     r"must have shape \[\?, 12, 12, 3\], got \(2, 12, 12\)"):
    net.target(params.target, obs[..., 0])
  with pytest.raises(ValueError, match=r"networks.rnd.predictor: .*got "
                     r"\(2, 12, 12, 4\)"):
    net.predictor(params.predictor, np.zeros((2, 12, 12, 4), np.uint8))
  with pytest.raises(ValueError, match=r"\[D\] \(vectors\) or \[H, W, C\]"):
    rnd.make_rnd_networks((12, 12))
  with pytest.raises(ValueError, match=r"sizes must be >= 1"):
    rnd.make_rnd_networks((6,), output_dim=0)


@pytest.mark.parametrize("jit", [False, True])
def test_nan_observation_is_rejected(jit):
  net, params = _net_and_params("mlp")
  obs = np.zeros((4, 6), np.float32)
  obs[1, 2] = np.inf
  with pytest.raises(Exception, match=r"networks.rnd.predictor: `observation` "
                     r"contains NaN or inf in lane\(s\) \[1\]"):
    _maybe_jit(net.predictor, jit)(params.predictor, obs).block_until_ready()


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", ["target", "predictor"])
def test_both_networks_check_observations_in_their_own_name(name, jit):
  """g and ĝ share one checked apply; each names itself in its errors."""
  net, params = _net_and_params("mlp")
  apply, p = getattr(net, name), getattr(params, name)
  assert apply.__name__ == name
  apply = _maybe_jit(apply, jit)
  obs = np.zeros((4, 6), np.float32)
  assert apply(p, obs).shape == (4, net.output_dim)
  with pytest.raises(ValueError, match=rf"networks.rnd.{name}: `observation` "
                     r"must have shape \[\?, 6\], got \(4, 5\)"):
    apply(p, obs[:, :5])
  obs[2, 0] = np.nan
  with pytest.raises(Exception, match=rf"networks.rnd.{name}: `observation` "
                     r"contains NaN or inf in lane\(s\) \[2\]"):
    apply(p, obs).block_until_ready()


# Running observation statistics (RND paper, Sec. 2.4).


@pytest.mark.parametrize("jit", [False, True])
def test_normalizer_matches_numpy_over_all_batches(jit):
  rng = np.random.default_rng(3)
  shape = (3, 2)
  # A large offset makes the naive E[x^2] - E[x]^2 lose ~all precision in
  # float32; the parallel merge stays accurate.
  batches = [1000.0 + rng.normal(size=(b,) + shape) * rng.uniform(0.5, 2.0)
             for b in (5, 1, 8, 3)]
  batches = [b.astype(np.float32) for b in batches]
  update = _maybe_jit(rnd.observation_normalizer_update, jit)
  stats = rnd.observation_normalizer_init(shape)
  seen = []
  for batch in batches:
    stats = update(stats, batch)
    seen.append(batch)
    all_obs = np.concatenate(seen).astype(np.float64)
    np.testing.assert_allclose(stats.mean, all_obs.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats.var, all_obs.var(0), rtol=2e-4)
    assert stats.count.dtype == jnp.float32
    assert float(stats.count) == len(all_obs)


def test_normalizer_init():
  stats = rnd.observation_normalizer_init((4, 4, 1))
  assert stats.mean.shape == (4, 4, 1) and stats.var.shape == (4, 4, 1)
  assert stats.mean.dtype == jnp.float32 and stats.var.dtype == jnp.float32
  np.testing.assert_array_equal(stats.mean, 0.0)
  np.testing.assert_array_equal(stats.var, 1.0)
  assert stats.count.shape == () and float(stats.count) == 0.0


@pytest.mark.parametrize("jit", [False, True])
def test_normalizer_accepts_uint8(jit):
  obs = _observations((5, 5, 2), 6, seed=4)
  update = _maybe_jit(rnd.observation_normalizer_update, jit)
  stats = update(rnd.observation_normalizer_init((5, 5, 2)), obs)
  np.testing.assert_allclose(stats.mean, obs.mean(0), rtol=1e-6)
  np.testing.assert_allclose(stats.var, obs.astype(np.float64).var(0),
                             rtol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_normalize_matches_numpy_and_clips(jit):
  rng = np.random.default_rng(5)
  history = rng.normal(2.0, 3.0, size=(50, 4)).astype(np.float32)
  stats = rnd.observation_normalizer_update(
      rnd.observation_normalizer_init((4,)), history)
  obs = np.array([[2.0, 2.0, 2.0, 2.0], [100.0, -100.0, 5.0, -1.0]],
                 np.float32)
  out = _maybe_jit(rnd.normalize_observation, jit)(stats, obs)
  expected = np.clip((obs - history.mean(0)) / history.std(0), -5.0, 5.0)
  assert out.dtype == jnp.float32
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
  assert out[1, 0] == 5.0 and out[1, 1] == -5.0
  out_clip_1 = _maybe_jit(functools.partial(rnd.normalize_observation,
                                            clip=1.0), jit)(stats, obs)
  np.testing.assert_allclose(out_clip_1, np.clip(expected, -1.0, 1.0),
                             rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_normalize_guards_zero_variance(jit):
  normalize = _maybe_jit(rnd.normalize_observation, jit)
  update = _maybe_jit(rnd.observation_normalizer_update, jit)
  obs = np.array([[0.0, 3.0, 7.0]], np.float32)
  # Before any update: mean 0, var 1, so only the clip applies.
  fresh = rnd.observation_normalizer_init((3,))
  np.testing.assert_array_equal(normalize(fresh, obs), [[0.0, 3.0, 5.0]])
  # After one observation the variance is exactly 0 everywhere.
  stats = update(fresh, obs)
  np.testing.assert_array_equal(stats.var, 0.0)
  out = np.asarray(normalize(stats, np.array([[0.0, 3.0, 7.0],
                                              [1.0, 2.0, 7.0]], np.float32)))
  assert np.all(np.isfinite(out))
  np.testing.assert_array_equal(out, [[0.0, 0.0, 0.0], [5.0, -5.0, 0.0]])


@pytest.mark.parametrize("jit", [False, True])
def test_normalizer_rejects_bad_observations(jit):
  stats = rnd.observation_normalizer_init((3,))
  with pytest.raises(ValueError, match=r"observation_normalizer_update: "
                     r"`observation` must have shape \[\?, 3\], got \(2, 4\)"):
    _maybe_jit(rnd.observation_normalizer_update, jit)(
        stats, np.zeros((2, 4), np.float32))
  with pytest.raises(ValueError, match=r"normalize_observation: `observation` "
                     r"must have shape \[\?, 3\], got \(3,\)"):
    _maybe_jit(rnd.normalize_observation, jit)(stats,
                                               np.zeros((3,), np.float32))
  bad = np.zeros((3, 3), np.float32)
  bad[2, 1] = np.nan
  with pytest.raises(Exception, match=r"`observation` contains NaN or inf in "
                     r"lane\(s\) \[2\]"):
    jax.block_until_ready(
        _maybe_jit(rnd.observation_normalizer_update, jit)(stats, bad))


# --- Observation encodings ---------------------------------------------------


@pytest.mark.parametrize("jit", [False, True])
def test_whitened_deepsea_grids_use_the_features_encoding(jit):
  # With RND's observation normalisation the networks take whitened floats
  # of the RAW shape ([B, 10, 10] for DeepSea): "features", never one-hot or
  # /255 again. The normaliser itself takes raw values of any encoding.
  raw = np.random.default_rng(0).integers(0, 2, (4, 10, 10)).astype(bool)
  stats = rnd.observation_normalizer_update(
      rnd.observation_normalizer_init((10, 10)), raw)
  white = _maybe_jit(rnd.normalize_observation, jit)(stats, raw)
  assert white.shape == (4, 10, 10) and white.dtype == jnp.float32
  net = rnd.make_rnd_networks((10, 10), 8, encoding=ngu_types.FEATURES)
  assert net.encoding == ngu_types.FEATURES
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  params = helpers.random_params(shapes.target)
  out = _maybe_jit(net.target, jit)(params, white)
  assert out.shape == (4, 8) and np.isfinite(np.asarray(out)).all()


@pytest.mark.parametrize("jit", [False, True])
def test_symbolic_rnd_without_normalisation(jit):
  # Without normalisation RND uses the environment's encoding: MiniGrid
  # codes are one-hot encoded, so g and g_hat equal the pixel networks on
  # the one-hot floats.
  encoding = ngu_types.symbolic((11, 6, 3))
  net = rnd.make_rnd_networks((7, 7, 3), 8, encoding=encoding)
  plain = rnd.make_rnd_networks((7, 7, 20), 8)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  params = helpers.random_params(shapes.predictor)
  rng = np.random.default_rng(0)
  codes = np.stack([rng.integers(0, n, (3, 7, 7)) for n in (11, 6, 3)],
                   axis=-1).astype(np.uint8)
  one_hot = np.concatenate([np.eye(n, dtype=np.float32)[codes[..., c]]
                            for c, n in enumerate((11, 6, 3))], axis=-1)
  np.testing.assert_allclose(
      np.asarray(_maybe_jit(net.predictor, jit)(params, codes)),
      np.asarray(plain.predictor(params, one_hot)), rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="integer codes"):
    net.predictor(params, codes.astype(np.float32))
