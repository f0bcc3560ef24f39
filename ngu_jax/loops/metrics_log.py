"""Metrics rows, learning curves, visit heatmaps and the progress bar.

The logging pieces every training loop shares (the Python loop of
`ngu_jax.loops.python.loop`, the compiled loop, the distributed one).

Logged to `output_dir/metrics.csv` (`COLUMNS`, written by `MetricsWriter`)
every `log_every_env_steps` environment steps (env steps count every lane):
env steps, episodes, mean return of the episodes finished since the last
row, the fraction of them with a positive return (the success rate of
sparse-reward tasks such as MiniGrid, whose only reward is for reaching the
goal), learner steps and mean loss since the last row, env steps/s, and for
Disco Maze the mean coverage of the finished episodes (Sec. 4.1,
`CoverageTracker`). A progress line goes to stderr (`ProgressBar`: a tqdm
bar when tqdm is installed).

Episode extras (`EPISODE_EXTRAS`): for each name, the column
"mean_episode_<name>" is the mean over the training lanes' episodes
finished since the last row of the environment's `timestep.extras[name]`
at their LAST step (a running per-episode count whose last value is the
episode's statistic); NaN in rows without such episodes and for
environments that do not report that extra. Reported by the noisy-TV grid
(`ngu_jax.envs.noisy_grid`):

  mean_episode_frontier   the largest maze distance from the start cell
      reached in the episode;
  mean_episode_tv_steps   TV actions taken in the episode (noise "tv").

One mechanism in every loop (`acting.record_episodes` in the host loops,
`compiled.state.episode_stats` in the compiled loop): a new extra is one
name in `EPISODE_EXTRAS` and its column in `COLUMNS`.

Diagnostics (`ngu_jax.agents.ngu.diagnostics`), so that a silenced intrinsic
reward shows in every run; means since the last row, NaN when there is nothing to
average or the column does not apply to the config:

  mean_episodic_reward, mean_intrinsic_reward   r^episodic (Alg. 1) and
      beta_j r^i (eq. 1 scaled as the loss sees it, App. A);
  mean_alpha, alpha_above_one   the modulator alpha_t and the fraction of
      steps with alpha_t > 1 (use_rnd with intrinsic_reward "ngu" only);
  rnd_error, rnd_error_mean, rnd_error_std   err(x_t), and the actor's
      running mu_e, sigma_e read at the row (`ActorState.error_stats`);
  rnd_loss, action_prediction_loss, action_prediction_accuracy   the
      learner's `sgd_step` metrics (rnd_loss needs use_rnd);
  q_exploit, q_explore   max_a Q(x_t, a, j) of the lanes of j = 0 and
      j = N - 1;
  arm_0 .. arm_<N-1>   with Agent57's meta-controller only (`columns_for`):
      the share of each mixture among the episodes in the training lanes'
      bandit windows at the row (`diagnostics.arm_shares`; the Python and
      compiled loops);
  q_extrinsic, q_intrinsic   with Agent57's split values
      (`config.loss.split_values`), the learner's mean Q_e and Q_i of the
      replayed actions (NaN otherwise).

The actor columns average the training lanes' non-FIRST steps.

Evaluation columns (`ngu_jax.loops.evaluation`): `eval_return` /
`eval_success` (the fraction of episodes with a positive return) /
`eval_coverage` (j = 0) and `eval_explore_return` / `eval_explore_coverage`
(j = N - 1); NaN in rows without an evaluation.

Visit heatmaps (grid worlds: Disco Maze, MiniGrid; with evaluations and an
`output_dir`): at each evaluation, `output_dir/heatmaps/eval_<env_steps>.png`
and `.npz` (no pickle) hold the visits per grid cell of every step of the
evaluation episodes of j = 0 ("eval_j0") and j = N - 1 ("eval_j<N-1>"), and
of the training lanes since the last evaluation ("train")
(`write_heatmaps`). Disco Maze draws a new maze every episode, so its maps
overlay many mazes; a terminating step counts the wall cell the agent hit.

Learning curves: `output_dir/curves.png` (`ngu_jax.plotting.plot_curves`:
returns, coverage, evaluations, intrinsic reward, alpha, RND error,
inverse dynamics, Q values, loss, throughput; panels without information
are left out) at checkpoints (periodic ones at most every 10 minutes) and
at the end, when matplotlib is installed (`plot_curves`).

Memory: the checkpoint path's transient allocations (the rows' JSON,
matplotlib's figures) leave glibc's heap fragmented, so a driver's resident
memory climbed 12% over the hour after its first 10 minutes in the soak
(`experiments.benchmarks.soak`) though nothing stayed alive. `plot_curves`
and the evaluation plots end with `release_freed_memory`, which hands the
freed pages back to the OS. Drawing curves.png still grew a process about
1 MB per drawing of a 20,000-row metrics.csv (0.1 MB for 2,000 rows; Python's
traced allocations grew 14 kB): `plotting.read_metrics` held a float object
per cell while matplotlib allocated between them, and some of those arenas
stayed pinned. It now reads into one numpy array (11 drawings of 500 to
20,500 rows: +1.6 MB, was +10 MB), a curve draws at most
`plotting.MAX_CURVE_POINTS` points, and periodic checkpoints redraw
curves.png at most every `CHECKPOINT_PLOT_INTERVAL_S` (10 minutes). The rows themselves live in metrics.csv
(`MetricsRows`): a loop keeps the last one, and its checkpoint their count,
so neither grows with the run's length.
"""

