"""Runs a grid of `experiments.train` runs (variants x seeds) and compares them.

Shared by the comparison scripts (`experiments.disco_maze_coverage`,
`experiments.minigrid_exploration`; those that run one comparison per task
or noise condition through `group_main`; the variants several of them run,
`NGU_LEARNED_F`, `NGU_RANDOM_F`, `RND_ONLY`). Each run is its own process
(`python -m experiments.train ... --output-dir ROOT/VARIANT/seedS`), so runs
can go in parallel (`jobs`) with XLA limited to `threads` CPU threads each,
and a finished run (its `done.json`) is not run again: re-running a script
after an interruption only runs what is missing (`--fresh` starts over).

Aggregation reads each run's `metrics.csv` (or, where only that exists, its
gzip-compressed `metrics.csv.gz`, as docs/results/ keeps them), puts every
metric on the common env-step grid of the logged rows and writes, under ROOT:

* `results.md`: one table per metric: per-seed "final" values (the mean of
  the rows in the last `final_fraction` of the budget), their interquartile
  mean (IQM) over seeds with a 95% stratified bootstrap confidence interval
  (`experiments.stats`, rliable; Agarwal et al. 2021) and their mean +- std,
  per variant; then the visit heatmaps of each variant's first seed;
* `<metric>.png`: the metric against env steps, IQM over seeds with its
  pointwise 95% CI band, one line per variant.

With `chance` (`main(chance=True)`), each table ends with a uniform random
policy's value of its metric on the same environment
(`experiments.chance`), where one exists (returns, success, coverage,
env steps per episode).

The statistics need rliable: `pip install -e ".[results]"`.
"""

import argparse
import dataclasses
import glob
import json
import math
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from experiments import chance as chance_lib
from experiments import stats
from ngu_jax import plotting
from ngu_jax import threads as threads_lib

DONE_FILE = "done.json"


@dataclasses.dataclass(frozen=True)
class Variant:
  """One agent variant: a name, a label for plots and its train.py flags."""
  name: str
  label: str
  args: Sequence[str]


# Variants that several studies run with the same flags and labels: NGU
# with its embedding f learned by inverse dynamics or fixed at its random
# initialisation, and the RND-only reward (NGU Fig. 2's three).
NGU_LEARNED_F = Variant("ngu", "NGU (learned f)",
                        ("--set", "learn_embedding=True"))
NGU_RANDOM_F = Variant("random_projection", "NGU, random-projection f",
                       ("--set", "learn_embedding=False"))
RND_ONLY = Variant("rnd", "RND only", ("--set", "intrinsic_reward='rnd'",
                                       "--set", "learn_embedding=False"))


def single_thread_env(threads: int) -> Dict[str, str]:
  """Environment for a child process that uses `threads` CPU threads."""
  env = dict(os.environ)
  env.update(threads_lib.xla_thread_env(threads, env.get("XLA_FLAGS", "")))
  return env


def run_dir(root: str, variant: str, seed: int) -> str:
  return os.path.join(root, variant, f"seed{seed}")


def vmapped_run_dir(root: str, variant: str) -> str:
  """The output of a variant's seeds vmapped in one compiled-loop run
  (`run_grid(vmap_seeds=True)`); seed s writes `seed_<s>/` under it."""
  return os.path.join(root, variant, "seeds")


def locate_run(root: str, variant: str, seed: int) -> Tuple[str, str]:
  """(directory with the run's metrics.csv, its done.json path).

  A run of its own (`run_dir`) if there is one, else seed `seed` of the
  variant's vmapped run (`vmapped_run_dir`), whose done.json is shared.
  """
  own = run_dir(root, variant, seed)
  vmapped = vmapped_run_dir(root, variant)
  if not os.path.isdir(own) and os.path.isdir(vmapped):
    return (os.path.join(vmapped, f"seed_{seed}"),
            os.path.join(vmapped, DONE_FILE))
  return own, os.path.join(own, DONE_FILE)


