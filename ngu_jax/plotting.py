"""Learning curves of a run's `metrics.csv`, and visit heatmaps, as PNGs.

`plot_curves(metrics_path, png_path)` draws the columns the three loops
write (`ngu_jax.loops.metrics_log`) against environment steps, one panel
per topic (`PANELS`; `panels_for(data)` says which are drawn):

  Episode return         training episodes' mean return;
  Episode coverage       the fraction of free cells a training episode
                         visits (Disco Maze, NGU Sec. 4.1, Fig. 2; noisy
                         grids);
  Frontier and TV        noisy grids: the largest maze distance from the
                         start reached per episode, and (second axis) TV
                         actions per episode;
  Evaluation return / coverage   the exploitative mixture j = 0 and the most
                         exploratory j = N - 1 (App. A);
  Intrinsic reward       mean r^episodic (Alg. 1) and mean beta_j r^i, the
                         intrinsic reward as the loss sees it (eq. 1, App. A);
  Life-long modulator    mean alpha and, on a second axis, the fraction of
                         steps with alpha > 1 (Sec. 2: only those raise r^i);
  RND error              the actor's err(x_t), its running mean +- std (the
                         modulator's mu_e, sigma_e) and the predictor's loss
                         on replayed observations;
  Inverse dynamics       action-prediction loss and (second axis) accuracy;
  Q values               max_a Q(x, a, j) of the j = 0 and j = N - 1 lanes;
  Agent57 value streams  with split values, the learner's mean Q_e and Q_i
                         of the replayed actions (Agent57 Sec. 3.1);
  Boltzmann temperature  with DiCE's behaviour policy, the 10th / 50th /
                         90th percentile of the lanes' tau (log axis) and the
                         mean entropy of their policies (right axis);
  Arm choices            with Agent57's meta-controller, the share of each
                         mixture j in the lanes' bandit windows (Sec. 3.2,
                         Fig. 8; columns arm_0 .. arm_<N-1>) and, on a
                         right axis, the evaluator bandit's arm (eval_arm);
  Learner loss, Throughput.

Panels that carry no information are left out: the return panels when every
return is 0 or NaN (e.g. Disco Maze, which pays no reward), the others when
all their columns are NaN (no RND: no alpha / RND panels; no evaluations: no
evaluation panels). A series equal to an earlier one of its panel (j = 0 and
j = N - 1 with N = 1) is drawn once with both labels. NaN entries (rows
without finished episodes, learner steps or an evaluation) are skipped, so a
series connects the rows that have values.

`plot_visit_heatmaps(counts, png_path, title)` draws grid-cell visit counts
(`ngu_jax.agents.ngu.diagnostics.add_visits`), one panel each, log-scaled
colour.

A metrics file may be gzip-compressed (docs/results/ publishes every run's
metrics as `metrics.csv.gz`): `open_metrics(path)` reads `path` as text
whether it names a `.csv` or a `.csv.gz`, and reads `path + ".gz"` when
`path` does not exist but that does (`find_metrics`), so code that names a
run's `metrics.csv` reads its published copy too. `read_metrics` and
`plot_curves` read through it, as does `experiments.compare.read_metrics`.

matplotlib is optional and imported only when plotting (never at import of
this module), with the Agg canvas and without pyplot, so plotting changes no
global backend (safe inside notebooks). Without matplotlib, the plotting
functions warn once and return None.
"""

import csv
import gzip
import math
import os
import warnings
from typing import (IO, Any, Dict, List, Mapping, NamedTuple, Optional,
                    Tuple)

import numpy as np

_warned_missing = False


