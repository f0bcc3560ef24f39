"""Tests of the host acting step (`ngu_jax.loops.acting`)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import envs
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.envs import base
from ngu_jax.envs import disco_maze
from ngu_jax.envs import disco_maze_jax
from ngu_jax.envs import functional
from ngu_jax.envs import noisy_grid
from ngu_jax.loops import acting
from ngu_jax.loops import host as host_lib
from ngu_jax.loops import metrics_log
from ngu_jax.loops.compiled import state as compiled_state

# A tiny agent: every network 16 wide, short sequences.
TINY = dict(grid_output_size=16, lstm_size=16, head_hidden=16,
            embedding_dim=8, rnd_output_dim=8, inverse_dynamics_hidden=16,
            trace_length=6, replay_period=3, min_replay_size=4, batch_size=4,
            memory_capacity=64, replay_capacity=64, samples_per_insert=1.0,
            actor_update_period=5, target_update_period=10)

F, M, L = base.StepType.FIRST, base.StepType.MID, base.StepType.LAST


def _timestep(step_type, reward, position=None, discount=None):
  step_type = np.asarray(step_type, np.int32)
  extras = {} if position is None else {
      "position": np.asarray(position, np.int32)}
  return base.TimeStep(
      step_type=step_type, reward=np.asarray(reward, np.float32),
      discount=(np.ones(step_type.shape, np.float32) if discount is None
                else np.asarray(discount, np.float32)),
      observation=np.zeros(step_type.shape + (1,), np.float32),
      extras=extras)


def test_seed_offsets():
  assert acting.EVAL_ENV_SEED_OFFSET == 10_000
  assert acting.EVAL_ACTOR_SEED_OFFSET == 1
  assert acting.evaluation_env_seed(3) == 10_003
  assert acting.evaluation_mixtures(1) == [0]
  assert acting.evaluation_mixtures(4) == [0, 3]


def test_episode_stats_by_hand():
  """Two lanes; the reward of a FIRST step belongs to no episode."""
  stats = acting.EpisodeStats.zeros(2, visits_shape=(3, 3))
  steps = [
      _timestep([F, F], [9., 9.], [[0, 0], [1, 1]]),
      _timestep([M, M], [1., -1.], [[0, 1], [1, 1]]),
      _timestep([L, M], [2., 0.5], [[0, 2], [1, 2]]),
      _timestep([F, L], [7., -1.], [[2, 2], [2, 2]]),
      _timestep([L, F], [0., 5.], [[2, 1], [0, 0]]),
  ]
  for ts in steps:
    stats.observe(ts)
  # Lane 0: 1 + 2 = 3, then 0 (FIRST's 7 not counted); lane 1: -1 + .5 - 1.
  assert stats.returns == [3., -1.5, 0.]
  assert stats.episodes == 3
  np.testing.assert_array_equal(stats.episode_return, [0., 0.])
  expected_visits = np.zeros((3, 3), np.int64)
  for ts in steps:
    for row, col in ts.extras["position"]:
      expected_visits[row, col] += 1
  np.testing.assert_array_equal(stats.visits, expected_visits)
  drained = stats.drain()
  assert drained["returns"] == [3., -1.5, 0.] and drained["coverages"] == []
  np.testing.assert_array_equal(drained["visits"], expected_visits)
  np.testing.assert_array_equal(drained["actor_sums"],
                                np.zeros(len(diagnostics.ACTOR_SUMS)))
  assert stats.returns == [] and stats.episodes == 3
  assert not stats.visits.any()


def test_episode_stats_coverage_from_the_tracker():
  """Coverage of finished episodes (Sec. 4.1): the tracker's value at LAST;
  a terminating LAST's wall cell is not counted."""
  tracker = disco_maze.CoverageTracker(1, size=5)  # 7 free cells.
  stats = acting.EpisodeStats.zeros(1)
  for ts in [_timestep([F], [0.], [[1, 1]]),
             _timestep([M], [0.], [[1, 2]]),
             _timestep([M], [0.], [[1, 3]]),
             _timestep([L], [0.], [[0, 3]], discount=[0.])]:
    stats.observe(ts, tracker)
  assert stats.coverages == [pytest.approx(3 / 7)]
  assert stats.returns == [0.] and stats.episodes == 1