def run_grid(root: str, variants: Sequence[Variant], seeds: Sequence[int],
             common_args: Sequence[str], jobs: int = 1, threads: int = 0,
             fresh: bool = False, show_progress: bool = False,
             vmap_seeds: bool = False) -> None:
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
    vmap_seeds: one compiled-loop run per variant with all `seeds` vmapped
      in one program (`--seeds`; `common_args` must select `--loop
      compiled`), written to `vmapped_run_dir`: one compile instead of one
      per seed, and the seeds share each step's matrix work.
  """
  queue = []
  if vmap_seeds:
    for variant in variants:
      queue.append(Job(f"{variant.name} seeds {list(seeds)}",
                       vmapped_run_dir(root, variant.name),
                       [*common_args, *variant.args,
                        "--seeds", *[str(s) for s in seeds]]))
    run_jobs(queue, jobs=jobs, threads=threads, fresh=fresh,
             show_progress=show_progress)
    return
  # Seed-major: every variant's seed 0 runs before any seed 1, so a grid cut
  # short still compares all the variants.
  for seed in seeds:
    for variant in variants:
      queue.append(Job(f"{variant.name} seed {seed}",
                       run_dir(root, variant.name, seed),
                       [*common_args, *variant.args, "--seed", str(seed)]))
  run_jobs(queue, jobs=jobs, threads=threads, fresh=fresh,
           show_progress=show_progress)


@dataclasses.dataclass(frozen=True)
class Job:
  """One training process: a name, its output dir, its flags, and the module
  it runs (`python -m MODULE ARGS --output-dir OUT`; `experiments.train`, or
  another with the same --output-dir / --resume / --no-progress flags, such
  as `examples.ppo_ngu`)."""
  name: str
  out: str
  args: Sequence[str]
  module: str = "experiments.train"


def _last_env_steps(out: str) -> Optional[int]:
  """The fewest env steps in the last rows of the `metrics.csv` files under
  `out` (one per seed), or None before the first row is written."""
  steps = []
  for path in glob.glob(os.path.join(out, "**", "metrics.csv"),
                        recursive=True):
    try:
      with open(path) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    except OSError:
      continue
    if len(lines) < 2 or "env_steps" not in lines[0].split(","):
      continue
    column = lines[0].split(",").index("env_steps")
    try:
      steps.append(int(float(lines[-1].split(",")[column])))
    except (IndexError, ValueError):
      continue  # A row being written.
  return min(steps) if steps else None


def progress_line(name: str, out: str, cmd: Sequence[str], started: float,
                  steps_at_start: Optional[int], now: float) -> str:
  """One line on a running job: env steps so far (from its metrics.csv) of
  its `--total-env-steps`, its rate since it started and the time left at
  that rate."""
  steps = _last_env_steps(out)
  minutes = (now - started) / 60
  if steps is None:
    return f"[compare] {name}: no metrics row yet ({minutes:.1f} min)"
  total = None
  if "--total-env-steps" in cmd:
    total = int(float(cmd[list(cmd).index("--total-env-steps") + 1]))
  text = f"[compare] {name}: {steps:,}"
  if total:
    text += f" / {total:,} env steps ({100 * steps / total:.0f}%)"
  else:
    text += " env steps"
  done = steps - (steps_at_start or 0)
  if done > 0 and now > started:
    rate = done / (now - started)
    text += f", {rate:,.0f} env steps/s per seed"
    if total and total > steps:
      text += f", about {(total - steps) / rate / 60:.0f} min left"
  return text + f" ({minutes:.1f} min)"


def run_jobs(queue: Sequence[Job], jobs: int = 1, threads: int = 0,
             fresh: bool = False, show_progress: bool = False,
             report_every: float = 600.0) -> None:
  """Runs `python -m MODULE ARGS --output-dir OUT` per job (`Job`).

  A job whose `OUT/done.json` exists is skipped (unless `fresh`); one with
  `OUT/checkpoint/` gets `--resume`. `jobs` processes at a time, each with
  `threads` CPU threads (0: all); output to `OUT/log.txt` unless
  `show_progress` (then `jobs` must be 1). Without `show_progress`, every
  `report_every` seconds (0: never) one line per running job says how far
  it is (`progress_line`: env steps from its metrics.csv, rate, time left).

  Raises:
    RuntimeError: some runs failed (after all have finished).
  """
  if show_progress and jobs != 1:
    raise ValueError("run_jobs: show_progress needs jobs == 1.")
  pending = []
  for job in queue:
    if not fresh and os.path.exists(os.path.join(job.out, DONE_FILE)):
      print(f"[compare] {job.name}: done, skipped.")
      continue
    cmd = [sys.executable, "-m", job.module, *job.args,
           "--output-dir", job.out]
    if not fresh and os.path.isdir(os.path.join(job.out, "checkpoint")):
      cmd.append("--resume")  # An interrupted run continues.
    if not show_progress:
      cmd.append("--no-progress")
    pending.append((job.name, job.out, cmd))
  env = single_thread_env(threads) if threads else dict(os.environ)
  running = []
  failures = []
  total, finished, start = len(pending), 0, time.time()
  last_report = start
  while pending or running:
    while pending and len(running) < jobs:
      name, out, cmd = pending.pop(0)
      os.makedirs(out, exist_ok=True)
      log = open(os.path.join(out, "log.txt"), "w")
      print(f"[compare] start {name}: {' '.join(cmd[1:])}", flush=True)
      if show_progress:
        proc = subprocess.Popen(cmd, env=env)
      else:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env=env)
      running.append((name, out, proc, log, time.time(),
                      (cmd, _last_env_steps(out))))
    time.sleep(1.0)
    now = time.time()
    if (not show_progress and report_every and running
        and now - last_report >= report_every):
      last_report = now
      for name, out, _, _, t0, (cmd, steps0) in running:
        print(progress_line(name, out, cmd, t0, steps0, now), flush=True)
    for entry in list(running):
      name, out, proc, log, t0, _ = entry
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
        failures.append((name, out))
        status = f"FAILED (exit {proc.returncode}, see {out}/log.txt)"
      print(f"[compare] {finished}/{total} {name}: {status} in "
            f"{took / 60:.1f} min (elapsed {(time.time() - start) / 60:.1f}"
            " min)", flush=True)
  if failures:
    raise RuntimeError(f"{len(failures)} run(s) failed: {failures}")


def group_parser(default_root: str, group_flag: str,
                 groups: Sequence[str], variants: Sequence[Variant],
                 default_env_steps: int) -> argparse.ArgumentParser:
  """The flags of a script that runs one comparison per group (a noise
  condition, a task): --output-root, `group_flag` (which groups), --seeds,
  --variants, --env-steps, --no-vmap-seeds, -h. Unknown flags are left for
  `main` (`parse_known_args`, then `group_argv`)."""
  names = [v.name for v in variants]
  parser = argparse.ArgumentParser(add_help=False)
  parser.add_argument("--output-root", default=default_root)
  parser.add_argument(group_flag, nargs="+", default=list(groups),
                      choices=list(groups))
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
  parser.add_argument("--variants", nargs="+", default=names, choices=names)
  parser.add_argument("--env-steps", type=int, default=default_env_steps)
  parser.add_argument("--no-vmap-seeds", action="store_true",
                      help="one process per seed instead")
  parser.add_argument("-h", "--help", action="store_true")
  return parser


def group_argv(root: str, args: argparse.Namespace,
               rest: Sequence[str]) -> List[str]:
  """`main`'s arguments for one group of a `group_parser` script."""
  return ["--output-root", root, "--env-steps", str(args.env_steps),
          "--seeds", *map(str, args.seeds), "--variants", *args.variants,
          *([] if args.no_vmap_seeds else ["--vmap-seeds"]), *rest]


