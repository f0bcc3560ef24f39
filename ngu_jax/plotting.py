"""Learning curves of a run's `metrics.csv` as a PNG (issue 6).

`plot_curves(metrics_path, png_path)` draws the columns written by
`ngu_jax.experiment.run_experiment` against environment steps, one panel
each: mean episode return; Disco Maze coverage (NGU Sec. 4.1, Fig. 2), when
the column has values; evaluation return and coverage of the exploitative
mixture j = 0 and the most exploratory j = N - 1 (App. A), when evaluated;
learner loss; env steps/s. NaN entries (rows without finished episodes,
learner steps or an evaluation) are skipped, so a series connects the rows
that have values.

matplotlib is optional and imported only when plotting (never at import of
this module), with the Agg canvas and without pyplot, so plotting changes no
global backend (safe inside notebooks). Without matplotlib, `plot_curves`
warns once and returns None.
"""

import csv
import math
import os
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

_warned_missing = False

# (title, y label, [(column, label)], optional): optional panels are drawn
# only when one of their columns has a finite value.
PANELS: Tuple[Tuple[str, str, Sequence[Tuple[str, str]], bool], ...] = (
    ("Episode return", "mean episode return",
     (("mean_episode_return", "training episodes"),), False),
    ("Disco Maze coverage", "fraction of free cells visited",
     (("mean_episode_coverage", "training episodes"),), True),
    ("Evaluation return", "mean episode return",
     (("eval_return", "j = 0"), ("eval_explore_return", "j = N - 1")), True),
    ("Evaluation coverage", "fraction of free cells visited",
     (("eval_coverage", "j = 0"), ("eval_explore_coverage", "j = N - 1")),
     True),
    ("Learner loss", "mean loss", (("learner_loss", "learner"),), False),
    ("Throughput", "env steps / s", (("env_steps_per_s", "acting"),), False),
)


def read_metrics(path: str) -> Dict[str, np.ndarray]:
  """Reads a metrics.csv into {column: float64 [rows]}.

  Empty or non-numeric cells become NaN.

  Raises:
    FileNotFoundError: no file at `path`.
  """
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    columns: Dict[str, List[float]] = {name: [] for name in
                                       (reader.fieldnames or [])}
    for row in reader:
      for name in columns:
        columns[name].append(_to_float(row.get(name)))
  return {name: np.asarray(values, np.float64)
          for name, values in columns.items()}


def _to_float(value: Optional[str]) -> float:
  try:
    return float(value)
  except (TypeError, ValueError):
    return math.nan


def _import_matplotlib():
  """(Figure, FigureCanvasAgg), or None (warns once) without matplotlib."""
  global _warned_missing
  try:
    # pylint: disable=g-import-not-at-top
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
  except ImportError:
    if not _warned_missing:
      _warned_missing = True
      warnings.warn("ngu_jax.plotting: matplotlib is not installed; no "
                    "learning-curve PNGs are written.", RuntimeWarning,
                    stacklevel=3)
    return None
  return Figure, FigureCanvasAgg


def plot_curves(metrics_path: str, png_path: str,
                title: Optional[str] = None) -> Optional[str]:
  """Writes the learning curves of a metrics.csv as a PNG.

  Args:
    metrics_path: a metrics.csv of `run_experiment` (columns it lacks are
      treated as all-NaN, so older or partial files work).
    png_path: the PNG to write (replaced atomically).
    title: figure title; default the last two parts of the run directory.

  Returns:
    `png_path`, or None when matplotlib is not installed.
  """
  mpl = _import_matplotlib()
  if mpl is None:
    return None
  figure_cls, canvas_cls = mpl
  data = read_metrics(metrics_path)
  num_rows = len(next(iter(data.values()))) if data else 0
  x = data.get("env_steps", np.full(num_rows, math.nan))

  def column(name):
    return data.get(name, np.full(num_rows, math.nan))

  panels = [p for p in PANELS
            if not p[3] or any(np.isfinite(column(c)).any() for c, _ in p[2])]
  cols = 2
  rows = -(-len(panels) // cols)
  fig = figure_cls(figsize=(5.2 * cols, 3.2 * rows))
  canvas_cls(fig)
  for n, (panel_title, ylabel, series, _) in enumerate(panels):
    ax = fig.add_subplot(rows, cols, n + 1)
    drawn = 0
    for name, label in series:
      y = column(name)
      ok = np.isfinite(x) & np.isfinite(y)
      if ok.any():
        marker = "o" if ok.sum() < 30 or ok.sum() < 0.5 * num_rows else None
        ax.plot(x[ok], y[ok], marker=marker, markersize=3, label=label)
        drawn += 1
    if not drawn:
      ax.text(0.5, 0.5, "no data yet", ha="center", va="center",
              transform=ax.transAxes, color="grey")
    elif len(series) > 1:
      ax.legend(fontsize="small")
    ax.set_title(panel_title, fontsize="medium")
    ax.set_xlabel("env steps")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
  if title is None:  # The run directory, e.g. "disco/seed0".
    run_dir = os.path.dirname(os.path.abspath(metrics_path))
    title = os.path.join(os.path.basename(os.path.dirname(run_dir)),
                         os.path.basename(run_dir))
  fig.suptitle(title)
  fig.tight_layout()
  tmp = png_path + ".tmp"
  fig.savefig(tmp, format="png", dpi=90)
  os.replace(tmp, png_path)
  return png_path
