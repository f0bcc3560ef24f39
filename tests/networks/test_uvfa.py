"""Tests for ngu_jax.networks.uvfa (NGU Sec. 3, App. H.3)."""

import functools
import re

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import types as ngu_types
from ngu_jax.networks import uvfa
from tests import helpers

T, B, A, N = 5, 3, 3, 2
OBS = (4,)
LSTM, HIDDEN, MLP = 8, 8, (6,)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _maybe_jit(fn, jit):
  return jax.jit(fn) if jit else fn


@functools.lru_cache(maxsize=None)
def _net_and_params(obs_shape=OBS, seed=0):
  net = uvfa.make_uvfa_network(obs_shape, A, N, lstm_size=LSTM,
                               head_hidden=HIDDEN, mlp_hidden_sizes=MLP,
                               grid_output_size=8)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  return net, helpers.random_params(shapes, seed, bias_fan_in=4)


def _inputs(lead, seed=0, obs_shape=OBS):
  rng = np.random.default_rng(seed)
  if len(obs_shape) == 3:
    obs = rng.integers(0, 256, size=lead + obs_shape).astype(np.uint8)
  else:
    obs = rng.normal(size=lead + obs_shape).astype(np.float32)
  return uvfa.UVFAInputs(
      observation=obs,
      prev_action=rng.integers(0, A, size=lead).astype(np.int32),
      prev_extrinsic_reward=rng.normal(size=lead).astype(np.float32),
      prev_intrinsic_reward=rng.uniform(size=lead).astype(np.float32),
      mixture_index=rng.integers(0, N, size=lead).astype(np.int32))


def _random_state(batch, seed=1):
  rng = np.random.default_rng(seed)
  return uvfa.LSTMState(
      hidden=rng.normal(size=(batch, LSTM)).astype(np.float32),
      cell=rng.normal(size=(batch, LSTM)).astype(np.float32))


def _select(inputs, t):
  return jax.tree_util.tree_map(lambda x: x[t], inputs)


# ----------------------------------------------------------------------------
# Shapes and parameters.


@JIT
@pytest.mark.parametrize("obs_shape", [OBS, (5, 5, 2)], ids=["mlp", "grid"])
def test_output_shapes_and_dtypes(jit, obs_shape):
  net, params = _net_and_params(obs_shape)
  assert net.torso == ("mlp" if len(obs_shape) == 1 else "grid")
  q, state = _maybe_jit(net.apply, jit)(params, _inputs((B,), 0, obs_shape),
                                        net.initial_state(B))
  assert q.shape == (B, A) and q.dtype == jnp.float32
  assert state.hidden.shape == state.cell.shape == (B, LSTM)
  q_seq, final = _maybe_jit(net.unroll, jit)(
      params, _inputs((T, B), 0, obs_shape), net.initial_state(B),
      np.zeros((T, B), bool))
  assert q_seq.shape == (T, B, A) and q_seq.dtype == jnp.float32
  assert final.hidden.shape == final.cell.shape == (B, LSTM)
  assert np.all(np.isfinite(q_seq))


def test_init_and_parameter_layout():
  net = uvfa.make_uvfa_network(OBS, A, N, lstm_size=LSTM, head_hidden=HIDDEN,
                               mlp_hidden_sizes=MLP)
  params = net.init(jax.random.PRNGKey(0))
  shapes = jax.tree_util.tree_map(lambda p: p.shape, params)
  # LSTM input: torso features (6) + one-hot a (3) + r^e + r^i + one-hot j (2)
  # = 13, plus the recurrent hidden state (8); 4 gates of width 8.
  assert shapes == {
      "mlp_torso/linear_0": {"w": (4, 6), "b": (6,)},
      "lstm/linear": {"w": (6 + A + 2 + N + LSTM, 4 * LSTM), "b": (4 * LSTM,)},
      "dueling_head/value_hidden": {"w": (LSTM, HIDDEN), "b": (HIDDEN,)},
      "dueling_head/value": {"w": (HIDDEN, 1), "b": (1,)},
      "dueling_head/advantage_hidden": {"w": (LSTM, HIDDEN), "b": (HIDDEN,)},
      "dueling_head/advantage": {"w": (HIDDEN, A), "b": (A,)},
  }


def test_initial_state_is_zeros():
  net, _ = _net_and_params()
  state = net.initial_state(2)
  np.testing.assert_array_equal(state.hidden, np.zeros((2, LSTM)))
  np.testing.assert_array_equal(state.cell, np.zeros((2, LSTM)))