@dataclasses.dataclass(frozen=True)
class GroupComparison:
  """What `group_main` runs for one group: the arguments of `main` that
  differ from group to group."""
  fixed_args: Sequence[str]  # The group's train.py flags.
  title: str  # results.md's heading; `main` fills in {env} and {env_steps}.
  argv: Sequence[str] = ()  # Flags before the command line's own (--env).
  default_env: Optional[str] = None
  baseline: Sequence[str] = ()
  chance: bool = False


def group_main(argv: Optional[Sequence[str]], doc: str, group_flag: str,
               groups: Sequence[str], variants: Sequence[Variant],
               metrics: Dict[str, str], default_root: str,
               default_env_steps: int,
               comparison: Callable[[str], GroupComparison],
               after: Optional[Callable[[str, str, argparse.Namespace],
                                        str]] = None
               ) -> Optional[Tuple[argparse.Namespace, List[str]]]:
  """The command line of a script that runs one comparison per group.

  Parses `group_parser`'s flags (-h prints `doc`) and leaves the others to
  `main`. For each chosen group G, in order: `main` on the output root
  OUTPUT_ROOT/G with `group_argv`'s flags and `comparison(G)`'s arguments,
  then `after(G, OUTPUT_ROOT/G, flags)`, whose text (the part it wrote to
  the group's results.md) ends the group's text.

  Args:
    argv: command-line arguments (None: sys.argv).
    doc: the script's docstring: the help, and its first line the
      description of each group's `main`.
    group_flag, groups, variants, default_root, default_env_steps: as in
      `group_parser`.
    metrics: metrics.csv column -> name, for the tables and plots.
    comparison: a group's `GroupComparison`.
    after: what a group adds once its comparison is done (None: nothing).

  Returns:
    `(flags, texts)`: the parsed flags and each group's text; None when the
    flags ask for the help.
  """
  parser = group_parser(default_root, group_flag, groups, variants,
                        default_env_steps)
  args, rest = parser.parse_known_args(argv)
  if args.help:
    print(doc)
    return None
  texts = []
  for group in getattr(args, group_flag.lstrip("-").replace("-", "_")):
    root = os.path.join(args.output_root, group)
    spec = comparison(group)
    text = main(group_argv(root, args, [*spec.argv, *rest]),
                doc.split("\n")[0], variants, spec.fixed_args, metrics,
                default_root=root, default_env_steps=args.env_steps,
                title=spec.title, default_env=spec.default_env,
                baseline=spec.baseline, chance=spec.chance)
    if after is not None:
      text += after(group, root, args)
    texts.append(text)
  return args, texts


