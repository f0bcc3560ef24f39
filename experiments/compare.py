"""Runs a grid of `experiments.train` runs (variants x seeds) and compares them.

Shared by the comparison scripts (`experiments.disco_maze_coverage`,
`experiments.minigrid_exploration`). Each run is its own process
(`python -m experiments.train ... --output-dir ROOT/VARIANT/seedS`), so runs
can go in parallel (`jobs`) with XLA limited to `threads` CPU threads each,
and a finished run (its `done.json`) is not run again: re-running a script
after an interruption only runs what is missing (`--fresh` starts over).

Aggregation reads each run's `metrics.csv`, puts every metric on the common
env-step grid of the logged rows and writes, under ROOT:

* `results.md`: one table per metric: per-seed "final" values (the mean of
  the rows in the last `final_fraction` of the budget) and their mean +- std
  over seeds, per variant;
* `<metric>.png`: the metric against env steps, mean over seeds with a
  min-max band, one line per variant.
"""

import argparse
import csv
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from typing import Dict, Optional, Sequence

import numpy as np

DONE_FILE = "done.json"


@dataclasses.dataclass(frozen=True)
class Variant:
  """One agent variant: a name, a label for plots and its train.py flags."""
  name: str
  label: str
  args: Sequence[str]


def single_thread_env(threads: int) -> Dict[str, str]:
  """Environment for a child process that uses `threads` CPU threads."""
  env = dict(os.environ)
  flags = env.get("XLA_FLAGS", "")
  if threads == 1:
    flags += " --xla_cpu_multi_thread_eigen=false"
  env["XLA_FLAGS"] = (flags + f" intra_op_parallelism_threads={threads}"
                      ).strip()
  for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    env[name] = str(threads)
  return env


def run_dir(root: str, variant: str, seed: int) -> str:
  return os.path.join(root, variant, f"seed{seed}")


def run_grid(root: str, variants: Sequence[Variant], seeds: Sequence[int],
             common_args: Sequence[str], jobs: int = 1, threads: int = 0,
             fresh: bool = False, show_progress: bool = False) -> None:
  """Runs every (variant, seed) not yet done, `jobs` at a time.

  Args:
    root: output root; run (v, s) writes to `root/v/seed{s}`.
    variants: the variants (their `args` follow `common_args`, so they win).
    seeds: the seeds.
    common_args: train.py flags shared by all runs (preset, budget, ...).
    jobs: runs in parallel.
    threads: CPU threads per run (0: XLA's default, all cores).
    fresh: rerun runs that are already done.
    show_progress: runs print to this terminal with their progress bar
      (and `log.txt` stays empty) instead of to `log.txt`; needs jobs == 1.
  """
  if show_progress and jobs != 1:
    raise ValueError("run_grid: show_progress needs jobs == 1.")
  queue = []
  for variant in variants:
    for seed in seeds:
      out = run_dir(root, variant.name, seed)
      if not fresh and os.path.exists(os.path.join(out, DONE_FILE)):
        print(f"[compare] {variant.name} seed {seed}: done, skipped.")
        continue
      cmd = [sys.executable, "-m", "experiments.train", *common_args,
             *variant.args, "--seed", str(seed), "--output-dir", out]
      if not show_progress:
        cmd.append("--no-progress")
      queue.append((variant.name, seed, out, cmd))
  env = single_thread_env(threads) if threads else dict(os.environ)
  running = []
  failures = []
  total, finished, start = len(queue), 0, time.time()
  while queue or running:
    while queue and len(running) < jobs:
      name, seed, out, cmd = queue.pop(0)
      os.makedirs(out, exist_ok=True)
      log = open(os.path.join(out, "log.txt"), "w")
      print(f"[compare] start {name} seed {seed}: {' '.join(cmd[1:])}",
            flush=True)
      if show_progress:
        proc = subprocess.Popen(cmd, env=env)
      else:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env=env)
      running.append((name, seed, out, proc, log, time.time()))
    time.sleep(1.0)
    for entry in list(running):
      name, seed, out, proc, log, t0 = entry
      if proc.poll() is None:
        continue
      running.remove(entry)
      log.close()
      finished += 1
      took = time.time() - t0
      if proc.returncode == 0:
        with open(os.path.join(out, DONE_FILE), "w") as f:
          json.dump({"seconds": took}, f)
        status = "ok"
      else:
        failures.append((name, seed, out))
        status = f"FAILED (exit {proc.returncode}, see {out}/log.txt)"
      print(f"[compare] {finished}/{total} {name} seed {seed}: {status} in "
            f"{took / 60:.1f} min (elapsed {(time.time() - start) / 60:.1f}"
            " min)", flush=True)
  if failures:
    raise RuntimeError(f"{len(failures)} run(s) failed: {failures}")


