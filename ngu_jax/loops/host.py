"""The host skeleton every training loop shares.

The three loops (the Python loop `python.loop.run_experiment`, the compiled
loop's driver `compiled.runner.run_compiled` and the distributed program's
`distributed.launcher.run_distributed`) differ in how they act and
learn; around that they do the same things, written once here (as DQN Zoo
shares its run-loop parts across agents):

* `check_arguments`: the run arguments' checks and messages;
* `next_point` / `Schedule`: the env steps of the next metrics row,
  evaluation and checkpoint ("the first point past every multiple of
  `every`");
* `make_row`: a metrics row with exactly the columns of one list
  (`metrics_log.COLUMNS`, plus the distributed program's extras), from the
  counts, the episode statistics (`episode_columns`), rates and elapsed
  time, NaN evaluation columns, `diagnostics.learner_summary` and
  `diagnostics.actor_summary`. A new metric is one entry in `COLUMNS` and
  one value here: a row missing a column raises;
* `LearnerMetrics`: the learner's per-step metrics since the last row;
* `report_interrupt`: the Ctrl-C message (checkpoint saved or not), with the
  loop's name and its resume hint.

The learner's pacing rule is `ngu_jax.loops.pacing`; checkpoint format names
are `checkpointing.checkpoint_format`.
"""

import math
import sys
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence,
                    Union)

import numpy as np

from ngu_jax.agents.ngu import diagnostics
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import checkpointing
from ngu_jax.loops import metrics_log

# The evaluation columns (`ngu_jax.loops.evaluation`): NaN in rows without
# an evaluation.
EVAL_COLUMNS = ("eval_return", "eval_success", "eval_coverage",
                "eval_explore_return", "eval_explore_coverage")
# Each loop's resume hint for the Ctrl-C message.
RESUME_HINTS = {
    "run_experiment": "resume=True (experiments.train: --resume)",
    "run_compiled": "resume=True (experiments.train: --resume)",
    "run_distributed": "resume=True (experiments.launch: --resume)",
}


# ------------------------------------------------------------------ arguments

def _is_int(value: Any) -> bool:
  return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_arguments(where: str, total_env_steps: int,
                    log_every_env_steps: int, *,
                    num_lanes: Optional[int] = None,
                    eval_every_env_steps: int = 0,
                    checkpoint_every_env_steps: int = 0,
                    output_dir: Optional[str] = None, resume: bool = False,
                    max_minutes: float = 0.,
                    seeds: Optional[Sequence[int]] = None,
                    max_restarts: Optional[int] = None) -> None:
  """Checks a loop's run arguments; each loop passes what it has.

  Args:
    where: the loop's function name, e.g. "run_experiment" (in messages).
    total_env_steps, log_every_env_steps: >= 1.
    num_lanes: >= 1 (None: the loop has no such argument).
    eval_every_env_steps, checkpoint_every_env_steps: >= 0.
    output_dir, resume: `resume` and checkpoints need an `output_dir`.
    max_minutes: a finite number >= 0.
    seeds: distinct ints (None: the loop takes one seed).
    max_restarts: an int >= -1 (None: not a distributed run).

  Raises:
    ValueError: naming the argument and the loop.
  """
  metrics_log.check_max_minutes(max_minutes, where)
  names = ["total_env_steps", "log_every_env_steps"]
  values = [total_env_steps, log_every_env_steps]
  if num_lanes is not None:
    names.insert(1, "num_lanes")
    values.insert(1, num_lanes)
  if any(v < 1 for v in values):
    listed = ", ".join(f"`{n}`" for n in names[:-1]) + f" and `{names[-1]}`"
    raise ValueError(f"{where}: {listed} must be >= 1, got "
                     f"{', '.join(str(v) for v in values)}.")
  if eval_every_env_steps < 0 or checkpoint_every_env_steps < 0:
    raise ValueError(f"{where}: `eval_every_env_steps` and "
                     "`checkpoint_every_env_steps` must be >= 0, got "
                     f"{eval_every_env_steps}, {checkpoint_every_env_steps}.")
  if seeds is not None and (not seeds or len(set(int(s) for s in seeds))
                            != len(seeds)):
    raise ValueError(f"{where}: `seeds` must be distinct ints, got "
                     f"{list(seeds)}.")
  if output_dir is None and (resume or checkpoint_every_env_steps):
    raise ValueError(f"{where}: `resume` and `checkpoint_every_env_steps` "
                     "need an `output_dir`.")
  if max_restarts is not None and not (_is_int(max_restarts)
                                       and max_restarts >= -1):
    raise ValueError(f"{where}: `max_restarts` must be an int >= -1, got "
                     f"{max_restarts!r}.")


# ------------------------------------------------------------------- schedule