def test_atari_default_sizes():
  net = uvfa.make_uvfa_network((84, 84, 1), 18, 32)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  assert net.torso == "atari" and net.lstm_size == 512
  # 512 torso features + 18 + 2 + 32 extras + 512 recurrent.
  assert shapes["lstm/linear"]["w"].shape == (512 + 52 + 512, 2048)
  assert shapes["dueling_head/advantage"]["w"].shape == (512, 18)


# ----------------------------------------------------------------------------
# Extras and conditioning.


@JIT
def test_embed_extras_hand_checked(jit):
  inputs = uvfa.UVFAInputs(
      observation=None,
      prev_action=np.array([2, 0, -1], np.int32),
      prev_extrinsic_reward=np.array([1.5, -2., 0.], np.float32),
      prev_intrinsic_reward=np.array([0.25, 0., 0.], np.float32),
      mixture_index=np.array([1, 0, 1], np.int32))
  fn = functools.partial(uvfa.embed_extras, num_actions=3, num_mixtures=2)
  out = _maybe_jit(fn, jit)(inputs)  # observation=None: an empty pytree.
  #                a0  a1  a2  r^e   r^i  j0  j1
  expected = [[0., 0., 1., 1.5, 0.25, 0., 1.],
              [1., 0., 0., -2., 0., 1., 0.],
              [0., 0., 0., 0., 0., 0., 1.]]  # -1: episode start, no action.
  np.testing.assert_array_equal(out, expected)
  assert out.dtype == jnp.float32


def test_embed_extras_time_major():
  inputs = _inputs((T, B))
  out = uvfa.embed_extras(inputs, A, N)
  assert out.shape == (T, B, A + 2 + N)
  np.testing.assert_array_equal(out[..., :A].argmax(-1), inputs.prev_action)
  np.testing.assert_array_equal(out[..., A], inputs.prev_extrinsic_reward)
  np.testing.assert_array_equal(out[..., A + 1], inputs.prev_intrinsic_reward)
  np.testing.assert_array_equal(out[..., A + 2:].argmax(-1),
                                inputs.mixture_index)


@JIT
@pytest.mark.parametrize("field, value", [
    ("mixture_index", lambda x: 1 - x),
    ("prev_action", lambda x: (x + 1) % A),
    ("prev_extrinsic_reward", lambda x: x + 1.),
    ("prev_intrinsic_reward", lambda x: x + 1.),
])
def test_every_extra_input_changes_q(jit, field, value):
  """UVFA conditioning: Q(x, ., beta_j) depends on j and on the extras."""
  net, params = _net_and_params()
  inputs = _inputs((B,), seed=3)
  state = net.initial_state(B)
  apply = _maybe_jit(net.apply, jit)
  q, _ = apply(params, inputs, state)
  changed = inputs._replace(**{field: value(getattr(inputs, field))})
  q_changed, _ = apply(params, changed, state)
  assert np.all(np.abs(np.asarray(q) - np.asarray(q_changed)).max(-1) > 1e-4)


# ----------------------------------------------------------------------------
# Dueling head.


@JIT
def test_dueling_identity(jit):
  net, params = _net_and_params()
  q, value, _ = _maybe_jit(net.apply_with_value, jit)(
      params, _inputs((B,), seed=5), _random_state(B))
  assert value.shape == (B,)
  # Q = V + Adv - mean_a Adv  =>  mean_a (Q - V) = 0, while Q varies over a.
  np.testing.assert_allclose(np.mean(q - value[:, None], axis=-1),
                             np.zeros(B), atol=1e-6)
  assert np.all(np.ptp(np.asarray(q), axis=-1) > 1e-3)
  # apply returns the same Q.
  q_apply, _ = net.apply(params, _inputs((B,), seed=5), _random_state(B))
  np.testing.assert_allclose(q_apply, q, rtol=1e-6)


def test_dueling_head_hand_checked():
  """The head alone on a hand-made input: Q = V + Adv - mean(Adv)."""
  head = hk.without_apply_rng(hk.transform(
      lambda x: uvfa.DuelingHead(3, hidden_size=2)(x)))
  params = {
      "dueling_head/value_hidden": {"w": np.eye(2, dtype=np.float32),
                                    "b": np.zeros(2, np.float32)},
      "dueling_head/value": {"w": np.array([[1.], [2.]], np.float32),
                             "b": np.array([0.5], np.float32)},
      "dueling_head/advantage_hidden": {"w": np.eye(2, dtype=np.float32),
                                        "b": np.zeros(2, np.float32)},
      "dueling_head/advantage": {
          "w": np.array([[1., 0., 2.], [0., 3., 0.]], np.float32),
          "b": np.zeros(3, np.float32)},
  }
  x = np.array([[1., 2.]], np.float32)  # ReLU passes it unchanged.
  q, value = head.apply(params, x)
  # V = 1 + 4 + 0.5 = 5.5; Adv = [1, 6, 2], mean 3 -> Q = 5.5 + [-2, 3, -1].
  np.testing.assert_allclose(value, [5.5])
  np.testing.assert_allclose(q, [[3.5, 8.5, 4.5]])