import csv
import ctypes
import gc
import itertools
import logging
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax import plotting
from ngu_jax.loops import checkpointing

try:  # Optional progress bar.
  import tqdm  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the environment.
  tqdm = None

METRICS_FILE = "metrics.csv"
CURVES_FILE = "curves.png"
HEATMAP_DIR = "heatmaps"
# Per-episode extras read at LAST (module docstring); column of `name`:
# `episode_extra_column(name)`.
EPISODE_EXTRAS = ("frontier", "tv_steps")
COLUMNS = ("env_steps", "actor_steps", "episodes", "mean_episode_return",
           "episode_success_rate", "mean_episode_coverage",
           "mean_episode_frontier", "mean_episode_tv_steps", "learner_steps",
           "learner_loss", "replay_size", "env_steps_per_s", "elapsed_s",
           "eval_return", "eval_success", "eval_coverage",
           "eval_explore_return", "eval_explore_coverage",
           # Diagnostics (module docstring; `ngu_jax.agents.ngu.diagnostics`).
           "mean_episodic_reward", "mean_intrinsic_reward", "mean_alpha",
           "alpha_above_one", "rnd_error", "rnd_error_mean", "rnd_error_std",
           "rnd_loss", "action_prediction_loss", "action_prediction_accuracy",
           "q_exploit", "q_explore", "q_extrinsic", "q_intrinsic")


# With Agent57's meta-controller: the evaluator bandit's arm and the return
# of its evaluation (`ngu_jax.loops.evaluation.evaluate_bandit`).
EVAL_BANDIT_COLUMNS = diagnostics.EVAL_BANDIT_COLUMNS


def columns_for(config) -> Tuple[str, ...]:
  """The metrics.csv columns of a run: `COLUMNS` and those the agent adds
  for its variant (`ngu_jax.agents.ngu.diagnostics.extra_columns`: Agent57's
  arm shares and `EVAL_BANDIT_COLUMNS`, DiCE's temperatures)."""
  return COLUMNS + diagnostics.extra_columns(config)


def episode_extra_column(name: str) -> str:
  """The metrics column of the episode extra `name`: "mean_episode_<name>"."""
  return f"mean_episode_{name}"


def check_max_minutes(max_minutes: float, where: str) -> None:
  """Raises ValueError unless `max_minutes` is a finite number >= 0."""
  if (isinstance(max_minutes, bool)
      or not isinstance(max_minutes, (int, float))
      or not math.isfinite(max_minutes) or max_minutes < 0):
    raise ValueError(f"{where}: `max_minutes` must be a finite number >= 0 "
                     f"(0: no wall-clock limit), got {max_minutes!r}.")


def past_max_minutes(elapsed_s: float, max_minutes: float) -> bool:
  """Whether a run with a wall-clock limit of `max_minutes` (0: none) is out
  of time after `elapsed_s` seconds of training."""
  return bool(max_minutes) and elapsed_s >= 60. * max_minutes


def mean_or_nan(values: Sequence[float]) -> float:
  """The mean of `values` as a float, NaN when there are none."""
  return float(np.mean(values)) if values else math.nan


