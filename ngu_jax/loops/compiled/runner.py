"""Host driver of the compiled loop: chunks, metrics, evaluation, checkpoints.

`run_compiled` trains NGU on a functional environment with
`ngu_jax.loops.compiled` and writes what the Python loop writes
(`ngu_jax.loops.python.loop.run_experiment`): metrics.csv with the same
`COLUMNS`, curves.png, heatmaps/eval_<env_steps>.png / .npz for grid worlds,
and a checkpoint that `resume=True` continues exactly. Several seeds run in
one program (`jax.vmap` over the seed axis); each seed gets its own
directory `output_dir/seed_<s>/` (one seed: `output_dir` itself). The
jitted program of the latest `PROGRAM_CACHE_SIZE` (config, environment,
lanes, chunk length) is kept: calling `run_compiled` again with the same
ones (a resume, the next budget or seed count of a sweep, a notebook cell
run twice) does not compile again.

The host only calls compiled functions: `run_chunk` (a scan of
`log_every_env_steps / num_lanes` actor steps, vmapped over seeds) and, at
the first row past every multiple of `eval_every_env_steps`, `evaluate`
(one episode per lane with j = 0 and j = N - 1, inside the program). After
each chunk it reads the chunk's sums (a few scalars per seed), writes the
rows, and checkpoints every `checkpoint_every_env_steps`, at the end and on
Ctrl-C (`loops.checkpointing.DeferInterrupt`).

The argument checks, schedule, metrics rows and Ctrl-C message are the
shared `ngu_jax.loops.host`'s.

Checkpoint (`output_dir/checkpoint/`, replaced atomically, no pickle):
config.json (the run's configuration, with the effective agent config, i.e.
the episodic memory fitted to the episodes (`compiled.fit_memory_to_episodes`):
resuming with another is refused; checkpoints that recorded the config as
given still resume), state.json (format `checkpointing.checkpoint_format(
"compiled")`: per seed the metrics rows' count and last row -- the rows
are in the seed's metrics.csv, cut back to that count on resume --,
evaluation counter, next log / eval points, elapsed time), train_state.npz (the seeds' whole `TrainState`: environments,
actor, adder, replay, learner, keys, counters), visits.npz (training-lane
visits since the last evaluation). A run resumed from a checkpoint produces
the same rows and parameters as an uninterrupted one. (A checkpoint written
before `ChunkStats.episode_extras` existed resumes too: `_load_train_state`.)
"""

import functools
import logging
import math
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu.variants import policy as variant_policy
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.intrinsic import lifelong
from ngu_jax.loops import acting
from ngu_jax.loops import checkpointing
from ngu_jax.loops import evaluation
from ngu_jax.loops import host
from ngu_jax.loops import metrics_log
from ngu_jax.loops.compiled import loop as compiled
from ngu_jax.loops.compiled import state as state_lib

CHECKPOINT_FORMAT = checkpointing.checkpoint_format("compiled")
CHECKPOINT_VERSION = checkpointing.CHECKPOINT_VERSION


def _row(metrics: Dict[str, np.ndarray], seed_index: int,
         config: NGUConfig, elapsed: float) -> Dict[str, Any]:
  """The metrics row of one seed from `chunk_metrics` (stacked on seeds)."""
  m = {k: np.asarray(v)[seed_index] for k, v in metrics.items()}
  returns, coverage = m["returns"], m["coverage"]
  learner = m["learner_sums"]
  count = float(learner[-1])
  values = {name: ([float(learner[i]) / count] if count else [])
            for i, name in enumerate(compiled.LEARNER_METRICS)}
  env_steps = int(m["env_steps"])
  episode_stats = dict(
      mean_episode_return=(returns[0] / returns[1] if returns[1]
                           else math.nan),
      episode_success_rate=(returns[2] / returns[1] if returns[1]
                            else math.nan),
      mean_episode_coverage=(coverage[0] / coverage[1] if coverage[1]
                             else math.nan))
  for (total, count), name in zip(m["episode_extras"],
                                  state_lib.EPISODE_EXTRAS):
    episode_stats[metrics_log.episode_extra_column(name)] = (
        total / count if count else math.nan)
  stats = lifelong.RunningStats(mean=m["error_mean"], var=m["error_var"],
                                count=m["error_count"])
  row = host.make_row(
      config, env_steps=env_steps, actor_steps=int(m["actor_steps"]),
      episodes=int(m["episodes"]), learner_steps=int(m["learner_steps"]),
      replay_size=int(m["replay_size"]), episode_stats=episode_stats,
      env_steps_per_s=host.rate(env_steps, elapsed), elapsed_s=elapsed,
      learner_values=values, actor_sums=m["actor_sums"], error_stats=stats,
      extra=diagnostics.lane_controller_columns(config, {0: m}),
      columns=metrics_log.columns_for(config))
  return {k: (float(v) if isinstance(v, (np.floating, np.ndarray)) else v)
          for k, v in row.items()}


