r"""A benchmark and its baseline revision, measured in the same call.

A speed-up is a ratio of two rates; both must come from one run on one
machine, because this project's machines differ by 2x and a shared one by
10-25% from minute to minute (docs/performance.md). A benchmark that reports
a speed-up over an older revision therefore takes `--baseline-rev REV`:

  1. REV is checked out in a temporary git worktree (`git worktree add
     --detach`), which is removed afterwards;
  2. the same command -- the benchmark's own module, with the same
     arguments less the baseline ones -- runs there (the baseline's library
     and the baseline's copy of the benchmark) and here, each in a fresh
     Python process, one after the other, `--baseline-rounds` times
     interleaved (baseline, here, baseline, here, ...);
  3. each benchmark's `parse` reads the figures from what its command
     printed (so a revision that predates this module can be measured), and
     `compare` prints both sides' figures, the ratio here / baseline of
     each (for a time, baseline / here: > 1 always means "here is faster"),
     and the float32 matmul peak each side measured in its own process.

`--baseline-rev none` measures only this checkout (what the children run).

Usage inside a benchmark's `main`:

    baseline.add_argument(parser, default="3b473ec")
    args = parser.parse_args(argv)
    if baseline.requested(args):
      return baseline.main(__spec__.name, argv, args, parse=parse_figures)
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

# The repository this module lives in (experiments/benchmarks/ -> root).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NONE = "none"
# A figure named "... ms" or "... s" is a time (lower is better), one named
# ".../s" a rate (higher is better); any other (a share, a count) is shown
# on both sides without a speed-up.
TIME_SUFFIXES = (" ms", " s")
RATE_SUFFIX = "/s"
PEAK = "matmul_peak_gflops"
# Printed by every benchmark that measures the matmul peak, in one of these
# forms ("float32 matmul peak 460.1 GFLOP/s", "jnp.dot ... float32: 360.4
# GFLOP/s").
PEAK_PATTERNS = (re.compile(r"matmul peak\s+([\d.]+)\s*GFLOP/s"),
                 re.compile(r"peak: jnp\.dot \S+ float32:\s*([\d.]+)\s*GFLOP/s"))

Figures = Dict[str, float]


def add_argument(parser: argparse.ArgumentParser, default: str) -> None:
  """Adds `--baseline-rev` (default: the revision the README figure names),
  `--baseline-rounds` and `--json`."""
  group = parser.add_argument_group(
      "baseline (experiments/benchmarks/baseline.py)")
  group.add_argument(
      "--baseline-rev", default=default, metavar="REV",
      help="git revision to measure in a temporary worktree in the same call, "
           "before this checkout, with the same arguments (default: "
           f"{default}, the revision the published ratio names); 'none' "
           "measures this checkout only")
  group.add_argument(
      "--baseline-dir", default=None, metavar="DIR",
      help="a copy of --baseline-rev's tree already on disk (e.g. `git "
           "archive REV ngu_jax experiments | tar -x -C DIR` on a machine "
           "without the repository's history), used instead of a worktree")
  group.add_argument(
      "--baseline-rounds", type=int, default=1, metavar="K",
      help="interleaved rounds (baseline, here) x K; the medians are "
           "compared (default 1)")
  group.add_argument(
      "--json", default=None, metavar="PATH",
      help="also write every round's figures, both revisions and the "
           "ratios to PATH as JSON")


def requested(args: argparse.Namespace) -> bool:
  """Whether this call is the comparison (not one side of it)."""
  return str(args.baseline_rev).lower() != NONE


def strip_baseline_args(argv: Sequence[str]) -> List[str]:
  """`argv` without `--baseline-rev`, `--baseline-dir`, `--baseline-rounds`
  and `--json`
  (either `--flag value` or `--flag=value`)."""
  flags = ("--baseline-rev", "--baseline-dir", "--baseline-rounds", "--json")
  out, skip = [], False
  for arg in argv:
    if skip:
      skip = False
      continue
    if arg in flags:
      skip = True
      continue
    if any(arg.startswith(f + "=") for f in flags):
      continue
    out.append(arg)
  return out


def resolve(rev: str, repo: Optional[str] = None) -> str:
  """The full commit hash of `rev`, or SystemExit with git's reason."""
  repo = repo or REPO
  try:
    out = subprocess.run(["git", "-C", repo, "rev-parse", "--verify",
                          "--quiet", rev + "^{commit}"],
                         capture_output=True, text=True, check=False)
  except FileNotFoundError:
    raise SystemExit("--baseline-rev needs git on PATH") from None
  if out.returncode != 0:
    raise SystemExit(f"--baseline-rev {rev!r}: not a commit of the "
                     f"repository at {repo} (is it a git clone with the "
                     "history? pass --baseline-rev none to measure this "
                     "checkout only)")
  return out.stdout.strip()


