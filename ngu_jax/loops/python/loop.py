"""The Python loop: single-process NGU, one batched env, actor, replay, learner.

Badia et al. (2020), "Never Give Up", App. A, run in one process: one
`BatchedEnv` of B lanes is stepped by one `Actor` (one jitted step for all
lanes), whose steps go through the `SequenceAdder` into the embedded
prioritised replay; once the replay holds `min_replay_size` sequences, the
learner runs at `config.samples_per_insert` sampled sequences per fresh
`replay_period` env steps (`ngu_jax.loops.pacing`, the rule every loop
shares), checked here after every actor step (one thread cannot wait on the
replay's rate limiter). Actors pull parameters every `actor_update_period`
steps (Table 6).

All parts come from `NGUBuilder`, as in the other loops; the shared pieces
are `ngu_jax.loops.host` (argument checks, schedule, metrics rows, learner
metrics, the Ctrl-C message), `ngu_jax.loops.pacing`,
`ngu_jax.loops.metrics_log` (metrics.csv columns, curves, heatmaps,
progress), `ngu_jax.loops.evaluation` (evaluation episodes) and
`ngu_jax.loops.checkpointing` (checkpoints, resume, Ctrl-C; this loop's
files: `ngu_jax.loops.python.state`).

The actor diagnostic columns (`metrics_log`) are summed per step by one
small jitted function (`diagnostics.actor_step_sums`) into a float32 vector
on the device, read only when a row is written: no transfer to the host per
step. Evaluations run at the first metrics row past every multiple of
`eval_every_env_steps`.
"""

import dataclasses
import logging
import os
import time
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.agents.ngu import diagnostics
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu.variants import policy as variant_policy
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import acting
from ngu_jax.loops import checkpointing
from ngu_jax.loops import evaluation
from ngu_jax.loops import host
from ngu_jax.loops import metrics_log
from ngu_jax.loops import pacing
from ngu_jax.loops.python import state as python_state


# Moved to `ngu_jax.loops.acting` (the host acting step); kept importable.
actor_sums_fn = acting.actor_sums_fn


def _output_paths(output_dir: Optional[str]) -> Dict[str, Optional[str]]:
  """checkpoint_path, metrics_path, curves_path in `output_dir` (or None)."""
  if output_dir is None:
    return dict(checkpoint_path=None, metrics_path=None, curves_path=None)
  return dict(
      checkpoint_path=os.path.join(output_dir, checkpointing.CHECKPOINT_DIR),
      metrics_path=os.path.join(output_dir, metrics_log.METRICS_FILE),
      curves_path=os.path.join(output_dir, metrics_log.CURVES_FILE))


def _arm_shares(config, actor_state) -> Dict[str, float]:
  """The arm-share and temperature columns of `metrics_log.columns_for`
  (none without a meta-controller or Boltzmann lanes)."""
  lanes = actor_lib.lane_controllers(actor_state)
  return diagnostics.lane_controller_columns(config, {0: jax.device_get(
      {k: lanes[k] for k in diagnostics.CONTROLLER_FIELDS if k in lanes})})


@dataclasses.dataclass(frozen=True)
class _Settings:
  """The arguments of one `run_experiment` call that the loop reads."""
  num_lanes: int
  total_env_steps: int
  log_every_env_steps: int
  eval_every_env_steps: int
  checkpoint_every_env_steps: int
  max_minutes: float  # 0: no wall-clock limit.
  run_config: Dict[str, Any]  # `checkpointing.run_config`.
  grid_shape: Optional[Tuple[int, int]]  # `metrics_log.grid_shape`.
  heatmap_dir: Optional[str]
  bva_dir: Optional[str]  # DiCE's pooled value curves (`write_bva_curve`).
  checkpoint_path: Optional[str]
  metrics_path: Optional[str]
  curves_path: Optional[str]