def test_environments_declare_their_coverage():
  maze = envs.make("disco_maze", 3, size=7)
  tracker = acting.make_coverage_tracker(maze)
  assert isinstance(tracker, disco_maze.CoverageTracker)
  assert tracker.size == 7 and tracker.get_state()["count"].shape == (3,)
  lanes = envs.make("jax/disco_maze", 2, size=9)
  tracker = acting.make_coverage_tracker(lanes)
  assert isinstance(tracker, disco_maze.CoverageTracker)
  assert tracker.size == 9 and tracker.get_state()["count"].shape == (2,)

  class Bare(base.BatchedEnv):  # Declares nothing: no coverage.
    num_envs = 1
    observation_spec = action_spec = reset = step = lambda self, *a: None

  assert acting.make_coverage_tracker(Bare()) is None
  assert acting.make_coverage_tracker(object()) is None


def _parts(seed=0, num_lanes=2):
  config = config_lib.disco_maze(**{**TINY, "num_mixtures": 3})
  env = envs.make("disco_maze", num_lanes, seed=seed, size=7,
                  max_episode_steps=6)
  spec = builder_lib.make_environment_spec(env)
  builder = builder_lib.NGUBuilder(config)
  networks = builder.make_networks(spec)
  return config, env, spec, builder, networks


class _Source:
  """A variable source of fixed parameters."""

  def __init__(self, params):
    self.params = params

  def get_variables(self):
    return self.params


def _learner_params(builder, networks, spec):
  replay = builder.make_replay_tables(spec, rate_limit=False, seed=0)
  learner = builder.make_learner(
      jax.random.PRNGKey(0), networks, builder.make_dataset_iterator(replay),
      env_spec=spec, replay_client=replay)
  return learner.state.params


def test_make_evaluation_actors_seeds_and_policies():
  """Actor j is keyed PRNGKey(seed + 1 + j), with the evaluation policy of
  mixture j: it acts exactly as one built by hand so."""
  config, env, spec, builder, networks = _parts()
  source = _Source(_learner_params(builder, networks, spec))
  seed = 5
  actors = acting.make_evaluation_actors(builder, networks, spec, source,
                                         config, seed)
  assert sorted(actors) == [0, 2]
  timestep = env.reset()
  for j, actor in actors.items():
    policy = builder.make_policy(networks, spec, evaluation=True,
                                 eval_mixture_index=j)
    twin = builder.make_actor(jax.random.PRNGKey(seed + 1 + j), policy, spec,
                              source)
    ts = timestep
    for _ in range(4):
      action = actor.select_action(ts)
      np.testing.assert_array_equal(action, twin.select_action(ts))
      actor.update()
      twin.update()
      ts = env.step(action)


def test_evaluation_actors_adopt_the_training_statistics():
  """`Actor.adopt_statistics` (the Python loop calls it before every
  evaluation): the evaluator gets the training actor's RND-error moments
  and pooled d_m^2, copied -- both actors keep acting (the states are
  donated at every step) and the training actor's statistics are unchanged
  by the evaluator's steps."""
  config, env, spec, builder, networks = _parts(num_lanes=3)
  params = _learner_params(builder, networks, spec)
  # Observation statistics as after a learner update: errors count.
  stats = params.rnd_observation_stats
  source = _Source(params._replace(rnd_observation_stats=stats._replace(
      var=jnp.ones_like(stats.var), count=jnp.ones_like(stats.count))))
  actor = builder.make_actor(jax.random.PRNGKey(4), builder.make_policy(
      networks, spec), spec, source)
  timestep = env.reset()
  for _ in range(6):
    action = actor.select_action(timestep)
    actor.update()
    timestep = env.step(action)
  trained = jax.device_get(actor.state.error_stats)
  assert trained.count > 0
  evaluator = acting.make_evaluation_actors(builder, networks, spec, source,
                                            config, 5)[0]
  evaluator.adopt_statistics(actor.state)
  got = jax.device_get(evaluator.state)
  np.testing.assert_array_equal(got.error_stats.count, trained.count)
  np.testing.assert_array_equal(got.error_stats.mean, trained.mean)
  memory = jax.device_get(actor.state.memory)
  pooled = (np.sum(memory.distance_count * memory.mean_sq_distance)
            / np.sum(memory.distance_count))
  np.testing.assert_allclose(got.memory.mean_sq_distance, pooled, rtol=1e-6)
  eval_ts = env.reset()
  for _ in range(3):
    eval_action = evaluator.select_action(eval_ts)
    eval_ts = env.step(eval_action)
  assert jax.device_get(evaluator.state.error_stats).count > trained.count
  np.testing.assert_array_equal(
      jax.device_get(actor.state.error_stats).count, trained.count)
  actor.select_action(timestep)  # The training state is still valid.