class ProgressBar:
  """tqdm bar if available, else a simple line rewritten every ~2 s.

  Args:
    total: env steps of the whole run.
    enabled: False shows nothing.
    initial: env steps already done (a resumed run).
  """

  def __init__(self, total: int, enabled: bool, initial: int = 0):
    self._enabled = enabled
    self._bar = (tqdm.tqdm(total=total, initial=initial, unit="step",
                           file=sys.stderr)
                 if enabled and tqdm is not None else None)
    self._total = total
    self._last_print = 0.

  def update(self, done: int, increment: int, text: str) -> None:
    """`done` env steps so far, `increment` of them new; `text` after it."""
    if not self._enabled:
      return
    if self._bar is not None:
      self._bar.update(increment)
      self._bar.set_postfix_str(text, refresh=False)
      return
    now = time.time()
    if now - self._last_print >= 2. or done >= self._total:
      self._last_print = now
      sys.stderr.write(f"\r{done}/{self._total} env steps  {text}   ")
      sys.stderr.flush()

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
    elif self._enabled:
      sys.stderr.write("\n")


def write_metrics_rows(path: str, rows: List[Dict[str, Any]],
                       columns: Sequence[str] = COLUMNS) -> None:
  """Writes the metrics CSV `path` with exactly `rows` (atomically)."""
  tmp = path + ".tmp"
  with open(tmp, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
  os.replace(tmp, path)


def parse_cell(text: Optional[str]) -> Any:
  """A metrics.csv cell as the row that wrote it held it.

  An int ("12"), a float ("0.5", "nan" -> `math.nan`, the one NaN object,
  so that rows read twice compare equal), NaN for an empty cell (as
  `checkpointing.rows_from_json` reads a None), else the text.
  """
  if text is None or text == "":
    return math.nan
  try:
    return int(text)
  except ValueError:
    pass
  try:
    value = float(text)
  except ValueError:
    return text
  return math.nan if math.isnan(value) else value


def read_rows(path: str) -> List[Dict[str, Any]]:
  """metrics.csv's rows, each {column: `parse_cell(cell)`}, in file order.

  Floats round-trip exactly (the csv module writes `repr`), so these are
  the rows the loop wrote, as `run_experiment`'s summary returns them.
  """
  with open(path, newline="") as f:
    return [{k: parse_cell(v) for k, v in row.items()}
            for row in csv.DictReader(f)]


def keep_first_rows(path: str, count: int,
                    columns: Sequence[str] = COLUMNS) -> None:
  """Rewrites metrics.csv `path` (atomically) with its first `count` rows.

  A resumed run drops the rows written after its checkpoint. The cells
  are copied as text; columns the file lacks stay empty, columns
  `columns` lacks are dropped.

  Raises:
    checkpointing.ResumeError: (a ValueError) no file, or fewer than
      `count` rows in it (the checkpoint's rows are gone), naming `path`.
  """
  try:
    with open(path, newline="") as f:
      rows = list(itertools.islice(csv.DictReader(f), count))
  except OSError as e:
    raise checkpointing.ResumeError(
        f"cannot resume: the checkpoint counts {count} metrics rows but "
        f"{path} cannot be read: {e}") from e
  if len(rows) < count:
    raise checkpointing.ResumeError(
        f"cannot resume: the checkpoint counts {count} metrics rows but "
        f"{path} holds {len(rows)} (the run's metrics.csv was replaced or "
        "truncated)")
  tmp = path + ".tmp"
  with open(tmp, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
  os.replace(tmp, path)


class MetricsWriter:
  """metrics.csv (`COLUMNS`), one row at a time, flushed after each.

  Args:
    path: the CSV file.
    previous_rows: None: a fresh file (header only). An int n (a resumed
      run): the file keeps its first n rows (those of the checkpoint; rows
      written after it are dropped: `keep_first_rows`), then is appended
      to. A list (a checkpoint written before version 2, which held its
      rows): the file is first rewritten with exactly these rows.
    columns: the CSV's columns (default `COLUMNS`; a loop may add its own
      after them, e.g. the distributed program's).

  Usable as a context manager (closes on exit).

  Raises:
    checkpointing.ResumeError: `previous_rows` an int, and the file holds
      fewer rows.
  """

  def __init__(self, path: str,
               previous_rows: Union[None, int, List[Dict[str, Any]]] = None,
               columns: Sequence[str] = COLUMNS):
    self.path = path
    if isinstance(previous_rows, int):
      keep_first_rows(path, previous_rows, columns)
    elif previous_rows is not None:
      write_metrics_rows(path, previous_rows, columns)
    self._file = open(path, "w" if previous_rows is None else "a",
                      newline="")
    self._writer = csv.DictWriter(self._file, fieldnames=columns)
    if previous_rows is None:
      self._writer.writeheader()

  def write(self, row: Dict[str, Any]) -> None:
    """Appends `row` ({column: value}; missing columns stay empty)."""
    self._writer.writerow(row)
    self._file.flush()

  def close(self) -> None:
    self._file.close()

  def __enter__(self) -> "MetricsWriter":
    return self

  def __exit__(self, *exc_info) -> bool:
    self.close()
    return False


class MetricsRows:
  """A run's metrics rows: each written to metrics.csv, the last one kept.

  What a loop keeps of its rows. With a `path`, memory holds only the last
  row and the count, the checkpoint records them (`state`), and `all`
  reads the rows back from the file: the rows of a long run grow with its
  length (4,300 rows, a 4.9 MB state.json, 44 minutes into the compiled
  loop's soak), so they live only in metrics.csv. Without a path (a run
  without `output_dir`, which saves no checkpoint) every row is kept in
  memory.

  Args:
    path: metrics.csv, or None.
    columns: its columns (`MetricsWriter`).

  Use: `restore` (a resumed run), `open` (creates or truncates the file),
  `append` per row, `close`.
  """

  def __init__(self, path: Optional[str], columns: Sequence[str] = COLUMNS):
    self.path, self.columns = path, tuple(columns)
    self.count = 0
    self.last: Optional[Dict[str, Any]] = None
    self._kept: List[Dict[str, Any]] = []
    self._previous: Union[None, int, List[Dict[str, Any]]] = None
    self._writer: Optional[MetricsWriter] = None

  def __len__(self) -> int:
    return self.count

  def __bool__(self) -> bool:
    return self.count > 0

  def state(self) -> Dict[str, Any]:
    """For a checkpoint's JSON: {"num_rows": n, "last_row": the last row,
    its non-finite floats None (`checkpointing.rows_to_json`), or None}."""
    last = self.last
    if last is not None:
      last = checkpointing.rows_to_json([last])[0]
    return {"num_rows": self.count, "last_row": last}

  def restore(self, meta: Dict[str, Any]) -> None:
    """The rows of a checkpoint's JSON: `state()`'s keys, or "rows" (all
    the rows, as checkpoints before version 2 held them)."""
    if "rows" in meta:
      rows = checkpointing.rows_from_json(meta["rows"])
      self.count, self.last = len(rows), (rows[-1] if rows else None)
      self._previous = rows
      if self.path is None:
        self._kept = list(rows)
      return
    self.count = int(meta["num_rows"])
    last = meta.get("last_row")
    self.last = (None if last is None
                 else checkpointing.rows_from_json([last])[0])
    self._previous = self.count

  def open(self, resume: bool) -> None:
    """Opens metrics.csv: fresh, or (`resume`) keeping the restored rows
    (`MetricsWriter`'s `previous_rows`). Nothing without a path."""
    if self.path is None:
      return
    if resume and self._previous is None:
      # MetricsWriter would start the file afresh: the run's rows lost.
      raise RuntimeError(f"MetricsRows: open(resume=True) for {self.path} "
                         f"before restore()")
    self._writer = MetricsWriter(
        self.path, self._previous if resume else None, self.columns)
    if not resume:
      self.count, self.last = 0, None

  def append(self, row: Dict[str, Any]) -> None:
    """Writes `row` (and keeps it as the last)."""
    self.count += 1
    self.last = row
    if self.path is None:
      self._kept.append(row)
    elif self._writer is None:
      raise RuntimeError(f"MetricsRows: a row for {self.path} before open()")
    else:
      self._writer.write(row)

  def all(self) -> List[Dict[str, Any]]:
    """Every row of the run, those before a resume included (`read_rows`
    of the file; the kept rows without a path)."""
    if self.path is None:
      return list(self._kept)
    return read_rows(self.path) if os.path.exists(self.path) else []

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None


def saved_metrics(meta: Dict[str, Any], num_seeds: Optional[int] = None
                  ) -> Union[Dict[str, Any], List[Dict[str, Any]]]:
  """What a checkpoint's JSON holds of its rows, for `MetricsRows.restore`.

  Checkpoints of version 2 hold `meta["metrics"]`: one `MetricsRows.state()`,
  or one per seed (the compiled loop, the PPO example); version 1 held every
  row as `meta["rows"]`: a list of rows, or one list per seed.

  Args:
    meta: the checkpoint's JSON (state.json).
    num_seeds: None for a run of one seed; else the number of seeds whose
      rows the checkpoint holds.

  Returns:
    `restore`'s argument, or (`num_seeds`) a list of them, one per seed.

  Raises:
    checkpointing.ResumeError: the checkpoint holds no rows, or the rows of
      another number of seeds.
  """
  if "rows" in meta:  # Version 1: `restore` reads "rows" itself.
    saved = (meta if num_seeds is None else
             [{"rows": rows} for rows in meta["rows"]])
  elif "metrics" in meta:
    saved = meta["metrics"]
  else:
    raise checkpointing.ResumeError(
        "the checkpoint's JSON holds no metrics rows (neither \"metrics\" "
        "nor \"rows\")")
  if num_seeds is None:
    return saved
  if not isinstance(saved, list) or len(saved) != num_seeds:
    raise checkpointing.ResumeError(
        f"the checkpoint holds the metrics rows of "
        f"{len(saved) if isinstance(saved, list) else 'no list of'} seeds, "
        f"not {num_seeds}")
  return saved


_LIBC = None


def release_freed_memory() -> bool:
  """Collects garbage, then returns the heap's free pages to the OS.

  glibc's `malloc_trim(0)`: after a burst of short-lived allocations (a
  checkpoint's JSON, a matplotlib figure) glibc keeps the freed memory in its
  arenas, and a long run's resident memory grows with fragmentation though
  nothing is alive (module docstring). A few milliseconds on a 300 MB heap.

  Returns:
    Whether `malloc_trim` ran: False where the C library has none (musl,
    macOS), where only the garbage collection runs.
  """
  global _LIBC
  gc.collect()
  if _LIBC is None:
    try:
      _LIBC = ctypes.CDLL("libc.so.6")
    except OSError:
      _LIBC = False
  trim = getattr(_LIBC, "malloc_trim", None) if _LIBC else None
  if trim is None:
    return False
  trim(0)
  return True


# A periodic checkpoint redraws curves.png at most this often (seconds).
CHECKPOINT_PLOT_INTERVAL_S = 600.
# curves_path -> time.monotonic() of its last drawing, for `min_interval_s`.
_LAST_PLOT: Dict[str, float] = {}


def plot_curves(metrics_path: Optional[str], curves_path: Optional[str],
                min_interval_s: float = 0.) -> Optional[str]:
  """`plotting.plot_curves`, but a failure only logs (never stops a run).

  Every loop calls it after each checkpoint (periodic ones with
  `min_interval_s=CHECKPOINT_PLOT_INTERVAL_S`) and at the end; it ends
  with `release_freed_memory` (module docstring: Memory).

  Args:
    metrics_path, curves_path: `plotting.plot_curves`'s.
    min_interval_s: draw only if `curves_path` was not drawn (by this
      process) in the last this many seconds. A drawing leaves a little
      memory behind in the process (module docstring: Memory), so a long
      run's periodic checkpoints draw at most every
      `CHECKPOINT_PLOT_INTERVAL_S`.

  Returns:
    The path written, or None (no `metrics_path`, drawn too recently, no
    matplotlib, or an error, logged as a warning).
  """
  if metrics_path is None:
    return None
  now = time.monotonic()
  if curves_path is not None:
    last = _LAST_PLOT.get(curves_path)
    if min_interval_s > 0 and last is not None and now - last < min_interval_s:
      return None
    _LAST_PLOT[curves_path] = now
  try:
    return plotting.plot_curves(metrics_path, curves_path)
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("run_experiment: could not write %s: %r", curves_path, e)
    return None
  finally:
    release_freed_memory()


def grid_shape(env_name: str, env: envs.BatchedEnv
               ) -> Optional[Tuple[int, int]]:
  """The initial visit-count grid of a grid world, else None.

  What the environment declares (`BatchedEnv.visit_grid_shape`: Disco Maze
  its size x size grid; MiniGrid (0, 0), grown to the cells visited; a
  functional environment in lanes the `grid_shape` it declares), not
  matched on `env_name` (kept for callers; unused).
  """
  del env_name
  shape = env.visit_grid_shape()
  return None if shape is None else (int(shape[0]), int(shape[1]))


def write_heatmaps(directory: str, env_steps: int,
                   counts: Dict[str, Tuple[str, np.ndarray]]) -> None:
  """eval_<env_steps>.npz (the counts) and .png (`plot_visit_heatmaps`).

  Args:
    directory: where both go (created).
    env_steps: the env steps of the evaluation.
    counts: npz key (e.g. "eval_j0", "train") -> (panel title, int64
      [H, W] visits); padded with zeros to one shape.

  A failure only logs (never stops a run).
  """
  try:
    height = max(c.shape[0] for _, c in counts.values())
    width = max(c.shape[1] for _, c in counts.values())
    padded = {key: np.pad(c, ((0, height - c.shape[0]),
                              (0, width - c.shape[1])))
              for key, (_, c) in counts.items()}
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"eval_{env_steps}")
    ckpt_lib.save_arrays(stem + ".npz", padded)
    plotting.plot_visit_heatmaps(
        {title: padded[key] for key, (title, _) in counts.items()},
        stem + ".png", title=f"Visits per grid cell at {env_steps} env steps")
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("run_experiment: could not write the heatmaps of %d env "
                    "steps in %s: %r", env_steps, directory, e)
  finally:
    release_freed_memory()


BVA_DIR = "bva"


def write_bva_curve(directory: str, env_steps: int, bva_config: Any,
                    bva_state: Any) -> None:
  """DiCE's pooled value curves: bva_<env_steps>.npz (x, values, counts of
  `diagnostics.bva_value_curve`) and values.png redrawn from every npz in
  `directory` (`plotting.plot_bva_curves`). A failure only logs."""
  try:
    x, values, counts = diagnostics.bva_value_curve(bva_config, bva_state)
    os.makedirs(directory, exist_ok=True)
    ckpt_lib.save_arrays(os.path.join(directory, f"bva_{env_steps}.npz"),
                         {"x": x, "values": values, "counts": counts})
    curves = {}
    for name in os.listdir(directory):
      stem, ext = os.path.splitext(name)
      if ext == ".npz" and stem.startswith("bva_") and stem[4:].isdigit():
        got = ckpt_lib.load_arrays(os.path.join(directory, name))
        curves[int(stem[4:])] = (got["x"], got["values"], got["counts"])
    plotting.plot_bva_curves(
        curves, os.path.join(directory, "values.png"),
        title="Bandits Vote: pooled value per temperature tile")
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("write_bva_curve: could not write the curve of %d env "
                    "steps in %s: %r", env_steps, directory, e)
  finally:
    release_freed_memory()


def write_cell_maps(directory: str, env_steps: int, sums: np.ndarray,
                    preferred_action: Optional[np.ndarray] = None,
                    label: str = "right") -> None:
  """cells_<env_steps>.npz (the sums) and .png (`plotting.plot_cell_maps`).

  Args:
    directory: where both go (created).
    env_steps: the env steps of the evaluation.
    sums: float [H, W, C], `diagnostics.cell_step_sums` of the training
      lanes since the last evaluation (nothing is written for a grid without
      positions, whose sums stay [1, 1, C] zeros).
    preferred_action: int [H, W] or None (`diagnostics.cell_panels`).
    label: the preferred action's name.

  A failure only logs (never stops a run).
  """
  try:
    sums = np.asarray(sums, np.float64)
    if not sums[..., 0].any():
      return
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"cells_{env_steps}")
    arrays = {"sums": sums}
    if preferred_action is not None:
      arrays["preferred_action"] = np.asarray(preferred_action, np.int64)
    ckpt_lib.save_arrays(stem + ".npz", arrays)
    panels = diagnostics.cell_panels(diagnostics.cell_maps(sums),
                                     preferred_action, label)
    plotting.plot_cell_maps(
        panels, stem + ".png",
        title=f"Per cell, training lanes up to {env_steps} env steps")
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("write_cell_maps: could not write the cell maps of %d env "
                    "steps in %s: %r", env_steps, directory, e)
  finally:
    release_freed_memory()
