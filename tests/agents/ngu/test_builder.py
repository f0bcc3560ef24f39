"""Tests for ngu_jax.agents.ngu.builder (the Acme builder, NGU App. A).

Each builder method builds; then a tiny end-to-end run on Disco Maze: actor
-> adder -> replay -> learner -> priorities back into the replay and
parameters back to the actor. The replay backends ("embedded", "reverb")
each run the builder's replay, adder, dataset and learner; the Reverb runs
are skipped where Reverb is not importable (tests/replay/conftest.py), unless
NGU_JAX_REQUIRE_REVERB=1.
"""

import functools
import importlib.util

import jax
import numpy as np
import pytest

from ngu_jax import envs
from ngu_jax import mixtures
from ngu_jax import networks as networks_lib
from ngu_jax import types as ngu_types
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.replay import PrioritizedReplay, ReplayNotReadyError
from ngu_jax.replay import SequenceAdder
from ngu_jax.types import SequenceBatch
from tests.replay.conftest import BACKENDS, reverb_backend

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


def test_actor_lanes_among_all_actors():
  """Actor i of K gets lanes i*B ... of the K*B lanes' eps_l and j (App. A)."""
  config, _, spec, builder, networks = _parts()
  policy = builder.make_policy(networks, spec)
  total = 3 * B
  state = policy.init(jax.random.PRNGKey(0), B, first_lane=B,
                      total_lanes=total)
  np.testing.assert_allclose(state.epsilon,
                             mixtures.actor_epsilons(total)[B:2 * B],
                             rtol=1e-6)
  np.testing.assert_array_equal(
      state.mixture_index,
      mixtures.actor_mixtures(total, config.num_mixtures)[B:2 * B])
  actor = builder.make_actor(jax.random.PRNGKey(1), policy, spec, None,
                             first_lane=2 * B, total_lanes=total)
  np.testing.assert_allclose(actor.state.epsilon,
                             mixtures.actor_epsilons(total)[2 * B:],
                             rtol=1e-6)


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
  assert replay.priorities[0] == learning.MIN_PRIORITY
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


# ------------------------------------------------------------ replay backends


def test_unknown_replay_backend_raises():
  config, _, _, _, _ = _parts()
  assert builder_lib.NGUBuilder(config).replay_backend == "embedded"
  for name in ("Reverb", "ray", "", None):
    with pytest.raises(ValueError,
                       match="choose one of 'embedded', 'reverb'") as e:
      builder_lib.NGUBuilder(config, replay_backend=name)
    assert repr(name) in str(e.value)


def test_reverb_backend_without_reverb_says_how_to_install_it():
  if importlib.util.find_spec("reverb") is not None:
    pytest.skip("Reverb is installed here.")
  config, _, spec, _, _ = _parts()
  builder = builder_lib.NGUBuilder(config, replay_backend="reverb")
  with pytest.raises(ImportError, match=r"requirements/reverb\.txt") as e:
    builder.make_replay_tables(spec)
  assert "[reverb]" in str(e.value) and "make test-reverb" in str(e.value)


def _backend_builder(backend):
  """An `NGUBuilder` on `backend` (skips Reverb where not importable)."""
  if backend == "reverb":
    reverb_backend()
  config, _, _, _, _ = _parts()
  builder = builder_lib.NGUBuilder(config, replay_backend=backend)
  assert builder.replay_backend == backend
  return builder


def _make_replay(request, builder, **kwargs):
  """`builder.make_replay_tables`, closed (Reverb server) after the test."""
  _, _, spec, _, _ = _parts()
  replay = builder.make_replay_tables(spec, _policy(), **kwargs)
  if hasattr(replay, "close"):
    request.addfinalizer(replay.close)
  return replay


def _stored_priorities(replay, backend):
  """{key: priority} of the stored items, read from the backend itself."""
  # pylint: disable=protected-access
  if backend == "embedded":
    slots = np.flatnonzero(replay._ids >= 0)
    priorities = replay._tree.get(slots) ** (1. / replay._alpha)
    return dict(zip(replay._ids[slots].tolist(), priorities.tolist()))
  # Reverb has no listing: sample (MinSize limiter only) until all are seen.
  table = replay._table
  return {int(s.info.key): float(s.info.priority)
          for s in replay.client.sample(table, num_samples=500,
                                        emit_timesteps=False)}
  # pylint: enable=protected-access


class _Spy:
  """Records the calls of a replay method and forwards them."""

  def __init__(self, method):
    self.method, self.calls = method, []

  def __call__(self, *args, **kwargs):
    self.calls.append(args)
    return self.method(*args, **kwargs)


