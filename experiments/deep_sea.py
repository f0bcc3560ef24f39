r"""Deep exploration on bsuite DeepSea: NGU and its ablations against chance.

DeepSea (Osband et al., 2020, bsuite) is an N x N triangle: the diver starts
top left and moves one row down per step, left or right; only going right at
every one of the N steps reaches the treasure (reward 1), and every right
move costs 0.01 / N. Which action is "right" is hidden behind a fixed random
mapping per cell. A uniformly random policy reaches the treasure with
probability 2^-N per episode, so dithering needs about 2^N episodes; deep
exploration (a novelty bonus carried back N steps by the value function)
needs polynomially many. No state repeats within an episode, so NGU's
episodic term cannot tell a left from a right move: the test isolates the
life-long (RND) novelty and the learner's ability to propagate it.

Variants (one config each, no tuning; the `deep_sea(size)` preset of
`ngu_jax.agents.ngu.config`, with N = 8 mixtures, 16 lanes, the compiled
loop; all in each run's config.json):

* `ngu`: NGU's intrinsic reward (episodic x RND modulator, eq. 1);
* `rnd`: the RND-only intrinsic reward (`intrinsic_reward="rnd"`);
* `episodic`: NGU with alpha = 1 (`use_rnd=False`: episodic novelty only);
* `beta0`: beta = 0 (R2D2 with App. A's per-lane epsilons);
* `ngu_cmr`: NGU with NGU's Cross Mixture Ratio 0.5 (Sec. 4.2, App. C:
  half of each batch trains another mixture, so the exploit policy j = 0
  also learns from the treasures the exploratory mixtures find);
* `ngu_rescaled`: NGU with `episodic_rescale_short_memory=True` (ours: with
  n < k entries the episodic kernel sum counts k / n times, so that r^i
  does not fall with the time step because DeepSea's memory of one episode
  never holds k = 10 entries before its last steps);
* `recode`: RECODE's clustering memory instead of episodic x RND (never
  wiped: a count-like bonus across episodes);
* `agent57`: Agent57's split values and per-lane UCB bandits;
* `split_values`, `bandits` (not run by default): Agent57's two changes
  alone -- split values with NGU's fixed mixtures, and the per-lane UCB
  bandits with NGU's single value head;
* `ngu_paper_defaults` (not run by default): NGU with the two settings this
  study changed, `aux_loss_step_selection="last"` and
  `actor_epsilons_per_mixture=False` (README, "Deep exploration");
* `ngu_random_f`, `episodic_random_f` (not run by default): NGU and its
  alpha = 1 ablation with the embedding f a fixed random network
  (`learn_embedding=False`, NGU Fig. 2's "random projection"), to tell
  whether the inverse-dynamics training is what makes the episodic reward
  prefer often visited cells;
* `ngu_wipe3` (not run by default): NGU with the episodic memory kept over
  3 episodes (NGU Table 9, "# episodes w/o wiping" in {1, 3}; 100 slots
  hold 3 episodes up to N = 32), so that a cell the last episodes visited
  pays less in the next;
* `ngu_n2` (not run by default): NGU with N = 2 mixtures, so that j = 0
  acts in 8 of the 16 lanes and trains on half of each batch (with N = 8:
  2 lanes, an eighth; the paper has 8 actors per mixture).

and the uniform random walk, computed exactly: success probability 2^-N per
episode, 2^N expected episodes to the first treasure; a budget of E env
steps holds E / (N + 1) episodes (N moves, then the auto-reset step every
loop counts as an env step: `budget_episodes`).

Every (size, variant) is one process training the seeds side by side
(`--seeds`, vmapped in one program); an interrupted study continues where it
stopped (finished runs are skipped, the others resume from their
checkpoints). `--aggregate-only` rewrites the results from the runs'
metrics.csv: `results.md` (per size: the fraction of training episodes that
reach the treasure, IQM [95% CI] over seeds, against the random walk; the
greedy j = 0 evaluation; episodes to the first treasure), `success.png`
(the fraction over training, per size), `first_treasure.png` (episodes to
the first treasure against N, with 2^N), whether the RND error, alpha and
r^i rank cells by how rarely they are visited (`rarity_ranking`), and the
per-cell maps of the largest size (visits, RND error, alpha, r^i, Q(right) - Q(left) and
P(right) for j = 0 and j = N - 1; `ngu_jax.agents.ngu.diagnostics.cell_panels`), and
which lanes reach the treasure: the j = 0 and j = N - 1 lanes' success
(`mixture_success`).

The default budget is bsuite's protocol: sizes 10, 14, 20, 30, 40, 50 with
10,000 episodes each (`--episodes`; N + 1 env steps an episode), and
results.md adds bsuite's own summary: per size the episode at which the
running fraction of training episodes that missed the treasure falls below
0.8 (bsuite's `find_solution`; unsolved if never within the episodes) and
bsuite's deep_sea score (the share of sizes solved before 2^N + 100
episodes). `--env-steps` gives every run the same env steps instead (the
earlier 60,000-step study).

Usage:
  python -m experiments.deep_sea [--output-root runs/deep_sea]
      [--sizes 10 14 20 30 40 50] [--episodes 10000 | --env-steps STEPS]
      [--seeds 0 1 2 3 4] [--variants ngu rnd recode agent57 beta0 ngu_cmr ngu_rescaled]
      [--jobs 2] [--threads 1] [--set FIELD=VALUE] [--aggregate-only]
      [--results-dir DIR] [--fresh]
"""

import argparse
import glob
import json
import math
import os
import warnings
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from experiments import compare
from experiments import stats
from ngu_jax import plotting