def head(repo: Optional[str] = None) -> str:
  """This checkout's commit, with '+changes' when the tree is not clean."""
  repo = repo or REPO
  rev = subprocess.run(["git", "-C", repo, "rev-parse", "--short=10", "HEAD"],
                       capture_output=True, text=True, check=False)
  dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain",
                          "--untracked-files=no"],
                         capture_output=True, text=True, check=False)
  name = rev.stdout.strip()
  if not name:
    return "here"  # Not a git checkout (a copy of the tree).
  return name + ("+changes" if dirty.stdout.strip() else "")


@contextlib.contextmanager
def worktree(rev: str, repo: Optional[str] = None) -> Iterator[str]:
  """A detached worktree of `rev` in a temporary folder, removed on exit."""
  repo = repo or REPO
  commit = resolve(rev, repo)
  parent = tempfile.mkdtemp(prefix="ngu_jax_baseline_")
  path = os.path.join(parent, commit[:10])
  subprocess.run(["git", "-C", repo, "worktree", "add", "--detach",
                  "--quiet", path, commit], check=True)
  try:
    yield path
  finally:
    subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", path],
                   check=False, capture_output=True)
    shutil.rmtree(parent, ignore_errors=True)
    subprocess.run(["git", "-C", repo, "worktree", "prune"], check=False,
                   capture_output=True)


def knows_baseline_flag(root: str, module: str) -> bool:
  """Whether the benchmark `module` at `root` takes `--baseline-rev`
  (revisions older than this module do not)."""
  path = os.path.join(root, *module.split(".")) + ".py"
  try:
    with open(path, encoding="utf-8") as f:
      return "--baseline-rev" in f.read()
  except OSError:
    return False


def run_side(root: str, module: str, argv: Sequence[str],
             label: str) -> Tuple[str, float]:
  """Runs `python -m module argv` with `root` first on the path (its
  `ngu_jax` and `experiments` shadow any installed copy); echoes its output
  with a `[label]` prefix; returns (stdout, seconds)."""
  args = list(argv)
  if knows_baseline_flag(root, module):
    args += ["--baseline-rev", NONE]
  env = dict(os.environ)
  env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"]
                              if env.get("PYTHONPATH") else "")
  env["PYTHONUNBUFFERED"] = "1"
  cmd = [sys.executable, "-m", module] + args
  print(f"[{label}] $ (cd {root} && {' '.join(cmd[1:])})", flush=True)
  t = time.perf_counter()
  proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  lines = []
  for line in proc.stdout:
    lines.append(line)
    print(f"[{label}] {line}", end="", flush=True)
  code = proc.wait()
  seconds = time.perf_counter() - t
  if code != 0:
    raise SystemExit(f"[{label}] {module} exited with status {code}")
  return "".join(lines), seconds


def parse_peak(text: str) -> float:
  """The matmul peak (GFLOP/s) a benchmark printed, or NaN."""
  for pattern in PEAK_PATTERNS:
    match = pattern.search(text)
    if match:
      return float(match.group(1))
  return float("nan")


def is_time(name: str) -> bool:
  return name.endswith(TIME_SUFFIXES)


def speedup(name: str, base: float, here: float) -> float:
  """here / base for a rate, base / here for a time (> 1: here is faster);
  NaN for a figure that is neither."""
  if is_time(name):
    base, here = here, base
  elif not name.endswith(RATE_SUFFIX):
    return float("nan")
  return here / base if base else float("nan")