def _pipeline(request, backend, rate_limit):
  """Replay, spied adder inserts and priority updates, learner, actor."""
  config, env, spec, _, networks = _parts()
  builder = _backend_builder(backend)
  replay = _make_replay(request, builder, rate_limit=rate_limit, seed=3)
  inserts = replay.insert = _Spy(replay.insert)
  updates = replay.update_priorities = _Spy(replay.update_priorities)
  learner = builder.make_learner(
      jax.random.PRNGKey(0), networks,
      builder.make_dataset_iterator(replay, timeout=0),
      env_spec=spec, replay_client=replay)
  policy = _policy()
  actor = builder.make_actor(jax.random.PRNGKey(1), policy, spec, learner,
                             builder.make_adder(replay, spec, policy))
  timestep = env.reset()
  for _ in range(100):
    if replay.size >= config.min_replay_size:
      break
    action = actor.select_action(timestep)
    actor.observe(timestep, action)
    actor.update()
    timestep = env.step(action)
  inserted = sum(len(items) for items, *_ in inserts.calls)
  assert replay.size == inserted >= config.min_replay_size
  return replay, learner, updates


@pytest.mark.parametrize("backend", BACKENDS)
def test_make_replay_tables_on_each_backend(request, backend):
  """Both backends get the config's capacity, exponents, min size, rate
  limiter (when rate_limit) and seed."""
  config, _, _, _, _ = _parts()
  builder = _backend_builder(backend)
  reference = builder_lib.NGUBuilder(config).make_replay_tables()
  replay = _make_replay(request, builder, seed=7)
  unlimited = _make_replay(request, builder, rate_limit=False)
  # pylint: disable=protected-access
  for made, spi in ((replay, config.samples_per_insert), (unlimited, None)):
    assert type(made).__name__ == {"embedded": "PrioritizedReplay",
                                   "reverb": "ReverbReplay"}[backend]
    assert made.capacity == config.replay_capacity
    assert made.min_size == config.min_replay_size
    assert made._alpha == config.priority_exponent
    assert made._beta == config.importance_sampling_exponent
    assert made._spi == spi
  assert replay._seed == 7 and unlimited._seed == 0
  assert replay._limiter == reference._limiter
  assert unlimited._limiter.samples_per_insert is None
  if backend == "reverb":
    info = replay.client.server_info()[replay._table]
    assert info.max_size == config.replay_capacity
    limiter = info.rate_limiter_info
    assert limiter.samples_per_insert == config.samples_per_insert
    assert limiter.min_size_to_sample == config.min_replay_size
    low, high = reference._limiter._limits()
    assert (limiter.min_diff, limiter.max_diff) == (low, high)
    info = unlimited.client.server_info()[unlimited._table]
    assert info.rate_limiter_info.min_size_to_sample == config.min_replay_size
  # pylint: enable=protected-access