def main(argv: Optional[Sequence[str]], description: str,
         variants: Sequence[Variant], fixed_args: Sequence[str],
         metrics: Dict[str, str], default_root: str, default_env_steps: int,
         title: str, default_env: Optional[str] = None) -> str:
  """The command line of a comparison script (see the module docstring).

  Flags: --output-root, --env-steps (per run), --seeds, --jobs, --threads
  (per run), --variants, --aggregate-only, --fresh, --show-progress, and
  --env when `default_env` is given. Runs `fixed_args` + budget / log /
  eval flags + each variant's args, then aggregates.

  Args:
    argv: command-line arguments (None: sys.argv).
    description: the parser's description.
    variants: the variants; `fixed_args`: train.py flags shared by all.
    metrics: metrics.csv column -> name, for the tables and plots.
    default_root, default_env_steps: defaults of the flags.
    title: heading of results.md; "{env}" and "{env_steps}" are filled in.
    default_env: the environment (then an --env flag exists), or None.
  """
  names = [v.name for v in variants]
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--output-root", default=default_root)
  if default_env is not None:
    parser.add_argument("--env", default=default_env)
  parser.add_argument("--env-steps", type=int, default=default_env_steps,
                      help="env steps per run")
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
  parser.add_argument("--jobs", type=int, default=1,
                      help="runs in parallel")
  parser.add_argument("--threads", type=int, default=0,
                      help="CPU threads per run (0: all)")
  parser.add_argument("--variants", nargs="+", default=names, choices=names)
  parser.add_argument("--aggregate-only", action="store_true")
  parser.add_argument("--fresh", action="store_true",
                      help="rerun runs that are already done")
  parser.add_argument("--show-progress", action="store_true",
                      help="runs print their progress here (jobs must be 1)")
  args = parser.parse_args(argv)
  chosen = [v for v in variants if v.name in args.variants]
  env = getattr(args, "env", None)
  common = list(fixed_args) + (["--env", env] if env else []) + [
      "--total-env-steps", str(args.env_steps),
      "--log-every", str(max(args.env_steps // 40, 1)),
      "--eval-every", str(max(args.env_steps // 5, 1))]
  if not args.aggregate_only:
    run_grid(args.output_root, chosen, args.seeds, common, jobs=args.jobs,
             threads=args.threads, fresh=args.fresh,
             show_progress=args.show_progress)
  text = aggregate(args.output_root, chosen, args.seeds, metrics,
                   title=title.format(env=env, env_steps=args.env_steps))
  print(text)
  print(f"Results: {args.output_root}/results.md; plots: "
        f"{args.output_root}/*.png; per run: "
        f"{args.output_root}/VARIANT/seedS/(metrics.csv, curves.png, "
        "checkpoint/)")
  return text


def read_metrics(path: str) -> Dict[str, np.ndarray]:
  """Columns of a metrics.csv as float arrays (empty cells -> NaN).

  Adds `env_steps_per_episode` (env steps / episodes finished between
  consecutive rows) when the file has `env_steps` and `episodes`.
  """
  with open(path) as f:
    rows = list(csv.DictReader(f))
  if not rows:
    raise ValueError(f"{path}: no rows.")
  out = {}
  for key in rows[0]:
    values = []
    for row in rows:
      try:
        values.append(float(row[key]))
      except (TypeError, ValueError):
        values.append(math.nan)
    out[key] = np.asarray(values, np.float64)
  if "env_steps" in out and "episodes" in out:
    # Derived: env steps per episode finished between consecutive rows (all
    # lanes together), a proxy for the episode length.
    steps = np.diff(out["env_steps"], prepend=0.)
    episodes = np.diff(out["episodes"], prepend=0.)
    with np.errstate(divide="ignore", invalid="ignore"):
      out["env_steps_per_episode"] = np.where(episodes > 0,
                                              steps / episodes, math.nan)
  return out


def _final(steps: np.ndarray, values: np.ndarray,
           final_fraction: float) -> float:
  """Mean of the finite values logged in the last fraction of the run."""
  keep = (steps >= steps[-1] * (1 - final_fraction)) & np.isfinite(values)
  return float(np.mean(values[keep])) if keep.any() else math.nan


def aggregate(root: str, variants: Sequence[Variant], seeds: Sequence[int],
              metrics: Dict[str, str], final_fraction: float = 0.2,
              title: str = "") -> str:
  """Writes results.md and one PNG per metric under `root`; returns the md.

  Args:
    root: the output root of `run_grid`.
    variants: the variants to compare (missing runs are reported).
    seeds: the seeds.
    metrics: metrics.csv column -> human-readable name.
    final_fraction: "final" = mean over rows in the last fraction of steps.
    title: heading of results.md.
  """
  os.makedirs(root, exist_ok=True)
  data = {}  # (variant, seed) -> columns
  missing, unfinished = [], []
  for variant in variants:
    for seed in seeds:
      directory = run_dir(root, variant.name, seed)
      path = os.path.join(directory, "metrics.csv")
      if os.path.exists(path):
        data[(variant.name, seed)] = read_metrics(path)
        if not os.path.exists(os.path.join(directory, DONE_FILE)):
          unfinished.append(f"{variant.name}/seed{seed}")
      else:
        missing.append(f"{variant.name}/seed{seed}")
  lines = [f"# {title}".rstrip(), ""]
  if missing:
    lines += [f"Missing runs: {', '.join(missing)}", ""]
  if unfinished:
    lines += [f"Unfinished runs (their rows so far are included): "
              f"{', '.join(unfinished)}", ""]
  for column, label in metrics.items():
    lines += [f"## {label} (`{column}`), final {final_fraction:.0%} of the "
              "budget", "",
              "| variant | " + " | ".join(f"seed {s}" for s in seeds)
              + " | mean ± std |",
              "|---" * (len(seeds) + 2) + "|"]
    for variant in variants:
      finals = []
      for seed in seeds:
        cols = data.get((variant.name, seed))
        finals.append(math.nan if cols is None or column not in cols else
                      _final(cols["env_steps"], cols[column], final_fraction))
      finite = [v for v in finals if math.isfinite(v)]
      summary = (f"{np.mean(finite):.3f} ± {np.std(finite):.3f}" if finite
                 else "n/a")
      lines.append(f"| {variant.label} | "
                   + " | ".join(f"{v:.3f}" for v in finals)
                   + f" | {summary} |")
    lines.append("")
    png = _plot(root, variants, seeds, data, column, label)
    if png:
      lines += [f"![{label}]({os.path.basename(png)})", ""]
  seconds = []
  for variant in variants:
    for seed in seeds:
      done = os.path.join(run_dir(root, variant.name, seed), DONE_FILE)
      if os.path.exists(done):
        with open(done) as f:
          seconds.append(json.load(f)["seconds"])
  if seconds:
    lines.append(f"{len(seconds)} runs, {sum(seconds) / 60:.1f} run-minutes "
                 f"in all ({np.mean(seconds) / 60:.1f} min per run).")
  text = "\n".join(lines) + "\n"
  with open(os.path.join(root, "results.md"), "w") as f:
    f.write(text)
  return text


def _plot(root: str, variants: Sequence[Variant], seeds: Sequence[int],
          data, column: str, label: str) -> Optional[str]:
  """Mean over seeds with a min-max band; returns the PNG path (or None)."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("[compare] matplotlib not installed: no plots.", file=sys.stderr)
    return None
  fig, ax = plt.subplots(figsize=(6.4, 4.0))
  for variant in variants:
    runs = [data[(variant.name, s)] for s in seeds
            if (variant.name, s) in data and column in data[(variant.name, s)]]
    if not runs:
      continue
    grid = runs[0]["env_steps"]
    for cols in runs[1:]:
      if len(cols["env_steps"]) < len(grid):
        grid = cols["env_steps"]
    curves = np.stack([np.interp(grid, cols["env_steps"],
                                 _fill_nan(cols[column])) for cols in runs])
    finite_rows = np.isfinite(curves).all(axis=0)
    if not finite_rows.any():
      continue
    x, y = grid[finite_rows], curves[:, finite_rows]
    ax.plot(x, y.mean(axis=0), label=f"{variant.label} ({len(runs)} seeds)")
    ax.fill_between(x, y.min(axis=0), y.max(axis=0), alpha=0.2)
  ax.set_xlabel("environment steps")
  ax.set_ylabel(label)
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  path = os.path.join(root, f"{column}.png")
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def _fill_nan(values: np.ndarray) -> np.ndarray:
  """Carries the last finite value forward (evaluation columns are sparse).

  Leading NaNs stay NaN.
  """
  out = np.array(values, np.float64)
  last = math.nan
  for i, v in enumerate(out):
    if math.isfinite(v):
      last = v
    else:
      out[i] = last
  return out
