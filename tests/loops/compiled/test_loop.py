"""Tests of the compiled loop (`ngu_jax.loops.compiled`)."""

import csv
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.intrinsic import lifelong
from ngu_jax.loops import metrics_log
from ngu_jax.loops.compiled import loop as compiled
from ngu_jax.loops.compiled import runner as compiled_runner
from ngu_jax.loops.compiled import state as compiled_state

# A tiny agent: every network 16 wide, short sequences, learning early.
TINY = dict(grid_output_size=16, lstm_size=16, head_hidden=16,
            embedding_dim=8, rnd_output_dim=8, inverse_dynamics_hidden=16,
            trace_length=6, replay_period=3, min_replay_size=4, batch_size=4,
            memory_capacity=64, replay_capacity=64, samples_per_insert=1.0,
            actor_update_period=5, target_update_period=10)


def tiny_disco(**overrides):
  return config_lib.disco_maze(**{**TINY, **overrides})


def disco_env(**kwargs):
  return envs.make_functional("disco_maze", size=7, max_episode_steps=20,
                              **kwargs)


# The loop of the pacing test's chunk of 5 (learner phases 3 + 2), which
# the evaluation test trains too: one loop object and one jitted chunk for
# both, compiled once in this file's process (the persistent cache cannot
# share it: the chunk's input checks are a host callback).
PACED = dict(actor_update_period=7, samples_per_insert=4.0)
PACED_LANES = 4


def paced_loop(chunk=5, learner_period=3):
  """One loop object per (chunk, period) in this file, so that its jitted
  functions (`jitted`) are compiled once for every test that uses it."""
  return _paced_loop(chunk, learner_period)


@functools.lru_cache(maxsize=None)
def _paced_loop(chunk, learner_period):
  return compiled.make_compiled_loop(tiny_disco(**PACED), disco_env(),
                                     num_lanes=PACED_LANES,
                                     steps_per_chunk=chunk,
                                     learner_period=learner_period)


_JITTED = {}


def jitted(loop, name):
  """`jax.jit(getattr(loop, name))`, one per loop object and name."""
  key = (id(loop), name)
  if key not in _JITTED:
    _JITTED[key] = (loop, jax.jit(getattr(loop, name)))
  return _JITTED[key][1]


def run_chunks(loop, state, n):
  run = jitted(loop, "run_chunk")
  for _ in range(n):
    state = run(state)
  return state


def test_fit_memory_to_episodes():
  config = config_lib.disco_maze()
  assert compiled.fit_memory_to_episodes(config, 99).memory_capacity == 100
  assert compiled.fit_memory_to_episodes(
      config, 10_000).memory_capacity == config.memory_capacity
  kept = config_lib.disco_maze(memory_wipe_period=2)
  assert compiled.fit_memory_to_episodes(kept, 99) == kept


@pytest.mark.parametrize("learner_period, chunk", [
    pytest.param(1, 1, marks=pytest.mark.slow), (3, 5)])