ENV = "gymnax/DeepSea-bsuite"
VARIANTS = (
    compare.Variant("ngu", "NGU", []),
    compare.RND_ONLY,
    compare.Variant("episodic", "NGU, alpha = 1 (episodic only)",
                    ["--set", "use_rnd=False"]),
    compare.Variant("beta0", "beta = 0", ["--set", "beta=0.0"]),
    compare.Variant("ngu_cmr", "NGU, cross mixture ratio 0.5",
                    ["--set", "cross_mixture_ratio=0.5"]),
    compare.Variant("ngu_rescaled", "NGU, short memory rescaled (k / n)",
                    ["--set", "episodic_rescale_short_memory=True"]),
    compare.Variant("recode", "RECODE",
                    ["--set", "intrinsic_reward='recode'"]),
    compare.Variant("agent57", "Agent57 (split values + bandits)",
                    ["--set", "split_values=True",
                     "--set", "meta_controller='ucb'"]),
    compare.Variant("split_values", "NGU + split values (no bandits)",
                    ["--set", "split_values=True"]),
    compare.Variant("bandits", "NGU + UCB bandits (no split values)",
                    ["--set", "meta_controller='ucb'"]),
    compare.Variant("ngu_paper_defaults",
                    "NGU, last-5 aux steps, epsilons over all lanes",
                    ["--set", "aux_loss_step_selection='last'",
                     "--set", "actor_epsilons_per_mixture=False"]),
    compare.Variant("ngu_random_f", "NGU, f a fixed random network",
                    ["--set", "learn_embedding=False"]),
    compare.Variant("episodic_random_f",
                    "NGU, alpha = 1, f a fixed random network",
                    ["--set", "use_rnd=False",
                     "--set", "learn_embedding=False"]),
    compare.Variant("ngu_wipe3", "NGU, memory wiped every 3rd episode",
                    ["--set", "memory_wipe_period=3",
                     "--set", "memory_capacity=100"]),
    # The exploit head's share: with 16 lanes and N = 8, j = 0 acts in 2
    # lanes and trains on an eighth of the batches; N = 2 gives it half
    # (as `experiments.minigrid`'s `ngu_n2`).
    compare.Variant("ngu_n2", "NGU, N = 2",
                    ["--set", "num_mixtures=2"]),
)
DEFAULT_VARIANTS = ("ngu", "rnd", "recode", "agent57", "beta0", "ngu_cmr",
                    "ngu_rescaled")
# bsuite's protocol (Osband et al. 2020; bsuite/experiments/deep_sea): each
# size gets PROTOCOL_EPISODES episodes; a size is solved at the first
# episode where the running fraction of "bad" episodes (that missed the
# treasure) falls below BSUITE_THRESHOLD; the score is the share of sizes
# solved before 2^N + BSUITE_FORGIVENESS episodes.
PROTOCOL_SIZES = (10, 14, 20, 30, 40, 50)
PROTOCOL_EPISODES = 10_000
BSUITE_THRESHOLD = 0.8
BSUITE_FORGIVENESS = 100
RANDOM = "random walk (exact)"
NUM_LANES = 16


def size_dir(root: str, size: int) -> str:
  return os.path.join(root, f"size{size}")


def seed_dir(root: str, size: int, variant: str, seed: int,
             num_seeds: int) -> str:
  """Where train.py writes a seed of a (size, variant) process."""
  out = os.path.join(size_dir(root, size), variant)
  return out if num_seeds == 1 else os.path.join(out, f"seed_{seed}")


def steps_for(env_steps: Union[int, Dict[int, int]], size: int) -> int:
  """A run's env steps: `env_steps` itself, or its entry for `size`."""
  return int(env_steps[size] if isinstance(env_steps, dict) else env_steps)


def protocol_env_steps(sizes: Sequence[int], episodes: int
                       ) -> Dict[int, int]:
  """Env steps holding `episodes` episodes of each size: N + 1 each
  (`budget_episodes`)."""
  return {size: episodes * (size + 1) for size in sizes}