@JIT
def test_zero_output_init_gives_zero_q_and_learns(jit):
  """zero_output_init: Q = 0 for every input at initialisation, the same
  parameter layout as the default (only the output weights differ), and a
  gradient step moves Q off zero."""
  kwargs = dict(lstm_size=LSTM, head_hidden=HIDDEN, mlp_hidden_sizes=MLP)
  zero = uvfa.make_uvfa_network(OBS, A, N, zero_output_init=True, **kwargs)
  default = uvfa.make_uvfa_network(OBS, A, N, **kwargs)
  key = jax.random.PRNGKey(3)
  params, params_default = zero.init(key), default.init(key)
  assert (jax.tree_util.tree_structure(params)
          == jax.tree_util.tree_structure(params_default))
  for name in ("value", "advantage"):
    w = params[f"dueling_head/{name}"]["w"]
    assert np.all(np.asarray(w) == 0.)
    assert np.any(np.asarray(params_default[f"dueling_head/{name}"]["w"]))
  np.testing.assert_array_equal(  # The layers below are drawn as before.
      params["lstm/linear"]["w"], params_default["lstm/linear"]["w"])
  inputs, state = _inputs((T, B), seed=2), _random_state(B)
  first = np.zeros((T, B), bool)
  q, _ = _maybe_jit(zero.unroll, jit)(params, inputs, state, first)
  np.testing.assert_array_equal(q, np.zeros((T, B, A), np.float32))
  q_default, _ = default.unroll(params_default, inputs, state, first)
  assert np.ptp(np.asarray(q_default)) > 1e-3

  target = jnp.arange(1., A + 1.)  # Differs across actions: A's gradient
  # is the deviation from its mean over actions, V's the mean.

  def loss(p):
    q, _ = zero.unroll(p, inputs, state, first)
    return jnp.sum((q - target) ** 2)

  grads = _maybe_jit(jax.grad(loss), jit)(params)
  assert np.any(np.asarray(grads["dueling_head/advantage"]["w"]))
  assert np.any(np.asarray(grads["dueling_head/value"]["w"]))
  stepped = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
  q_after, _ = zero.unroll(stepped, inputs, state, first)
  q_after = np.asarray(q_after)  # Moved towards the target, per action.
  assert np.all(q_after > 0.) and np.all(np.diff(q_after, axis=-1) > 0.)


# ----------------------------------------------------------------------------
# Recurrence.


def _loop_apply(net, params, inputs, state, step_is_first):
  qs = []
  initial = net.initial_state(B)
  for t in range(inputs.prev_action.shape[0]):
    first = np.asarray(step_is_first[t])[:, None]
    state = jax.tree_util.tree_map(lambda i, s: np.where(first, i, s),
                                   initial, state)
    q, state = net.apply(params, _select(inputs, t), state)
    qs.append(q)
  return np.stack(qs), state


