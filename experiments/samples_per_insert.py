r"""Learning per CPU-hour: NGU at several samples-per-insert ratios, equal wall time.

The replay ratio (`NGUConfig.samples_per_insert`: sequences sampled by the
learner per sequence inserted by the actors) trades acting for learning: at
a fixed wall-clock budget a higher ratio buys more learner updates per env
step and fewer env steps. NGU App. A's distributed setting works out at
about 0.19; the presets use 4. This script measures what each ratio buys on
the Disco Maze laptop setting of `experiments.disco_maze_coverage` (NGU with
the learned embedding, the same flags), every run stopped by the same
wall-clock budget (`experiments.train --max-minutes`), and reports:

* at equal wall time (the shortest run's last row, in minutes): the
  training-episode coverage, env steps and learner updates reached;
* at equal env steps (the fewest any run reached): the same coverage;

each as per-seed values (the mean of the rows in the last 20% of the
window), IQM over seeds with a 95% stratified bootstrap CI
(`experiments.stats`) and P(ratio > the presets' ratio 4); the coverage and
episode-length tables end with chance, a uniform random policy's value on
the same maze (`experiments.chance`). Plots: coverage
against wall time and against env steps (IQM over seeds, pointwise 95% CI).

Runs go one per process, `--jobs 2 --threads 1` on 2 cores, so every run
shares the machine with one other run for its whole budget (the wall-clock
budget is what makes the ratios comparable: keep the jobs even). An
interrupted study continues where it was (`experiments.compare.run_jobs`).

Usage:
  python -m experiments.samples_per_insert [--output-root runs/spi]
      [--ratios 0.5 1 2 4] [--seeds 0 1 2] [--minutes 5] [--jobs 2]
      [--threads 1] [--set FIELD=VALUE] [--aggregate-only] [--fresh]
"""

import argparse
import math
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

from experiments import chance as chance_lib
from experiments import compare
from experiments import disco_maze_coverage
from experiments import stats

# The presets' ratio: the tables' P(ratio > this).
REFERENCE_RATIO = 4.0
# Env steps per run the wall-clock budget stops well before (a bound, not a
# budget); rows every LOG_EVERY env steps.
MAX_ENV_STEPS = 100_000_000
LOG_EVERY = 8_000
EVAL_EVERY = 200_000
CHECKPOINT_EVERY = 200_000
WINDOW = 0.2  # "At T": the mean of the rows in the last 20% of [0, T].


def variant(ratio: float) -> compare.Variant:
  return compare.Variant(f"spi{ratio:g}", f"samples per insert {ratio:g}",
                         ["--set", f"samples_per_insert={ratio!r}"])


def _window_mean(x: np.ndarray, values: np.ndarray, end: float) -> float:
  """Mean of the finite `values` whose `x` lies in [(1 - WINDOW) end, end]
  (none there: the last finite value at or before `end`; NaN: none)."""
  keep = (x <= end) & (x >= (1 - WINDOW) * end) & np.isfinite(values)
  if keep.any():
    return float(np.mean(values[keep]))
  return _at(x[np.isfinite(values)], values[np.isfinite(values)], end)


def _at(x: np.ndarray, values: np.ndarray, end: float) -> float:
  """The last value logged at or before `end` (NaN: none)."""
  keep = x <= end
  return float(values[keep][-1]) if keep.any() else math.nan


def _summary(values: np.ndarray, base: Optional[np.ndarray], reps: int,
             counts: bool) -> List[str]:
  """Per-seed cells, the IQM [CI] and P(> base) [CI] (when `base`);
  `counts`: the values are counts (no decimals)."""
  iqm = stats.iqm_ci(values, reps=reps)
  if counts:
    cells = [f"{v:,.0f}" for v in values]
    cells.append(f"{iqm[0]:,.0f} [{iqm[1]:,.0f}, {iqm[2]:,.0f}]"
                 if math.isfinite(iqm[0]) else "n/a")
  else:
    cells = [f"{v:.3f}" for v in values]
    cells.append(compare.format_ci(*iqm))
  if base is not None:
    cells.append(compare.format_ci(
        *stats.probability_of_improvement(values, base, reps=reps)))
  return cells


