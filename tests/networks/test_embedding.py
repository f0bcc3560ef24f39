"""Tests for ngu_jax.networks.embedding."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ngu_jax import types as ngu_types
from ngu_jax.losses import inverse_dynamics
from ngu_jax.networks import embedding
from tests import helpers

# name -> (observation_shape, num_actions, torso kind resolved by "auto").
_CASES = {
    "grid": ((12, 12, 3), 4),
    "atari": ((36, 36, 1), 3),  # Smallest image the Atari stack accepts.
    "mlp": ((6,), 5),
}


@functools.lru_cache(maxsize=None)
def _net_and_params(case, embedding_activation=None):
  obs_shape, num_actions = _CASES[case]
  net = embedding.make_embedding_network(
      obs_shape, num_actions, embedding_activation=embedding_activation)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  return net, helpers.random_params(shapes)


def _observations(obs_shape, batch, seed):
  rng = np.random.default_rng(seed)
  return rng.integers(0, 256, size=(batch,) + obs_shape).astype(np.uint8)


def _maybe_jit(fn, jit):
  return jax.jit(fn) if jit else fn


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", sorted(_CASES))
def test_output_shapes(case, jit):
  net, params = _net_and_params(case)
  obs_shape, num_actions = _CASES[case]
  assert net.observation_shape == obs_shape
  assert net.num_actions == num_actions and net.embedding_dim == 32
  obs_t = _observations(obs_shape, 3, seed=0)
  obs_tp1 = _observations(obs_shape, 3, seed=1)
  emb = _maybe_jit(net.embed, jit)(params, obs_t)
  logits = _maybe_jit(net.inverse_logits, jit)(params, obs_t, obs_tp1)
  assert emb.shape == (3, 32) and emb.dtype == jnp.float32
  assert logits.shape == (3, num_actions)
  assert np.all(np.isfinite(emb)) and np.all(np.isfinite(logits))


def test_parameter_layout_is_siamese():
  """One embedder (f) shared by both observations, then h on [2 * 32]."""
  net, params = _net_and_params("grid")
  shapes = jax.tree_util.tree_map(lambda p: p.shape, params)
  assert shapes == {
      "embedder/grid_torso/conv_0": {"w": (3, 3, 3, 16), "b": (16,)},
      "embedder/grid_torso/conv_1": {"w": (3, 3, 16, 32), "b": (32,)},
      "embedder/embedding": {"w": (8 * 8 * 32, 32), "b": (32,)},
      "inverse_dynamics_head/hidden": {"w": (64, 128), "b": (128,)},
      "inverse_dynamics_head/logits": {"w": (128, 4), "b": (4,)},
  }
  assert net.embedding_dim == 32


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", sorted(_CASES))
def test_inverse_logits_is_head_of_both_embeddings(case, jit):
  """logits = h(f(x_t), f(x_tp1)), in that order, with a numpy head."""
  net, params = _net_and_params(case)
  obs_shape, _ = _CASES[case]
  obs_t = _observations(obs_shape, 4, seed=2)
  obs_tp1 = _observations(obs_shape, 4, seed=3)
  embed = _maybe_jit(net.embed, jit)
  e_t = np.asarray(embed(params, obs_t), np.float64)
  e_tp1 = np.asarray(embed(params, obs_tp1), np.float64)
  hidden = params["inverse_dynamics_head/hidden"]
  out = params["inverse_dynamics_head/logits"]
  h = np.maximum(np.concatenate([e_t, e_tp1], -1) @ hidden["w"] +
                 hidden["b"], 0.0)
  expected = h @ out["w"] + out["b"]
  logits = _maybe_jit(net.inverse_logits, jit)(params, obs_t, obs_tp1)
  np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
  # The order of the two observations matters.
  swapped = _maybe_jit(net.inverse_logits, jit)(params, obs_tp1, obs_t)
  assert not np.allclose(swapped, logits)


@pytest.mark.parametrize("jit", [False, True])
def test_mlp_embedding_matches_numpy(jit):
  net, params = _net_and_params("mlp")
  x = np.random.default_rng(4).normal(size=(3, 6)).astype(np.float32)
  h = x.astype(np.float64)
  for i in range(2):
    layer = params[f"embedder/mlp_torso/linear_{i}"]
    h = np.maximum(h @ layer["w"] + layer["b"], 0.0)
  out = params["embedder/embedding"]
  expected = h @ out["w"] + out["b"]
  np.testing.assert_allclose(_maybe_jit(net.embed, jit)(params, x), expected,
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_embedding_activation(jit):
  obs = _observations((12, 12, 3), 8, seed=5)
  linear_net, params = _net_and_params("grid")
  relu_net, relu_params = _net_and_params("grid", "relu")
  linear = np.asarray(_maybe_jit(linear_net.embed, jit)(params, obs))
  relu = np.asarray(_maybe_jit(relu_net.embed, jit)(relu_params, obs))
  assert linear.min() < 0.0  # The default output is linear.
  np.testing.assert_allclose(relu, np.maximum(linear, 0.0), rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_uint8_equals_float_over_255(jit):
  net, params = _net_and_params("grid")
  obs = _observations((12, 12, 3), 3, seed=6)
  embed = _maybe_jit(net.embed, jit)
  np.testing.assert_allclose(embed(params, obs),
                             embed(params, obs.astype(np.float32) / 255.0),
                             rtol=1e-5, atol=1e-6)


def test_init_is_deterministic_and_finite():
  net = embedding.make_embedding_network((12, 12, 3), 4)
  params = net.init(jax.random.PRNGKey(0))
  again = net.init(jax.random.PRNGKey(0))
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  assert jax.tree_util.tree_map(lambda p: p.shape, params) == (
      jax.tree_util.tree_map(lambda s: s.shape, shapes))
  for a, b in zip(jax.tree_util.tree_leaves(params),
                  jax.tree_util.tree_leaves(again)):
    np.testing.assert_array_equal(a, b)
  logits = net.inverse_logits(params, _observations((12, 12, 3), 2, 0),
                              _observations((12, 12, 3), 2, 1))
  assert np.all(np.isfinite(logits))


def test_bad_observation_shapes():
  net, params = _net_and_params("grid")
  good = _observations((12, 12, 3), 2, seed=0)
  with pytest.raises(ValueError,
                     match=r"networks.embedding.embed: `observation` must have "
                     r"shape \[\?, 12, 12, 3\], got \(2, 12, 12, 1\)"):
    net.embed(params, good[..., :1])
  with pytest.raises(ValueError, match=r"must have shape \[\?, 12, 12, 3\], "
                     r"got \(12, 12, 3\)"):
    net.embed(params, good[0])
  with pytest.raises(ValueError, match=r"`observation_tp1` must have shape "
                     r"\[\?, 12, 12, 3\], got \(2, 11, 12, 3\)"):
    net.inverse_logits(params, good, good[:, 1:])
  with pytest.raises(ValueError, match=r"same batch size, got 2 and 1"):
    net.inverse_logits(params, good, good[:1])
  with pytest.raises(ValueError, match=r"uint8 or floating point, got dtype "
                     r"int32"):
    net.embed(params, good.astype(np.int32))


@pytest.mark.parametrize("jit", [False, True])
def test_nan_observation_is_rejected(jit):
  net, params = _net_and_params("grid")
  obs = np.zeros((3, 12, 12, 3), np.float32)
  obs[2, 0, 0, 1] = np.nan
  with pytest.raises(Exception, match=r"`observation_t` contains NaN or inf "
                     r"in lane\(s\) \[2\]"):
    _maybe_jit(net.inverse_logits, jit)(params, obs,
                                        np.zeros_like(obs)).block_until_ready()


@pytest.mark.parametrize("kwargs, match", [
    (dict(observation_shape=(12, 12), num_actions=4),
     r"\[D\] \(vectors\) or \[H, W, C\]"),
    (dict(observation_shape=(12, 12, 3), num_actions=4, torso="atari"),
     r"at least 36x36"),
    (dict(observation_shape=(12, 12, 3), num_actions=0), r"`num_actions` "
     r"must be >= 1, got 0"),
    (dict(observation_shape=(12, 12, 3), num_actions=4,
          embedding_activation="tanh"), r"embedding_activation must be one of"),
])
def test_bad_construction(kwargs, match):
  with pytest.raises(ValueError, match=match):
    embedding.make_embedding_network(**kwargs)


_MOVES = np.array([[0, -1], [0, 1], [-1, 0], [1, 0]])  # left right up down


def _maze_frames(rng, positions):
  """12x12x3 frames: agent pixel (channel 0) inside a flickering wall.

  The border wall's colour (channels 1, 2) is redrawn at every frame, a
  distraction the agent does not control (as in Disco Maze, NGU Sec. 4.1).
  """
  n = len(positions)
  frames = np.zeros((n, 12, 12, 3), np.uint8)
  wall = np.zeros((12, 12), bool)
  wall[[0, -1], :] = True
  wall[:, [0, -1]] = True
  frames[:, wall, 1:] = rng.integers(0, 256, size=(n, 1, 2), dtype=np.uint8)
  frames[np.arange(n), positions[:, 0], positions[:, 1], 0] = 255
  return frames


def _transitions(rng, n):
  actions = rng.integers(0, 4, size=n)
  positions = rng.integers(2, 10, size=(n, 2))
  return (_maze_frames(rng, positions),
          _maze_frames(rng, positions + _MOVES[actions]),
          actions.astype(np.int32))


@pytest.mark.slow
def test_inverse_dynamics_training_learns_the_action():
  """100 Adam steps: the loss falls well below log(4) and f is trained."""
  rng = np.random.default_rng(0)
  net = embedding.make_embedding_network((12, 12, 3), 4)
  params = net.init(jax.random.PRNGKey(0))
  optimizer = optax.adam(1e-3)  # Table 7 (Disco Maze) learning rate.
  opt_state = optimizer.init(params)

  def loss_fn(p, obs_t, obs_tp1, actions):
    logits = net.inverse_logits(p, obs_t, obs_tp1)
    return inverse_dynamics.inverse_dynamics_loss(logits, actions, p)

  @jax.jit
  def step(p, state, obs_t, obs_tp1, actions):
    grads = jax.grad(lambda q: loss_fn(q, obs_t, obs_tp1, actions)[0])(p)
    updates, state = optimizer.update(grads, state, p)
    return optax.apply_updates(p, updates), state

  eval_data = _transitions(rng, 256)
  initial_loss, _ = loss_fn(params, *eval_data)
  trained = params
  for _ in range(100):
    trained, opt_state = step(trained, opt_state, *_transitions(rng, 64))
  final_loss, metrics = jax.jit(loss_fn)(trained, *eval_data)

  assert abs(float(initial_loss) - np.log(4)) < 0.1
  assert float(final_loss) < 0.5 * np.log(4)
  assert float(metrics["accuracy"]) > 0.75
  # Gradients reached f: its conv kernels and output layer moved.
  for name in ("embedder/grid_torso/conv_0", "embedder/embedding"):
    assert not np.allclose(trained[name]["w"], params[name]["w"], atol=1e-4)


# --- Observation encodings ---------------------------------------------------


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("obs_shape, encoding, make_obs", [
    ((7, 7, 3), ngu_types.symbolic((11, 6, 3)),
     lambda rng, b: np.stack([rng.integers(0, n, (b, 7, 7))
                              for n in (11, 6, 3)], -1).astype(np.uint8)),
    ((10, 10), ngu_types.BINARY,
     lambda rng, b: rng.integers(0, 2, (b, 10, 10)).astype(np.float32)),
    ((4,), ngu_types.FEATURES,
     lambda rng, b: rng.normal(size=(b, 4)).astype(np.float32)),
], ids=["minigrid", "deepsea", "cartpole"])
def test_encodings(jit, obs_shape, encoding, make_obs):
  net = embedding.make_embedding_network(obs_shape, 3, 8,
                                         encoding=encoding)
  assert net.encoding == encoding and net.observation_shape == obs_shape
  params = helpers.random_params(jax.eval_shape(net.init,
                                                jax.random.PRNGKey(0)))
  rng = np.random.default_rng(0)
  x_t, x_tp1 = make_obs(rng, 4), make_obs(rng, 4)
  e = _maybe_jit(net.embed, jit)(params, x_t)
  assert e.shape == (4, 8) and np.isfinite(np.asarray(e)).all()
  logits = _maybe_jit(net.inverse_logits, jit)(params, x_t, x_tp1)
  assert logits.shape == (4, 3)


def test_symbolic_codes_out_of_range_rejected_eagerly():
  encoding = ngu_types.symbolic((11, 6, 3))
  net = embedding.make_embedding_network((7, 7, 3), 3, 8, encoding=encoding)
  params = helpers.random_params(jax.eval_shape(net.init,
                                                jax.random.PRNGKey(0)))
  codes = np.zeros((2, 7, 7, 3), np.uint8)
  codes[1, 3, 3, 2] = 3  # Door state 3 does not exist.
  with pytest.raises(ValueError, match=r"`observation` has codes outside "
                     r".* in lane\(s\) \[1\]"):
    net.embed(params, codes)
  # Under jit the Q-network checks codes (the actor vmaps f over lanes).
  assert jax.jit(net.embed)(params, codes).shape == (2, 8)
