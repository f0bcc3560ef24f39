"""Tests for ngu_jax.agents.ngu.builder (the Acme builder, NGU App. A).

Each builder method builds; then a tiny end-to-end run on Disco Maze: actor
-> adder -> replay -> learner -> priorities back into the replay and
parameters back to the actor.
"""

import functools

import jax
import numpy as np
import pytest

from ngu_jax import envs
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.replay import PrioritizedReplay, SequenceAdder
from ngu_jax.types import SequenceBatch

B = 2
TINY = dict(
    num_mixtures=1, torso="grid", grid_output_size=16, lstm_size=16,
    head_hidden=16, embedding_dim=8, rnd_output_dim=8,
    inverse_dynamics_hidden=16, trace_length=10, replay_period=5,
    min_replay_size=4, batch_size=4, memory_capacity=50, replay_capacity=100,
    num_neighbors=3, actor_update_period=20)


@functools.lru_cache(maxsize=None)
def _parts():
  config = config_lib.disco_maze(**TINY)
  env = envs.make("disco_maze", B, seed=0, max_episode_steps=30)
  spec = builder_lib.make_environment_spec(env)
  builder = builder_lib.NGUBuilder(config)
  networks = builder.make_networks(spec)
  return config, env, spec, builder, networks


@functools.lru_cache(maxsize=None)
def _policy():
  """One policy object, so that the actors' jitted step compiles once."""
  _, _, spec, builder, networks = _parts()
  return builder.make_policy(networks, spec)


def test_environment_spec():
  _, _, spec, _, _ = _parts()
  assert spec.observation_shape == (21, 21, 3)
  assert spec.num_actions == 4
  assert spec.num_lanes == B


def test_make_replay_tables_from_config():
  config, _, spec, builder, _ = _parts()
  replay = builder.make_replay_tables(spec)
  assert isinstance(replay, PrioritizedReplay)
  assert replay.capacity == config.replay_capacity
  assert replay.min_size == config.min_replay_size
  # pylint: disable=protected-access
  assert replay._alpha == config.priority_exponent
  assert replay._beta == config.importance_sampling_exponent
  assert replay._spi == config.samples_per_insert
  assert builder.make_replay_tables(spec, rate_limit=False)._spi is None
  # pylint: enable=protected-access


def test_make_adder_and_policy():
  config, _, spec, builder, networks = _parts()
  replay = builder.make_replay_tables(spec, rate_limit=False)
  adder = builder.make_adder(replay, spec)
  assert isinstance(adder, SequenceAdder)
  assert adder.item_length == config.burn_in + config.trace_length
  assert adder.num_lanes == B
  policy = builder.make_policy(networks, spec)
  state = policy.init(jax.random.PRNGKey(0), B)
  assert state.prev_action.shape == (B,)
  assert not policy.evaluation
  eval_policy = builder.make_policy(networks, spec, evaluation=True)
  eval_state = eval_policy.init(jax.random.PRNGKey(0), B)
  np.testing.assert_allclose(eval_state.epsilon, config.eval_epsilon)


class _Source:
  """A variable source counting its calls."""

  def __init__(self, params):
    self.params, self.calls = params, 0

  def get_variables(self, names=None):
    del names
    self.calls += 1
    return self.params


def test_actor_pulls_params_every_update_period_and_writes_adder():
  config, env, spec, builder, networks = _parts()
  params = learning.init_learner(config, networks,
                                 jax.random.PRNGKey(0)).params
  source = _Source(params)
  replay = builder.make_replay_tables(spec, rate_limit=False)
  policy = _policy()
  actor = builder.make_actor(jax.random.PRNGKey(1), policy, spec, source,
                             builder.make_adder(replay, spec, policy))
  timestep = env.reset()
  steps = 2 * config.actor_update_period + 1
  for _ in range(steps):
    action = actor.select_action(timestep)
    assert action.shape == (B,) and action.dtype == np.int32
    actor.observe(timestep, action)
    actor.update()
    timestep = env.step(action)
  # One pull before the first action, then at updates 20 and 40.
  assert source.calls == 1 + 2
  assert replay.size > 0