@pytest.mark.parametrize("backend", BACKENDS)
def test_learner_updates_priorities_on_each_backend(request, backend):
  """Actor steps fill the replay through the adder; two learner steps on
  the dataset write their priorities back, by the backend's keys."""
  config, _, _, _, _ = _parts()
  replay, learner, updates = _pipeline(request, backend, rate_limit=False)
  size = replay.size
  for _ in range(2):
    assert np.isfinite(learner.step()["loss"])
  assert int(learner.state.steps) == 2
  assert replay.size == size  # sampling keeps the items.
  assert len(updates.calls) == 2
  last = {}
  for keys, priorities in updates.calls:
    assert keys.shape == priorities.shape == (config.batch_size,)
    assert keys.dtype == (np.uint64 if backend == "reverb" else np.int64)
    assert np.all(priorities >= learning.MIN_PRIORITY)
    last.update(zip(keys.tolist(), priorities.tolist()))
  stored = _stored_priorities(replay, backend)
  seen = set(last) & set(stored)
  if backend == "embedded":
    assert seen == set(last)  # No evictions: capacity 100.
  assert seen  # Reverb: those its sampling met.
  for key in seen:
    assert np.isclose(stored[key], last[key], rtol=1e-6), key
  assert not np.allclose(list(stored.values()), 1.)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rate_limited_learner_on_each_backend(request, backend):
  """With rate_limit the replay enforces samples_per_insert (Reverb's
  SampleToInsertRatio, Acme's default error buffer): after m inserts, k
  batches of n samples while spi * m - k * n >= spi * min_size -
  error_buffer; then it refuses."""
  config, _, _, _, _ = _parts()
  replay, learner, updates = _pipeline(request, backend, rate_limit=True)
  limiter = replay._limiter  # pylint: disable=protected-access
  assert limiter.samples_per_insert == config.samples_per_insert
  spi, n = config.samples_per_insert, config.batch_size
  floor = spi * config.min_replay_size - limiter.error_buffer
  allowed = int((spi * replay.size - floor) // n)  # no evictions: size = m.
  assert allowed >= 2
  for _ in range(allowed):
    learner.step()
  assert len(updates.calls) == allowed
  with pytest.raises(ReplayNotReadyError, match="rate limiter"):
    learner.step()
  assert len(updates.calls) == int(learner.state.steps) == allowed


def _shape_batch(spec, config, t1=5):
  """A `SequenceBatch` of `jax.ShapeDtypeStruct`s for the spec's lanes."""
  b = spec.num_lanes
  s = jax.ShapeDtypeStruct
  f32, i32 = np.float32, np.int32
  step = lambda dtype: s((t1, b), dtype)
  lstm = s((b, config.lstm_size), f32)
  return SequenceBatch(
      observation=s((t1, b) + spec.observation_shape,
                    spec.observations.dtype),
      action=step(i32), extrinsic_reward=step(f32),
      intrinsic_reward=step(f32), discount=step(f32),
      step_is_first=step(bool), behaviour_prob=step(f32), mask=step(f32),
      prev_action=step(i32), prev_extrinsic_reward=step(f32),
      prev_intrinsic_reward=step(f32), mixture_index=s((b,), i32),
      initial_state=networks_lib.LSTMState(hidden=lstm, cell=lstm),
      importance_weights=s((b,), f32))


# Every family's declared encoding reaches the networks, and actor and
# learner trace on its observations (shapes only, no compilation; the
# end-to-end runs are tests/experiments/test_train.py's slow tests).
@pytest.mark.parametrize("name, kwargs, torso", [
    ("atari/Pong", {}, "atari"),
    ("disco_maze", {"size": 7}, "grid"),
    ("minigrid/MiniGrid-DoorKey-5x5-v0", {}, "grid"),
    ("gymnax/DeepSea-bsuite", {"size": 10}, "grid"),
    ("gymnax/CartPole-v1", {}, "mlp"),
])
@pytest.mark.parametrize("normalize", [True, False])
def test_every_env_family_builds_and_traces(name, kwargs, torso, normalize):
  if name.startswith("gymnax/"):
    pytest.importorskip("gymnax")
  config = config_lib.NGUConfig(**{
      **TINY, "torso": "auto", "num_mixtures": 2,
      "rnd_observation_normalization": normalize})
  with envs.make(name, B, seed=0, **kwargs) as env:
    spec = builder_lib.make_environment_spec(env)
    timestep = env.reset()
  encoding = env.observation_encoding()
  assert spec.observation_encoding == encoding
  builder = builder_lib.NGUBuilder(config)
  networks = builder.make_networks(spec)
  assert networks.uvfa.torso == torso
  assert networks.uvfa.encoding == encoding
  assert networks.embedding.encoding == encoding
  # Whitened RND inputs are real features of the raw shape.
  assert networks.rnd.encoding == (ngu_types.FEATURES if normalize
                                   else encoding)
  assert networks.rnd.observation_shape == spec.observation_shape
  policy = builder.make_policy(networks, spec)
  key = jax.random.PRNGKey(0)
  params = jax.eval_shape(lambda k: learning.init_learner(
      config, networks, k), key)
  state = jax.eval_shape(lambda k: policy.init(k, B), key)
  action, _ = jax.eval_shape(
      policy.select_action, params.params, state, timestep.observation,
      np.asarray(timestep.reward, np.float32), timestep.first())
  assert action.shape == (B,)
  _, priorities, metrics = jax.eval_shape(
      functools.partial(learning.sgd_step, config, networks), params,
      _shape_batch(spec, config))
  assert priorities.shape == (B,) and "loss" in metrics


def test_equal_configs_share_networks_and_the_jitted_acting_function():
  """make_networks returns the same object for equal (config, observation
  spec), and make_policy the same select_action: what is jitted over them
  compiles once per process. Anything else differing builds anew."""
  from ngu_jax.agents.ngu import networks as ngu_networks  # pylint: disable=g-import-not-at-top
  config = config_lib.disco_maze(lstm_size=8)
  first = ngu_networks.make_networks(config, (7, 7, 3), 4)
  assert ngu_networks.make_networks(config_lib.disco_maze(lstm_size=8),
                                    [7, 7, 3], np.int64(4)) is first
  assert ngu_networks.make_networks(config, (7, 7, 3), 4,
                                    ngu_types.PIXELS) is first
  assert ngu_networks.make_networks(config_lib.disco_maze(lstm_size=16),
                                    (7, 7, 3), 4) is not first
  assert ngu_networks.make_networks(config, (7, 7, 3), 5) is not first
  policies = [builder_lib.NGUBuilder(config).make_policy(first, None, ev)
              for ev in (False, True)]
  assert policies[0].select_action is policies[1].select_action
  other = builder_lib.NGUBuilder(config_lib.disco_maze(lstm_size=16))
  assert other.make_policy(first).select_action is not (
      policies[0].select_action)