class _Run:
  """Host state of a compiled run (rows, evaluation points, outputs)."""

  def __init__(self, loop: compiled.CompiledLoop, seeds: Sequence[int],
               output_dir: Optional[str]):
    self.loop, self.seeds = loop, list(seeds)
    self.num_evals = 0
    self.evaluations = host.Schedule(0)  # Set by `run_compiled`.
    self.elapsed_s = 0.
    self.train_visits = None
    self.train_cells = None
    self.dirs = [None] * len(self.seeds)
    if output_dir is not None:
      self.dirs = ([output_dir] if len(self.seeds) == 1 else
                   [os.path.join(output_dir, f"seed_{s}") for s in self.seeds])
    # Per seed: the last row in memory, all in its metrics.csv.
    self.rows = [metrics_log.MetricsRows(
        self.path(i, metrics_log.METRICS_FILE),
        metrics_log.columns_for(loop.config))
                 for i in range(len(self.seeds))]

  def path(self, i: int, name: str) -> Optional[str]:
    return None if self.dirs[i] is None else os.path.join(self.dirs[i], name)

  def open_writers(self, resume: bool) -> None:
    for d, rows in zip(self.dirs, self.rows):
      if d is not None:
        os.makedirs(d, exist_ok=True)
      rows.open(resume)

  def close(self) -> None:
    for rows in self.rows:
      rows.close()

  def plot(self, min_interval_s: float = 0.) -> List[Optional[str]]:
    return [metrics_log.plot_curves(self.path(i, metrics_log.METRICS_FILE),
                                    self.path(i, metrics_log.CURVES_FILE),
                                    min_interval_s=min_interval_s)
            for i in range(len(self.seeds))]


def _evaluate_into(run: _Run, rows: List[Dict[str, Any]], evaluate,
                   state, eval_keys):
  """Runs the in-program evaluation and fills the rows' eval columns;
  returns the state (its evaluator bandit updated)."""
  results, state = evaluate(state, eval_keys)
  results = jax.device_get(results)
  config = run.loop.config
  last = config.num_mixtures - 1
  bva = (None if state.actor.bva is None
         else jax.device_get(state.actor.bva))
  for i, row in enumerate(rows):
    if bva is not None and run.dirs[i] is not None:
      metrics_log.write_bva_curve(
          os.path.join(run.dirs[i], metrics_log.BVA_DIR),
          int(row["env_steps"]), variant_policy.bva_config(config),
          jax.tree_util.tree_map(lambda x, i=i: x[i], bva))
    row["eval_return"] = float(results["return_j0"][i])
    row["eval_success"] = float(results["success_j0"][i])
    row["eval_coverage"] = float(results["coverage_j0"][i])
    row["eval_explore_return"] = float(results["return_jN"][i])
    row["eval_explore_coverage"] = float(results["coverage_jN"][i])
    if "arm" in results:
      row["eval_arm"] = float(results["arm"][i])
      row["eval_bandit_return"] = float(results["return_bandit"][i])
    if run.loop.env.grid_shape is None or run.dirs[i] is None:
      continue
    visits = {0: {"visits": np.asarray(results["visits_j0"][i], np.int64)},
              last: {"visits": np.asarray(results["visits_jN"][i],
                                          np.int64)}}
    counts = evaluation.heatmap_counts(
        visits, config.num_mixtures, np.asarray(run.train_visits[i],
                                                np.int64))
    metrics_log.write_heatmaps(
        os.path.join(run.dirs[i], metrics_log.HEATMAP_DIR),
        int(row["env_steps"]), counts)
    preferred = getattr(run.loop.env, "preferred_actions", lambda: None)()
    metrics_log.write_cell_maps(
        os.path.join(run.dirs[i], metrics_log.HEATMAP_DIR),
        int(row["env_steps"]), run.train_cells[i], preferred)
  return state