def test_learner_pacing_counters_and_parameter_pulls(learner_period, chunk):
  """The Python loop's pacing, checked after every chunk (blocks of
  `learner_period` actor steps, the last one shorter when it must be: 3 + 2
  in a chunk of 5; a chunk a multiple of the period: 1 + 1 + ...). With a
  chunk of one actor step, also: the actor pulls the learner's parameters
  every `actor_update_period` actor steps, after acting and before that
  step's learning (and holds them in between)."""
  loop = paced_loop(chunk, learner_period)
  config = loop.config
  assert loop.steps_per_chunk == chunk
  state = jitted(loop, "init")(jax.random.PRNGKey(0))
  run = jitted(loop, "run_chunk")
  spe = config.samples_per_insert / config.replay_period
  leaf = lambda p: np.asarray(jax.tree_util.tree_leaves(p.q)[0])
  pulled = leaf(state.actor_params)
  ready_at = None
  changed = 0
  for block in range(1, 1 + 40 // chunk):
    before = leaf(state.learner.params)
    state = run(state)
    c = jax.device_get(state.counters)
    step = block * chunk
    assert c.env_steps == 4 * step and c.actor_steps == step
    if chunk == 1:
      if step % 7 == 0:
        changed += not np.array_equal(before, leaf(state.learner.params))
        pulled = before
      np.testing.assert_array_equal(leaf(state.actor_params), pulled)
    size = int(np.asarray(state.replay.size))
    if learner_period == 1 and ready_at is None and (
        size >= config.min_replay_size):
      ready_at = c.env_steps  # The first step with min_replay_size items.
      assert c.ready_at == ready_at
    if c.ready_at < 0:
      assert size < config.min_replay_size and c.learner_steps == 0
      continue
    # Learner steps n = 0, 1, ... while n batch <= spe (env - ready_at).
    expected = int(np.floor(spe * (c.env_steps - c.ready_at)
                            / config.batch_size)) + 1
    assert c.learner_steps == expected, step
  assert c.learner_steps > 5
  assert int(state.learner.steps) + int(state.learner.skipped_steps) == (
      c.learner_steps)
  if chunk == 1:  # Pulls that learning changed right after: the order shows.
    assert changed >= 2


def test_learner_period_for():
  config = tiny_disco(batch_size=32, replay_period=5, samples_per_insert=4.)
  # 16 lanes: 16 * 4 / (5 * 32) = 0.4 learner steps per actor step.
  assert compiled.learner_period_for(config, 16) == 20
  assert compiled.learner_period_for(config, 16, learner_steps=1.) == 2
  loop = compiled.make_compiled_loop(config, disco_env(), 16,
                                     steps_per_chunk=50)
  assert (loop.learner_period, loop.steps_per_chunk) == (20, 50)
  loop = compiled.make_compiled_loop(config, disco_env(), 16,
                                     steps_per_chunk=5)
  assert (loop.learner_period, loop.steps_per_chunk) == (5, 5)


def test_episode_statistics_match_a_rollout():
  """Returns / episodes from the loop equal a direct count on DeepSea."""
  pytest.importorskip("gymnax")
  config = config_lib.minigrid(**{**TINY, "torso": "auto",
                                  "num_mixtures": 2,
                                  "min_replay_size": 64})
  env = envs.make_functional("gymnax/DeepSea-bsuite")
  loop = compiled.make_compiled_loop(config, env, num_lanes=3,
                                     steps_per_chunk=25)
  state = jax.jit(loop.init)(jax.random.PRNGKey(2))
  state = run_chunks(loop, state, 1)
  m = jax.device_get(compiled_state.chunk_metrics(state))
  # DeepSea episodes last exactly `size` steps (default 8): every lane
  # finishes an episode every 9 timesteps (FIRST + 8), counted at LAST.
  size = 8
  assert m["episodes"] == 3 * (25 // (size + 1))
  assert m["returns"][1] == m["episodes"]
  assert int(m["learner_steps"]) == 0  # min_replay_size not reached.
  # Per-cell sums: one visit per lane and step, at the cells of `visits`;
  # the j = 0 lanes (0 and 2) and the j = 1 lane (1) took 25 actions each.
  cells = np.asarray(m["cells"])
  assert cells.shape[:2] == (size + 1, size)
  np.testing.assert_array_equal(cells[..., 0], m["visits"])
  assert cells[..., 0].sum() == 3 * 25
  maps = diagnostics.cell_maps(cells)
  assert np.nansum(maps["policy_exploit"] * maps["exploit_visits"][
      ..., None]) == 2 * 25
  assert maps["explore_visits"].sum() == 25


@pytest.mark.slow
def test_vmapped_seeds_equal_separate_runs():
  config = tiny_disco()
  loop = compiled.make_compiled_loop(config, disco_env(), num_lanes=2,
                                     steps_per_chunk=30)
  keys = jnp.stack([jax.random.PRNGKey(3), jax.random.PRNGKey(4)])
  both = jax.jit(jax.vmap(loop.run_chunk))(jax.jit(jax.vmap(loop.init))(keys))
  for i in range(2):
    alone = run_chunks(loop, jax.jit(loop.init)(keys[i]), 1)
    c_both = jax.tree_util.tree_map(lambda x: np.asarray(x)[i],
                                    both.counters)
    assert c_both == jax.device_get(alone.counters)
    assert int(alone.counters.learner_steps) > 0
    np.testing.assert_array_equal(np.asarray(both.timestep.observation)[i],
                                  np.asarray(alone.timestep.observation))
    for a, b in zip(jax.tree_util.tree_leaves(alone.learner.params),
                    jax.tree_util.tree_leaves(both.learner.params)):
      np.testing.assert_allclose(np.asarray(b)[i], np.asarray(a), rtol=1e-4,
                                 atol=1e-5)


def test_evaluate_one_episode_per_lane_from_the_training_statistics():
  """One episode per lane of j = 0 and j = N - 1; the evaluators take the
  training lanes' running statistics (RND-error moments, d_m^2:
  `actor.with_training_statistics`), so the r^i the network sees is on its
  training scale: the same state with those statistics emptied plays other
  evaluation episodes (same keys, same parameters)."""
  loop = paced_loop()
  state = run_chunks(loop, jitted(loop, "init")(jax.random.PRNGKey(5)), 6)
  assert float(state.actor.error_stats.count) > 0
  assert int(state.counters.learner_steps) > 0
  memory = state.actor.memory
  cold = state._replace(actor=state.actor._replace(
      error_stats=lifelong.init(), memory=memory._replace(
          mean_sq_distance=jnp.zeros_like(memory.mean_sq_distance),
          distance_count=jnp.zeros_like(memory.distance_count))))
  evaluate = jax.jit(loop.evaluate)
  key = jax.random.PRNGKey(6)
  warm, after = evaluate(state, key)
  warm = jax.device_get(warm)
  again = jax.device_get(evaluate(state, key)[0])
  fresh = jax.device_get(evaluate(cold, key)[0])
  assert after.eval_bandit is None and "arm" not in warm  # No Agent57.
  assert warm["return_j0"] == 0.  # Disco Maze has no extrinsic reward.
  assert warm["success_j0"] == 0.
  assert 0 < warm["coverage_j0"] <= 1
  # Every evaluation step of each lane's one episode is counted once.
  assert warm["visits_j0"].sum() >= PACED_LANES * 2
  assert warm["visits_j0"].shape == (7, 7)
  assert warm["intrinsic_j0"] == again["intrinsic_j0"] > 0
  for j in ("j0", "jN"):
    assert abs(warm[f"intrinsic_{j}"] / fresh[f"intrinsic_{j}"] - 1) > 0.05


def test_learn_on_replay_updates_the_learner_and_not_the_data():
  """`learn_on_replay(n)`: n learner steps on the stored replay, no env
  steps; the key threads through, so two steps equal one step twice."""
  loop = paced_loop()
  state = run_chunks(loop, jitted(loop, "init")(jax.random.PRNGKey(7)), 6)
  assert int(state.counters.learner_steps) > 0
  # The count traced (one program for both counts: fori_loop's while form).
  learn = jax.jit(loop.learn_on_replay)
  one = lambda s: learn(jnp.int32(1), s)
  after = learn(jnp.int32(2), state)
  c0, c1 = jax.device_get(state.counters), jax.device_get(after.counters)
  assert c1.learner_steps == c0.learner_steps + 2
  assert c1.env_steps == c0.env_steps and c1.actor_steps == c0.actor_steps
  assert (int(after.learner.steps) + int(after.learner.skipped_steps)
          == int(state.learner.steps) + int(state.learner.skipped_steps) + 2)
  for a, b in zip(jax.tree_util.tree_leaves(state.replay.items),
                  jax.tree_util.tree_leaves(after.replay.items)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  leaves = lambda s: jax.tree_util.tree_leaves(s.learner.params.q)
  assert any(not np.array_equal(np.asarray(a), np.asarray(b))
             for a, b in zip(leaves(state), leaves(after)))
  # The learner metrics' step count (the sums' last entry) grows by 2.
  assert (float(after.stats.learner_sums[-1])
          == float(state.stats.learner_sums[-1]) + 2)
  twice = one(one(state))
  for a, b in zip(jax.tree_util.tree_leaves(after),
                  jax.tree_util.tree_leaves(twice)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_runner_init_per_seed_equals_the_vmapped_init():
  """`run_compiled` starts from one seed's `init` per key, stacked: the same
  state, bit for bit, as `vmap(init)` over the keys."""
  loop = paced_loop()
  keys = jax.random.split(jax.random.PRNGKey(11), 3)
  got = compiled_runner._Jitted(loop).init(keys)  # pylint: disable=protected-access
  want = jax.jit(jax.vmap(loop.init))(keys)
  data = lambda x: np.asarray(jax.random.key_data(x) if jnp.issubdtype(
      x.dtype, jax.dtypes.prng_key) else x)
  got_leaves, want_leaves = (jax.tree_util.tree_leaves(t) for t in (got, want))
  assert len(got_leaves) == len(want_leaves) > 100
  for g, w in zip(got_leaves, want_leaves):
    assert g.shape == w.shape and g.dtype == w.dtype
    np.testing.assert_array_equal(data(g), data(w))
  one = compiled_runner._Jitted(loop).init(keys[:1])  # pylint: disable=protected-access
  np.testing.assert_array_equal(
      data(jax.tree_util.tree_leaves(one)[0]), data(got_leaves[0][:1]))


@pytest.mark.slow
def test_make_train_jits_and_vmaps():
  train = compiled.make_train(tiny_disco(), disco_env(), num_lanes=2,
                              total_env_steps=120, steps_per_chunk=20)
  keys = jax.random.split(jax.random.PRNGKey(7), 2)
  state, metrics = jax.jit(jax.vmap(train))(keys)
  assert metrics["env_steps"].shape == (2, 3)
  np.testing.assert_array_equal(metrics["env_steps"][0], [40, 80, 120])
  assert np.all(np.asarray(state.counters.learner_steps) > 0)
  for leaf in jax.tree_util.tree_leaves(state.learner.params):
    assert np.all(np.isfinite(np.asarray(leaf)))


def _read(path):
  with open(path) as f:
    return list(csv.DictReader(f))


def _runs_and_resumes_exactly(config, tmp_path, eval_every=40):
  """Runs `config` for 120 env steps (2 lanes, tiny Disco Maze) into
  tmp_path/full, and for 60 then resumed to 120 into tmp_path/part; asserts
  that both end in the same state. Returns the uninterrupted run's result."""
  kwargs = dict(num_lanes=2, seeds=(0,), log_every_env_steps=40,
                eval_every_env_steps=eval_every, progress=False,
                env_kwargs={"size": 7, "max_episode_steps": 10})
  full = compiled_runner.run_compiled(config, "disco_maze", 120,
                                      output_dir=str(tmp_path / "full"),
                                      **kwargs)
  part = tmp_path / "part"
  compiled_runner.run_compiled(config, "disco_maze", 60, output_dir=str(part),
                               **kwargs)
  resumed = compiled_runner.run_compiled(config, "disco_maze", 120,
                                         output_dir=str(part), resume=True,
                                         **kwargs)
  for a, b in zip(jax.tree_util.tree_leaves(full["final_state"]),
                  jax.tree_util.tree_leaves(resumed["final_state"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  return full


@pytest.mark.slow
def test_run_compiled_writes_outputs_and_resumes_exactly(tmp_path):
  kwargs = dict(num_lanes=2, seeds=(0, 1), log_every_env_steps=40,
                eval_every_env_steps=80, progress=False,
                env_kwargs={"size": 7, "max_episode_steps": 20})
  full = compiled_runner.run_compiled(tiny_disco(), "disco_maze", 160,
                                      output_dir=str(tmp_path / "full"),
                                      **kwargs)
  part = tmp_path / "part"
  compiled_runner.run_compiled(tiny_disco(), "disco_maze", 80,
                               output_dir=str(part), **kwargs)
  resumed = compiled_runner.run_compiled(tiny_disco(), "disco_maze", 160,
                                         output_dir=str(part), resume=True,
                                         **kwargs)
  for seed in (0, 1):
    rows_full = _read(tmp_path / "full" / f"seed_{seed}" / "metrics.csv")
    rows_part = _read(part / f"seed_{seed}" / "metrics.csv")
    assert list(rows_full[0]) == list(metrics_log.COLUMNS)
    assert [int(r["env_steps"]) for r in rows_full] == [40, 80, 120, 160]
    skip = ("env_steps_per_s", "elapsed_s")
    for a, b in zip(rows_full, rows_part):
      assert {k: v for k, v in a.items() if k not in skip} == {
          k: v for k, v in b.items() if k not in skip}
    assert not math.isnan(float(rows_full[1]["eval_coverage"]))
    assert (tmp_path / "full" / f"seed_{seed}" / "heatmaps" /
            "eval_160.npz").is_file()
    # Per-cell sums since the last evaluation, identical after a resume.
    cells = [np.load(d / f"seed_{seed}" / "heatmaps" / "cells_160.npz")[
        "sums"] for d in (tmp_path / "full", part)]
    np.testing.assert_array_equal(cells[0], cells[1])
    assert cells[0][..., 0].sum() == 80  # 2 lanes x 40 actor steps.
  for a, b in zip(jax.tree_util.tree_leaves(full["final_state"]),
                  jax.tree_util.tree_leaves(resumed["final_state"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_arguments():
  with pytest.raises(ValueError, match="FunctionalEnv"):
    compiled.make_compiled_loop(tiny_disco(), envs.make("disco_maze", 2), 2)
  with pytest.raises(ValueError, match="seeds"):
    compiled_runner.run_compiled(tiny_disco(), "disco_maze", 40,
                                 seeds=(0, 0), progress=False)
  with pytest.raises(ValueError, match="unknown functional"):
    envs.make_functional("atari/Pong")


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_that_resumes_exactly(tmp_path,
                                                        monkeypatch):
  """A SIGINT during a chunk: the chunk finishes, a checkpoint is saved,
  KeyboardInterrupt is raised, and resuming gives the uninterrupted rows."""
  import signal  # pylint: disable=g-import-not-at-top
  kwargs = dict(num_lanes=2, log_every_env_steps=40, progress=True,
                env_kwargs={"size": 7, "max_episode_steps": 20})
  full = compiled_runner.run_compiled(tiny_disco(), "disco_maze", 120,
                                      output_dir=str(tmp_path / "full"),
                                      **kwargs)
  original = metrics_log.ProgressBar.update
  calls = []

  def interrupting_update(self, done, increment, text):
    calls.append(done)
    if len(calls) == 1:
      signal.raise_signal(signal.SIGINT)  # Deferred to the end of the chunk.
    original(self, done, increment, text)

  monkeypatch.setattr(metrics_log.ProgressBar, "update", interrupting_update)
  outer_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(KeyboardInterrupt):
      compiled_runner.run_compiled(tiny_disco(), "disco_maze", 120,
                                   output_dir=str(tmp_path / "cut"), **kwargs)
  finally:
    signal.signal(signal.SIGINT, outer_handler)
  monkeypatch.setattr(metrics_log.ProgressBar, "update", original)
  assert len(_read(tmp_path / "cut" / "metrics.csv")) == 1
  resumed = compiled_runner.run_compiled(tiny_disco(), "disco_maze", 120,
                                         output_dir=str(tmp_path / "cut"),
                                         resume=True, **kwargs)
  skip = ("env_steps_per_s", "elapsed_s")
  strip = lambda rows: [{k: v for k, v in r.items() if k not in skip}
                        for r in rows]
  assert strip(_read(tmp_path / "cut" / "metrics.csv")) == strip(
      _read(tmp_path / "full" / "metrics.csv"))
  for a, b in zip(jax.tree_util.tree_leaves(full["final_state"]),
                  jax.tree_util.tree_leaves(resumed["final_state"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_a_second_run_with_the_same_program_reuses_its_compiled_functions(
    monkeypatch):
  """`run_compiled` keeps the programs of its latest calls: the same config,
  environment, lanes and chunk length build (and compile) nothing again;
  another config does, and the oldest program is dropped."""
  compiled_runner._cached_build.cache_clear()
  built = []
  original = compiled.make_compiled_loop

  def counting(*args, **kwargs):
    built.append(args[0])
    return original(*args, **kwargs)

  monkeypatch.setattr(compiled, "make_compiled_loop", counting)
  env_kwargs = {"size": 7, "max_episode_steps": 20}
  kwargs = dict(num_lanes=2, log_every_env_steps=40, progress=False,
                env_kwargs=env_kwargs)
  first = compiled_runner.run_compiled(tiny_disco(), "disco_maze", 40,
                                       **kwargs)
  again = compiled_runner.run_compiled(tiny_disco(), "disco_maze", 40,
                                       **kwargs)
  assert len(built) == 1
  strip = lambda row: {k: v for k, v in row.items()
                       if k not in ("env_steps_per_s", "elapsed_s")}
  assert strip(again["rows"][0][0]) == strip(first["rows"][0][0])
  # The cache itself (building is cheap; jit compiles at the first call).
  program = lambda config, lanes: compiled_runner._program(
      config, "disco_maze", env_kwargs, lanes, 20)
  assert program(tiny_disco(), 2) is program(tiny_disco(), 2)
  assert len(built) == 1
  program(tiny_disco(), 4)
  program(tiny_disco(learning_rate=3e-3), 2)
  assert len(built) == 3
  assert compiled_runner._cached_build.cache_info().currsize == (
      compiled_runner.PROGRAM_CACHE_SIZE)
  program(tiny_disco(), 2)
  assert len(built) == 4  # The first program was dropped.
  # An unhashable environment argument: built every time, never kept.
  make = envs.make_functional
  monkeypatch.setattr(envs, "make_functional",
                      lambda name, unused, **kw: make(name, **kw))
  for _ in range(2):
    compiled_runner._program(tiny_disco(), "disco_maze",
                             {**env_kwargs, "unused": []}, 2, 20)
  assert len(built) == 6
  assert compiled_runner._cached_build.cache_info().currsize == (
      compiled_runner.PROGRAM_CACHE_SIZE)


def test_row_means_of_the_episode_extras():
  """`ChunkStats.episode_extras` sums / counts become the
  mean_episode_<name> columns; a zero count (no such episodes, or an
  environment without the extra) gives NaN."""
  assert compiled.state_lib.EPISODE_EXTRAS == ("frontier", "tv_steps")
  learner = np.zeros(len(compiled.LEARNER_METRICS) + 1, np.float32)
  metrics = {  # One seed, stacked on a leading seed axis.
      "env_steps": [40], "actor_steps": [20], "episodes": [4],
      "learner_steps": [0], "replay_size": [0],
      "returns": [[2., 4., 1.]], "coverage": [[0., 0.]],
      "episode_extras": [[[10., 4.], [0., 0.]]],
      "actor_sums": [np.zeros(len(diagnostics.ACTOR_SUMS), np.float32)],
      "learner_sums": [learner], "error_mean": [0.], "error_var": [1.],
      "error_count": [0.]}
  metrics = {k: np.asarray(v) for k, v in metrics.items()}
  row = compiled_runner._row(metrics, 0, tiny_disco(), 1.)
  assert tuple(row) == metrics_log.COLUMNS
  assert row["mean_episode_frontier"] == 2.5
  assert math.isnan(row["mean_episode_tv_steps"])
  assert math.isnan(row["mean_episode_coverage"])
  assert row["mean_episode_return"] == 0.5


def _stats_only_state(stats):
  """A `TrainState` holding only `stats` and zero counters (the leaves the
  checkpoint-layout tests need)."""
  zero = jnp.zeros((), jnp.int32)
  return compiled.TrainState(
      env_state=None, timestep=None, episode_return=jnp.ones((2,)),
      actor=None, actor_params=None, adder=None, replay=None, learner=None,
      key=None, counters=compiled.Counters(zero, zero, zero, zero, zero),
      stats=stats)


def test_train_state_of_the_layout_before_the_episode_extras(tmp_path):
  """A train_state.npz without `ChunkStats.episode_extras` (written before
  it existed) loads with zero sums; a current one loads exactly; any other
  mismatch is still refused."""
  env = envs.make_functional("noisy_grid/tv", size=7)
  stats = compiled.state_lib.zero_stats(env)
  stats = stats._replace(returns=stats.returns + 1.,
                         episode_extras=stats.episode_extras + 3.)
  state = _stats_only_state(stats)
  template = jax.tree_util.tree_map(jnp.zeros_like, state)
  path = str(tmp_path / "train_state.npz")
  ckpt_lib.save_pytree(path, state)
  loaded = compiled_runner._load_train_state(path, template)
  for a, b in zip(jax.tree_util.tree_leaves(loaded),
                  jax.tree_util.tree_leaves(state)):
    np.testing.assert_array_equal(a, b)
  arrays = ckpt_lib.load_arrays(path)
  del arrays[".stats.episode_extras"]
  ckpt_lib.save_arrays(path, arrays)
  loaded = compiled_runner._load_train_state(path, template)
  np.testing.assert_array_equal(loaded.stats.episode_extras,
                                np.zeros((2, 2), np.float32))
  np.testing.assert_array_equal(loaded.stats.returns, [1., 1., 1.])
  del arrays[".stats.returns"]
  ckpt_lib.save_arrays(path, arrays)
  with pytest.raises(ValueError, match=r"\.stats\.returns"):
    compiled_runner._load_train_state(path, template)


@pytest.mark.slow
def test_agent57_switches_train_and_resume_exactly(tmp_path):
  # Agent57's split values and per-lane bandits (N = 2 arms, window 3) ride
  # in the program state: a resumed run ends in the same state, bandits
  # included, as an uninterrupted one.
  config = tiny_disco(num_mixtures=2, split_values=True,
                      meta_controller="ucb", ucb_window=3,
                      eval_ucb_epsilon=0.)
  full = _runs_and_resumes_exactly(config, tmp_path)
  actor_state = full["final_state"].actor
  # Every finished episode reached its lane's bandit: episodes started less
  # the one still running. (Disco Maze ends an episode at the first wall.)
  np.testing.assert_array_equal(actor_state.bandit.num_episodes,
                                np.asarray(actor_state.episode_count) - 1)
  assert int(np.min(actor_state.bandit.num_episodes)) > 2
  assert set(np.asarray(actor_state.mixture_index).ravel()) <= {0, 1}
  rows = _read(tmp_path / "full" / "metrics.csv")
  assert list(rows[0]) == list(metrics_log.COLUMNS) + [
      "arm_0", "arm_1", "eval_arm", "eval_bandit_return"]
  last = rows[-1]
  assert float(last["arm_0"]) + float(last["arm_1"]) == pytest.approx(1.)
  # The evaluator's bandit (in the state: compared above): each arm once,
  # then greedy on the windowed mean (all returns 0: the lowest index); one
  # restarted at the resume (60 env steps) would play arm 0 at 80.
  assert [float(r["eval_arm"]) for r in rows] == [0., 1., 0.]
  bandit = full["final_state"].eval_bandit
  assert int(np.asarray(bandit.num_episodes)[0]) == 3 * 2  # 3 evals x 2 lanes.
  np.testing.assert_array_equal(np.asarray(bandit.arms)[0, :6],
                                [0, 0, 1, 1, 0, 0])


@pytest.mark.slow
def test_standardized_intrinsic_reward_trains_and_resumes_exactly(tmp_path):
  # `intrinsic.normalization` "standardize": the running statistics of r^i
  # ride in the program state (the actor's `intrinsic_reward_stats`), hold
  # every non-FIRST lane step's r^i, and a resumed run ends in the same state.
  base = tiny_disco(beta=0.3)
  config = config_lib.NGUConfig(**{
      **base.to_dict(),
      "intrinsic": {**base.to_dict()["intrinsic"],
                    "normalization": "standardize",
                    "normalization_horizon": 50}})
  full = _runs_and_resumes_exactly(config, tmp_path)
  final = full["final_state"]
  stats = final.actor.intrinsic_reward_stats
  # Each lane step folds in r^i unless it is a FIRST step (one per episode
  # begun, the first one included).
  non_first = (np.asarray(final.counters.env_steps)
               - np.asarray(final.actor.episode_count).sum(axis=-1))
  np.testing.assert_array_equal(np.asarray(stats.count), non_first)
  assert np.all(np.asarray(stats.count) > 0)
  assert np.all(np.isfinite(np.asarray(stats.var)))
  assert np.all(np.asarray(stats.var) > 0)
  rows = _read(tmp_path / "full" / "metrics.csv")
  assert all(math.isfinite(float(r["learner_loss"])) for r in rows)


@pytest.mark.slow
def test_compiled_dice_resumes_exactly(tmp_path):
  """DiCE in the compiled loop (Boltzmann lanes with BVA temperatures, the
  DiCE learner on sequences that carry their tau through the device adder
  and replay): the ensembles live in the program state, so a resumed run
  ends in the state of an uninterrupted one; rows gain the temperature
  columns; the learner learned."""
  config = tiny_disco(behaviour_policy="boltzmann", bva_num_bandits=2,
                      bva_num_candidates=2, learner_loss="dice")
  full = _runs_and_resumes_exactly(config, tmp_path, eval_every=60)
  # The ensembles' pooled value curves at each evaluation (bva/; the
  # evaluations fall on the 40-step chunks' ends: 80 and 120).
  evaluated = {f"bva_{int(r['env_steps'])}.npz"
               for r in _read(tmp_path / "full" / "metrics.csv")
               if math.isfinite(float(r["eval_return"]))}
  bva_dir = tmp_path / "full" / metrics_log.BVA_DIR
  assert {p.name for p in bva_dir.glob("bva_*.npz")} == evaluated
  assert len(evaluated) == 2
  actor_state = full["final_state"].actor
  # Every finished episode reached every bandit of its lane's ensemble.
  np.testing.assert_array_equal(
      np.asarray(actor_state.bva.counts).sum(axis=(-1, -2)),
      2 * (np.asarray(actor_state.episode_count) - 1))
  rows = _read(tmp_path / "full" / "metrics.csv")
  assert list(rows[0]) == list(metrics_log.COLUMNS) + list(
      diagnostics.TEMPERATURE_COLUMNS)
  assert float(rows[-1]["tau_median"]) >= 1 / 50
  assert int(rows[-1]["learner_steps"]) > 0
  assert math.isfinite(float(rows[-1]["learner_loss"]))
  replay_tau = np.asarray(full["final_state"].replay.items.tau)
  assert replay_tau.shape[-1] > 0 and (replay_tau > 0).any()


def test_train_state_of_the_layout_before_agent57s_learner_metrics(tmp_path):
  """A train_state.npz whose `learner_sums` predates q_extrinsic_mean and
  q_intrinsic_mean (2 entries shorter) loads with zero learner sums."""
  env = envs.make_functional("noisy_grid/tv", size=7)
  stats = compiled.state_lib.zero_stats(env)
  stats = stats._replace(returns=stats.returns + 1.)
  state = _stats_only_state(stats)
  template = jax.tree_util.tree_map(jnp.zeros_like, state)
  path = str(tmp_path / "train_state.npz")
  old = state._replace(stats=stats._replace(
      learner_sums=stats.learner_sums[2:]))
  ckpt_lib.save_pytree(path, old)
  loaded = compiled_runner._load_train_state(path, template)
  assert loaded.stats.learner_sums.shape == stats.learner_sums.shape
  np.testing.assert_array_equal(loaded.stats.returns, [1., 1., 1.])
  # Both older layouts at once.
  arrays = ckpt_lib.load_arrays(path)
  del arrays[".stats.episode_extras"]
  ckpt_lib.save_arrays(path, arrays)
  loaded = compiled_runner._load_train_state(path, template)
  assert loaded.stats.episode_extras.shape == stats.episode_extras.shape
  # Any other length is refused.
  ckpt_lib.save_pytree(path, state._replace(stats=stats._replace(
      learner_sums=stats.learner_sums[3:])))
  with pytest.raises(ValueError, match="learner_sums"):
    compiled_runner._load_train_state(path, template)