def main(argv: Optional[Sequence[str]], description: str,
         variants: Sequence[Variant], fixed_args: Sequence[str],
         metrics: Dict[str, str], default_root: str, default_env_steps: int,
         title: str, default_env: Optional[str] = None,
         baseline: Sequence[str] = (), chance: bool = False) -> str:
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
    baseline: variant names in order of preference: the tables add
      P(variant > baseline) for the first one among the chosen variants.
    chance: end every table whose metric a random policy has (returns,
      success, coverage, episode length) with a uniform random policy's
      value on the runs' environment (`experiments.chance.for_flags`).
  """
  names = [v.name for v in variants]
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--output-root", default=default_root)
  if default_env is not None:
    parser.add_argument("--env", default=default_env)
  parser.add_argument("--env-steps", type=int, default=default_env_steps,
                      help="env steps per run")
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
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
  parser.add_argument("--vmap-seeds", action="store_true",
                      help="one compiled-loop run per variant with the seeds "
                      "vmapped (needs --loop compiled in the script's flags)")
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE",
                      help="config override for every variant (after the "
                      "script's settings, before the variant's own)")
  args = parser.parse_args(argv)
  chosen = [v for v in variants if v.name in args.variants]
  env = getattr(args, "env", None)
  overrides = [flag for value in args.set for flag in ("--set", value)]
  common = list(fixed_args) + overrides + (["--env", env] if env else []) + [
      "--total-env-steps", str(args.env_steps),
      "--log-every", str(max(args.env_steps // 40, 1)),
      "--eval-every", str(max(args.env_steps // 5, 1)),
      "--checkpoint-every", str(max(args.env_steps // 10, 1))]
  if not args.aggregate_only:
    if args.vmap_seeds and "compiled" not in common:
      parser.error("--vmap-seeds needs the compiled loop (--loop compiled)")
    run_grid(args.output_root, chosen, args.seeds, common, jobs=args.jobs,
             threads=args.threads, fresh=args.fresh,
             show_progress=args.show_progress, vmap_seeds=args.vmap_seeds)
  names = [v.name for v in chosen]
  text = aggregate(args.output_root, chosen, args.seeds, metrics,
                   title=title.format(env=env, env_steps=args.env_steps),
                   baseline=next((b for b in baseline if b in names), None),
                   chance=chance_lib.for_flags(common) if chance else None)
  print(text)
  print(f"Results: {args.output_root}/results.md; plots: "
        f"{args.output_root}/*.png; per run: "
        f"{args.output_root}/VARIANT/seedS/(metrics.csv, curves.png, "
        "checkpoint/)")
  return text


def read_metrics(path: str) -> Dict[str, np.ndarray]:
  """Columns of a metrics.csv as float arrays (empty cells -> NaN).

  `path` may name a gzip-compressed `metrics.csv.gz`, or a `metrics.csv` of
  which only the `.gz` exists (`ngu_jax.plotting.open_metrics`). Adds
  `env_steps_per_episode` (env steps / episodes finished between
  consecutive rows) when the file has `env_steps` and `episodes`.

  Raises:
    FileNotFoundError: neither `path` nor `path + ".gz"` exists.
    ValueError: the file has no rows.
  """
  out = plotting.read_metrics(path)
  if not out or not len(next(iter(out.values()))):
    raise ValueError(f"{path}: no rows.")
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
              title: str = "", reps: int = 2000, curve_reps: int = 1000,
              baseline: Optional[str] = None,
              chance: Optional[Dict[str, float]] = None) -> str:
  """Writes results.md and one PNG per metric under `root`; returns the md.

  Args:
    root: the output root of `run_grid`.
    variants: the variants to compare (missing runs are reported).
    seeds: the seeds.
    metrics: metrics.csv column -> human-readable name.
    final_fraction: "final" = mean over rows in the last fraction of steps.
    title: heading of results.md.
    reps: bootstrap replications of the tables' CIs.
    curve_reps: bootstrap replications of the plots' pointwise CIs.
    baseline: a variant name: the tables then add P(variant > baseline)
      (probability of improvement, with its CI) per variant.
    chance: metrics.csv column -> a uniform random policy's value
      (`experiments.chance.columns`): the tables of those columns end with
      that row.

  Raises:
    ImportError: rliable is not installed (`pip install -e ".[results]"`).
    ValueError: `baseline` is not one of `variants`.
  """
  stats.require_rliable()
  if baseline is not None and baseline not in [v.name for v in variants]:
    raise ValueError(f"aggregate: baseline {baseline!r} is not a variant.")
  os.makedirs(root, exist_ok=True)
  data, missing, unfinished = load_runs(root, variants, seeds)
  lines = [f"# {title}".rstrip(), "",
           f"Statistics over seeds: IQM (interquartile mean) with a 95% "
           f"stratified bootstrap CI ({reps} reps; plots: pointwise, "
           f"{curve_reps} reps), rliable {stats.rliable_version()} "
           "(Agarwal et al. 2021); mean ± std for reference.", ""]
  if missing:
    lines += [f"Missing runs: {', '.join(missing)}", ""]
  if unfinished:
    lines += [f"Unfinished runs (their rows so far are included): "
              f"{', '.join(unfinished)}", ""]
  if chance:
    lines += [_CHANCE_NOTE, ""]
  for column, label in metrics.items():
    lines += _table(variants, seeds, data, column, label, final_fraction,
                    reps, baseline, chance)
    png = _plot(root, variants, seeds, data, column, label, curve_reps)
    if png:
      lines += [f"![{label}]({os.path.basename(png)})", ""]
  lines += _heatmap_section(root, variants, seeds)
  lines += _run_time_lines(root, variants, seeds)
  return write_results(root, "\n".join(lines) + "\n")


def write_results(root: str, text: str, mode: str = "w") -> str:
  """Writes `text` to ROOT/results.md (mode "a": appends it); returns it."""
  with open(os.path.join(root, "results.md"), mode) as f:
    f.write(text)
  return text


def summary_table(root: str, variants: Sequence[Variant],
                  seeds: Sequence[int], column: str, label: str,
                  final_fraction: float, reps: int = 2000,
                  baseline: Optional[str] = None,
                  chance_flags: Optional[Sequence[str]] = None) -> str:
  """One metric's markdown table as `aggregate` writes it (per-seed means
  of the rows in the last `final_fraction` of the budget, IQM with its CI,
  P(> baseline)), for a table `aggregate` does not make: e.g. the mean over
  every evaluation (`final_fraction` 1, the area under the curve). With
  `chance_flags` (the runs' train.py flags) it ends with a uniform random
  policy's value (`experiments.chance.for_flags`), as `aggregate`'s tables
  with `chance`. "" when no run has a metrics.csv yet."""
  stats.require_rliable()
  data, _, _ = load_runs(root, variants, seeds)
  if not data:
    return ""
  chance = (chance_lib.for_flags(chance_flags) if chance_flags is not None
            else None)
  return "\n".join(_table(variants, seeds, data, column, label,
                          final_fraction, reps, baseline, chance))


def load_runs(root: str, variants: Sequence[Variant], seeds: Sequence[int]):
  """Reads every run's metrics.csv (or metrics.csv.gz: `read_metrics`).

  Returns:
    `(data, missing, unfinished)`: (variant, seed) -> columns, and the
    "variant/seedS" names of runs without metrics.csv(.gz) / without
    done.json.
  """
  data, missing, unfinished = {}, [], []
  for variant in variants:
    for seed in seeds:
      directory, done = locate_run(root, variant.name, seed)
      path = plotting.find_metrics(os.path.join(directory, "metrics.csv"))
      if path is not None:
        data[(variant.name, seed)] = read_metrics(path)
        if not os.path.exists(done):
          unfinished.append(f"{variant.name}/seed{seed}")
      else:
        missing.append(f"{variant.name}/seed{seed}")
  return data, missing, unfinished


def final_values(data, variant: str, seeds: Sequence[int], column: str,
                 final_fraction: float) -> np.ndarray:
  """Per-seed final values of a column, shaped [num_seeds] (NaN: none): the
  mean of each run's rows in the last `final_fraction` of its budget (1:
  every row, the area under the curve). `data` as `load_runs` returns."""
  finals = []
  for seed in seeds:
    cols = data.get((variant, seed))
    finals.append(math.nan if cols is None or column not in cols else
                  _final(cols["env_steps"], cols[column], final_fraction))
  return np.asarray(finals, np.float64)


def format_ci(value: float, low: float, high: float) -> str:
  """Formats an estimate and its CI as `v [low, high]`.

  `v [n/a]` without an interval, `n/a` without an estimate.
  """
  if not math.isfinite(value):
    return "n/a"
  if not (math.isfinite(low) and math.isfinite(high)):
    return f"{value:.3f} [n/a]"
  return f"{value:.3f} [{low:.3f}, {high:.3f}]"


_CHANCE_NOTE = ("Chance: a uniform random policy's mean over "
                f"{chance_lib.EPISODES:,} whole episodes of the same "
                "environment (`experiments.chance`), in the IQM column of "
                f"the row \"{chance_lib.LABEL}\".")


def _table(variants: Sequence[Variant], seeds: Sequence[int], data,
           column: str, label: str, final_fraction: float, reps: int,
           baseline: Optional[str],
           chance: Optional[Dict[str, float]] = None) -> List[str]:
  """The markdown lines of one metric's table (per-seed finals, IQM, mean;
  a last row with `chance[column]` when there is one)."""
  header = ([f"seed {s}" for s in seeds] + ["IQM [95% CI]", "mean ± std"])
  base = None
  if baseline is not None:
    base = final_values(data, baseline, seeds, column, final_fraction)
    name = next(v.label for v in variants if v.name == baseline)
    header.append(f"P(> {name}) [95% CI]")
  lines = [f"## {label} (`{column}`), final {final_fraction:.0%} of the "
           "budget", "", "| variant | " + " | ".join(header) + " |",
           "|---" * (len(header) + 1) + "|"]
  for variant in variants:
    finals = final_values(data, variant.name, seeds, column, final_fraction)
    finite = finals[np.isfinite(finals)]
    cells = [f"{v:.3f}" for v in finals]
    cells.append(format_ci(*stats.iqm_ci(finals, reps=reps)))
    cells.append(f"{np.mean(finite):.3f} ± {np.std(finite):.3f}"
                 if finite.size else "n/a")
    if base is not None:
      cells.append("—" if variant.name == baseline else format_ci(
          *stats.probability_of_improvement(finals, base, reps=reps)))
    lines.append(f"| {variant.label} | " + " | ".join(cells) + " |")
  if chance and column in chance:
    cells = [""] * len(seeds) + [f"{chance[column]:.3f}"]
    cells += [""] * (len(header) - len(cells))
    lines.append(f"| {chance_lib.LABEL} | " + " | ".join(cells) + " |")
  return lines + [""]


def _eval_step(path: str) -> float:
  """The env steps in a heatmap's name `eval_<env_steps>.png` (inf: none)."""
  stem = os.path.splitext(os.path.basename(path))[0]
  try:
    return float(stem[len("eval_"):])
  except ValueError:
    return math.inf