def test_acting_step_is_the_loop_body():
  """`ActingStep` = statistics, select_action, observe, diagnostics sums,
  update: the same actions and sums as those calls made by hand."""
  config, env, spec, builder, networks = _parts(num_lanes=3)
  source = _Source(_learner_params(builder, networks, spec))
  policy = builder.make_policy(networks, spec)
  actor = builder.make_actor(jax.random.PRNGKey(4), policy, spec, source)
  twin = builder.make_actor(jax.random.PRNGKey(4), policy, spec, source)
  step = acting.ActingStep(actor, config, env.make_coverage_tracker())
  stats = acting.EpisodeStats.zeros(3)
  add = acting.actor_sums_fn(config.num_mixtures, config.beta)
  sums = jnp.asarray(acting.zero_actor_sums())
  timestep = env.reset()
  for _ in range(12):
    action = step(timestep, stats)
    expected = twin.select_action(timestep)
    extras = twin.state.extras
    sums = add(sums, {k: getattr(extras, k)
                      for k in diagnostics.ACTOR_EXTRAS}, timestep.first())
    twin.update()
    np.testing.assert_array_equal(action, expected)
    timestep = env.step(action)
  assert actor.num_updates == twin.num_updates == 12
  np.testing.assert_array_equal(jax.device_get(stats.actor_sums),
                                jax.device_get(sums))
  assert stats.episodes == len(stats.returns) == len(stats.coverages) > 0
  assert all(0 < c <= 1 for c in stats.coverages)


class _RewardedMaze(disco_maze_jax.DiscoMazeJax):
  """Disco Maze with rewards in {-0.5, 0, 0.5} (0 on FIRST), so that
  episodes have positive, zero and negative returns (exact in float32)."""

  def step(self, state, action):
    state, ts = super().step(state, action)
    position = ts.extras["position"]
    reward = 0.5 * ((position[0] + 2 * position[1]) % 3) - 0.5
    reward = jnp.where(ts.step_type == base.StepType.FIRST, 0., reward)
    return state, ts._replace(reward=reward.astype(jnp.float32))