class _Run:
  """One `run_experiment` call: its settings, parts, loop state and outputs.

  The loop body is split into `_act` (statistics of the step received, then
  select_action / observe / update), `_step_env`, `_learn` (pacing) and
  `_after_step` (progress, metrics rows, periodic checkpoints).
  """

  def __init__(self, config: NGUConfig, parts: python_state.Parts,
               loop: python_state.LoopState, settings: _Settings):
    self.config, self.parts, self.loop = config, parts, loop
    self.settings = settings
    self.zero_sums = np.zeros(len(diagnostics.ACTOR_SUMS), np.float32)
    self.bar: Optional[metrics_log.ProgressBar] = None
    self.start = 0.
    self.checkpoints = host.Schedule(0)
    # `loop` and `parts` can be saved as they are (between two steps).
    self.consistent = True

  def begin(self, progress: bool) -> None:
    """Starts the clock, the progress bar and the checkpoint schedule."""
    loop, every = self.loop, self.settings.checkpoint_every_env_steps
    self.checkpoints = host.Schedule(every, loop.env_steps)
    self.start = time.time() - loop.elapsed_s
    self.bar = metrics_log.ProgressBar(
        self.settings.total_env_steps, progress,
        initial=min(loop.env_steps, self.settings.total_env_steps))

  def _evaluate(self, row: Dict[str, Any]) -> None:
    """Evaluates every evaluation actor into `row`; writes the heatmaps."""
    loop, parts, config = self.loop, self.parts, self.config
    # Each evaluation starts from the training lanes' running statistics
    # (`actor.with_training_statistics`), as in the compiled loop.
    for eval_actor in parts.eval_actors.values():
      eval_actor.adopt_statistics(parts.actor.state)
    results = {j: evaluation.evaluate(eval_actor, parts.eval_env,
                                      parts.coverage is not None,
                                      visits_shape=self.settings.grid_shape)
               for j, eval_actor in parts.eval_actors.items()}
    bandit_result = None
    if parts.eval_bandit is not None:
      bandit_result = evaluation.evaluate_bandit(
          parts.eval_actors[0], parts.eval_bandit, parts.eval_env,
          parts.coverage is not None)
    row.update(evaluation.evaluation_columns(results, config.num_mixtures,
                                             bandit_result))
    bva = parts.actor.state.bva
    if bva is not None and self.settings.bva_dir is not None:
      metrics_log.write_bva_curve(self.settings.bva_dir, loop.env_steps,
                                  variant_policy.bva_config(config),
                                  jax.device_get(bva))
    if self.settings.grid_shape is not None:
      counts = evaluation.heatmap_counts(results, config.num_mixtures,
                                         loop.visits)
      if counts and self.settings.heatmap_dir is not None:
        metrics_log.write_heatmaps(self.settings.heatmap_dir, loop.env_steps,
                                   counts)
      loop.visits = np.zeros(self.settings.grid_shape, np.int64)

  def make_row(self) -> Dict[str, Any]:
    """The metrics row now (evaluating if due); resets the accumulators."""
    loop, parts, config = self.loop, self.parts, self.config
    loop.elapsed_s = elapsed = time.time() - self.start
    row = host.make_row(
        config, env_steps=loop.env_steps, actor_steps=loop.actor_steps,
        episodes=loop.episodes, learner_steps=loop.learner_steps,
        replay_size=parts.replay.size,
        episode_stats=host.episode_columns(loop.returns, loop.coverages,
                                           parts.coverage is not None,
                                           loop.episode_extras),
        env_steps_per_s=host.rate(loop.env_steps, elapsed),
        elapsed_s=elapsed, learner_values=loop.learner_metrics.values,
        actor_sums=jax.device_get(loop.actor_sums),
        error_stats=jax.device_get(parts.actor.state.error_stats),
        extra=_arm_shares(config, parts.actor.state),
        columns=metrics_log.columns_for(config))
    if parts.eval_actors and loop.evaluations.fire(loop.env_steps):
      self._evaluate(row)
    loop.rows.append(row)
    loop.returns, loop.coverages = [], []
    loop.episode_extras = acting.zero_episode_extras()
    loop.learner_metrics.pop()
    loop.actor_sums = jnp.array(self.zero_sums)
    return row

  def save(self, why: str, plot: bool = True) -> None:
    """Checkpoints the run (and plots the curves so far)."""
    self.loop.elapsed_s = time.time() - self.start
    settings = self.settings
    python_state.save_checkpoint(settings.checkpoint_path, self.parts,
                                 self.loop, settings.run_config)
    if plot:
      metrics_log.plot_curves(
          settings.metrics_path, settings.curves_path,
          min_interval_s=(metrics_log.CHECKPOINT_PLOT_INTERVAL_S
                          if why == "periodic" else 0.))
    logging.info("run_experiment: %s checkpoint at %d env steps in %s.",
                 why, self.loop.env_steps, settings.checkpoint_path)

  def _act(self) -> None:
    """Episode statistics of the step received; chooses the next action.

    The host acting step (`acting.ActingStep`: statistics, select_action,
    observe, actor diagnostics, update) on `loop`, which carries the
    `acting.EpisodeStats` fields for the checkpoint.
    """
    loop = self.loop
    self.consistent = False
    loop.pending_action = self.parts.acting(loop.timestep, loop)
    self.consistent = True

  def _step_env(self) -> None:
    """Applies the pending action.

    A KeyboardInterrupt out of env.step leaves a consistent state: the
    action is still pending.
    """
    loop = self.loop
    timestep = self.parts.env.step(loop.pending_action)
    self.consistent = False
    loop.timestep, loop.pending_action = timestep, None
    loop.actor_steps += 1
    loop.env_steps += self.settings.num_lanes

  def _learn(self) -> None:
    """The learner steps due (`ngu_jax.loops.pacing`).

    Once the replay holds min_replay_size items (the first batch as soon as
    it does): samples_per_env_step sampled sequences per fresh env step.
    """
    loop, config = self.loop, self.config
    if loop.ready_at is None and pacing.is_ready(config,
                                                 self.parts.replay.size):
      loop.ready_at = loop.env_steps
    while (loop.ready_at is not None
           and pacing.learner_step_due(config, loop.learner_steps,
                                       loop.env_steps - loop.ready_at)):
      loop.learner_metrics.add(self.parts.learner.step())
      loop.learner_steps += 1

  def _after_step(self) -> None:
    """Progress, the metrics row and the periodic checkpoint when due."""
    loop = self.loop
    rate = loop.env_steps / max(time.time() - self.start, 1e-9)
    self.bar.update(loop.env_steps, self.settings.num_lanes,
                    f"{rate:.0f} env steps/s, {loop.episodes} episodes, "
                    f"{loop.learner_steps} learner steps")
    if loop.log.fire(loop.env_steps):
      self.make_row()
    self.consistent = True
    if (loop.env_steps < self.settings.total_env_steps
        and self.checkpoints.fire(loop.env_steps)):
      self.save("periodic")

  def iterate(self) -> None:
    """One iteration: act (unless an action is pending), step, learn, log."""
    if self.loop.pending_action is None:
      self._act()
    self._step_env()
    self._learn()
    self._after_step()

  def _on_interrupt(self) -> None:
    """Saves a checkpoint if the state is consistent; tells the user."""
    host.interrupted("run_experiment", self.settings.checkpoint_path,
                     self.consistent, lambda: self.save("interrupt"),
                     self.loop.env_steps, during="a step")

  def out_of_budget(self) -> bool:
    """`total_env_steps` reached, or `max_minutes` past at the last row."""
    return (self.loop.env_steps >= self.settings.total_env_steps
            or metrics_log.past_max_minutes(self.loop.elapsed_s,
                                            self.settings.max_minutes))

  def run(self) -> None:
    """The loop to its budget, checkpointing at the end / Ctrl-C."""
    host.run_interruptibly(
        self.iterate, self.out_of_budget, self._on_interrupt, self._finish,
        enabled=self.settings.checkpoint_path is not None)

  def _finish(self) -> None:
    """The end (a Ctrl-C now is ignored: the run is complete). A row only
    because the run ends between two log points is written after the
    checkpoint, so that a resumed run drops it."""
    if self.settings.checkpoint_path is not None:
      self.save("final", plot=False)
    if (self.loop.rows.last is None
        or self.loop.rows.last["env_steps"] != self.loop.env_steps):
      self.make_row()

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()
    self.loop.rows.close()
    python_state.close_parts(self.parts)