def next_point(env_steps: int, every: int) -> int:
  """The first multiple of `every` past `env_steps` (0 if `every` is 0).

  A periodic event (row, evaluation, checkpoint) happens at the first check
  with env_steps >= this point, and the next point is computed from there:
  with checks every c env steps it happens every max(c, every) env steps
  (rounded to the checks), and never more than once per check.
  """
  return (env_steps // every + 1) * every if every else 0


class Schedule:
  """One periodic event (a row, an evaluation, a checkpoint) over env steps.

  Args:
    every: env steps between events; 0: never.
    env_steps: env steps so far (the first event is the first multiple of
      `every` past them).
    next_at: a saved next point instead (a resumed loop).
  """

  def __init__(self, every: int, env_steps: int = 0,
               next_at: Optional[int] = None):
    self.every = int(every)
    self.next_at = (int(next_at) if next_at is not None
                    else next_point(int(env_steps), self.every))

  def due(self, env_steps: int) -> bool:
    """Whether the event is due at `env_steps` (never if `every` is 0)."""
    return bool(self.every) and env_steps >= self.next_at

  def advance(self, env_steps: int) -> None:
    """Moves the next point past `env_steps` (after the event happened)."""
    self.next_at = next_point(int(env_steps), self.every)

  def fire(self, env_steps: int) -> bool:
    """`due`, and if so `advance`: whether to do the event now."""
    if not self.due(env_steps):
      return False
    self.advance(env_steps)
    return True


# ------------------------------------------------------------------ the rows

def rate(count: float, seconds: float) -> float:
  """count / seconds, finite for a zero duration."""
  return count / max(seconds, 1e-9)


def episode_columns(returns: Sequence[float], coverages: Sequence[float],
                    track_coverage: bool = True,
                    episode_extras: Optional[
                        Mapping[str, Sequence[float]]] = None
                    ) -> Dict[str, float]:
  """mean_episode_return, episode_success_rate, mean_episode_coverage and
  the episode-extra columns (`metrics_log.EPISODE_EXTRAS`).

  Args:
    returns: the returns of the episodes finished since the last row.
    coverages: their coverages (Disco Maze, Sec. 4.1).
    track_coverage: False: the environment has no coverage (NaN).
    episode_extras: extra name -> its values at the LAST step of the
      episodes finished since the last row (`acting.EpisodeStats.
      episode_extras`); a name missing or without values gives NaN.

  Returns:
    {column: mean}, one entry for every column named here.
  """
  mean = metrics_log.mean_or_nan
  episode_extras = episode_extras or {}
  out = dict(
      mean_episode_return=mean(returns),
      episode_success_rate=mean([float(r > 0) for r in returns]),
      mean_episode_coverage=mean(coverages) if track_coverage else math.nan)
  out.update({metrics_log.episode_extra_column(name):
              mean(list(episode_extras.get(name, ())))
              for name in metrics_log.EPISODE_EXTRAS})
  return out


def make_row(config: NGUConfig, *, env_steps: int, actor_steps: int,
             episodes: int, learner_steps: int, replay_size: int,
             episode_stats: Mapping[str, float], env_steps_per_s: float,
             elapsed_s: float, learner_values: Mapping[str, Sequence[float]],
             actor_sums: Any, error_stats: Any = None,
             extra: Optional[Mapping[str, Any]] = None,
             columns: Sequence[str] = metrics_log.COLUMNS
             ) -> Dict[str, Any]:
  """A metrics row with exactly `columns`, in their order.

  Args:
    config: the agent's config (which diagnostics apply).
    env_steps, actor_steps, episodes, learner_steps, replay_size: counts.
    episode_stats: `episode_columns` (or the same means computed
      elsewhere, e.g. from the compiled loop's sums).
    env_steps_per_s, elapsed_s: throughput and wall-clock time.
    learner_values: `LearnerMetrics.values` (metric -> values since the last
      row).
    actor_sums: float [len(diagnostics.ACTOR_SUMS)], the summed
      `diagnostics.actor_step_sums` since the last row.
    error_stats: the actor's RND error statistics (or None).
    extra: further columns (the distributed program's, an evaluation's).
    columns: the row's columns (default `metrics_log.COLUMNS`).

  Returns:
    {column: value} for every column (evaluation columns NaN unless in
    `extra`).

  Raises:
    KeyError: a column nothing here provides (a new column needs a value).
  """
  values = dict(env_steps=env_steps, actor_steps=actor_steps,
                episodes=episodes, learner_steps=learner_steps,
                replay_size=replay_size, env_steps_per_s=env_steps_per_s,
                elapsed_s=elapsed_s)
  values.update(episode_stats)
  values.update({name: math.nan for name in EVAL_COLUMNS
                 + metrics_log.EVAL_BANDIT_COLUMNS})
  values.update(diagnostics.summary_columns(config, learner_values,
                                            actor_sums, error_stats))
  values.update(extra or {})
  missing = [c for c in columns if c not in values]
  if missing:
    raise KeyError(f"make_row: no value for the column(s) {missing}.")
  return {c: values[c] for c in columns}


class LearnerMetrics:
  """The learner's per-step metrics since the last metrics row.

  Keeps, for each `Learner.step` metric of `diagnostics.LEARNER_COLUMNS`,
  the list of its values (NaN where a step did not report it).

  Args:
    values: metric name -> values to start from (a restored loop).
  """

  def __init__(self, values: Optional[Mapping[str, Sequence[float]]] = None):
    self.values: Dict[str, List[float]] = {
        k: list(v) for k, v in (values or {}).items()}

  def add(self, metrics: Mapping[str, Any]) -> None:
    """Adds one learner step's metrics."""
    for _, name in diagnostics.LEARNER_COLUMNS:
      self.values.setdefault(name, []).append(metrics.get(name, math.nan))

  def extend(self, values: Mapping[str, Sequence[float]]) -> None:
    """Adds the values of several steps (e.g. popped from another node)."""
    for name, got in values.items():
      self.values.setdefault(name, []).extend(got)

  def pop(self) -> Dict[str, List[float]]:
    """The values so far; starts afresh."""
    values, self.values = self.values, {}
    return values


# ------------------------------------------------------------------- Ctrl-C

def run_interruptibly(iterate: Callable[[], None], done: Callable[[], bool],
                      on_interrupt: Callable[[], None],
                      finish: Callable[[], None], enabled: bool) -> None:
  """A loop's iterations, with Ctrl-C deferred to their boundaries.

  `iterate()` until `done()`, under `checkpointing.DeferInterrupt`: a first
  Ctrl-C ends the current iteration; then (or on a KeyboardInterrupt
  raised inside one) `on_interrupt()` runs (`interrupted`: save if the
  state is consistent, tell the user) and the KeyboardInterrupt goes on.
  `finish()` (the final checkpoint) runs at the end with Ctrl-C still
  deferred. The Python and compiled loops run this way.

  Args:
    iterate: one iteration (a step, a compiled chunk).
    done: whether the run has reached its budget.
    on_interrupt: what a Ctrl-C does before it propagates.
    finish: what the end of the budget does.
    enabled: whether to defer Ctrl-C (False: no checkpoints to save).
  """
  with checkpointing.DeferInterrupt(enabled=enabled) as interrupt:
    try:
      while not done():
        iterate()
        if interrupt.requested:
          raise KeyboardInterrupt
    except KeyboardInterrupt:
      on_interrupt()
      raise
    finish()


def interrupted(where: str, checkpoint_path: Optional[str], consistent: bool,
                save: Callable[[], None],
                env_steps: Union[Optional[int], Callable[[], int]],
                during: str = "a step") -> None:
  """What every loop does on Ctrl-C: `save()` a checkpoint if there is a
  checkpoint path and the state is `consistent` (not in the middle of a
  step or a donated chunk), then `report_interrupt` (`env_steps` may be a
  function, called after the save: the steps the checkpoint holds)."""
  if checkpoint_path is not None and consistent:
    save()
  report_interrupt(where, checkpoint_path, consistent,
                   env_steps() if callable(env_steps) else env_steps,
                   during=during)


def report_interrupt(where: str, checkpoint_path: Optional[str], saved: bool,
                     env_steps: Optional[int] = None,
                     during: str = "a step", hint: Optional[str] = None,
                     stream=None) -> None:
  """Tells the user what a Ctrl-C left behind (on stderr).

  Args:
    where: the loop's function name (`RESUME_HINTS` gives its hint).
    checkpoint_path: the checkpoint directory; None: nothing is said (the
      run saves no checkpoints).
    saved: whether a checkpoint was saved at the interrupt.
    env_steps: env steps of the saved checkpoint.
    during: what an unsaved interrupt cut short ("a step", "a compiled
      chunk").
    hint: how to continue (default: `RESUME_HINTS[where]`).
    stream: where to write (default sys.stderr).
  """
  if checkpoint_path is None:
    return
  stream = sys.stderr if stream is None else stream
  if saved:
    hint = hint or RESUME_HINTS.get(where, "resume=True")
    stream.write(f"\n{where}: interrupted at {env_steps} env steps; "
                 f"checkpoint saved in {checkpoint_path}; continue with "
                 f"{hint}.\n")
  else:
    stream.write(f"\n{where}: interrupted in the middle of {during}: no "
                 f"checkpoint saved; the last one in {checkpoint_path} (if "
                 "any) stays.\n")