def test_host_and_compiled_statistics_agree():
  """The host step's statistics (`record_episodes` with the coverage tracker
  the env declares) and the compiled loop's (`compiled_state.
  episode_stats`, jitted in a scan) on the same episodes: same episode
  count, mean return, success rate and mean coverage."""
  num_lanes, num_steps = 4, 60
  env = functional.FunctionalBatchedEnv(
      _RewardedMaze(size=5, max_episode_steps=5), num_lanes, seed=3)
  actions = np.random.default_rng(0).integers(0, 4, (num_steps, num_lanes))
  timesteps = [env.reset()]
  for action in actions[:-1]:
    timesteps.append(env.step(action))
  # The host acting step's statistics.
  host = acting.EpisodeStats.zeros(num_lanes)
  tracker = env.make_coverage_tracker()
  for ts in timesteps:
    host.observe(ts, tracker)
  # The compiled loop's, on the same timesteps.
  functional_env = env.functional_env
  zero = jnp.zeros((), jnp.int32)
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *timesteps)
  state = compiled_state.TrainState(
      env_state=None, timestep=jax.tree_util.tree_map(lambda x: x[0],
                                                      stacked),
      episode_return=jnp.zeros((num_lanes,), jnp.float32), actor=None,
      actor_params=None, adder=None, replay=None, learner=None, key=None,
      counters=compiled_state.Counters(
          env_steps=zero, actor_steps=zero, learner_steps=zero,
          episodes=zero, ready_at=zero),
      stats=compiled_state.zero_stats(functional_env))

  @jax.jit
  def run(state, stacked):
    def body(state, ts):
      return compiled_state.episode_stats(state._replace(timestep=ts)), None
    return jax.lax.scan(body, state, stacked)[0]

  out = jax.device_get(run(state, stacked))
  returns, coverage = out.stats.returns, out.stats.coverage
  assert host.episodes == int(out.counters.episodes) == int(returns[1]) > 10
  assert int(coverage[1]) == len(host.coverages) == host.episodes
  # Returns are multiples of 0.5: exact.
  assert float(returns[0]) / float(returns[1]) == np.mean(host.returns)
  assert float(returns[2]) == sum(r > 0 for r in host.returns)
  assert 0 < float(returns[2]) < host.episodes  # Successes and failures.
  assert min(host.returns) < 0
  np.testing.assert_allclose(float(coverage[0]) / float(coverage[1]),
                             np.mean(host.coverages), rtol=1e-6)
  np.testing.assert_array_equal(out.episode_return,
                                host.episode_return.astype(np.float32))
  # Per episode too: the compiled loop's coverage extra at each LAST is
  # the host tracker's number.
  tracker = env.make_coverage_tracker()
  for ts in timesteps:
    lane_coverage = tracker.update(ts)
    np.testing.assert_array_equal(lane_coverage[ts.last()],
                                  ts.extras["coverage"][ts.last()])
  assert not math.isnan(np.mean(host.coverages))
  # Disco Maze reports no episode extras: nothing recorded (NaN columns).
  assert host.episode_extras == {"frontier": [], "tv_steps": []}
  np.testing.assert_array_equal(out.stats.episode_extras, 0.)


def _extras_timestep(step_type, frontier, tv_steps):
  ts = _timestep(step_type, np.zeros(len(step_type)))
  ts.extras.update(frontier=np.asarray(frontier, np.int32),
                   tv_steps=np.asarray(tv_steps, np.int32))
  return ts


def test_episode_extras_by_hand():
  """Each extra of `EPISODE_EXTRAS` is read at LAST (its value then is the
  episode's statistic), drained with the returns; absent extras stay
  empty and give NaN columns."""
  assert acting.EPISODE_EXTRAS == metrics_log.EPISODE_EXTRAS == (
      "frontier", "tv_steps")
  stats = acting.EpisodeStats.zeros(2)
  for ts in [_extras_timestep([F, F], [0, 0], [0, 0]),
             _extras_timestep([M, M], [1, 2], [0, 1]),
             _extras_timestep([L, M], [3, 2], [1, 1]),
             _extras_timestep([F, L], [0, 4], [0, 2]),
             _extras_timestep([L, F], [5, 0], [3, 0])]:
    stats.observe(ts)
  assert stats.episode_extras == {"frontier": [3, 4, 5],
                                  "tv_steps": [1, 2, 3]}
  drained = stats.drain()
  assert drained["episode_extras"] == {"frontier": [3, 4, 5],
                                       "tv_steps": [1, 2, 3]}
  assert stats.episode_extras == {"frontier": [], "tv_steps": []}
  columns = host_lib.episode_columns(drained["returns"], [], False,
                                     drained["episode_extras"])
  assert columns["mean_episode_frontier"] == 4.
  assert columns["mean_episode_tv_steps"] == 2.
  # An environment without the extras (positions only).
  stats.observe(_timestep([L, L], [0., 0.], [[0, 0], [0, 0]]))
  assert stats.returns == [0., 0.]
  assert stats.episode_extras == {"frontier": [], "tv_steps": []}
  columns = host_lib.episode_columns(stats.returns, [], False,
                                     stats.episode_extras)
  assert math.isnan(columns["mean_episode_frontier"])
  assert math.isnan(columns["mean_episode_tv_steps"])