def _heatmap_section(root: str, variants: Sequence[Variant],
                     seeds: Sequence[int]) -> List[str]:
  """Links to the eval_*.png heatmaps of each variant's first seed with any.

  Looks in the run directory and its `heatmaps/` folder; paths are relative
  to `root`. No lines when no run has heatmaps.
  """
  lines = []
  for variant in variants:
    for seed in seeds:
      directory, _ = locate_run(root, variant.name, seed)
      paths = [p for d in (directory, os.path.join(directory, "heatmaps"))
               for p in glob.glob(os.path.join(d, "eval_*.png"))]
      if not paths:
        continue
      lines += [f"### {variant.label} (seed {seed})", ""]
      for path in sorted(paths, key=_eval_step):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        name = os.path.splitext(os.path.basename(path))[0]
        lines.append(f"![{variant.label} {name}]({rel})")
      lines.append("")
      break
  return ["## Visit heatmaps", ""] + lines if lines else []


def _run_time_lines(root: str, variants: Sequence[Variant],
                    seeds: Sequence[int]) -> List[str]:
  """The line on run time, from the done.json files (none: no line)."""
  seconds = {}
  for variant in variants:
    for seed in seeds:
      _, done = locate_run(root, variant.name, seed)
      if os.path.exists(done) and done not in seconds:
        with open(done) as f:
          seconds[done] = json.load(f)["seconds"]
  if not seconds:
    return []
  values = list(seconds.values())
  return [f"{len(values)} runs, {sum(values) / 60:.1f} run-minutes "
          f"in all ({np.mean(values) / 60:.1f} min per run)."]