class Panel(NamedTuple):
  """One panel of `plot_curves`.

  Attributes:
    title: the panel's title.
    ylabel: label of the left y axis.
    series: (column, legend label) pairs drawn on the left axis.
    show: "always"; "finite": only when one of its columns has a finite
      value; "nonzero": only when one has a finite non-zero value.
    twin: (column, label) pairs on a second y axis (right), if any.
    twin_ylabel: label of that axis.
    band: (mean column, std column, label): a dashed mean and a shaded
      mean +- std on the left axis, or None.
    log_y: a logarithmic left axis (for positive quantities spanning
      orders of magnitude).
    hline: a grey reference line at this y on the left axis, or None.
  """
  title: str
  ylabel: str
  series: Tuple[Tuple[str, str], ...]
  show: str = "always"
  twin: Tuple[Tuple[str, str], ...] = ()
  twin_ylabel: str = ""
  band: Optional[Tuple[str, str, str]] = None
  log_y: bool = False
  hline: Optional[float] = None

  def columns(self) -> Tuple[str, ...]:
    """Every column the panel draws."""
    band = (self.band[0], self.band[1]) if self.band else ()
    return tuple(c for c, _ in self.series + self.twin) + band


PANELS: Tuple[Panel, ...] = (
    Panel("Episode return", "mean episode return",
          (("mean_episode_return", "training episodes"),), "nonzero"),
    Panel("Episode coverage", "fraction of free cells visited",
          (("mean_episode_coverage", "training episodes"),), "finite"),
    Panel("Frontier and TV", "per training episode",
          (("mean_episode_frontier", "frontier (max maze distance)"),),
          "finite", twin=(("mean_episode_tv_steps", "TV actions"),),
          twin_ylabel="TV actions per episode"),
    Panel("Evaluation return", "mean episode return",
          (("eval_return", "j = 0"), ("eval_explore_return", "j = N - 1"),
           ("eval_bandit_return", "evaluator bandit's j")), "nonzero"),
    Panel("Evaluation coverage", "fraction of free cells visited",
          (("eval_coverage", "j = 0"),
           ("eval_explore_coverage", "j = N - 1")), "finite"),
    Panel("Intrinsic reward", "mean per step",
          (("mean_episodic_reward", r"$r^{episodic}$"),
           ("mean_intrinsic_reward", r"$\beta_j\, r^i$ (to the loss)")),
          "finite"),
    Panel("Life-long modulator", r"mean $\alpha$",
          (("mean_alpha", r"mean $\alpha$"),), "finite",
          twin=(("alpha_above_one", r"fraction $\alpha > 1$"),),
          twin_ylabel=r"fraction of steps with $\alpha > 1$", hline=1.),
    Panel("RND error", r"$\|\hat g(x) - g(x)\|^2$",
          (("rnd_error", "actor err"), ("rnd_loss", "learner loss (replay)")),
          "finite",
          band=("rnd_error_mean", "rnd_error_std",
                r"running $\mu_e \pm \sigma_e$"), log_y=True),
    Panel("Inverse dynamics", "action-prediction loss",
          (("action_prediction_loss", "loss"),), "finite",
          twin=(("action_prediction_accuracy", "accuracy"),),
          twin_ylabel="accuracy"),
    Panel("Q values", r"mean $\max_a Q(x, a, j)$",
          (("q_exploit", "j = 0"), ("q_explore", "j = N - 1")), "finite"),
    Panel("Agent57 value streams", "mean Q of replayed actions",
          (("q_extrinsic", r"$Q_e$ (on $r^e$)"),
           ("q_intrinsic", r"$Q_i$ (on $r^i$)")), "finite"),
    Panel("Boltzmann temperature", r"$\tau$ over lanes",
          (("tau_p10", "10th percentile"), ("tau_median", "median"),
           ("tau_p90", "90th percentile")), "finite",
          twin=(("policy_entropy", "policy entropy"),),
          twin_ylabel="entropy (nats)", log_y=True),
    Panel("Learner loss", "mean loss", (("learner_loss", "learner"),)),
    Panel("Throughput", "env steps / s", (("env_steps_per_s", "acting"),)),
)