def test_dataset_iterator_yields_importance_weighted_batches():
  config, env, spec, builder, networks = _parts()
  replay = builder.make_replay_tables(spec, rate_limit=False)
  params = learning.init_learner(config, networks,
                                 jax.random.PRNGKey(0)).params
  policy = _policy()
  actor = builder.make_actor(jax.random.PRNGKey(1), policy, spec,
                             _Source(params),
                             builder.make_adder(replay, spec, policy))
  timestep = env.reset()
  while replay.size < config.min_replay_size:
    action = actor.select_action(timestep)
    actor.observe(timestep, action)
    actor.update()
    timestep = env.step(action)
  keys, batch = next(builder.make_dataset_iterator(replay, timeout=0))
  assert isinstance(batch, SequenceBatch)
  assert keys.shape == (config.batch_size,)
  assert batch.observation.shape == (config.trace_length, config.batch_size,
                                     21, 21, 3)
  assert batch.importance_weights.shape == (config.batch_size,)
  assert np.all(batch.importance_weights > 0)
  assert np.isclose(batch.importance_weights.max(), 1.)
  learning.check_batch(networks.uvfa, batch)


def test_learner_floors_priorities():
  """Zero priorities (non-finite lanes) are floored, not rejected."""
  config, _, _, _, networks = _parts()

  class Replay:
    def update_priorities(self, keys, priorities):
      self.keys, self.priorities = keys, priorities

  rng = np.random.default_rng(0)
  t, b = config.trace_length, config.batch_size
  state = networks.uvfa.initial_state(b)
  batch = SequenceBatch(
      observation=rng.integers(0, 255, (t, b, 21, 21, 3)).astype(np.uint8),
      action=rng.integers(0, 4, (t, b)).astype(np.int32),
      extrinsic_reward=np.zeros((t, b), np.float32),
      intrinsic_reward=np.zeros((t, b), np.float32),
      discount=np.ones((t, b), np.float32),
      step_is_first=np.zeros((t, b), bool),
      behaviour_prob=np.full((t, b), 0.25, np.float32),
      mask=np.ones((t, b), np.float32),
      prev_action=rng.integers(0, 4, (t, b)).astype(np.int32),
      prev_extrinsic_reward=np.zeros((t, b), np.float32),
      prev_intrinsic_reward=np.zeros((t, b), np.float32),
      mixture_index=np.zeros((b,), np.int32),
      initial_state=jax.tree_util.tree_map(np.asarray, state),
      importance_weights=np.ones((b,), np.float32))
  batch.extrinsic_reward[3, 0] = np.nan  # lane 0 is non-finite.
  replay = Replay()
  builder = builder_lib.NGUBuilder(config)
  learner = builder.make_learner(
      jax.random.PRNGKey(0), networks,
      iter([(np.arange(b), batch)]), replay_client=replay)
  metrics = learner.step()
  assert metrics["step_skipped"] == 1
  assert replay.priorities[0] == builder_lib.MIN_PRIORITY
  assert np.all(replay.priorities > 0)


@pytest.mark.slow
def test_end_to_end_disco_maze():
  config, env, spec, builder, networks = _parts()
  replay = builder.make_replay_tables(spec, rate_limit=False, seed=0)
  learner = builder.make_learner(
      jax.random.PRNGKey(0), networks, builder.make_dataset_iterator(replay),
      env_spec=spec, replay_client=replay)
  policy = _policy()
  actor = builder.make_actor(jax.random.PRNGKey(1), policy, spec, learner,
                             builder.make_adder(replay, spec, policy))
  before = jax.tree_util.tree_map(np.array, learner.get_variables())
  timestep = env.reset()
  losses = []
  for step in range(150):  # 300 env steps.
    action = actor.select_action(timestep)
    actor.observe(timestep, action)
    actor.update()
    timestep = env.step(action)
    if replay.size >= config.min_replay_size and step % 10 == 0:
      losses.append(learner.step()["loss"])
  assert len(losses) >= 3
  assert np.all(np.isfinite(losses))
  assert int(learner.state.steps) == len(losses)
  # Priorities were written back: no longer all equal to the initial 1.
  tree = replay._tree  # pylint: disable=protected-access
  leaves = tree.leaves()[:replay.size]
  assert not np.allclose(leaves, leaves[0])
  # The actor now acts with the learner's updated parameters.
  after = learner.get_variables()
  for params in (after, actor.params):
    changed = jax.tree_util.tree_map(
        lambda x, y: not np.allclose(x, y), before.q, params.q)
    assert any(jax.tree_util.tree_leaves(changed))