def _median(values: Sequence[float]) -> float:
  values = sorted(v for v in values if v == v)
  if not values:
    return float("nan")
  mid = len(values) // 2
  return (values[mid] if len(values) % 2
          else 0.5 * (values[mid - 1] + values[mid]))


def compare(rounds: Sequence[Tuple[Figures, Figures]], base_name: str,
            here_name: str) -> Tuple[List[str], Dict[str, Dict[str, float]]]:
  """The comparison table: per figure, both medians over rounds and the
  ratio (`speedup`). Returns (lines, {figure: {base, here, ratio}})."""
  names = [n for n in rounds[0][1] if n in rounds[0][0]]
  table = {}
  for name in names:
    base = _median([r[0].get(name, float("nan")) for r in rounds])
    here = _median([r[1].get(name, float("nan")) for r in rounds])
    table[name] = {"base": base, "here": here,
                   "ratio": speedup(name, base, here)}
  width = max([len(n) for n in names] + [6])
  lines = [f"{'figure':<{width}} {base_name:>14} {here_name:>16} "
           f"{'speed-up':>9}"]
  for name, row in table.items():
    ratio = (f"{row['ratio']:>8.2f}x" if row["ratio"] == row["ratio"]
             else f"{'-':>9}")
    lines.append(f"{name:<{width}} {row['base']:>14.4g} {row['here']:>16.4g} "
                 f"{ratio}")
  return lines, table


def main(module: str, argv: Optional[Sequence[str]],
         args: argparse.Namespace,
         parse: Callable[[str], Figures]) -> Dict[str, object]:
  """Runs `module` at `args.baseline_rev` and here, interleaved, and prints
  the comparison (module docstring). Returns what `--json` writes."""
  argv = list(sys.argv[1:] if argv is None else argv)
  inner = strip_baseline_args(argv)
  if args.baseline_rounds < 1:
    raise SystemExit("--baseline-rounds must be >= 1")
  if args.json:
    json_dir = os.path.dirname(os.path.abspath(args.json))
    if not os.access(json_dir, os.W_OK):
      raise SystemExit(f"--json {args.json}: {json_dir} is not writable")
  if args.baseline_dir:
    if not os.path.isdir(os.path.join(args.baseline_dir, "ngu_jax")):
      raise SystemExit(f"--baseline-dir {args.baseline_dir}: no ngu_jax/ "
                       "there (expected a copy of the baseline's tree)")
    base_commit = args.baseline_rev
    tree = contextlib.nullcontext(os.path.abspath(args.baseline_dir))
  else:
    base_commit = resolve(args.baseline_rev)
    tree = worktree(base_commit)
  here_name = head()
  base_name = base_commit[:10]
  rounds, raw = [], []
  with tree as base_root:
    for k in range(args.baseline_rounds):
      sides = []
      for root, name in ((base_root, base_name), (REPO, here_name)):
        text, seconds = run_side(root, module, inner,
                                 f"{name} {k + 1}/{args.baseline_rounds}")
        figures = dict(parse(text))
        figures[PEAK] = parse_peak(text)  # No speed-up: each side's own.
        sides.append(figures)
        raw.append({"revision": name, "round": k, "seconds": seconds,
                    "figures": figures})
      rounds.append((sides[0], sides[1]))
  lines, table = compare(rounds, base_name, here_name)
  header = (f"{module} {' '.join(inner)}: baseline {base_name} "
            f"({args.baseline_rev}) vs here {here_name}, {len(rounds)} "
            "interleaved round(s), medians; speed-up > 1: here is faster "
            f"(the {PEAK} row is each side's own measurement)")
  print("\n" + header)
  for line in lines:
    print(line)
  result = {"module": module, "argv": inner, "baseline_rev": args.baseline_rev,
            "baseline_commit": base_commit, "here": here_name,
            "cpu_count": os.cpu_count(), "rounds": raw, "table": table}
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1, sort_keys=True, default=float)
    print(f"figures written to {args.json}")
  return result