def panels_for(data: Mapping[str, np.ndarray]) -> List[Panel]:
  """The panels `plot_curves` draws for these columns (module docstring).

  Args:
    data: {column: float [rows]}, e.g. `read_metrics(path)`; missing
      columns count as all-NaN.

  Returns:
    The entries of `PANELS` to draw, in order, and the arm-choice panel
    when the data has arm_<j> columns.
  """
  def informative(panel):
    if panel.show == "always":
      return True
    for name in panel.columns():
      values = np.asarray(data.get(name, ()), np.float64)
      values = values[np.isfinite(values)]
      if values.size and (panel.show == "finite" or (values != 0).any()):
        return True
    return False
  panels = [p for p in PANELS if informative(p)]
  arms = sorted((name for name in data if name.startswith("arm_")
                 and name[4:].isdigit()), key=lambda name: int(name[4:]))
  twin = ((("eval_arm", "evaluator's j"),) if "eval_arm" in data else ())
  arm_panel = Panel("Arm choices (bandit windows)", "share of episodes",
                    tuple((name, f"j = {name[4:]}") for name in arms),
                    "finite", twin=twin, twin_ylabel="evaluator's arm j")
  if arms and informative(arm_panel):
    panels.insert(len(panels) - 2, arm_panel)  # Before loss and throughput.
  return panels


GZIP_SUFFIX = ".gz"


def find_metrics(path: str) -> Optional[str]:
  """The file that holds the metrics CSV `path`, or None if there is none.

  `path` itself if it is a file, else its gzip-compressed copy
  `path + ".gz"` if that is one (docs/results/ keeps `metrics.csv.gz`).
  """
  if os.path.isfile(path):
    return path
  if not path.endswith(GZIP_SUFFIX) and os.path.isfile(path + GZIP_SUFFIX):
    return path + GZIP_SUFFIX
  return None


def open_metrics(path: str) -> IO[str]:
  """Opens the metrics CSV `path` (`find_metrics`) as text for `csv`.

  A file whose name ends in ".gz" is decompressed while it is read.

  Raises:
    FileNotFoundError: neither `path` nor `path + ".gz"` is a file.
  """
  found = find_metrics(path)
  if found is None:
    raise FileNotFoundError(f"no metrics file {path!r} (nor {path!r} + "
                            f"{GZIP_SUFFIX!r}).")
  if found.endswith(GZIP_SUFFIX):
    return gzip.open(found, "rt", newline="")
  return open(found, newline="")


def read_metrics(path: str) -> Dict[str, np.ndarray]:
  """Reads a metrics.csv into {column: float64 [rows]}.

  Empty or non-numeric cells become NaN. `path` may be gzip-compressed, or
  name a `metrics.csv` of which only `metrics.csv.gz` exists
  (`open_metrics`).

  Raises:
    FileNotFoundError: no file at `path` (nor at `path + ".gz"`).
  """
  # Straight into one float64 array, a row at a time: lists of a float
  # object per cell (a long run's metrics.csv has about a million) spread
  # over Python's small-object arenas, and matplotlib's allocations in
  # between kept some of them alive: a process drawing curves.png grew
  # about 1 MB per drawing (`metrics_log`'s docstring, Memory).
  with open_metrics(path) as f:
    reader = csv.reader(f)
    names = next(reader, None) or []
    values = np.full((256, len(names)), math.nan)
    num_rows = 0
    for row in reader:
      if num_rows == len(values):
        values = np.concatenate([values, np.full_like(values, math.nan)])
      for j, cell in enumerate(row[:len(names)]):
        try:
          values[num_rows, j] = float(cell)
        except ValueError:
          pass
      num_rows += 1
  return {name: values[:num_rows, j].copy() for j, name in enumerate(names)}


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


def _save(fig, png_path: str) -> str:
  """Writes `fig` to `png_path` atomically (a .tmp file, then a rename)."""
  tmp = png_path + ".tmp"
  fig.savefig(tmp, format="png", dpi=90)
  os.replace(tmp, png_path)
  return png_path


# A curve draws at most this many of its points (evenly spaced over its
# finite ones, the first and last kept): a panel is about 500 pixels wide,
# and matplotlib's memory per drawing grows with the points (a process
# keeps part of it: `metrics_log`'s docstring, Memory).
MAX_CURVE_POINTS = 2000