def aggregate(root: str, ratios: Sequence[float], seeds: Sequence[int],
              reps: int = 2000, curve_reps: int = 1000,
              chance: Optional[Dict[str, float]] = None) -> str:
  """Writes ROOT/results.md and the two plots; returns the markdown.

  `chance`: metrics.csv column -> a uniform random policy's value
  (`experiments.chance.columns`); the coverage and episode-length tables
  then end with it.
  """
  stats.require_rliable()
  variants = [variant(r) for r in ratios]
  data, missing, unfinished = compare.load_runs(root, variants, seeds)
  if not data:
    raise ValueError(f"samples_per_insert: no runs under {root}.")
  minutes = min(cols["elapsed_s"][-1] for cols in data.values()) / 60
  steps = min(cols["env_steps"][-1] for cols in data.values())
  base_name = variant(REFERENCE_RATIO).name if REFERENCE_RATIO in ratios else None
  lines = [f"# Samples per insert at equal wall time ({minutes:.1f} min per "
           "run)", "",
           "NGU (learned f), Disco Maze laptop setting "
           "(`experiments.disco_maze_coverage`), every run stopped by the same "
           "wall-clock budget. Per-seed values: the mean of the rows in the "
           f"last {WINDOW:.0%} of the window; IQM over seeds with a 95% "
           f"stratified bootstrap CI ({reps} reps), rliable "
           f"{stats.rliable_version()}.", ""]
  if missing:
    lines += [f"Missing runs: {', '.join(missing)}", ""]
  if unfinished:
    lines += [f"Unfinished runs: {', '.join(unfinished)}", ""]
  if chance:
    lines += ["Chance: a uniform random policy's mean over "
              f"{chance_lib.EPISODES:,} whole episodes of the same maze "
              "(`experiments.chance`), in the IQM column of the row "
              f"\"{chance_lib.LABEL}\".", ""]

  def per_seed(name, fn):
    return np.asarray([fn(data[(name, s)]) if (name, s) in data else math.nan
                       for s in seeds], np.float64)

  # (title, counts, per-run value, the chance column or None)
  tables = [
      (f"training-episode coverage at equal wall time ({minutes:.1f} min)",
       False, lambda c: _window_mean(c["elapsed_s"] / 60, c["mean_episode_coverage"],
                              minutes), "mean_episode_coverage"),
      (f"env steps reached in {minutes:.1f} min", True,
       lambda c: _at(c["elapsed_s"] / 60, c["env_steps"], minutes), None),
      (f"learner updates reached in {minutes:.1f} min", True,
       lambda c: _at(c["elapsed_s"] / 60, c["learner_steps"], minutes), None),
      (f"training-episode coverage at equal env steps ({steps:,.0f})",
       False, lambda c: _window_mean(c["env_steps"], c["mean_episode_coverage"],
                              steps), "mean_episode_coverage"),
      (f"env steps per training episode at equal wall time ({minutes:.1f} "
       "min)", False,
       lambda c: _window_mean(c["elapsed_s"] / 60, c["env_steps_per_episode"],
                              minutes), "env_steps_per_episode"),
  ]
  for title, counts, fn, chance_column in tables:
    header = [f"seed {s}" for s in seeds] + ["IQM [95% CI]"]
    if base_name is not None:
      header.append(f"P(> ratio {REFERENCE_RATIO:g}) [95% CI]")
    lines += [f"## {title}", "", "| samples per insert | "
              + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
    base = per_seed(base_name, fn) if base_name is not None else None
    for v, ratio in zip(variants, ratios):
      values = per_seed(v.name, fn)
      cells = _summary(values, None if v.name == base_name else base, reps,
                       counts)
      if base is not None and v.name == base_name:
        cells.append("—")
      lines.append(f"| {ratio:g} | " + " | ".join(cells) + " |")
    if chance and chance_column in chance:
      cells = [""] * len(seeds) + [f"{chance[chance_column]:.3f}"]
      cells += [""] * (len(header) - len(cells))
      lines.append(f"| {chance_lib.LABEL} | " + " | ".join(cells) + " |")
    lines.append("")
  for x_name, x_label in (("elapsed_min", "wall-clock minutes per run"),
                          ("env_steps", "environment steps")):
    png = _plot(root, variants, seeds, data, x_name, x_label, curve_reps)
    if png:
      lines += [f"![coverage against {x_label}]({os.path.basename(png)})", ""]
  return compare.write_results(root, "\n".join(lines) + "\n")


def _plot(root, variants, seeds, data, x_name: str, x_label: str,
          reps: int) -> Optional[str]:
  """Training-episode coverage against `x_name`: IQM and 95% CI band."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("[samples_per_insert] matplotlib not installed: no plots.",
          file=sys.stderr)
    return None
  fig, ax = plt.subplots(figsize=(6.4, 4.0))
  for v in variants:
    runs = [data[(v.name, s)] for s in seeds if (v.name, s) in data]
    if not runs:
      continue
    xs = [(c["elapsed_s"] / 60 if x_name == "elapsed_min" else c["env_steps"])
          for c in runs]
    grid = np.linspace(max(x[0] for x in xs), min(x[-1] for x in xs), 60)
    curves = np.stack([np.interp(grid, x, compare._fill_nan(
        c["mean_episode_coverage"])) for x, c in zip(xs, runs)])
    iqm, low, high = stats.iqm_curve(curves, reps=reps)
    line, = ax.plot(grid, iqm, label=f"{v.label} ({len(runs)} seeds)")
    ax.fill_between(grid, low, high, alpha=0.2, color=line.get_color())
  return compare.save_plot(fig, ax,
                           os.path.join(root, f"coverage_vs_{x_name}.png"),
                           x_label, "training-episode coverage")


def main(argv: Optional[Sequence[str]] = None) -> str:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output-root", default="runs/samples_per_insert")
  parser.add_argument("--ratios", type=float, nargs="+",
                      default=[0.5, 1.0, 2.0, 4.0])
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
  parser.add_argument("--minutes", type=float, default=5.0,
                      help="wall-clock budget per run")
  parser.add_argument("--jobs", type=int, default=2)
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE",
                      help="config override for every run")
  parser.add_argument("--aggregate-only", action="store_true")
  parser.add_argument("--fresh", action="store_true")
  args = parser.parse_args(argv)
  if not (args.minutes > 0 and math.isfinite(args.minutes)):
    parser.error(f"--minutes must be a finite number > 0, got "
                 f"{args.minutes}")
  if any(not (r > 0 and math.isfinite(r)) for r in args.ratios):
    parser.error(f"--ratios must be finite numbers > 0, got {args.ratios}")
  if not args.aggregate_only:
    ngu = next(v for v in disco_maze_coverage.VARIANTS if v.name == "ngu")
    common = (list(disco_maze_coverage.LAPTOP) + list(ngu.args)
              + [flag for value in args.set for flag in ("--set", value)]
              + ["--total-env-steps", str(MAX_ENV_STEPS),
                 "--max-minutes", repr(args.minutes),
                 "--log-every", str(LOG_EVERY),
                 "--eval-every", str(EVAL_EVERY),
                 "--checkpoint-every", str(CHECKPOINT_EVERY)])
    compare.run_grid(args.output_root, [variant(r) for r in args.ratios],
                     args.seeds, common, jobs=args.jobs, threads=args.threads,
                     fresh=args.fresh)
  text = aggregate(args.output_root, args.ratios, args.seeds,
                   chance=chance_lib.for_flags(disco_maze_coverage.LAPTOP))
  print(text)
  return text


if __name__ == "__main__":
  main()