def _save(path: str, run: _Run, state, this_config: Dict[str, Any]) -> None:
  with ckpt_lib.atomic_directory(path) as tmp:
    ckpt_lib.save_pytree(os.path.join(tmp, "train_state.npz"), state)
    ckpt_lib.save_arrays(os.path.join(tmp, "visits.npz"),
                         {"train": np.asarray(run.train_visits),
                          "train_cells": np.asarray(run.train_cells)})
    checkpointing.write_run_state(tmp, "compiled", this_config, {
        "metrics": [rows.state() for rows in run.rows],
        "num_evals": run.num_evals, "next_eval": run.evaluations.next_at,
        "elapsed_s": run.elapsed_s})


def _restore(path: str, meta: Dict[str, Any], run: _Run, template):
  for rows, saved in zip(run.rows, metrics_log.saved_metrics(
      meta, num_seeds=len(run.rows))):
    rows.restore(saved)
  run.num_evals = meta["num_evals"]
  run.evaluations.next_at = int(meta["next_eval"])
  run.elapsed_s = float(meta["elapsed_s"])
  visits = ckpt_lib.load_arrays(os.path.join(path, "visits.npz"))
  run.train_visits = visits["train"]
  run.train_cells = visits["train_cells"]
  return _load_train_state(os.path.join(path, "train_state.npz"), template)


# Learner metrics added since the first compiled checkpoints (the last
# entries of `LEARNER_METRICS`): Agent57's q_extrinsic_mean, q_intrinsic_mean.
_NEWER_LEARNER_METRICS = 2


def _load_train_state(path: str, template):
  """The saved `TrainState` (stacked on seeds) in `template`'s structure.

  Checkpoints of older layouts are read too, and their sums start at zero
  (they are zero in every checkpoint: saved states are those after
  `reset_stats`): one written before `ChunkStats.episode_extras` existed
  has no such leaf, and one written before Agent57's learner metrics has a
  shorter `learner_sums`.
  """
  stats = template.stats
  shorter = stats.learner_sums[..., _NEWER_LEARNER_METRICS:]
  layouts = (dict(), dict(learner_sums=shorter),
             dict(episode_extras=None, learner_sums=shorter),
             dict(episode_extras=None))
  error = None
  for older in layouts:
    try:
      state = ckpt_lib.load_pytree(
          path, template._replace(stats=stats._replace(**older)))
    except ValueError as e:
      error = error or e
      continue
    zeros = {k: jnp.zeros_like(getattr(stats, k)) for k in older}
    return state._replace(stats=state.stats._replace(**zeros))
  raise error


def compiled_config(config: NGUConfig, env_name: str, num_lanes: int,
                    seeds: Sequence[int], env_kwargs, log_every_env_steps: int,
                    eval_every_env_steps: int) -> Dict[str, Any]:
  """What a resumed compiled run must share with its checkpoint.

  `run_compiled` passes the effective config (`CompiledLoop.config`, the
  episodic memory fitted to the episodes), so that config.json records it.
  """
  out = checkpointing.run_config(config, env_name, num_lanes, int(seeds[0]),
                                 env_kwargs, log_every_env_steps,
                                 eval_every_env_steps)
  out.update(loop="compiled", seeds=[int(s) for s in seeds])
  return out


def _start(fns, seeds, checkpoint_path, this_config, resume, run,
           legacy_config=None):
  """The initial (or restored) stacked state.

  `legacy_config`: the run configuration as checkpoints written before
  config.json recorded the effective config hold it (also accepted).
  """
  keys = jnp.stack([jax.random.PRNGKey(int(s)) for s in seeds])
  state = fns.init(keys)
  if resume:
    path = checkpointing.find_checkpoint(
        checkpoint_path, os.path.dirname(checkpoint_path), "run_compiled")
    meta = checkpointing.read_checkpoint_meta(
        path, this_config, loop="compiled", where="run_compiled",
        also_accept=[legacy_config] if legacy_config is not None else [])
    try:
      state = _restore(path, meta, run, state)
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise checkpointing.ResumeError(
          f"run_compiled: cannot resume from the corrupt or incomplete "
          f"checkpoint {path}: {e}") from e
  elif checkpoint_path is not None and os.path.isdir(checkpoint_path):
    logging.warning("run_compiled: %s holds a checkpoint; starting afresh.",
                    checkpoint_path)
  if run.train_visits is None:
    run.train_visits = np.zeros((len(seeds),) + tuple(
        np.shape(state.stats.visits)[1:]), np.int64)
    run.train_cells = np.zeros((len(seeds),) + tuple(
        np.shape(state.stats.cells)[1:]), np.float64)
  return state