@JIT
def test_unroll_equals_loop_of_apply(jit):
  net, params = _net_and_params()
  inputs = _inputs((T, B), seed=7)
  state = _random_state(B)
  first = np.zeros((T, B), bool)
  first[2, 1] = True  # A reset in lane 1 only.
  q, final = _maybe_jit(net.unroll, jit)(params, inputs, state, first)
  q_loop, final_loop = _loop_apply(net, params, inputs, state, first)
  np.testing.assert_allclose(q, q_loop, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(final.hidden, final_loop.hidden, rtol=1e-5,
                             atol=1e-5)
  np.testing.assert_allclose(final.cell, final_loop.cell, rtol=1e-5,
                             atol=1e-5)


@JIT
@pytest.mark.parametrize("k", [0, 3])
def test_reset_starts_afresh(jit, k):
  net, params = _net_and_params()
  unroll = _maybe_jit(net.unroll, jit)
  inputs = _inputs((T, B), seed=8)
  state = _random_state(B, seed=9)
  first = np.zeros((T, B), bool)
  first[k] = True
  q_reset, _ = unroll(params, inputs, state, first)
  # A fresh unroll of steps k.. from the initial state.
  tail = jax.tree_util.tree_map(lambda x: x[k:], inputs)
  q_fresh, _ = unroll(params, tail, net.initial_state(B),
                      np.zeros((T - k, B), bool))
  np.testing.assert_allclose(q_reset[k:], q_fresh, rtol=1e-5, atol=1e-5)
  # Steps before the reset are untouched by it.
  q_none, _ = unroll(params, inputs, state, np.zeros((T, B), bool))
  np.testing.assert_allclose(q_reset[:k], q_none[:k], rtol=1e-6)
  # Without the reset, step k sees the carried state and Q differs.
  assert np.all(np.abs(np.asarray(q_none[k]) - np.asarray(q_fresh[0])).max(-1)
                > 1e-4)


# ----------------------------------------------------------------------------
# Bad inputs.


def _edit(field, fn):
  def edit(inputs):
    return inputs._replace(**{field: fn(np.array(getattr(inputs, field)))})
  return edit


def _set(index, value):
  def fn(x):
    x[index] = value
    return x
  return fn


_STATIC_ERRORS = {
    "observation shape": (_edit("observation", lambda x: x[..., :3]),
                          "`observation` must have shape [?, ?, 4]"),
    "int observation": (_edit("observation", lambda x: x.astype(np.int32)),
                        "`observation` must be uint8 or floating point"),
    "B mismatch": (_edit("prev_action", lambda x: x[:, :2]),
                   "`prev_action` must have shape [5, 3], got (5, 2)"),
    "float action": (_edit("prev_action", lambda x: x.astype(np.float32)),
                     "`prev_action` must be an integer array"),
    "int reward": (_edit("prev_intrinsic_reward",
                         lambda x: x.astype(np.int32)),
                   "`prev_intrinsic_reward` must be floating point"),
}

_VALUE_ERRORS = {
    "action too large": (_edit("prev_action", _set((1, 2), A)),
                         "`prev_action` has values outside [-1, 3) in lane(s) "
                         "[2]"),
    "action below -1": (_edit("prev_action", _set((1, 2), -2)),
                        "`prev_action` has values outside [-1, 3) in lane(s) "
                        "[2]"),
    "negative mixture": (_edit("mixture_index", _set((0, 0), -1)),
                         "`mixture_index` has values outside [0, 2) in "
                         "lane(s) [0]"),
    "mixture too large": (_edit("mixture_index", _set((4, 1), N)),
                          "`mixture_index` has values outside [0, 2) in "
                          "lane(s) [1]"),
    "NaN reward": (_edit("prev_extrinsic_reward", _set((3, 1), np.nan)),
                   "`prev_extrinsic_reward` contains NaN or inf in lane(s) "
                   "[1]"),
    "NaN observation": (_edit("observation", _set((2, 0, 1), np.nan)),
                        "`observation` contains NaN or inf in lane(s) [0]"),
}


def _unroll_call(jit, inputs, state=None, first=None):
  net, params = _net_and_params()
  state = net.initial_state(B) if state is None else state
  first = np.zeros((T, B), bool) if first is None else first
  return jax.block_until_ready(
      _maybe_jit(net.unroll, jit)(params, inputs, state, first))


@JIT
@pytest.mark.parametrize("case", list(_STATIC_ERRORS))
def test_rejects_bad_shapes_and_types(jit, case):
  edit, message = _STATIC_ERRORS[case]
  with pytest.raises(ValueError, match=re.escape(message)):
    _unroll_call(jit, edit(_inputs((T, B))))


@JIT
@pytest.mark.parametrize("case", list(_VALUE_ERRORS))
def test_rejects_bad_values(jit, case):
  edit, message = _VALUE_ERRORS[case]
  with pytest.raises(ValueError if not jit else Exception,
                     match=re.escape(message)):
    _unroll_call(jit, edit(_inputs((T, B))))


def test_rejects_bad_state_and_resets():
  net, params = _net_and_params()
  with pytest.raises(ValueError, match=re.escape(
      "`state.hidden` must have shape [3, 8], got (2, 8)")):
    _unroll_call(False, _inputs((T, B)), state=net.initial_state(2))
  with pytest.raises(ValueError, match="must be an LSTMState"):
    _unroll_call(False, _inputs((T, B)), state=np.zeros((B, LSTM)))
  with pytest.raises(ValueError, match=re.escape(
      "`step_is_first` must have shape [5, 3], got (5,)")):
    _unroll_call(False, _inputs((T, B)), first=np.zeros(T, bool))
  with pytest.raises(ValueError, match="`step_is_first` must be bool"):
    _unroll_call(False, _inputs((T, B)), first=np.zeros((T, B), np.float32))
  with pytest.raises(ValueError, match=re.escape(
      "`prev_action` has values outside [-1, 3)")):
    net.apply(params, _inputs((B,))._replace(
        prev_action=np.array([0, 3, 1], np.int32)), net.initial_state(B))
  with pytest.raises(ValueError, match="must be a UVFAInputs"):
    net.apply(params, tuple(_inputs((B,))), net.initial_state(B))


@pytest.mark.parametrize("kwargs, message", [
    (dict(observation_shape=(4, 4), num_actions=3, num_mixtures=2),
     "observation_shape must be [D]"),
    (dict(observation_shape=OBS, num_actions=0, num_mixtures=2),
     "`num_actions` must be a positive integer"),
    (dict(observation_shape=OBS, num_actions=3, num_mixtures=0),
     "`num_mixtures` must be a positive integer"),
    (dict(observation_shape=OBS, num_actions=3, num_mixtures=2, torso="cnn"),
     "unknown torso kind"),
    (dict(observation_shape=OBS, num_actions=3, num_mixtures=2, lstm_size=0),
     "`lstm_size` must be a positive integer"),
])
def test_factory_rejects_bad_configuration(kwargs, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    uvfa.make_uvfa_network(**kwargs)


# ----------------------------------------------------------------------------
# Observation encodings.


def _encoded_net(obs_shape, encoding):
  net = uvfa.make_uvfa_network(obs_shape, A, N, lstm_size=LSTM,
                               head_hidden=HIDDEN, mlp_hidden_sizes=MLP,
                               grid_output_size=8, encoding=encoding)
  shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  return net, helpers.random_params(shapes, 0, bias_fan_in=4)


@JIT
def test_deepsea_binary_grid_network(jit):
  # DeepSea's [10, 10] observations (rank 2) get a channel axis: grid torso.
  net, params = _encoded_net((10, 10), ngu_types.BINARY)
  assert net.torso == "grid" and net.encoding == ngu_types.BINARY
  inputs = _inputs((B,))._replace(observation=np.eye(10, dtype=np.float32)[
      None].repeat(B, 0))
  q, _ = _maybe_jit(net.apply, jit)(params, inputs, net.initial_state(B))
  assert q.shape == (B, A) and np.isfinite(np.asarray(q)).all()
  # The same net on the explicit [10, 10, 1] floats gives the same values.
  grid_net, _ = _encoded_net((10, 10, 1), ngu_types.PIXELS)
  q_grid, _ = grid_net.apply(params, inputs._replace(
      observation=inputs.observation[..., None]), net.initial_state(B))
  np.testing.assert_allclose(np.asarray(q), np.asarray(q_grid), rtol=1e-5,
                             atol=1e-6)


@JIT
def test_symbolic_codes_apply_and_unroll(jit):
  encoding = ngu_types.symbolic((11, 6, 3))
  net, params = _encoded_net((7, 7, 3), encoding)
  assert net.torso == "grid"
  rng = np.random.default_rng(0)

  def codes(lead):
    return np.stack([rng.integers(0, n, lead + (7, 7)) for n in (11, 6, 3)],
                    axis=-1).astype(np.uint8)

  inputs = _inputs((B,))._replace(observation=codes((B,)))
  q, _ = _maybe_jit(net.apply, jit)(params, inputs, net.initial_state(B))
  assert q.shape == (B, A)
  seq = _inputs((T, B))._replace(observation=codes((T, B)))
  first = np.zeros((T, B), bool)
  q_seq, _ = _maybe_jit(net.unroll, jit)(params, seq, net.initial_state(B),
                                         first)
  assert q_seq.shape == (T, B, A)
  # A code out of range is reported, naming the lane (B axis of [T, B]).
  bad = seq.observation.copy()
  bad[3, 1, 0, 0, 0] = 11
  error = ValueError if not jit else Exception
  with pytest.raises(error, match=r"`observation` has codes outside .* in "
                     r"lane\(s\) \[1\]"):
    jax.block_until_ready(_maybe_jit(net.unroll, jit)(
        params, seq._replace(observation=bad), net.initial_state(B), first))
  with pytest.raises(ValueError, match="integer codes"):
    net.apply(params, inputs._replace(
        observation=inputs.observation.astype(np.float32)),
              net.initial_state(B))