def thin(ok: np.ndarray, max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
  """`ok` (bool [rows]) with at most `max_points` True entries.

  Keeps the True entries at evenly spaced ranks among them, the first and
  the last included; `ok` itself when it has no more than `max_points`.
  """
  where = np.flatnonzero(ok)
  if len(where) <= max_points:
    return ok
  keep = np.zeros_like(ok)
  keep[where[np.round(np.linspace(0, len(where) - 1, max_points)
                      ).astype(np.int64)]] = True
  return keep


def _draw_series(ax, x: np.ndarray, series, column, num_rows: int,
                 colours) -> list:
  """Plots each (column, label) of `series` on `ax`; the lines drawn.

  A series equal (where finite) to one drawn before on `ax` is not drawn
  again: its label joins that line's. Each draws at most
  `MAX_CURVE_POINTS` points (`thin`).
  """
  lines, seen = [], []
  for name, label in series:
    y = column(name)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
      continue
    marker = "o" if ok.sum() < 30 or ok.sum() < 0.5 * num_rows else None
    ok = thin(ok)
    same = next((line for line, (mask, values) in seen
                 if np.array_equal(mask, ok) and np.array_equal(values, y[ok])),
                None)
    if same is not None:
      same.set_label(f"{same.get_label()}, {label}")
      continue
    (line,) = ax.plot(x[ok], y[ok], marker=marker, markersize=3, label=label,
                      color=next(colours))
    seen.append((line, (ok, y[ok])))
    lines.append(line)
  return lines


def plot_curves(metrics_path: str, png_path: str,
                title: Optional[str] = None) -> Optional[str]:
  """Writes the learning curves of a metrics.csv as a PNG.

  The panels are `panels_for(read_metrics(metrics_path))` (module
  docstring).

  Args:
    metrics_path: a metrics.csv of `run_experiment` (columns it lacks are
      treated as all-NaN, so older or partial files work), or its gzip
      copy (`open_metrics`).
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

  panels = panels_for(data)
  cols = 2 if len(panels) <= 6 else 3
  rows = -(-len(panels) // cols)
  fig = figure_cls(figsize=(5.2 * cols, 3.2 * rows))
  canvas_cls(fig)
  for n, panel in enumerate(panels):
    ax = fig.add_subplot(rows, cols, n + 1)
    colours = iter(f"C{i}" for i in range(10))
    lines = _draw_series(ax, x, panel.series, column, num_rows, colours)
    if panel.band is not None:
      mean, std = column(panel.band[0]), column(panel.band[1])
      ok = thin(np.isfinite(x) & np.isfinite(mean))
      if ok.any():
        colour = next(colours)
        (line,) = ax.plot(x[ok], mean[ok], linestyle="--", color=colour,
                          label=panel.band[2])
        std = np.where(np.isfinite(std), std, 0.)[ok]
        ax.fill_between(x[ok], mean[ok] - std, mean[ok] + std, color=colour,
                        alpha=0.2, linewidth=0)
        lines.append(line)
    if panel.log_y and lines and all(
        (column(c)[np.isfinite(column(c))] > 0).all() for c, _ in
        panel.series):
      ax.set_yscale("log", nonpositive="clip")
    if panel.hline is not None and lines:
      ax.axhline(panel.hline, color="grey", linewidth=0.8, linestyle="-.")
    top = ax  # The legend goes on the top-most axis (drawn last).
    if panel.twin:
      top = ax.twinx()
      twin_lines = _draw_series(top, x, panel.twin, column, num_rows,
                                colours)
      for line in twin_lines:
        line.set_linestyle(":")
      top.set_ylabel(panel.twin_ylabel)
      lines += twin_lines
    if not lines:
      ax.text(0.5, 0.5, "no data yet", ha="center", va="center",
              transform=ax.transAxes, color="grey")
    elif len(panel.series) + len(panel.twin) + bool(panel.band) > 1:
      top.legend(lines, [line.get_label() for line in lines],
                 fontsize="small", framealpha=0.8)
    ax.set_title(panel.title, fontsize="medium")
    ax.set_xlabel("env steps")
    ax.set_ylabel(panel.ylabel)
    ax.grid(alpha=0.3)
  if title is None:  # The run directory, e.g. "disco/seed0".
    run_dir = os.path.dirname(os.path.abspath(metrics_path))
    title = os.path.join(os.path.basename(os.path.dirname(run_dir)),
                         os.path.basename(run_dir))
  fig.suptitle(title)
  fig.tight_layout()
  return _save(fig, png_path)


def _check_grids(grids: Mapping[str, np.ndarray], arg: str,
                 where: str) -> None:
  """Raises ValueError unless `grids` is a non-empty dict of [H, W] arrays."""
  if not grids:
    raise ValueError(f"{where}: `{arg}` is empty.")
  for name, grid in grids.items():
    if np.ndim(grid) != 2:
      raise ValueError(f"{where}: `{arg}[{name!r}]` must be [H, W], got "
                       f"shape {np.shape(grid)}.")


def _grid_plotting(grids: Mapping[str, Any], name: str, where: str):
  """Checks [H, W] panels (`_check_grids`) and imports matplotlib.

  Returns:
    (Figure, FigureCanvas, `matplotlib.colors`), or None when matplotlib is
    not installed.
  """
  _check_grids(grids, name, where)
  mpl = _import_matplotlib()
  if mpl is None:
    return None
  from matplotlib import colors  # pylint: disable=g-import-not-at-top
  return mpl[0], mpl[1], colors


def plot_visit_heatmaps(counts: Mapping[str, np.ndarray], png_path: str,
                        title: str = "") -> Optional[str]:
  """Writes grid-cell visit counts as heatmaps, one panel each.

  Colours are log-scaled (cells never visited are left blank); row 0 is at
  the top, as the grids are rendered (Disco Maze, MiniGrid).

  Args:
    counts: panel title -> int [H, W] visits (`diagnostics.add_visits`),
      e.g. {"eval j = 0": ..., "eval j = N - 1": ...}.
    png_path: the PNG to write (replaced atomically).
    title: figure title, e.g. "visits at 20000 env steps".

  Returns:
    `png_path`, or None when matplotlib is not installed.

  Raises:
    ValueError: no panels, or an array that is not [H, W].
  """
  mpl = _grid_plotting(counts, "counts", "plotting.plot_visit_heatmaps")
  if mpl is None:
    return None
  figure_cls, canvas_cls, colors = mpl
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  plain = ticker.FuncFormatter(lambda value, _: f"{value:g}")
  fig = figure_cls(figsize=(4.2 * len(counts), 4.4))
  canvas_cls(fig)
  for n, (name, grid) in enumerate(counts.items()):
    ax = fig.add_subplot(1, len(counts), n + 1)
    grid = np.asarray(grid, np.float64)
    peak = grid.max() if grid.size else 0.
    if peak > 0:
      image = ax.imshow(np.ma.masked_less_equal(grid, 0.), cmap="viridis",
                        norm=colors.LogNorm(vmin=1., vmax=max(peak, 1.01)),
                        interpolation="nearest")
      bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04,
                         label="visits")
      bar.ax.yaxis.set_major_formatter(plain)
      # Minor ticks (2, 3, ...) labelled only within one decade.
      bar.ax.yaxis.set_minor_formatter(plain if peak < 10
                                       else ticker.NullFormatter())
    else:
      ax.text(0.5, 0.5, "no visits", ha="center", va="center",
              transform=ax.transAxes, color="grey")
      ax.set_xticks([])
      ax.set_yticks([])
    ax.set_title(f"{name} ({int(grid.sum())} visits)", fontsize="medium")
    ax.set_xlabel("column")
    ax.set_ylabel("row")
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  return _save(fig, png_path)


def plot_bva_curves(curves: Mapping[int, Tuple[np.ndarray, np.ndarray,
                                                 np.ndarray]],
                    png_path: str, title: str = "") -> Optional[str]:
  """DiCE's Bandits Vote pooled value curves over training (Sec. 3.3).

  Left: the pooled value of each tile (mean over lanes), one line per
  evaluation, darker = later, against tau = 1 / (exp(x) - 1) on a log axis
  (small tau = greedy). Right: the share of the lanes' bandit updates per
  tile at the last evaluation (where the ensembles have sampled).

  Args:
    curves: env steps -> (x [K] tile centres, values [L, K], counts [L, K])
      (`diagnostics.bva_value_curve`).
    png_path: the PNG to write (replaced atomically).
    title: figure title.

  Returns:
    `png_path`, or None when matplotlib is not installed.

  Raises:
    ValueError: no curves.
  """
  if not curves:
    raise ValueError("plotting.plot_bva_curves: no curves.")
  mpl = _import_matplotlib()
  if mpl is None:
    return None
  figure_cls, canvas_cls = mpl
  # pylint: disable=g-import-not-at-top
  from matplotlib import cm
  # pylint: enable=g-import-not-at-top
  fig = figure_cls(figsize=(9.0, 3.6))
  canvas_cls(fig)
  left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
  steps = sorted(curves)
  colours = cm.viridis(np.linspace(0.9, 0.1, len(steps)))
  for colour, step in zip(colours, steps):
    x, values, _ = curves[step]
    tau = 1. / np.expm1(np.maximum(np.asarray(x, np.float64), 1e-6))
    left.plot(tau, np.asarray(values).mean(axis=0), color=colour,
              label=f"{step} env steps")
  left.set_xscale("log")
  left.set_xlabel("tau (tile centre)")
  left.set_ylabel("pooled value (mean over lanes)")
  left.legend(fontsize="x-small")
  x, _, counts = curves[steps[-1]]
  tau = 1. / np.expm1(np.maximum(np.asarray(x, np.float64), 1e-6))
  total = np.asarray(counts, np.float64).sum(axis=0)
  share = total / max(total.sum(), 1.)
  right.plot(tau, share, color="C1", marker=".", drawstyle="steps-mid")
  right.set_xscale("log")
  right.set_xlabel("tau (tile centre)")
  right.set_ylabel(f"share of updates at {steps[-1]}")
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  return _save(fig, png_path)


def plot_cell_maps(panels: Mapping[str, np.ndarray], png_path: str,
                   title: str = "", columns: int = 4) -> Optional[str]:
  """Writes per-cell maps (`diagnostics.cell_panels`) as heatmaps.

  Cells never visited (NaN) are left blank. Panels whose title starts with
  "visits" are log-scaled; titles with " - " (differences) use a diverging
  colour map centred on 0; the rest a linear one. Row 0 is at the top.

  Args:
    panels: title -> float [H, W].
    png_path: the PNG to write (replaced atomically).
    title: figure title.
    columns: panels per row.

  Returns:
    `png_path`, or None when matplotlib is not installed.

  Raises:
    ValueError: no panels, or an array that is not [H, W].
  """
  mpl = _grid_plotting(panels, "panels", "plotting.plot_cell_maps")
  if mpl is None:
    return None
  figure_cls, canvas_cls, colors = mpl
  rows = -(-len(panels) // columns)
  fig = figure_cls(figsize=(3.9 * min(columns, len(panels)), 3.6 * rows))
  canvas_cls(fig)
  for n, (name, grid) in enumerate(panels.items()):
    ax = fig.add_subplot(rows, min(columns, len(panels)), n + 1)
    grid = np.asarray(grid, np.float64)
    shown = np.ma.masked_invalid(grid)
    finite = grid[np.isfinite(grid)]
    kwargs = {"cmap": "viridis"}
    if name.startswith("visits"):
      shown = np.ma.masked_less_equal(shown, 0.)
      peak = finite.max() if finite.size else 1.
      kwargs["norm"] = colors.LogNorm(vmin=1., vmax=max(peak, 1.01))
    elif " - " in name:
      bound = np.abs(finite).max() if finite.size else 1.
      kwargs.update(cmap="RdBu", vmin=-max(bound, 1e-9),
                    vmax=max(bound, 1e-9))
    if finite.size:
      image = ax.imshow(shown, interpolation="nearest", **kwargs)
      fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    else:
      ax.text(0.5, 0.5, "no visits", ha="center", va="center",
              transform=ax.transAxes, color="grey")
    ax.set_title(name, fontsize="medium")
    ax.set_xlabel("column")
    ax.set_ylabel("row")
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  return _save(fig, png_path)