def run_compiled(config: NGUConfig, env_name: str, total_env_steps: int,
                 num_lanes: int = 16, seeds: Sequence[int] = (0,),
                 output_dir: Optional[str] = None,
                 env_kwargs: Optional[Dict[str, Any]] = None,
                 log_every_env_steps: int = 1000,
                 eval_every_env_steps: int = 0, progress: bool = True,
                 checkpoint_every_env_steps: int = 0,
                 resume: bool = False,
                 max_minutes: float = 0.) -> Dict[str, Any]:
  """Trains NGU with the compiled loop for `total_env_steps` per seed.

  Args:
    config: the agent's config.
    env_name: a name `ngu_jax.envs.make_functional` accepts, e.g.
      "disco_maze", "minigrid/MiniGrid-DoorKey-8x8-v0",
      "gymnax/DeepSea-bsuite".
    total_env_steps: env steps (all lanes) per seed; rounded up to whole
      chunks of `num_lanes * (log_every_env_steps // num_lanes)`.
    num_lanes: B, training lanes per seed.
    seeds: seeds run side by side in one vmapped program.
    output_dir, env_kwargs, log_every_env_steps, eval_every_env_steps,
    progress, checkpoint_every_env_steps, resume, max_minutes: as in
      `ngu_jax.loops.python.loop.run_experiment` (the wall-clock limit is
      checked after each chunk).

  Returns:
    A summary dict: the first seed's last row, "rows" (per seed), "seeds",
    "output_dirs", "metrics_paths", "curves_paths", "checkpoint_path".
  """
  host.check_arguments(
      "run_compiled", total_env_steps, log_every_env_steps,
      num_lanes=num_lanes, eval_every_env_steps=eval_every_env_steps,
      checkpoint_every_env_steps=checkpoint_every_env_steps,
      output_dir=output_dir, resume=resume, max_minutes=max_minutes,
      seeds=seeds)
  steps_per_chunk = max(1, log_every_env_steps // num_lanes)
  fns = _program(config, env_name, env_kwargs, num_lanes, steps_per_chunk)
  loop = fns.loop
  # config.json records the effective config (memory fitted); checkpoints
  # that recorded `config` as given resume too.
  this_config = compiled_config(loop.config, env_name, num_lanes, seeds,
                                env_kwargs, log_every_env_steps,
                                eval_every_env_steps)
  legacy_config = compiled_config(config, env_name, num_lanes, seeds,
                                  env_kwargs, log_every_env_steps,
                                  eval_every_env_steps)
  checkpoint_path = (None if output_dir is None else
                     os.path.join(output_dir, checkpointing.CHECKPOINT_DIR))
  run = _Run(loop, seeds, output_dir)
  run.evaluations = host.Schedule(eval_every_env_steps)
  state = _start(fns, seeds, checkpoint_path, this_config, resume, run,
                 legacy_config)
  return _train(run, fns, state, total_env_steps,
                checkpoint_every_env_steps, checkpoint_path, this_config,
                progress, resume, max_minutes)


class _Jitted:
  """The compiled loop's functions, vmapped over seeds and jitted once."""

  def __init__(self, loop: compiled.CompiledLoop):
    def chunk(state):
      state = loop.run_chunk(state)
      return loop.reset_stats(state), state_lib.chunk_metrics(state)

    self.loop = loop
    self._init_one = jax.jit(loop.init)
    self.chunk = jax.jit(jax.vmap(chunk), donate_argnums=0)
    # Donated: `evaluate` returns the state (with Agent57's evaluator bandit
    # updated), and without donation the replay would be copied.
    self.evaluate = jax.jit(jax.vmap(loop.evaluate), donate_argnums=0)

  def init(self, keys: jax.Array):
    """`vmap(loop.init)(keys)` ([S] keys -> the stacked state), computed as
    one seed's jitted program run per key and stacked: the same values bit
    for bit, and a program that compiles in about half the time of the
    vmapped one (tiny Disco Maze config, 2 lanes: 12.8 s against 21.6 s for
    compiling and running it on 3 seeds, 2026-11-29). Its peak memory is
    twice the state's while the seeds are stacked."""
    states = [self._init_one(key) for key in keys]
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)


# The programs of the latest `run_compiled` calls, by what defines them:
# a later call with the same config, environment, lanes and chunk length (a
# resumed run, the next run of a sweep over seeds or budgets, a notebook
# cell run again) reuses the compiled functions instead of compiling the
# whole loop again (tens of seconds on CPU). Any number of seeds: jit keeps
# one executable per seed count.
PROGRAM_CACHE_SIZE = 2


def _build(config: NGUConfig, env_name: str,
           env_items: Tuple[Tuple[str, Any], ...], num_lanes: int,
           steps_per_chunk: int) -> _Jitted:
  env = envs.make_functional(env_name, **dict(env_items))
  return _Jitted(compiled.make_compiled_loop(config, env, num_lanes,
                                             steps_per_chunk))


