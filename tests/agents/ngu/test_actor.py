"""Tests for ngu_jax.agents.ngu.actor (NGU Sec. 2-3, App. A actors).

The actor's outputs are checked against the components called by hand
(episodic.step, lifelong.modulator, ngu_intrinsic_reward, uvfa.apply,
retrace.behaviour_probability) on the same inputs.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import mixtures
from ngu_jax.agents.ngu import actor
from ngu_jax.agents.ngu import variants
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.intrinsic import recode
from ngu_jax.losses import retrace
from ngu_jax.losses import rnd as rnd_losses
from ngu_jax.networks import rnd as rnd_lib
from ngu_jax.networks import uvfa
from ngu_jax.agents.ngu.variants import intrinsic as variant_intrinsic
from ngu_jax.agents.ngu.variants import policy as variant_policy
from tests import helpers

B, A, N = 3, 3, 2
OBS = (4,)
CONFIG = NGUConfig(
    num_mixtures=N, torso="mlp", lstm_size=8, head_hidden=8, embedding_dim=4,
    rnd_output_dim=4, inverse_dynamics_hidden=8, mlp_hidden_sizes=(8,),
    memory_capacity=50, num_neighbors=3, kernel_epsilon=1e-2)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


@functools.lru_cache(maxsize=None)
def _networks(config=CONFIG):
  return networks_lib.make_networks(config, OBS, A)


@functools.lru_cache(maxsize=None)
def _params(seed=0):
  net = _networks()
  shapes = jax.eval_shape(functools.partial(networks_lib.init_params, net),
                          jax.random.PRNGKey(0))
  rnd_params = helpers.random_params(
      (shapes.rnd_predictor, shapes.rnd_target), seed + 2, bias_fan_in=4)
  stats = rnd_lib.ObservationNormStats(
      mean=np.full(OBS, 0.1, np.float32), var=np.full(OBS, 2., np.float32),
      count=np.float32(10.))
  return networks_lib.NGUParams(
      q=helpers.random_params(shapes.q, seed, bias_fan_in=4),
      embedding=helpers.random_params(shapes.embedding, seed + 1,
                                      bias_fan_in=4),
      rnd_predictor=rnd_params[0], rnd_target=rnd_params[1],
      rnd_observation_stats=stats)


@functools.lru_cache(maxsize=None)
def _step_fn(jit, config=CONFIG):
  fn = functools.partial(actor.select_action, config, _networks(config))
  return jax.jit(fn) if jit else fn


def _inputs(steps, seed=0):
  """Observations, rewards, FIRST flags for `steps` steps of B lanes.

  Every lane starts at step 0; lane 1 starts a new episode at step 3.
  """
  rng = np.random.default_rng(seed)
  obs = rng.normal(size=(steps, B) + OBS).astype(np.float32)
  reward = rng.normal(size=(steps, B)).astype(np.float32)
  first = np.zeros((steps, B), bool)
  first[0] = True
  if steps > 3:
    first[3, 1] = True
  return obs, reward, first


def _run(steps, jit, config=CONFIG, params=None, seed=0):
  params = _params() if params is None else params
  state = actor.init(config, _networks(config), jax.random.PRNGKey(seed), B)
  obs, reward, first = _inputs(steps, seed)
  out = []
  for t in range(steps):
    prev_state = state
    action, state = _step_fn(jit, config)(params, state, obs[t], reward[t],
                                          first[t])
    out.append((prev_state, action, state))
  return out, (obs, reward, first)


@JIT
def test_intrinsic_reward_equals_components(jit):
  steps = 6
  out, (obs, _, first) = _run(steps, jit)
  net, params = _networks(), _params()
  mem_config = variant_intrinsic.episodic_memory_config(CONFIG)
  memory = episodic.init(mem_config, B, CONFIG.embedding_dim)
  stats = lifelong.init()
  for t in range(steps):
    memory = episodic.reset(memory, first[t])
    emb = net.embedding.embed(params.embedding, obs[t])
    r_epi, memory = episodic.step(mem_config, memory, emb)
    x = rnd_lib.normalize_observation(params.rnd_observation_stats, obs[t])
    err = rnd_losses.rnd_error(net.rnd.predictor(params.rnd_predictor, x),
                               net.rnd.target(params.rnd_target, x))
    alpha, stats = lifelong.modulator(stats, err)
    r_i = np.where(first[t], 0.,
                   lifelong.ngu_intrinsic_reward(r_epi, alpha, 5.0))
    extras = actor.get_extras(out[t][2])
    np.testing.assert_allclose(extras["episodic_reward"], r_epi, rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(extras["rnd_error"], err, rtol=1e-5)
    np.testing.assert_allclose(extras["alpha"], alpha, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(extras["intrinsic_reward"], r_i, rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(extras["prev_intrinsic_reward"], r_i,
                               rtol=1e-5, atol=1e-7)
  # The rewards are not trivially zero: modulated, non-zero novelty later on.
  assert np.all(np.asarray(actor.get_extras(out[2][2])["intrinsic_reward"])
                > 0)


@JIT
def test_q_inputs_and_behaviour_probability(jit):
  """mu is behaviour_probability of the Q-values that uvfa.apply gives on
  (a_{t-1}, r^e_t, r^i_t, j) from the stored LSTM state; LSTM reset at
  FIRST; the inputs are -1 / 0 at FIRST."""
  steps = 5
  out, (obs, reward, first) = _run(steps, jit)
  net, params = _networks(), _params()
  mixture = mixtures.actor_mixtures(B, N)
  epsilon = mixtures.actor_epsilons_per_mixture(B, N)
  for t in range(steps):
    prev_state, action, state = out[t]
    extras = actor.get_extras(state)
    expected_prev = np.where(first[t], -1, prev_state.prev_action)
    np.testing.assert_array_equal(extras["prev_action"], expected_prev)
    np.testing.assert_allclose(extras["prev_extrinsic_reward"],
                               np.where(first[t], 0., reward[t]))
    np.testing.assert_array_equal(extras["mixture_index"], mixture)
    np.testing.assert_allclose(extras["epsilon"], epsilon)
    lstm = extras["recurrent_state"]
    for name in ("hidden", "cell"):
      fed = np.asarray(getattr(lstm, name))
      carried = np.asarray(getattr(prev_state.recurrent_state, name))
      np.testing.assert_array_equal(fed[first[t]], 0.)
      np.testing.assert_array_equal(fed[~first[t]], carried[~first[t]])
    inputs = uvfa.UVFAInputs(obs[t], extras["prev_action"],
                             extras["prev_extrinsic_reward"],
                             extras["prev_intrinsic_reward"], mixture)
    q, new_lstm = net.uvfa.apply(params.q, inputs, lstm)
    np.testing.assert_allclose(state.recurrent_state.hidden, new_lstm.hidden,
                               rtol=1e-5, atol=1e-6)
    mu = retrace.behaviour_probability(q, action, epsilon)
    np.testing.assert_allclose(extras["behaviour_prob"], mu, rtol=1e-5)
    np.testing.assert_array_equal(state.prev_action, action)
    assert action.dtype == jnp.int32 and action.shape == (B,)
  # The state carries across steps: lane 0 at step 2 is not reset.
  assert np.any(np.asarray(out[2][2].extras.recurrent_state.hidden[0]) != 0)


def test_epsilon_greedy_frequencies_and_ties():
  """Fixed Q with a tie between actions 0 and 2: P = eps/A + (1-eps)/2."""
  lanes, eps = 20000, 0.3
  q = jnp.broadcast_to(jnp.array([1., 0., 1.]), (lanes, A))
  fn = jax.jit(variant_policy.epsilon_greedy_sample)
  action, mu = fn(jax.random.PRNGKey(0), q, jnp.full((lanes,), eps))
  freq = np.bincount(np.asarray(action), minlength=A) / lanes
  expected = np.array([eps / A + (1 - eps) / 2, eps / A,
                       eps / A + (1 - eps) / 2])
  # 4 standard deviations of a binomial frequency: < 0.015 here.
  np.testing.assert_allclose(freq, expected, atol=0.015)
  np.testing.assert_allclose(mu, expected[np.asarray(action)], rtol=1e-6)
  np.testing.assert_allclose(
      mu, retrace.behaviour_probability(q, action, eps), rtol=1e-6)
  # eps = 0: only greedy actions, mu = 1/2 for the tie.
  action0, mu0 = fn(jax.random.PRNGKey(1), q[:1000], jnp.zeros((1000,)))
  assert set(np.unique(np.asarray(action0))) == {0, 2}
  np.testing.assert_allclose(mu0, 0.5)


@JIT
def test_memory_reset_at_first_and_wipe_period(jit):
  out, _ = _run(5, jit)
  sizes = np.stack([np.asarray(s.memory.size) for _, _, s in out])
  # Lane 1 starts a new episode at step 3: its memory holds only f(x_3).
  np.testing.assert_array_equal(sizes[:, 0], [1, 2, 3, 4, 5])
  np.testing.assert_array_equal(sizes[:, 1], [1, 2, 3, 1, 2])
  assert float(out[3][2].extras.episodic_reward[1]) == 0.  # Empty memory.
  np.testing.assert_array_equal(out[4][2].episode_count, [1, 2, 1])
  # Wipe every 2nd episode: lane 1's second episode keeps its memory.
  config = CONFIG.__class__(**{**CONFIG.to_dict(), "memory_wipe_period": 2})
  out2, _ = _run(5, jit, config=config)
  np.testing.assert_array_equal(out2[4][2].memory.size, [5, 5, 5])
  assert float(out2[3][2].extras.episodic_reward[1]) > 0.
  assert float(out2[3][2].extras.intrinsic_reward[1]) == 0.  # FIRST.


@JIT
def test_embedding_params_refresh_only_at_episode_start(jit):
  net = _networks()
  params_a, params_b = _params(0), _params(10)
  obs, reward, first = _inputs(4)
  state = actor.init(CONFIG, net, jax.random.PRNGKey(0), B)
  step = _step_fn(jit)
  for t in range(3):
    _, state = step(params_a, state, obs[t], reward[t], first[t])
  # New parameters arrive; only lane 1 starts an episode at step 3.
  _, state = step(params_b, state, obs[3], reward[3], first[3])
  leaves = zip(jax.tree_util.tree_leaves(state.embedding_params),
               jax.tree_util.tree_leaves(params_a.embedding),
               jax.tree_util.tree_leaves(params_b.embedding))
  for lane_leaf, a, b in leaves:
    np.testing.assert_array_equal(lane_leaf[0], a)
    np.testing.assert_array_equal(lane_leaf[1], b)
    np.testing.assert_array_equal(lane_leaf[2], a)
  # Lanes 0 and 2 embedded x_3 with the old f: the memory holds f_a(x_3).
  last = np.asarray(state.memory.write_index) - 1
  written = np.asarray(state.memory.memory)[np.arange(B), last]
  f_a = np.asarray(net.embedding.embed(params_a.embedding, obs[3]))
  f_b = np.asarray(net.embedding.embed(params_b.embedding, obs[3]))
  np.testing.assert_allclose(written[[0, 2]], f_a[[0, 2]], rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(written[1], f_b[1], rtol=1e-5, atol=1e-6)
  assert np.abs(f_a - f_b).max() > 1e-3  # The two f really differ.


def test_jit_matches_eager():
  eager, _ = _run(4, False)
  jitted, _ = _run(4, True)
  for (_, a1, s1), (_, a2, s2) in zip(eager, jitted):
    np.testing.assert_array_equal(a1, a2)
    for x, y in zip(jax.tree_util.tree_leaves(s1),
                    jax.tree_util.tree_leaves(s2)):
      np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_without_rnd_alpha_is_one():
  config = NGUConfig(**{**CONFIG.to_dict(), "use_rnd": False})
  out, _ = _run(3, True, config=config)
  extras = actor.get_extras(out[2][2])
  np.testing.assert_allclose(extras["alpha"], 1.)
  np.testing.assert_allclose(extras["intrinsic_reward"],
                             extras["episodic_reward"])


@JIT
def test_rnd_only_reward_skips_the_episodic_memory(jit):
  config = NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "rnd"})
  steps = 5
  out, (obs, _, first) = _run(steps, jit, config=config)
  net, params = _networks(), _params()
  stats = lifelong.init()
  for t in range(steps):
    x = rnd_lib.normalize_observation(params.rnd_observation_stats, obs[t])
    err = rnd_losses.rnd_error(net.rnd.predictor(params.rnd_predictor, x),
                               net.rnd.target(params.rnd_target, x))
    reward, stats = lifelong.rnd_reward(stats, err)
    extras = actor.get_extras(out[t][2])
    np.testing.assert_allclose(extras["intrinsic_reward"],
                               np.where(first[t], 0., reward), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_array_equal(extras["episodic_reward"], 0.)
  assert np.all(np.asarray(actor.get_extras(out[2][2])["intrinsic_reward"])
                > 0)
  # The memory is never written.
  for leaf_a, leaf_b in zip(jax.tree_util.tree_leaves(out[0][0].memory),
                            jax.tree_util.tree_leaves(out[-1][2].memory)):
    np.testing.assert_array_equal(leaf_a, leaf_b)


def test_rnd_only_needs_rnd():
  with pytest.raises(ValueError, match="use_rnd"):
    NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "rnd",
                 "use_rnd": False})
  with pytest.raises(ValueError, match="intrinsic.kind"):
    NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "icm"})


@JIT
def test_no_intrinsic_reward_computes_none_and_acts_as_with_beta_zero(jit):
  """intrinsic_reward="none": r^i = 0, no memory or per-lane f in the state;
  the Q inputs, hence actions and behaviour probabilities, are those of the
  NGU actor with the same key whose r^i the Q-network never sees."""
  config = NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "none",
                        "use_rnd": False, "beta": 0.})
  steps = 5
  out, (obs, reward, first) = _run(steps, jit, config=config)
  state = out[-1][2]
  assert state.memory is None and state.embedding_params is None
  assert state.recode is None
  net, params = _networks(), _params()
  recurrent = net.uvfa.initial_state(B)
  prev_action = np.full((B,), -1)
  for t in range(steps):
    extras = actor.get_extras(out[t][2])
    for name in ("intrinsic_reward", "episodic_reward", "rnd_error"):
      np.testing.assert_array_equal(extras[name], 0.)
    np.testing.assert_array_equal(extras["alpha"], 1.)
    # The Q-network's inputs, rebuilt: r^i_{t-1} = 0.
    recurrent = jax.tree_util.tree_map(
        lambda init, cur: np.where(
            np.reshape(first[t], (-1,) + (1,) * (np.ndim(cur) - 1)),
            init, cur), net.uvfa.initial_state(B), recurrent)
    prev = np.where(first[t], -1, prev_action)
    inputs = uvfa.UVFAInputs(
        observation=obs[t], prev_action=prev.astype(np.int32),
        prev_extrinsic_reward=np.where(first[t], 0., reward[t]).astype(
            np.float32),
        prev_intrinsic_reward=np.zeros((B,), np.float32),
        mixture_index=np.asarray(out[t][0].mixture_index))
    q, recurrent = net.uvfa.apply(params.q, inputs, recurrent)
    np.testing.assert_allclose(extras["q_values"], q, rtol=1e-5, atol=1e-6)
    prev_action = np.asarray(out[t][1])
  with pytest.raises(ValueError, match="use_rnd"):
    NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "none"})
  with pytest.raises(ValueError, match="beta"):
    NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "none",
                 "use_rnd": False, "beta": 0.3})


def test_init_lanes_and_evaluation():
  net = _networks()
  state = actor.init(CONFIG, net, jax.random.PRNGKey(0), 2, first_lane=3,
                     total_lanes=5)
  np.testing.assert_array_equal(state.mixture_index, [1, 0])
  np.testing.assert_allclose(state.epsilon,
                             mixtures.actor_epsilons_per_mixture(5, N)[3:])
  # App. A's epsilons over all lanes, when asked for.
  over_lanes = NGUConfig(**{**CONFIG.to_dict(),
                            "actor_epsilons_per_mixture": False})
  state = actor.init(over_lanes, net, jax.random.PRNGKey(0), 2, first_lane=3,
                     total_lanes=5)
  np.testing.assert_allclose(state.epsilon, mixtures.actor_epsilons(5)[3:])
  ev = actor.init(CONFIG, net, jax.random.PRNGKey(0), 2, evaluation=True)
  np.testing.assert_allclose(ev.epsilon, CONFIG.eval_epsilon)
  np.testing.assert_array_equal(ev.mixture_index, [0, 0])
  assert set(actor.get_extras(state)) >= {
      "behaviour_prob", "intrinsic_reward", "prev_action",
      "prev_extrinsic_reward", "prev_intrinsic_reward", "mixture_index",
      "epsilon", "recurrent_state", "q_values"}
  assert actor.get_extras(state)["q_values"].shape == (2, A)


def test_most_exploratory_mixture_gets_large_epsilons():
  """16 lanes, N = 8 (the minigrid and deep_sea presets): App. A's epsilons
  over all lanes leave mixture 7 (the most exploratory) at eps <= 0.02; per
  mixture (the default) it gets 0.4 on one of its lanes, like j = 0."""
  config = NGUConfig(**{**CONFIG.to_dict(), "num_mixtures": 8})
  net = networks_lib.make_networks(config, OBS, A)
  state = actor.init(config, net, jax.random.PRNGKey(0), 16)
  eps = np.asarray(state.epsilon)
  j = np.asarray(state.mixture_index)
  assert eps[j == 7].max() == pytest.approx(0.4)
  assert eps[j == 0].max() == pytest.approx(0.4)
  np.testing.assert_allclose(np.sort(eps[j == 7]), np.sort(eps[j == 0]))


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_lanes=0), "need num_lanes >= 1"),
    (dict(num_lanes=2, first_lane=2, total_lanes=3), "need num_lanes >= 1"),
    (dict(num_lanes=2, evaluation=True, eval_mixture_index=N),
     "`eval_mixture_index` must be in [0, 2)"),
])
def test_init_rejects_bad_lanes(kwargs, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    actor.init(CONFIG, _networks(), jax.random.PRNGKey(0), **kwargs)


@pytest.mark.parametrize("case, message", [
    ("first int", "`step_is_first` must be bool"),
    ("obs shape", "`observation` must have shape [3, 4]"),
    ("reward nan", "`reward` contains NaN or inf in lane(s) [2]"),
])
def test_select_action_rejects_bad_input(case, message):
  obs, reward, first = _inputs(1)
  obs, reward, first = obs[0], reward[0].copy(), first[0]
  if case == "first int":
    first = first.astype(np.int32)
  elif case == "obs shape":
    obs = obs[:, :2]
  else:
    reward[2] = np.nan
  state = actor.init(CONFIG, _networks(), jax.random.PRNGKey(0), B)
  with pytest.raises(ValueError, match=re.escape(message)):
    _step_fn(False)(_params(), state, obs, reward, first)


def test_init_state_can_be_donated():
  # Every leaf owns its buffer: XLA refuses to donate one buffer twice, and
  # an undonated state is copied whole at every step (memory, embeddings).
  state = actor.init(CONFIG, _networks(), jax.random.PRNGKey(0), B)
  leaves = jax.tree_util.tree_leaves(state)
  pointers = [x.unsafe_buffer_pointer() for x in leaves]
  assert len(set(pointers)) == len(pointers)
  step = jax.jit(functools.partial(actor.select_action, CONFIG, _networks()),
                 donate_argnums=1)
  obs, reward, first = _inputs(3)
  donated = actor.init(CONFIG, _networks(), jax.random.PRNGKey(0), B)
  for t in range(3):
    action, donated = step(_params(), donated, obs[t], reward[t], first[t])
    expected, state = _step_fn(True)(_params(), state, obs[t], reward[t],
                                     first[t])
    np.testing.assert_array_equal(action, expected)


@JIT
@pytest.mark.parametrize("intrinsic_reward", ["ngu", "rnd"])
def test_errors_before_the_observation_normaliser_never_count(
    jit, intrinsic_reward):
  # Before the learner's observation statistics reach the actor
  # (count 0), RND sees raw inputs clipped to [-5, 5] and its errors are on
  # another scale; they must not enter mu_e / sigma_e.
  config = NGUConfig(**{**CONFIG.to_dict(), "rnd_error_horizon": 20,
                        "intrinsic_reward": intrinsic_reward})
  fresh = _params()._replace(
      rnd_observation_stats=rnd_lib.observation_normalizer_init(OBS))
  out, _ = _run(4, jit, config=config, params=fresh)
  for _, _, state in out:
    assert float(state.error_stats.count) == 0.
    extras = actor.get_extras(state)
    np.testing.assert_array_equal(extras["alpha"], 1.)
    if intrinsic_reward == "ngu":
      np.testing.assert_array_equal(extras["intrinsic_reward"],
                                    extras["episodic_reward"])
    else:
      np.testing.assert_array_equal(extras["intrinsic_reward"], 0.)
  # With statistics published, the errors count (over the horizon).
  out, (obs, _, _) = _run(4, jit, config=config)
  net, params = _networks(), _params()
  stats = lifelong.init()
  for t in range(4):
    x = rnd_lib.normalize_observation(params.rnd_observation_stats, obs[t])
    err = rnd_losses.rnd_error(net.rnd.predictor(params.rnd_predictor, x),
                               net.rnd.target(params.rnd_target, x))
    _, stats = lifelong.modulator(stats, err, horizon=20)
    got = out[t][2].error_stats
    np.testing.assert_allclose(got.mean, stats.mean, rtol=1e-5)
    np.testing.assert_allclose(got.var, stats.var, rtol=1e-4)
    assert float(got.count) == B * (t + 1)


def test_grid_filters_reach_every_network():
  """`config.grid_filters` sets the conv channels of Q, f and both RNDs."""
  config = NGUConfig(num_mixtures=1, torso="grid", lstm_size=8, head_hidden=8,
                     grid_output_size=8, grid_filters=(3, 5),
                     embedding_dim=4, rnd_output_dim=4,
                     inverse_dynamics_hidden=8)
  net = networks_lib.make_networks(config, (7, 7, 3), 4)
  params = jax.eval_shape(functools.partial(networks_lib.init_params, net),
                          jax.random.PRNGKey(0))
  trees = {"q": params.q, "embedding": params.embedding,
           "rnd_predictor": params.rnd_predictor,
           "rnd_target": params.rnd_target}
  for name, tree in trees.items():
    kernels = {path: leaf.shape for path, leaf in
               jax.tree_util.tree_flatten_with_path(tree)[0]
               if "conv_" in jax.tree_util.keystr(path)
               and jax.tree_util.keystr(path).endswith("['w']")}
    shapes = sorted(kernels.values(), key=lambda s: s[2])
    assert shapes == [(3, 3, 3, 3), (3, 3, 3, 5)], (name, kernels)


RECODE_CONFIG = NGUConfig(**{**CONFIG.to_dict(), "intrinsic_reward": "recode",
                             "recode_capacity": 16, "recode_num_neighbors": 3,
                             "recode_reward_horizon": 20})


@JIT
def test_recode_reward_is_one_shared_memory_over_all_lanes(jit):
  """RECODE (003 Sec. 3): r^i_t = recode.step's reward / running std, from
  ONE memory of all B lanes, never wiped at episode starts; no RND."""
  config = RECODE_CONFIG
  steps = 6
  out, (obs, _, first) = _run(steps, jit, config=config)
  net, params = _networks(config), _params()
  state0 = actor.init(config, net, jax.random.PRNGKey(0), B)
  assert state0.memory is None and state0.embedding_params is None
  memory, stats = state0.recode, lifelong.init()
  rec_config = variant_intrinsic.recode_config(config)
  for t in range(steps):
    # The latest f, one memory for all lanes, no reset at FIRST (first[3, 1]).
    emb = net.embedding.embed(params.embedding, obs[t])
    raw, memory = recode.step(rec_config, memory, emb)
    reward, stats = lifelong.divide_by_running_std(stats, raw, horizon=20)
    extras = actor.get_extras(out[t][2])
    np.testing.assert_allclose(extras["episodic_reward"], raw, rtol=1e-5)
    np.testing.assert_allclose(extras["intrinsic_reward"],
                               np.where(first[t], 0., reward), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_array_equal(extras["alpha"], 1.)
    np.testing.assert_array_equal(extras["rnd_error"], 0.)
    got = out[t][2].recode
    np.testing.assert_allclose(got.atoms, memory.atoms, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got.occupied, memory.occupied)
  # B lanes x steps embeddings went into the one memory (count mass grows
  # by one per embedding: gamma^n discounting on top).
  counts = np.asarray(recode.counts(out[-1][2].recode))
  g = config.recode.discount
  expected = sum(g ** i for i in range(B * steps))
  np.testing.assert_allclose(counts.sum(), expected, rtol=1e-4)
  assert float(out[-1][2].error_stats.count) == 0.  # RND never ran.


def test_recode_config_fields_are_validated():
  for field, value in [("recode_capacity", 0), ("recode_discount", 0.),
                       ("recode_discount", 1.5),
                       ("recode_insert_probability", -0.1),
                       ("recode_kernel_epsilon", 0.),
                       ("recode_reward_horizon", -1)]:
    with pytest.raises(ValueError, match=field.replace("recode_", "recode.")):
      NGUConfig(**{**RECODE_CONFIG.to_dict(), field: value})
  assert not variants.compose(RECODE_CONFIG).intrinsic.reads_rnd
  assert variants.compose(CONFIG).intrinsic.reads_rnd


@JIT
@pytest.mark.parametrize("config_name", ["ngu", "recode"])
def test_evaluation_actor_takes_the_training_statistics(jit, config_name):
  """`with_training_statistics`: an evaluator of 2 lanes gets the training
  lanes' (B = 3) RND-error statistics, RECODE memory and reward statistics
  as they are, and the count-weighted mean of their d_m^2 (written out
  here); its memories stay empty and nothing else changes."""
  config = CONFIG if config_name == "ngu" else RECODE_CONFIG
  out, _ = _run(6, True, config=config)  # The source lanes (jitted steps).
  source = out[-1][2]
  ev = actor.init(config, _networks(config), jax.random.PRNGKey(1), 2,
                  evaluation=True)
  fn = jax.jit(actor.with_training_statistics) if jit else (
      actor.with_training_statistics)
  got = fn(ev, source)
  helpers.assert_trees_equal(got.error_stats, source.error_stats)
  helpers.assert_trees_equal(got.recode, source.recode)
  helpers.assert_trees_equal(got.recode_reward_stats,
                             source.recode_reward_stats)
  for field in ("recurrent_state", "prev_action", "epsilon", "key",
                "mixture_index", "episode_count", "embedding_params"):
    helpers.assert_trees_equal(getattr(got, field), getattr(ev, field))
  if config_name == "recode":
    assert got.memory is None and source.recode is not None
    return
  assert float(source.error_stats.count) > 0  # Something to take.
  counts = np.asarray(source.memory.distance_count, np.float64)
  means = np.asarray(source.memory.mean_sq_distance, np.float64)
  assert counts.sum() > 0 and np.ptp(means) > 0  # Lanes differ: pooling.
  np.testing.assert_allclose(got.memory.mean_sq_distance,
                             [(counts * means).sum() / counts.sum()] * 2,
                             rtol=1e-6)
  np.testing.assert_array_equal(got.memory.distance_count,
                                [round(counts.mean())] * 2)
  np.testing.assert_array_equal(got.memory.size, [0, 0])
  # The evaluator's first step uses them: its alpha is the modulator of the
  # training statistics, not of empty ones.
  obs, reward, first = _inputs(1, seed=3)
  step = _step_fn(jit, config)
  _, warm = step(_params(), got, obs[0][:2], reward[0][:2], first[0][:2])
  _, cold = step(_params(), ev, obs[0][:2], reward[0][:2], first[0][:2])
  expected_count = float(source.error_stats.count) + 2
  assert float(warm.error_stats.count) == expected_count
  assert float(cold.error_stats.count) == 2.


def _normalized_config(kind, horizon=0):
  return NGUConfig(**{**CONFIG.to_dict(), "intrinsic": {
      "kind": "ngu", "normalization": kind,
      "normalization_horizon": horizon}})


@JIT
@pytest.mark.parametrize("kind", ["standardize", "std"])
def test_intrinsic_normalization_over_all_non_first_values(jit, kind):
  """`intrinsic.normalization`: r^i of the un-normalised actor (same key,
  same inputs) over the plain-numpy mean / population std of every non-FIRST
  r^i of all lanes so far (horizon 0 = all values), the step's own values
  folded in first; 0 at FIRST. Actions, memories and RND statistics are the
  un-normalised actor's until the normalised r^i enters the network."""
  steps = 7
  config = _normalized_config(kind)
  raw, (_, _, first) = _run(steps, jit)
  got, _ = _run(steps, jit, config=config)
  seen = []
  for t in range(steps):
    r = np.asarray(actor.get_extras(raw[t][2])["intrinsic_reward"],
                   np.float64)
    seen.extend(r[~first[t]])
    values = np.asarray(seen)
    std = values.std() if values.size else 0.
    if kind == "standardize":
      expected = (r - values.mean()) / std if std > 0 else 0. * r
    else:
      expected = r / std if std > 0 else 0. * r
    expected = np.where(first[t], 0., expected)
    extras = actor.get_extras(got[t][2])
    np.testing.assert_allclose(extras["intrinsic_reward"], expected,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(extras["prev_intrinsic_reward"], expected,
                               rtol=1e-4, atol=1e-5)
    # The kind's own reward parts are unchanged.
    for name in ("episodic_reward", "alpha", "rnd_error"):
      np.testing.assert_allclose(extras[name],
                                 actor.get_extras(raw[t][2])[name],
                                 rtol=1e-5, atol=1e-7)
    stats = got[t][2].intrinsic_reward_stats
    assert float(stats.count) == len(seen)
  assert len(seen) > 0 and np.ptp(seen) > 0  # Something was normalised.
  if kind == "standardize":  # Mean 0 over everything seen, negatives too.
    last = np.asarray(actor.get_extras(got[-1][2])["intrinsic_reward"])
    assert np.any(last < 0)
  assert raw[-1][2].intrinsic_reward_stats is None


def test_intrinsic_normalization_horizon_and_choices_are_validated():
  with pytest.raises(ValueError, match="intrinsic.normalization"):
    _normalized_config("zscore")
  with pytest.raises(ValueError, match="intrinsic.normalization_horizon"):
    _normalized_config("std", horizon=-1)
  assert _normalized_config("std", horizon=5).intrinsic.normalization_horizon \
      == 5


def test_evaluation_actor_takes_the_intrinsic_reward_statistics():
  config = _normalized_config("standardize")
  out, _ = _run(5, True, config=config)
  source = out[-1][2]
  ev = actor.init(config, _networks(config), jax.random.PRNGKey(1), 2,
                  evaluation=True)
  assert float(ev.intrinsic_reward_stats.count) == 0
  got = actor.with_training_statistics(ev, source)
  assert float(source.intrinsic_reward_stats.count) > 0
  helpers.assert_trees_equal(got.intrinsic_reward_stats,
                             source.intrinsic_reward_stats)