def _curves(runs, column: str) -> Tuple[np.ndarray, np.ndarray]:
  """Runs' values of a column on the shortest run's env-step grid.

  Returns:
    `(grid [num_points], curves [num_runs, num_points])`; sparse columns
    carry their last value forward (`_fill_nan`).
  """
  grid = runs[0]["env_steps"]
  for cols in runs[1:]:
    if len(cols["env_steps"]) < len(grid):
      grid = cols["env_steps"]
  curves = np.stack([np.interp(grid, cols["env_steps"],
                               _fill_nan(cols[column])) for cols in runs])
  return grid, curves


def _plot(root: str, variants: Sequence[Variant], seeds: Sequence[int],
          data, column: str, label: str,
          reps: int = 1000) -> Optional[str]:
  """IQM over seeds with a 95% CI band; returns the PNG path (or None)."""
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
    grid, curves = _curves(runs, column)
    iqm, low, high = stats.iqm_curve(curves, reps=reps)
    shown = np.isfinite(iqm)
    if not shown.any():
      continue
    line, = ax.plot(grid[shown], iqm[shown],
                    linestyle=line_style(len(ax.get_lines())),
                    label=f"{variant.label} (IQM, 95% CI, {len(runs)} seeds)")
    ax.fill_between(grid[shown], low[shown], high[shown], alpha=0.2,
                    color=line.get_color())
  return save_plot(fig, ax, os.path.join(root, f"{column}.png"),
                   "environment steps", label)


