"""Tests for ngu_jax.agents.ngu.variants.parts: the registry, `compose`, and
a new kind added as a user would (one module, one registration) running in
the actor, jitted and not, and in the Python loop."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.agents.ngu import actor
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu import variants
from ngu_jax.agents.ngu.variants import parts
from ngu_jax.loops.python import loop as python_loop

B, A, OBS = 3, 3, (4,)
TINY = dict(num_mixtures=2, torso="mlp", lstm_size=8, head_hidden=8,
            embedding_dim=4, rnd_output_dim=4, inverse_dynamics_hidden=8,
            mlp_hidden_sizes=(8,), beta=0.5, use_rnd=False)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


# --- A new kind, written as docs/design.md shows: a reward of 1 / (1 + t),
# t the step of the episode, counted in the kind's own `variant_state`.

def _step_count_init(config, networks, num_lanes, key):
  del config, networks
  return {"variant_state": jnp.zeros((num_lanes,), jnp.int32)}, key


def _step_count_step(config, networks, params, state, observation, first,
                     wipe):
  del config, networks, params, observation, wipe
  t = jnp.where(first, 0, state.variant_state["intrinsic"] + 1)
  b = t.shape[0]
  reward = 1. / (1. + t.astype(jnp.float32))
  return (variants.RewardStep(reward, jnp.zeros((b,)), jnp.ones((b,)),
                              jnp.zeros((b,))), {"variant_state": t})


STEP_COUNT = variants.IntrinsicReward(
    init=_step_count_init, step=_step_count_step, episodic=False,
    modulated=False, reads_rnd=False, reads_embedding=False,
    trains_embedding=False, trains_rnd=False)


@pytest.fixture
def step_count_kind(monkeypatch):
  """Registers the kind "step_count" for one test, then forgets it."""
  registry = {f: dict(kinds) for f, kinds in parts._REGISTRY.items()}
  kinds = {f: list(k) for f, k in config_lib.KINDS.items()}
  monkeypatch.setattr(parts, "_REGISTRY", registry)
  monkeypatch.setattr(config_lib, "KINDS", kinds)
  variants.register("intrinsic", "step_count", STEP_COUNT)
  return config_lib.NGUConfig(intrinsic_reward="step_count", **TINY)


def test_compose_returns_the_named_parts():
  composed = variants.compose(config_lib.NGUConfig())
  assert composed == variants.Variants(
      variants.intrinsic.NGU, variants.policy.EPSILON_GREEDY,
      variants.meta.FIXED, variants.loss.RETRACE)
  dice = variants.compose(config_lib.dice())
  assert dice.intrinsic is variants.intrinsic.NONE
  assert dice.policy is variants.policy.BOLTZMANN
  assert dice.loss is variants.loss.DICE
  assert variants.compose(config_lib.agent57()).meta is variants.meta.UCB
  for family, kinds in config_lib.KINDS.items():
    for kind in kinds:
      assert isinstance(variants.get(family, kind),
                        parts.FAMILY_TYPES[family])


def test_registry_refuses_what_it_cannot_build():
  with pytest.raises(ValueError, match="unknown family 'reward'"):
    variants.register("reward", "x", STEP_COUNT)
  with pytest.raises(ValueError, match="non-empty string"):
    variants.register("intrinsic", "", STEP_COUNT)
  with pytest.raises(ValueError, match="must be a BehaviourPolicy, got "
                     "IntrinsicReward"):
    variants.register("policy", "x", STEP_COUNT)
  with pytest.raises(ValueError, match=r"no 'intrinsic' kind 'icm'.*known: "
                     r"\['ngu', 'none', 'recode', 'rnd'\]"):
    variants.get("intrinsic", "icm")
  with pytest.raises(ValueError, match="unknown family"):
    variants.get("reward", "ngu")
  # Unregistered kinds are refused by the config itself.
  with pytest.raises(ValueError, match="`intrinsic.kind` must be one of"):
    config_lib.NGUConfig(intrinsic_reward="step_count")


def test_a_registration_makes_the_kind_a_config_choice(step_count_kind):
  config = step_count_kind
  assert config.intrinsic.kind == "step_count"
  assert variants.compose(config).intrinsic is STEP_COUNT
  assert config_lib.NGUConfig.from_dict(config.to_dict()) == config


@functools.lru_cache(maxsize=None)
def _params(config):
  net = networks_lib.make_networks(config, OBS, A)
  return net, networks_lib.init_params(net, jax.random.PRNGKey(0))


@JIT
def test_a_new_kind_runs_in_the_actor(step_count_kind, jit):
  """Its slot is made by `init`, read and written by `select_action`, and
  its reward reaches the extras (0 at FIRST, then 1 / (1 + t))."""
  config = step_count_kind
  net, params = _params(config)
  state = actor.init(config, net, jax.random.PRNGKey(1), B)
  assert state.memory is None and state.embedding_params is None
  np.testing.assert_array_equal(state.variant_state["intrinsic"], 0)
  step = functools.partial(actor.select_action, config, net)
  if jit:
    step = jax.jit(step)
  obs = jnp.zeros((B,) + OBS, jnp.float32)
  reward = jnp.zeros((B,), jnp.float32)
  firsts = [[True] * B, [False] * B, [False, True, False], [False] * B]
  expected_t = [[0, 0, 0], [1, 1, 1], [2, 0, 2], [3, 1, 3]]
  for first, t in zip(firsts, expected_t):
    _, state = step(params, state, obs, reward, jnp.asarray(first))
    np.testing.assert_array_equal(state.variant_state["intrinsic"], t)
    r_i = np.where(first, 0., 1. / (1. + np.asarray(t, np.float32)))
    np.testing.assert_allclose(actor.get_extras(state)["intrinsic_reward"],
                               r_i, rtol=1e-6)


def test_a_new_kind_trains_in_the_python_loop(step_count_kind, tmp_path):
  """Registered in the user's module, the kind trains end to end: the
  learner steps (f and the RND predictor untrained, as its flags say) and
  the metrics show its reward."""
  config = config_lib.disco_maze(
      intrinsic_reward="step_count", use_rnd=False, grid_output_size=16,
      lstm_size=16, head_hidden=16, embedding_dim=8, rnd_output_dim=8,
      inverse_dynamics_hidden=16, trace_length=6, replay_period=3,
      min_replay_size=4, batch_size=4, memory_capacity=64,
      replay_capacity=64, samples_per_insert=1.0, actor_update_period=5,
      target_update_period=10)
  out = python_loop.run_experiment(
      config, "disco_maze", 48, num_lanes=2,
      env_kwargs=dict(size=7, max_episode_steps=20), log_every_env_steps=24,
      output_dir=str(tmp_path), progress=False)
  last = out["rows"][-1]
  assert last["learner_steps"] > 0
  assert 0. < last["mean_intrinsic_reward"] < 0.5  # beta 0.5 x (0, 1].
  assert math.isnan(last["mean_episodic_reward"])
  assert math.isnan(last["action_prediction_loss"])
  assert math.isnan(last["rnd_loss"])