def _stack_episode_stats(functional_env, timesteps, num_lanes):
  """`compiled_state.episode_stats` over `timesteps`, jitted in a scan."""
  zero = jnp.zeros((), jnp.int32)
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *timesteps)
  state = compiled_state.TrainState(
      env_state=None, timestep=jax.tree_util.tree_map(lambda x: x[0],
                                                      stacked),
      episode_return=jnp.zeros((num_lanes,), jnp.float32), actor=None,
      actor_params=None, adder=None, replay=None, learner=None, key=None,
      counters=compiled_state.Counters(
          env_steps=zero, actor_steps=zero, learner_steps=zero,
          episodes=zero, ready_at=zero),
      stats=compiled_state.zero_stats(functional_env))

  @jax.jit
  def run(state, stacked):
    def body(state, ts):
      return compiled_state.episode_stats(state._replace(timestep=ts)), None
    return jax.lax.scan(body, state, stacked)[0]

  return jax.device_get(run(state, stacked))


def test_host_and_compiled_episode_extras_agree_on_the_noisy_grid():
  """Noisy-TV grid ("tv" noise), fixed actions with the TV action 4: the
  host statistics' and the compiled loop's frontier and tv_steps of the
  finished episodes agree, and equal references computed here from the
  actions (TV actions per episode) and the positions (largest BFS distance
  from the start per episode)."""
  num_lanes, num_steps, horizon = 3, 40, 5
  grid = noisy_grid.NoisyGrid("tv", size=7, max_episode_steps=horizon)
  env = functional.FunctionalBatchedEnv(grid, num_lanes, seed=1)
  rng = np.random.default_rng(4)
  # Half the actions are TV, the rest moves.
  actions = np.where(rng.random((num_steps, num_lanes)) < 0.5,
                     noisy_grid.TV_ACTION,
                     rng.integers(0, 4, (num_steps, num_lanes)))
  timesteps = [env.reset()]
  for action in actions[:-1]:
    timesteps.append(env.step(action))
  # References: per lane, each episode from its FIRST to its LAST.
  distance = np.asarray(grid.distance_to_start)
  frontier_ref, tv_ref = [], []
  start = np.zeros(num_lanes, int)  # Index of each lane's running FIRST.
  for t, ts in enumerate(timesteps):  # In the order the host records them.
    step_type = np.asarray(ts.step_type)
    for lane in range(num_lanes):
      if step_type[lane] == F:
        start[lane] = t
      elif step_type[lane] == L:
        rows = [np.asarray(timesteps[u].extras["position"])[lane]
                for u in range(start[lane], t + 1)]
        frontier_ref.append(max(int(distance[r, c]) for r, c in rows))
        # Actions applied from FIRST up to the LAST step (actions[t] is
        # applied to timesteps[t]).
        tv_ref.append(int(np.sum(
            actions[start[lane]:t, lane] == noisy_grid.TV_ACTION)))
  assert len(frontier_ref) == num_lanes * (num_steps // (horizon + 1))
  assert max(tv_ref) > 0 and min(frontier_ref) < max(frontier_ref)
  # The host acting step's statistics.
  host = acting.EpisodeStats.zeros(num_lanes)
  tracker = env.make_coverage_tracker()
  for ts in timesteps:
    host.observe(ts, tracker)
  assert host.episode_extras == {"frontier": frontier_ref,
                                 "tv_steps": tv_ref}
  columns = host_lib.episode_columns(host.returns, host.coverages, True,
                                     host.episode_extras)
  assert columns["mean_episode_frontier"] == np.mean(frontier_ref)
  assert columns["mean_episode_tv_steps"] == np.mean(tv_ref)
  # The compiled loop's, on the same timesteps (sums of small integers:
  # exact in float32).
  out = _stack_episode_stats(env.functional_env, timesteps, num_lanes)
  sums = np.asarray(out.stats.episode_extras)
  assert sums.shape == (len(compiled_state.EPISODE_EXTRAS), 2)
  index = compiled_state.EPISODE_EXTRAS.index
  np.testing.assert_array_equal(
      sums[index("frontier")], [sum(frontier_ref), len(frontier_ref)])
  np.testing.assert_array_equal(
      sums[index("tv_steps")], [sum(tv_ref), len(tv_ref)])
  assert int(out.counters.episodes) == host.episodes == len(tv_ref)
  np.testing.assert_allclose(
      float(out.stats.coverage[0]) / float(out.stats.coverage[1]),
      np.mean(host.coverages), rtol=1e-6)