def save_plot(fig, ax, path: str, xlabel: str, ylabel: str) -> str:
  """Labels `ax` (axes, grid, legend), writes `fig` to `path` at 100 dpi and
  closes it; returns `path`. For a figure of curves against steps or time
  (`aggregate`'s, `experiments.samples_per_insert`'s)."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.grid(alpha=0.3)
  place_legend(fig, ax)
  fig.savefig(path, dpi=100, bbox_inches="tight")
  plt.close(fig)
  return path


# Beyond this many curves, or with a label this long, the legend goes
# below the axes, not over (or beside) them.
LEGEND_INSIDE_MAX = 6
LEGEND_INSIDE_MAX_CHARS = 45


def line_style(index: int) -> str:
  """Solid, dashed, dotted, dash-dot for the axes' curves 0-9, 10-19, ...
  (`index`: the curves drawn before it): the default colour cycle repeats
  after 10 curves."""
  return ("-", "--", ":", "-.")[index // 10 % 4]


def place_legend(fig, ax, fontsize: Optional[float] = None) -> None:
  """A legend that never hides the curves: inside the axes for a few short
  entries, below them (the figure grown to fit, one entry per line) for
  more or longer ones. Call before saving with `bbox_inches="tight"`."""
  handles, labels = ax.get_legend_handles_labels()
  if not handles:
    return
  if (len(handles) <= LEGEND_INSIDE_MAX
      and max(map(len, labels)) <= LEGEND_INSIDE_MAX_CHARS):
    ax.legend(fontsize=fontsize)
    fig.tight_layout()
    return
  width, height = fig.get_size_inches()
  fig.set_size_inches(width, height + 0.17 * len(handles))
  fig.tight_layout()
  ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(0., -0.14),
            fontsize=fontsize or 7, frameon=False)


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