def run_experiment(config: NGUConfig, env_name: str, total_env_steps: int,
                   num_lanes: int = 8, seed: int = 0,
                   output_dir: Optional[str] = None,
                   env_kwargs: Optional[Dict[str, Any]] = None,
                   log_every_env_steps: int = 1000,
                   eval_every_env_steps: int = 0,
                   progress: bool = True,
                   checkpoint_every_env_steps: int = 0,
                   resume: bool = False,
                   replay_backend: str = "embedded",
                   max_minutes: float = 0.) -> Dict[str, Any]:
  """Trains NGU in one process for `total_env_steps` environment steps.

  Args:
    config: the agent's config.
    env_name: a name `ngu_jax.envs.make` accepts, e.g. "disco_maze".
    total_env_steps: budget in environment steps over all lanes (the run
      takes ceil(total / num_lanes) actor steps); with `resume`, the total
      including the steps already taken.
    num_lanes: B, lanes of the batched environment (one actor).
    seed: seeds the environment, the replay and the agent's keys.
    output_dir: where `metrics.csv`, `curves.png`, `heatmaps/` and
      `checkpoint/` go (created); None writes nothing (and saves no
      checkpoint).
    env_kwargs: extra keyword arguments of `envs.make`.
    log_every_env_steps: a metrics row every this many env steps (and one
      at the end).
    eval_every_env_steps: evaluate (`ngu_jax.loops.evaluation`) at the
      first metrics row past every multiple of this; 0 never.
    progress: show a progress bar / line on stderr.
    checkpoint_every_env_steps: also checkpoint at the first iteration past
      every multiple of this many env steps; 0: only at the end (and on
      Ctrl-C). Needs `output_dir`.
    resume: continue from `output_dir/checkpoint`
      (`ngu_jax.loops.checkpointing`); the run's configuration
      (`run_config`) must be the checkpoint's.
    replay_backend: "embedded" (default) or "reverb" (`NGUBuilder`; needs
      the [reverb] extra; its server is stopped at the end of the run).
    max_minutes: also stop at the first metrics row past this many minutes
      of training (the rows' `elapsed_s`, which a resumed run continues);
      0: no wall-clock limit; a run resumed past it takes no further step.
      For comparisons at equal wall time.

  Returns:
    A summary dict: the last metrics row plus "rows" (all rows, those before
    a resume included), "metrics_path", "curves_path" (None without
    matplotlib) and "checkpoint_path" (None without `output_dir`).

  Raises:
    ValueError: bad arguments.
    ResumeError: (a ValueError) with `resume`, a configuration differing
      from the checkpoint's (listing the fields) or a corrupt checkpoint.
    FileNotFoundError: `resume` without a checkpoint in `output_dir`.
    KeyboardInterrupt: on Ctrl-C, after saving a checkpoint
      (`ngu_jax.loops.checkpointing`).
  """
  host.check_arguments(
      "run_experiment", total_env_steps, log_every_env_steps,
      num_lanes=num_lanes, eval_every_env_steps=eval_every_env_steps,
      checkpoint_every_env_steps=checkpoint_every_env_steps,
      output_dir=output_dir, resume=resume, max_minutes=max_minutes)
  this_config = checkpointing.run_config(
      config, env_name, num_lanes, seed, env_kwargs, log_every_env_steps,
      eval_every_env_steps)
  paths = _output_paths(output_dir)
  checkpoint_path = paths["checkpoint_path"]
  resume_from = meta = None
  if resume:
    resume_from = checkpointing.find_checkpoint(checkpoint_path, output_dir)
    meta = checkpointing.read_checkpoint_meta(resume_from, this_config,
                                              loop="python")
  elif checkpoint_path is not None and os.path.isdir(checkpoint_path):
    logging.warning("run_experiment: %s holds a checkpoint; starting afresh "
                    "(it is replaced at this run's first checkpoint; pass "
                    "resume=True to continue it instead).", checkpoint_path)

  parts = python_state.build_parts(config, env_name, num_lanes, seed,
                                   env_kwargs, eval_every_env_steps,
                                   replay_backend)
  grid_shape = (metrics_log.grid_shape(env_name, parts.env)
                if parts.eval_actors else None)
  loop = python_state.LoopState(
      log=host.Schedule(log_every_env_steps),
      evaluations=host.Schedule(eval_every_env_steps),
      episode_return=np.zeros(num_lanes, np.float64),
      actor_sums=jnp.array(np.zeros(len(diagnostics.ACTOR_SUMS), np.float32)),
      visits=(None if grid_shape is None
              else np.zeros(grid_shape, np.int64)),
      rows=metrics_log.MetricsRows(paths["metrics_path"],
                                   metrics_log.columns_for(config)))
  run = _Run(config, parts, loop, _Settings(
      num_lanes=num_lanes, total_env_steps=total_env_steps,
      log_every_env_steps=log_every_env_steps,
      eval_every_env_steps=eval_every_env_steps,
      checkpoint_every_env_steps=checkpoint_every_env_steps,
      max_minutes=max_minutes, run_config=this_config, grid_shape=grid_shape,
      heatmap_dir=(os.path.join(output_dir, metrics_log.HEATMAP_DIR)
                   if output_dir is not None and grid_shape is not None
                   else None),
      bva_dir=(os.path.join(output_dir, metrics_log.BVA_DIR)
               if output_dir is not None else None),
      **paths))
  try:
    python_state.restore_or_reset(parts, loop, resume_from, meta)
    if output_dir is not None:
      os.makedirs(output_dir, exist_ok=True)
    loop.rows.open(resume)
    run.begin(progress)
    run.run()
  finally:
    run.close()
  curves_path = metrics_log.plot_curves(paths["metrics_path"],
                                        paths["curves_path"])
  summary = dict(loop.rows.last) if loop.rows.last is not None else {}
  summary.update(rows=loop.rows.all(), metrics_path=paths["metrics_path"],
                 curves_path=curves_path, checkpoint_path=checkpoint_path)
  return summary