_cached_build = functools.lru_cache(maxsize=PROGRAM_CACHE_SIZE)(_build)


def _program(config: NGUConfig, env_name: str,
             env_kwargs: Optional[Dict[str, Any]], num_lanes: int,
             steps_per_chunk: int) -> _Jitted:
  """The jitted compiled loop for these arguments, built or reused."""
  args = (config, env_name, tuple(sorted((env_kwargs or {}).items())),
          num_lanes, steps_per_chunk)
  try:
    hash(args)
  except TypeError:  # An unhashable env_kwargs value: build, don't keep.
    return _build(*args)
  return _cached_build(*args)


def _log_chunk(run: _Run, fns: _Jitted, state, metrics):
  """The rows of a finished chunk (evaluating if due), written out, and the
  state (an evaluation updates Agent57's evaluator bandit)."""
  metrics = jax.device_get(metrics)
  run.train_visits = run.train_visits + np.asarray(metrics.pop("visits"),
                                                   np.int64)
  run.train_cells = run.train_cells + np.asarray(metrics.pop("cells"),
                                                 np.float64)
  rows = [_row(metrics, i, run.loop.config, run.elapsed_s)
          for i in range(len(run.seeds))]
  if run.evaluations.fire(int(rows[0]["env_steps"])):
    keys = jnp.stack([
        jax.random.fold_in(jax.random.PRNGKey(acting.evaluation_env_seed(s)),
                           run.num_evals) for s in run.seeds])
    state = _evaluate_into(run, rows, fns.evaluate, state, keys)
    run.num_evals += 1
    run.train_visits = np.zeros_like(run.train_visits)
    run.train_cells = np.zeros_like(run.train_cells)
  for i, row in enumerate(rows):
    run.rows[i].append(row)
  return rows, state


def _train(run: _Run, fns: _Jitted, state, total_env_steps,
           checkpoint_every, checkpoint_path, this_config,
           progress, resume, max_minutes=0.) -> Dict[str, Any]:
  """The host loop over chunks (module docstring)."""
  env_steps = int(np.asarray(state.counters.env_steps)[0])
  checkpoints = host.Schedule(checkpoint_every, env_steps)
  bar = metrics_log.ProgressBar(total_env_steps, progress,
                                initial=min(env_steps, total_env_steps))
  start = time.time() - run.elapsed_s
  # `state`, `env_steps` and whether the state is consistent (False while
  # `state` is donated to a running chunk).
  at = {"state": state, "env_steps": env_steps, "consistent": True}

  def save():
    _save(checkpoint_path, run, at["state"], this_config)

  def iterate():
    at["consistent"] = False
    state, metrics = fns.chunk(at["state"])
    run.elapsed_s = time.time() - start
    rows, at["state"] = _log_chunk(run, fns, state, metrics)
    at["consistent"] = True
    previous, env_steps = at["env_steps"], int(rows[0]["env_steps"])
    at["env_steps"] = env_steps
    bar.update(env_steps, env_steps - previous,
               f"{env_steps / max(run.elapsed_s, 1e-9):.0f} env "
               f"steps/s per seed x {len(run.seeds)} seeds, "
               f"{rows[0]['learner_steps']} learner steps")
    if env_steps < total_env_steps and checkpoints.fire(env_steps):
      save()
      run.plot(min_interval_s=metrics_log.CHECKPOINT_PLOT_INTERVAL_S)

  try:
    run.open_writers(resume)
    host.run_interruptibly(
        iterate,
        done=lambda: (at["env_steps"] >= total_env_steps
                      or metrics_log.past_max_minutes(run.elapsed_s,
                                                      max_minutes)),
        on_interrupt=lambda: host.interrupted(
            "run_compiled", checkpoint_path, at["consistent"], save,
            at["env_steps"], during="a compiled chunk"),
        finish=lambda: None if checkpoint_path is None else save(),
        enabled=checkpoint_path is not None)
  finally:
    bar.close()
    run.close()
  curves = run.plot()
  summary = dict(run.rows[0].last) if run.rows[0] else {}
  summary.update(
      rows=[rows.all() for rows in run.rows], seeds=list(run.seeds), output_dirs=run.dirs,
      metrics_paths=[run.path(i, metrics_log.METRICS_FILE)
                     for i in range(len(run.seeds))],
      curves_paths=curves, checkpoint_path=checkpoint_path,
      final_state=at["state"])
  return summary