def jobs_for(root: str, sizes: Sequence[int],
             variants: Sequence[compare.Variant], seeds: Sequence[int],
             env_steps: Union[int, Dict[int, int]], sets: Sequence[str]
             ) -> List[compare.Job]:
  """One `experiments.train` job per (size, variant), sizes first;
  `env_steps` per run, or per size (`protocol_env_steps`)."""
  out = []
  overrides = [flag for value in sets for flag in ("--set", value)]
  for size in sizes:
    steps = steps_for(env_steps, size)
    common = [
        "--loop", "compiled", "--preset", "deep_sea", "--set", f"size={size}",
        "--env", ENV, "--env-kwarg", f"size={size}",
        "--num-lanes", str(NUM_LANES), "--total-env-steps", str(steps),
        "--log-every", str(max(steps // 60, 1)),
        "--eval-every", str(max(steps // 6, 1)),
        "--checkpoint-every", str(max(steps // 6, 1)),
        "--seeds", *[str(s) for s in seeds]] + overrides
    for variant in variants:
      out.append(compare.Job(f"size {size} {variant.name}",
                             os.path.join(size_dir(root, size), variant.name),
                             common + list(variant.args)))
  return out


# ---------------------------------------------------------------- analysis


def random_success(size: int) -> float:
  """P(a uniformly random policy reaches the treasure) = 2^-N."""
  return 0.5 ** size


def budget_episodes(size: int, env_steps: float) -> float:
  """Episodes in `env_steps` env steps (all lanes together): each episode is
  N moves plus the auto-reset step after its LAST, which the loops count
  as an env step, so N + 1 env steps (the runs' metrics.csv: 60,512 env
  steps are 5,488 episodes at N = 10)."""
  return env_steps / (size + 1)


def random_found_probability(size: int, episodes: float) -> float:
  """P(at least one treasure in `episodes` random episodes)."""
  return 1. - (1. - random_success(size)) ** episodes


def bsuite_solution(episodes: np.ndarray, successes: np.ndarray,
                    num_episodes: Optional[float] = None,
                    threshold: float = BSUITE_THRESHOLD) -> float:
  """bsuite's `find_solution` on a run's rows: the cumulative episodes at
  the first row where the running fraction of episodes that missed the
  treasure, (episodes - successes so far) / episodes, is below
  `threshold`, among the rows within `num_episodes` episodes (default:
  all); NaN: never (unsolved). bsuite reads it per episode; here at the
  rows' resolution (an upper bound on the episode).

  Args:
    episodes: cumulative training episodes at each row [R].
    successes: episodes that reached the treasure since the previous row [R].
  """
  episodes = np.asarray(episodes, np.float64)
  found = np.cumsum(np.asarray(successes, np.float64))
  within = episodes <= (np.inf if num_episodes is None else num_episodes)
  with np.errstate(invalid="ignore", divide="ignore"):
    bad = (episodes - found) / episodes
  hit = np.flatnonzero(within & (episodes > 0) & (bad < threshold))
  return float(episodes[hit[0]]) if hit.size else math.nan


def bsuite_score(solutions: Dict[int, float],
                 forgiveness: float = BSUITE_FORGIVENESS) -> float:
  """bsuite's deep_sea score: the share of sizes N solved before 2^N +
  `forgiveness` episodes ({size: `bsuite_solution`}, NaN unsolved)."""
  if not solutions:
    return math.nan
  return float(np.mean([np.isfinite(e) and e < 2. ** n + forgiveness
                        for n, e in solutions.items()]))


def run_summary(columns: Dict[str, np.ndarray], final_fraction: float = 0.2,
                num_episodes: Optional[float] = None) -> Dict[str, float]:
  """What a run's metrics.csv says about the treasure.

  Rows log `episodes` (cumulative) and `episode_success_rate` (the fraction
  of the episodes finished since the previous row that reached it).

  Returns:
    {"episodes": all training episodes, "successes": how many reached the
     treasure, "success_fraction": their fraction, "final_success": the
     fraction over the episodes of the last `final_fraction` of env steps,
     "first_episode": the cumulative episodes at the first row with a
     success (an upper bound, at the row's resolution; NaN: never),
     "eval_final": the greedy j = 0 evaluation's mean return at the last
     evaluation, "eval_solved": 1 if the greedy j = 0 evaluation reached the
     treasure in more than half of its episodes (mean return > 0.5;
     bsuite's returns are 1 - 0.01 with it, <= 0 without) in at least 2 of
     the last 3 evaluations (one evaluation alone flips: measured at N = 8,
     a seed at 0.99 then 0.055), "bsuite_episode": `bsuite_solution` within
     `num_episodes` (NaN: unsolved), "minutes": the run's wall-clock
     minutes (`elapsed_s` of its last row; every seed of a process shares
     them), "first_greedy_minutes": the minutes at the first evaluation
     whose greedy j = 0 return exceeded 0.5 (NaN: never), "eval_last":
     1 if the last evaluation's did}.
  """
  steps = columns["env_steps"]
  episodes = columns["episodes"]
  new = np.diff(episodes, prepend=0.)
  rate = np.nan_to_num(columns["episode_success_rate"])
  successes = rate * new
  total = float(episodes[-1]) if episodes.size else 0.
  final = steps >= steps[-1] * (1 - final_fraction)
  found = np.flatnonzero(successes > 0)
  evals = columns.get("eval_return", np.array([]))
  elapsed = columns.get("elapsed_s", np.full(steps.shape, math.nan))
  greedy = np.flatnonzero(np.nan_to_num(evals, nan=-1.) > 0.5)
  first_greedy = (float(elapsed[greedy[0]]) / 60 if greedy.size
                  else math.nan)
  evals = evals[np.isfinite(evals)]
  eval_final = float(evals[-1]) if evals.size else math.nan
  return {
      "episodes": total,
      "successes": float(successes.sum()),
      "success_fraction": float(successes.sum() / total) if total else
      math.nan,
      "final_success": float(successes[final].sum() / max(new[final].sum(),
                                                          1.)),
      "first_episode": float(episodes[found[0]]) if found.size else math.nan,
      "eval_final": eval_final,
      "eval_solved": (float(np.sum(evals[-3:] > 0.5) >= min(2, evals.size))
                      if evals.size else math.nan),
      "bsuite_episode": bsuite_solution(episodes, successes, num_episodes),
      "minutes": float(elapsed[-1]) / 60 if elapsed.size else math.nan,
      "first_greedy_minutes": first_greedy,
      "eval_last": float(eval_final > 0.5) if evals.size else math.nan,
  }


def _load(root: str, sizes, variants, seeds,
          episodes: Optional[int] = None):
  """(size, variant, seed) -> run_summary (bsuite's solution within
  `episodes`), plus the raw columns."""
  summaries, curves, missing = {}, {}, []
  for size in sizes:
    for variant in variants:
      for seed in seeds:
        path = os.path.join(seed_dir(root, size, variant.name, seed,
                                     len(seeds)), "metrics.csv")
        if plotting.find_metrics(path) is None:  # Nor metrics.csv.gz.
          missing.append(f"size{size}/{variant.name}/seed{seed}")
          continue
        columns = compare.read_metrics(path)
        summaries[(size, variant.name, seed)] = run_summary(
            columns, num_episodes=episodes)
        curves[(size, variant.name, seed)] = columns
  return summaries, curves, missing


def _group_missing(missing: Sequence[str], num_seeds: int) -> List[str]:
  """"size8/ngu/seed0", ... -> "size8/ngu" where every seed is missing."""
  groups: Dict[str, List[str]] = {}
  for name in missing:
    head, seed = name.rsplit("/", 1)
    groups.setdefault(head, []).append(seed)
  return [head if len(seeds) == num_seeds else
          f"{head}/{{{', '.join(seeds)}}}" for head, seeds in groups.items()]


def _seed_rows(summaries, size: int, variant: str, seeds
               ) -> List[Dict[str, float]]:
  """The run summaries of the seeds of (size, variant) that have one."""
  rows = [summaries.get((size, variant, s)) for s in seeds]
  return [r for r in rows if r is not None]


def _size_cells(sizes, summaries, variant: str, seeds, cell) -> List[str]:
  """Per size, `cell(rows)` of the (size, variant) seed summaries, or
  "(not run)" where none has run."""
  out = []
  for size in sizes:
    rows = _seed_rows(summaries, size, variant, seeds)
    out.append(cell(rows) if rows else "(not run)")
  return out


def _ci(values: np.ndarray, reps: int) -> str:
  value, low, high = stats.iqm_ci(values, reps=reps)
  return compare.format_ci(value, low, high)


def _size_table(size, variants, seeds, summaries, env_steps, reps):
  env_steps = steps_for(env_steps, size)
  episodes = budget_episodes(size, env_steps)
  p = random_success(size)
  lines = [f"### N = {size} ({env_steps:,} env steps per run, about "
           f"{episodes:,.0f} episodes; random walk: P(treasure) = 2^-{size}"
           f" = {p:.2e} per episode, {2 ** size:,} expected episodes to the "
           f"first, P(found within the budget) = "
           f"{random_found_probability(size, episodes):.2f})", "",
           "| variant | episodes reaching the treasure (training lanes) | "
           "last 20% of the budget | seeds that found it | episodes to the "
           "first (median) | greedy j = 0 solved (2 of the last 3 evaluations) |",
           "|---|---|---|---|---|---|",
           f"| {RANDOM} | {p:.2e} | {p:.2e} | "
           f"{random_found_probability(size, episodes):.2f} (probability) | "
           f"{2 ** size:,} (mean) | 0 |"]
  for variant in variants:
    rows = _seed_rows(summaries, size, variant.name, seeds)
    if not rows:
      lines.append(f"| {variant.label} | (not run) | | | | |")
      continue
    fraction = np.array([r["success_fraction"] for r in rows])
    final = np.array([r["final_success"] for r in rows])
    first = np.array([r["first_episode"] for r in rows])
    found = np.isfinite(first)
    median = (f"{np.median(np.where(found, first, np.inf)):,.0f}"
              if found.sum() * 2 > len(first) else "never (most seeds)")
    solved = np.array([r["eval_solved"] for r in rows])
    lines.append(
        f"| {variant.label} | {_ci(fraction, reps)} | {_ci(final, reps)} | "
        f"{int(found.sum())}/{len(rows)} | {median} | "
        f"{int(np.nansum(solved))}/{len(rows)} |")
  return lines + [""]


def _overview_lines(sizes, variants, seeds, summaries, env_steps, reps
                    ) -> List[str]:
  """results.md: one row per variant, one column per size."""
  lines = ["### All sizes: fraction of training episodes reaching the "
           "treasure, IQM [95% CI]; greedy j = 0 solved; seeds that found "
           "it", "",
           "| variant | " + " | ".join(f"N = {n}" for n in sizes) + " |",
           "|---|" + "---|" * len(sizes)]
  cells = []
  for size in sizes:
    p = random_success(size)
    found = random_found_probability(
        size, budget_episodes(size, steps_for(env_steps, size))) * len(seeds)
    cells.append(f"{p:.1e}; -; {found:.1f}/{len(seeds)} expected")
  lines.append(f"| {RANDOM} | " + " | ".join(cells) + " |")
  def cell(rows):
    fraction = np.array([r["success_fraction"] for r in rows])
    found = int(np.isfinite([r["first_episode"] for r in rows]).sum())
    solved = int(np.nansum([r["eval_solved"] for r in rows]))
    return (f"{_ci(fraction, reps)}; {solved}/{len(rows)}; "
            f"{found}/{len(rows)}")

  for variant in variants:
    cells = _size_cells(sizes, summaries, variant.name, seeds, cell)
    lines.append(f"| {variant.label} | " + " | ".join(cells) + " |")
  return lines + [""]


def _plot_success(out, sizes, variants, seeds, curves, reps) -> Optional[str]:
  """Over training, per size: the fraction of training episodes reaching the
  treasure (top) and the greedy j = 0 evaluation's return (bottom; 16
  episodes, epsilon 0.01; the treasure's 1 minus at most 0.01 of move
  costs, so about the fraction of them that reach it)."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  fig, axes = plt.subplots(2, len(sizes), figsize=(4.2 * len(sizes), 6.8),
                           squeeze=False)
  for col, size in enumerate(sizes):
    for variant in variants:
      runs = [curves.get((size, variant.name, s)) for s in seeds]
      runs = [r for r in runs if r is not None]
      if not runs:
        continue
      n = min(len(r["env_steps"]) for r in runs)
      x = runs[0]["env_steps"][:n]
      y = np.stack([np.nan_to_num(r["episode_success_rate"][:n])
                    for r in runs])
      iqm, low, high = stats.iqm_curve(y, reps=reps)
      line, = axes[0][col].plot(x, iqm, label=variant.label)
      axes[0][col].fill_between(x, low, high, alpha=0.2)
      evals = np.stack([r.get("eval_return", np.full(n, np.nan))[:n]
                        for r in runs])
      rows = np.isfinite(evals).all(axis=0)
      if rows.any():
        iqm, low, high = stats.iqm_curve(evals[:, rows], reps=reps)
        axes[1][col].plot(x[rows], iqm, marker=".", color=line.get_color())
        axes[1][col].fill_between(x[rows], low, high, alpha=0.2,
                                  color=line.get_color())
    axes[0][col].axhline(random_success(size), color="k", ls="--", lw=1,
                         label=RANDOM)
    axes[0][col].set_title(f"N = {size}")
    axes[0][col].set_yscale("symlog", linthresh=1e-3)
    axes[0][col].set_ylim(0, 1)
    axes[1][col].set_ylim(-0.05, 1.05)
    axes[1][col].set_xlabel("env steps")
  axes[0][0].set_ylabel("training episodes reaching\nthe treasure (IQM, 95% CI)")
  axes[1][0].set_ylabel("greedy j = 0 evaluation\nreturn (IQM, 95% CI)")
  legend = {}
  for ax in axes[0]:
    for handle, label in zip(*ax.get_legend_handles_labels()):
      legend.setdefault(label, handle)
  axes[0][-1].legend(list(legend.values()), list(legend), fontsize="small")
  fig.tight_layout()
  path = os.path.join(out, "success.png")
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


def _plot_first(out, sizes, variants, seeds, summaries, env_steps
                ) -> Optional[str]:
  """Episodes to the first treasure against N (bsuite's scaling plot)."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  fig, ax = plt.subplots(figsize=(5.5, 4))
  n = np.asarray(sizes, np.float64)
  ax.plot(n, 2. ** n, "k--", label=f"{RANDOM}: 2^N")
  budgets = {size: budget_episodes(size, steps_for(env_steps, size))
             for size in sizes}
  ax.plot(n, [budgets[size] for size in sizes], "k:",
          label="budget (episodes)")
  for k, variant in enumerate(variants):
    for size in sizes:
      firsts = [summaries.get((size, variant.name, s), {}).get(
          "first_episode", math.nan) for s in seeds]
      firsts = np.asarray(firsts, np.float64)
      shown = np.where(np.isfinite(firsts), firsts, budgets[size])
      jitter = size + 0.15 * (k - len(variants) / 2)
      ax.scatter(np.full(len(shown), jitter), shown, s=14,
                 marker="o" if k == 0 else "osD^v"[k % 5],
                 facecolors=["C%d" % k if np.isfinite(f) else "none"
                             for f in firsts],
                 edgecolors="C%d" % k,
                 label=variant.label if size == sizes[0] else None)
  ax.set_yscale("log")
  ax.set_xlabel("N (DeepSea size)")
  ax.set_ylabel("episodes to the first treasure")
  ax.set_title("filled: found; hollow: not found within the budget",
               fontsize="small")
  ax.legend(fontsize="small")
  fig.tight_layout()
  path = os.path.join(out, "first_treasure.png")
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


PATH_PANELS = ("visits (training lanes)", "RND error", "alpha",
               "Q(right) - Q(other), j = 0", "Q(right) - Q(other), j = N-1")


def cell_windows(run_dir: str, ext: str = "npz") -> List[str]:
  """`<run_dir>/heatmaps/cells_<env steps>.<ext>`, in env-step order."""
  return sorted(glob.glob(os.path.join(run_dir, "heatmaps", f"cells_*.{ext}")),
                key=window_step)


def window_step(path: str) -> int:
  """The env steps in a `cells_<env steps>.<ext>` file name."""
  return int(path.rsplit("_", 1)[1].split(".")[0])


def path_through_training(run_dir: str) -> Dict[str, np.ndarray]:
  """The per-cell numbers of the optimal path's cells (r, r) over training.

  Reads the run's `heatmaps/cells_<env steps>.npz` (training lanes between
  evaluations; `diagnostics.cell_step_sums`).

  Returns:
    {"env_steps": int [E]} and, per title of `PATH_PANELS`, float [N, E]:
    row r = the diagonal cell (r, r) (NaN where not visited), column = the
    evaluation.
  """
  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import diagnostics
  paths = cell_windows(run_dir)
  out = {"env_steps": np.array([window_step(p) for p in paths], np.int64)}
  columns = {name: [] for name in PATH_PANELS}
  for path in paths:
    with np.load(path) as f:
      sums, preferred = f["sums"], f["preferred_action"]
    panels = diagnostics.cell_panels(diagnostics.cell_maps(sums), preferred,
                                     "right")
    n = sums.shape[1]
    for name in PATH_PANELS:
      columns[name].append(panels[name][np.arange(n), np.arange(n)])
  for name in PATH_PANELS:
    out[name] = (np.stack(columns[name], axis=1) if columns[name] else
                 np.zeros((0, 0)))
  return out


def mixture_success(run_dir: str) -> Dict[str, np.ndarray]:
  """Which lanes reach the treasure: the j = 0 and the j = N - 1 lanes.

  From the run's `heatmaps/cells_<env steps>.npz` (training lanes between
  evaluations; `diagnostics.cell_step_sums`, which keeps per-cell counts of
  the actions the j = 0 and the j = N - 1 lanes took): the treasure is paid
  for "right" at the last cell of the optimal path, (N - 1, N - 1), the
  only cell where the column reaches N - 1; every episode starts at (0,
  0). So per window, a lane group's episodes are its visits of (0, 0) and
  its treasures its "right" actions (`preferred_action`) at (N - 1, N - 1).

  Returns:
    {"env_steps": int [E], "exploit" / "explore": float [E] the fraction of
    the j = 0 / j = N - 1 lanes' episodes that reached the treasure (NaN: no
    such episode), "exploit_episodes" / "explore_episodes": float [E]}.
  """
  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import diagnostics
  paths = cell_windows(run_dir)
  out = {"env_steps": np.array([window_step(p) for p in paths], np.int64)}
  for group in ("exploit", "explore"):
    out[group], out[group + "_episodes"] = [], []
  for path in paths:
    with np.load(path) as f:
      sums, preferred = f["sums"], f["preferred_action"]
    n = sums.shape[1]
    names = diagnostics.cell_channels(
        (sums.shape[-1] - len(diagnostics.CELL_SUMS)) // 4)
    right = int(preferred[n - 1, n - 1])
    for group in ("exploit", "explore"):
      episodes = float(sums[0, 0, names.index(f"{group}_visits")])
      found = float(sums[n - 1, n - 1, names.index(f"act_{group}_{right}")])
      out[group].append(found / episodes if episodes else math.nan)
      out[group + "_episodes"].append(episodes)
  for key in ("exploit", "explore", "exploit_episodes", "explore_episodes"):
    out[key] = np.asarray(out[key], np.float64)
  return out


def _seed_list(rows, key: str) -> str:
  """The seeds of `rows` (seed, summary) whose `key` test holds."""
  chosen = [str(seed) for seed, r in rows if key(r)]
  return "{" + ", ".join(chosen) + "}" if chosen else "none"


def _greedy_vs_lanes_lines(sizes, variants, seeds, summaries) -> List[str]:
  """results.md: per seed, whether the greedy j = 0 policy takes what the
  training lanes find (issue: the exploit policy learns what the explorers
  find)."""
  lines = ["### Does the greedy policy take what the lanes find? (seeds)",
           "", "Training lanes solved = bsuite's criterion on the training "
           "episodes of all mixtures; greedy solved = the 2-of-the-last-3 "
           "rule above; greedy at the end = the last evaluation alone.", "",
           "| N | variant | training lanes solved | greedy solved | greedy at "
           "the end |", "|---|---|---|---|---|"]
  for size in sizes:
    for variant in variants:
      rows = [(s, summaries[(size, variant.name, s)]) for s in seeds
              if (size, variant.name, s) in summaries]
      if not rows:
        continue
      lines.append(
          f"| {size} | {variant.label} | "
          f"{_seed_list(rows, lambda r: np.isfinite(r['bsuite_episode']))} | "
          f"{_seed_list(rows, lambda r: r['eval_solved'] == 1.)} | "
          f"{_seed_list(rows, lambda r: r['eval_last'] == 1.)} |")
  return lines + [""]


def _wallclock_lines(sizes, variants, seeds, summaries,
                     budget_minutes: float = 10.) -> List[str]:
  """results.md: minutes of one CPU core per seed (a run's process vmaps
  its seeds on one core: its minutes / seeds), minutes per seed to the
  first greedy treasure, and the largest N solved within `budget_minutes`
  per seed."""
  lines = ["### Wall clock (one CPU core per process of "
           f"{len(seeds)} vmapped seeds; minutes per seed = the process's "
           f"minutes / {len(seeds)})", "",
           "| N | variant | minutes per seed, whole run | minutes per seed to "
           "the first greedy treasure (median over the seeds that reached "
           "it) |", "|---|---|---|---|"]
  within: Dict[str, int] = {}
  for size in sizes:
    for variant in variants:
      rows = [summaries[(size, variant.name, s)] for s in seeds
              if (size, variant.name, s) in summaries]
      if not rows:
        continue
      per_seed = np.array([r["minutes"] for r in rows]) / len(seeds)
      first = np.array([r["first_greedy_minutes"] for r in rows]
                       ) / len(seeds)
      reached = first[np.isfinite(first)]
      first_text = (f"{np.median(reached):.2f} ({reached.size}/{len(rows)})"
                    if reached.size else "never")
      lines.append(f"| {size} | {variant.label} | "
                   f"{np.nanmedian(per_seed):.2f} | {first_text} |")
      solved_in_time = sum(
          1 for r in rows if r["eval_solved"] == 1.
          and r["first_greedy_minutes"] / len(seeds) <= budget_minutes)
      if solved_in_time * 2 > len(seeds):
        within[variant.name] = size
  lines += ["", f"Largest N solved (greedy, most seeds) with its first "
            f"greedy treasure within {budget_minutes:g} minutes per seed: " +
            "; ".join(f"{v.label} {within.get(v.name, 'none')}"
                      for v in variants) + ".", ""]
  return lines


def _mixture_lines(root, sizes, variants, seeds, reps) -> List[str]:
  """results.md: `mixture_success` in the last window, IQM over seeds."""
  lines = ["### Which lanes reach the treasure (training episodes of the "
           "j = 0 lanes and of the j = N - 1 lanes between the last two "
           "evaluations; IQM over seeds [95% CI])", "",
           "| N | variant | j = 0 (exploit) lanes | j = N - 1 lanes |",
           "|---|---|---|---|"]
  any_row = False
  for size in sizes:
    for variant in variants:
      last = {"exploit": [], "explore": []}
      for seed in seeds:
        m = mixture_success(seed_dir(root, size, variant.name, seed,
                                     len(seeds)))
        for group in last:
          if m[group].size and np.isfinite(m[group][-1]):
            last[group].append(m[group][-1])
      if last["exploit"] or last["explore"]:
        any_row = True
        cells = [_ci(np.asarray(last[g]), reps) if last[g] else "n/a"
                 for g in ("exploit", "explore")]
        lines.append(f"| {size} | {variant.label} | {cells[0]} | "
                     f"{cells[1]} |")
  return lines + [""] if any_row else []


def _plot_path(root, out, size, variants, seeds) -> Optional[str]:
  """One row of panels per variant: the optimal path's cells over training."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    from matplotlib import colors  # pylint: disable=g-import-not-at-top
    from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  data = [(v, path_through_training(seed_dir(root, size, v.name, seeds[0],
                                             len(seeds)))) for v in variants]
  data = [(v, d) for v, d in data if d["env_steps"].size]
  if not data:
    return None
  fig, axes = plt.subplots(len(data), len(PATH_PANELS), squeeze=False,
                           figsize=(3.4 * len(PATH_PANELS), 2.9 * len(data)))
  for row, (variant, d) in enumerate(data):
    steps = d["env_steps"]
    for ax, name in zip(axes[row], PATH_PANELS):
      grid = np.ma.masked_invalid(d[name])
      kwargs = {"cmap": "viridis"}
      finite = d[name][np.isfinite(d[name])]
      if name.startswith("visits"):
        grid = np.ma.masked_less_equal(grid, 0.)
        kwargs["norm"] = colors.LogNorm(vmin=1., vmax=max(
            finite.max() if finite.size else 1., 1.01))
      elif " - " in name:
        bound = max(np.abs(finite).max() if finite.size else 1., 1e-9)
        kwargs.update(cmap="RdBu", vmin=-bound, vmax=bound)
      image = ax.imshow(grid, aspect="auto", interpolation="nearest",
                        **kwargs)
      fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
      ax.set_xticks(range(len(steps)))
      ax.set_xticklabels([f"{s // 1000}k" for s in steps], fontsize="small")
      ax.set_title(name if row == 0 else "", fontsize="small")
      ax.set_ylabel(f"{variant.label}\ndiagonal cell (r, r)"
                    if ax is axes[row][0] else "")
    axes[row][len(PATH_PANELS) // 2].set_xlabel("env steps")
  fig.suptitle(f"The optimal path (N = {size}, seed {seeds[0]}) through "
               "training", fontsize="medium")
  fig.tight_layout()
  path = os.path.join(out, f"path_size{size}.png")
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return path


RANKED = ("rnd_error", "alpha", "intrinsic_reward")


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
  """Spearman's rank correlation (average ranks for ties); NaN if constant."""
  # pylint: disable=g-import-not-at-top
  from scipy import stats as scipy_stats
  if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
    return math.nan
  return float(scipy_stats.spearmanr(x, y)[0])


def rarity_ranking(run_dir: str) -> Dict[str, np.ndarray]:
  """Does a signal rank DeepSea's cells by how rarely they are visited?

  Per window between evaluations (`heatmaps/cells_<env steps>.npz`):
  Spearman's rank correlation, over the cells visited in that window, of the
  visit count with the mean RND error, alpha and r^i there (NGU eq. 1; for
  the RND-only baseline r^i is its err / sigma_e reward). A count-like
  novelty signal gives a correlation near -1 (the rarer the cell, the larger
  the signal); 0 means the signal does not know which cells are rare.

  DeepSea's visits fall with the row (every episode passes row 0), so a
  signal that only changes with the time step within the episode (the
  episodic memory fills up over the episode) correlates with visits over all
  cells. `<name>_within_rows` removes that: the mean over rows of the
  correlation among one row's visited cells (rows with at least 3 of them),
  i.e. among the cells an action choice at the row above decides between.

  Returns:
    {"env_steps": int [E]} and, per name in `RANKED`, `name` and
    `name + "_within_rows"`: float [E] (NaN where fewer than 3 cells, or no
    row with 3 cells, were visited or a signal was constant).
  """
  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import diagnostics
  paths = cell_windows(run_dir)
  out = {"env_steps": np.array([window_step(p) for p in paths], np.int64)}
  keys = [k for name in RANKED for k in (name, name + "_within_rows")]
  values = {key: [] for key in keys}
  for path in paths:
    with np.load(path) as f:
      maps = diagnostics.cell_maps(f["sums"])
    visited = maps["visits"] > 0
    for name in RANKED:
      values[name].append(_spearman(maps["visits"][visited],
                                    maps[name][visited]))
      per_row = [_spearman(maps["visits"][r][visited[r]],
                           maps[name][r][visited[r]])
                 for r in range(visited.shape[0])]
      per_row = [v for v in per_row if np.isfinite(v)]
      values[name + "_within_rows"].append(
          float(np.mean(per_row)) if per_row else math.nan)
  for key in keys:
    out[key] = np.asarray(values[key], np.float64)
  return out


def intrinsic_reward_by_row(run_dir: str) -> np.ndarray:
  """The visit-weighted mean r^i of each row in the last evaluation window.

  DeepSea's row is the time step within the episode, so this shows how the
  episodic reward changes as the episode's memory fills (NGU Alg. 1: fewer
  than k entries until row k). Returns float [rows] (NaN for unvisited
  rows; empty if the run wrote no cell maps).
  """
  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import diagnostics
  paths = cell_windows(run_dir)
  if not paths:
    return np.zeros(0)
  with np.load(paths[-1]) as f:
    maps = diagnostics.cell_maps(f["sums"])
  visits = maps["visits"]
  total = np.where(visits > 0, visits * maps["intrinsic_reward"], 0.).sum(1)
  count = visits.sum(1)
  return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _by_row_lines(root, sizes, variants, seeds) -> List[str]:
  """results.md: r^i per row (the time step), median over seeds."""
  lines = ["### r^i by row (= time step in the episode; visit-weighted mean "
           "over the row's cells in the last evaluation window, median over "
           "seeds)", ""]
  any_row = False
  for size in sizes:
    medians = [(variant, _median_rows(root, size, variant.name, seeds))
               for variant in variants]
    medians = [(v, m) for v, m in medians if m.size and np.isfinite(m).any()]
    if medians:
      any_row = True
      width = max(m.size for _, m in medians)
      lines += [f"N = {size}:", "",
                "| variant | " + " | ".join(f"row {r}" for r in range(width))
                + " |", "|---|" + "---|" * width]
      lines += [f"| {v.label} | " + " | ".join(
          f"{x:.3g}" if np.isfinite(x) else "" for x in m) + " |"
                for v, m in medians] + [""]
  return lines if any_row else []


def _median_rows(root, size, variant, seeds) -> np.ndarray:
  per_seed = [intrinsic_reward_by_row(seed_dir(root, size, variant, s,
                                               len(seeds))) for s in seeds]
  per_seed = [p for p in per_seed if p.size]
  if not per_seed:
    return np.zeros(0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # All-NaN rows.
    return np.nanmedian(np.stack(per_seed), axis=0)


def _ranking_lines(root, sizes, variants, seeds) -> List[str]:
  """results.md: the rank correlations at the last evaluation, per size."""
  keys = [k for name in RANKED for k in (name, name + "_within_rows")]
  lines = ["### Does the signal rank cells by rarity? (Spearman correlation "
           "of visits with the signal over the visited cells, between the "
           "last two evaluations; median over seeds [min, max]; -1: the "
           "rarer the cell the larger the signal; 'in rows': the mean of the "
           "correlations within each row, which the row's time step cannot "
           "explain)", "",
           "| N | variant | RND error | in rows | alpha | in rows | r^i "
           "| in rows |", "|---|---|---|---|---|---|---|---|"]
  any_row = False
  for size in sizes:
    for variant in variants:
      last = {key: [] for key in keys}
      for seed in seeds:
        r = rarity_ranking(seed_dir(root, size, variant.name, seed,
                                    len(seeds)))
        for key in keys:
          if r[key].size:
            last[key].append(r[key][-1])
      cells = []
      for name in keys:
        v = np.asarray(last[name], np.float64)
        v = v[np.isfinite(v)]
        cells.append(f"{np.median(v):+.2f} [{v.min():+.2f}, {v.max():+.2f}]"
                     if v.size else "n/a")
      if any(c != "n/a" for c in cells):
        any_row = True
        lines.append(f"| {size} | {variant.label} | " + " | ".join(cells)
                     + " |")
  return lines + [""] if any_row else []


def _bsuite_lines(sizes, variants, seeds, summaries, episodes, reps
                  ) -> List[str]:
  """results.md: bsuite's own summary (`bsuite_solution`, `bsuite_score`)."""
  within = (f"within {episodes:,} episodes" if episodes else
            "within each run's budget")
  lines = [f"### bsuite's summary: the episode where the running fraction "
           f"of episodes that missed the treasure falls below "
           f"{BSUITE_THRESHOLD} ({within}; training lanes, all mixtures; "
           f"median over the seeds that solved it, at the rows' resolution),"
           f" and the deep_sea score (the share of sizes solved before 2^N + "
           f"{BSUITE_FORGIVENESS} episodes; IQM over seeds [95% CI])", "",
           "| variant | " + " | ".join(f"N = {n}" for n in sizes)
           + " | score |", "|---|" + "---|" * (len(sizes) + 1),
           f"| {RANDOM} | " + " | ".join("unsolved" for _ in sizes)
           + " | 0 |"]
  def cell(rows):
    solved = np.array([r["bsuite_episode"] for r in rows])
    ok = np.isfinite(solved)
    return f"{int(ok.sum())}/{len(rows)} solved" + (
        f", episode {np.median(solved[ok]):,.0f}" if ok.any() else "")

  for variant in variants:
    cells = _size_cells(sizes, summaries, variant.name, seeds, cell)
    scores = []
    for seed in seeds:
      solutions = {size: summaries[(size, variant.name, seed)][
          "bsuite_episode"] for size in sizes
                   if (size, variant.name, seed) in summaries}
      if solutions:
        scores.append(bsuite_score(solutions))
    score = _ci(np.asarray(scores), reps) if scores else "(not run)"
    lines.append(f"| {variant.label} | " + " | ".join(cells)
                 + f" | {score} |")
  return lines + [""]


def _cell_map_lines(root, out, size, variants, seeds) -> List[str]:
  lines = [f"### What the agent sees per cell (N = {size}, seed {seeds[0]}, "
           "training lanes between the last two evaluations)", ""]
  for variant in variants:
    found = cell_windows(seed_dir(root, size, variant.name, seeds[0],
                                  len(seeds)), "png")
    if found:
      lines.append(f"{variant.label}: ![{variant.name}]"
                   f"({os.path.relpath(found[-1], out)})")
      lines.append("")
  return lines


def aggregate(root: str, sizes: Sequence[int],
              variants: Sequence[compare.Variant], seeds: Sequence[int],
              env_steps: Union[int, Dict[int, int]], reps: int = 2000,
              results_dir: Optional[str] = None,
              episodes: Optional[int] = None) -> str:
  """Writes results.md and the plots; returns the markdown.

  Reads the runs under `root`; writes to `results_dir` (default `root`), so
  that one set of runs can give several reports (the main variants; the
  diagnosis variants). `env_steps`: per run, or per size (bsuite's
  protocol: `episodes` episodes of each size, `protocol_env_steps`).
  """
  stats.require_rliable()
  out = root if results_dir is None else results_dir
  summaries, curves, missing = _load(root, sizes, variants, seeds, episodes)
  if not summaries:
    raise FileNotFoundError(
        f"deep_sea: no runs under {root!r} for sizes {list(sizes)}, variants "
        f"{[v.name for v in variants]} and seeds {list(seeds)} (no "
        f"size<N>/<variant>/.../metrics.csv); run the study first, or pass "
        f"the --output-root, --sizes, --variants and --seeds it ran with.")
  os.makedirs(out, exist_ok=True)
  budget = (f"{episodes:,} episodes per size (bsuite's protocol)" if episodes
            else f"{steps_for(env_steps, sizes[0]):,} env steps per run"
            if not isinstance(env_steps, dict) else "env steps per size")
  lines = [f"# DeepSea: NGU and its ablations against the random walk "
           f"({budget}, {len(seeds)} seeds)", "",
           "IQM over seeds with 95% stratified bootstrap CIs (rliable "
           f"{stats.rliable_version()}, {reps} reps). Episodes to the first "
           "treasure are read at the metrics rows' resolution (an upper "
           "bound). 'Solved' = the greedy j = 0 evaluation (16 episodes, "
           "epsilon 0.01) reaches the treasure in more than half of them in "
           "at least 2 of the last 3 evaluations.", ""]
  if missing:
    lines += ["Not run (or not finished): " + ", ".join(_group_missing(
        missing, len(seeds))), ""]
  lines += _overview_lines(sizes, variants, seeds, summaries, env_steps, reps)
  lines += _bsuite_lines(sizes, variants, seeds, summaries, episodes, reps)
  solved_by = {}
  for size in sizes:
    lines += _size_table(size, variants, seeds, summaries, env_steps, reps)
    for variant in variants:
      solved = [summaries.get((size, variant.name, s), {}).get("eval_solved")
                for s in seeds]
      if sum(1 for x in solved if x == 1.) * 2 > len(seeds):
        solved_by[variant.name] = size
  lines += ["### Largest N solved (greedy j = 0 solved for most seeds)", "",
            "| variant | largest N solved |", "|---|---|",
            f"| {RANDOM} | none (the greedy policy of a random walk does not "
            "exist; its success rate is 2^-N) |"]
  for variant in variants:
    lines.append(f"| {variant.label} | {solved_by.get(variant.name, 'none')} |")
  lines.append("")
  for png in (_plot_success(out, sizes, variants, seeds, curves, reps=500),
              _plot_first(out, sizes, variants, seeds, summaries,
                          env_steps)):
    if png:
      lines += [f"![{os.path.basename(png)}]({os.path.basename(png)})", ""]
  lines += _greedy_vs_lanes_lines(sizes, variants, seeds, summaries)
  lines += _wallclock_lines(sizes, variants, seeds, summaries)
  lines += _mixture_lines(root, sizes, variants, seeds, reps)
  lines += _ranking_lines(root, sizes, variants, seeds)
  lines += _by_row_lines(root, sizes, variants, seeds)
  lines += _cell_map_lines(root, out, max(sizes), variants, seeds)
  for size in sizes:
    png = _plot_path(root, out, size, variants, seeds)
    if png:
      lines += [f"The optimal path's cells through training, N = {size}: "
                f"![{os.path.basename(png)}]({os.path.basename(png)})", ""]
  times = []
  for size in sizes:
    for variant in variants:
      done = os.path.join(size_dir(root, size), variant.name,
                          compare.DONE_FILE)
      if os.path.exists(done):
        with open(done) as f:
          times.append(json.load(f)["seconds"])
  if times:
    lines += [f"Run time: {sum(times) / 60:.0f} min of processes "
              f"({len(times)} processes of {len(seeds)} seeds each).", ""]
  return compare.write_results(out, "\n".join(lines) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> str:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output-root", default="runs/deep_sea")
  parser.add_argument("--sizes", type=int, nargs="+",
                      default=list(PROTOCOL_SIZES))
  budget = parser.add_mutually_exclusive_group()
  budget.add_argument("--episodes", type=int, default=None,
                      help="episodes per size, all 16 lanes together "
                      f"(bsuite's protocol, the default: {PROTOCOL_EPISODES:,}"
                      "; N + 1 env steps each)")
  budget.add_argument("--env-steps", type=int, default=None,
                      help="env steps per run instead (all 16 lanes together)")
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
  names = [v.name for v in VARIANTS]
  parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                      choices=names)
  parser.add_argument("--jobs", type=int, default=2, help="runs in parallel")
  parser.add_argument("--threads", type=int, default=1,
                      help="CPU threads per run (0: all)")
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE",
                      help="config override for every variant (before the "
                      "variant's own)")
  parser.add_argument("--aggregate-only", action="store_true")
  parser.add_argument("--results-dir", default=None,
                      help="where results.md and the plots go (default: "
                      "--output-root)")
  parser.add_argument("--fresh", action="store_true")
  args = parser.parse_args(argv)
  if any(s < 2 for s in args.sizes):
    parser.error("--sizes: DeepSea sizes must be >= 2.")
  for flag in ("episodes", "env_steps"):
    value = getattr(args, flag)
    if value is not None and value < 1:
      parser.error(f"--{flag.replace('_', '-')}: must be >= 1, got {value}.")
  sizes = sorted(set(args.sizes))
  episodes = None
  if args.env_steps is not None:
    env_steps = args.env_steps
  else:
    episodes = args.episodes or PROTOCOL_EPISODES
    env_steps = protocol_env_steps(sizes, episodes)
  variants = [v for v in VARIANTS if v.name in args.variants]
  if not args.aggregate_only:
    compare.run_jobs(jobs_for(args.output_root, sizes, variants, args.seeds,
                              env_steps, args.set),
                     jobs=args.jobs, threads=args.threads, fresh=args.fresh)
  try:
    text = aggregate(args.output_root, sizes, variants, args.seeds,
                     env_steps, results_dir=args.results_dir,
                     episodes=episodes)
  except FileNotFoundError as e:
    parser.error(str(e))
  print(text)
  print(f"Results: {args.results_dir or args.output_root}/results.md")
  return text


if __name__ == "__main__":
  main()
