r"""Agent57 against NGU and R2D2 on a small suite of dense and sparse tasks.

Agent57 (Badia et al., 2020) claims its two changes to NGU -- split
extrinsic / intrinsic values (Sec. 3.1) and a per-actor sliding-window UCB
bandit over the N mixtures (Sec. 3.2) -- make it at least as good as the
better of NGU (every lane plays its fixed mixture l mod N) and R2D2 (no
intrinsic reward) on every task: the bandits move to the exploitative arms
where the extrinsic reward is dense and to the exploratory ones where it is
sparse. This script tests that at laptop scale:

* tasks (`TASKS`): gymnax Catch (dense, short), CartPole (dense, long),
  DeepSea 10 (sparse, deep exploration), MinAtar Breakout (dense, pixels);
* variants (`VARIANTS`), the same N = 8 mixtures, replay ratio and budget
  everywhere:
  `ngu` (fixed mixtures, one network), `agent57` (`split_values` and
  `meta_controller="ucb"`), `r2d2` (`intrinsic_reward="none"`, beta = 0:
  no intrinsic reward computed, fed to the network or learned from);
* 5 seeds vmapped per run in the compiled loop; IQM with 95% stratified
  bootstrap CIs of the training and evaluation returns
  (`experiments.compare`); with `agent57` the arm shares of the bandits
  (`arm_<j>` columns) over time in each run's curves.png, and per task
  `arm_choices.png` (Agent57 Fig. 8 style: the share of each arm j in the
  bandits' windows against env steps, mean over seeds; j = 0 exploits,
  j = N - 1 explores most) with the mean arm index over time.

Usage:
  python -m experiments.agent57_suite [--output-root runs/agent57_suite]
      [--tasks catch cartpole deep_sea breakout] [--env-steps 60000]
      [--seeds 0 1 2 3 4] [--variants ngu agent57 r2d2] [--aggregate-only]
      [--set FIELD=VALUE]

Writes ROOT/<task>/results.md (tables, curves) per task and ROOT/results.md,
the whole suite in one table (`suite_summary`: each variant's greedy return,
P(Agent57 > the better of NGU and R2D2) and the verdict on the claim, the
bandits' final mean arm). Interrupted runs resume; finished ones are
skipped.
"""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from experiments import chance as chance_lib
from experiments import compare
from ngu_jax import plotting

VARIANTS = (
    compare.Variant("ngu", "NGU (fixed mixtures)", []),
    compare.Variant("agent57", "Agent57 (split values + UCB bandits)",
                    ["--set", "split_values=True",
                     "--set", "meta_controller='ucb'"]),
    compare.Variant("r2d2", "R2D2 (no intrinsic reward)",
                    ["--set", "beta=0.0", "--set", "intrinsic_reward='none'",
                     "--set", "use_rnd=False"]),
)
# Laptop scale, the same for every variant (ours): N = 8 mixtures, 16 lanes,
# 16 sampled sequences per inserted one (the DeepSea preset's replay ratio;
# the pacing rule gives env steps x samples_per_insert / (replay_period x
# batch_size) learner updates, so at the minigrid preset's 4 a 30k-step run
# with replay period 5 and batch 32 gets at most 750, a quarter of these).
COMMON = ["--loop", "compiled", "--num-lanes", "16",
          "--set", "num_mixtures=8", "--set", "lstm_size=64",
          "--set", "head_hidden=64", "--set", "batch_size=32",
          "--set", "samples_per_insert=16.0"]
# Per task: preset, environment and the sizes its episodes need.
TASKS: Dict[str, List[str]] = {
    "catch": ["--preset", "minigrid", "--env", "gymnax/Catch-bsuite",
              "--set", "torso='mlp'", "--set", "mlp_hidden_sizes=(64, 64)",
              "--set", "trace_length=10", "--set", "replay_period=5",
              "--set", "memory_capacity=64"],
    "cartpole": ["--preset", "minigrid", "--env", "gymnax/CartPole-v1",
                 "--set", "torso='mlp'", "--set", "mlp_hidden_sizes=(64,)",
                 "--set", "trace_length=20", "--set", "replay_period=10",
                 "--set", "memory_capacity=600"],
    "deep_sea": ["--preset", "deep_sea", "--set", "size=10",
                 "--env", "gymnax/DeepSea-bsuite", "--env-kwarg", "size=10"],
    "breakout": ["--preset", "minigrid", "--env", "gymnax/Breakout-MinAtar",
                 "--set", "grid_filters=(8, 16)",
                 "--set", "grid_output_size=64",
                 "--set", "trace_length=20", "--set", "replay_period=10",
                 "--set", "memory_capacity=2000"],
}
METRICS = {"mean_episode_return": "training return",
           "eval_return": "evaluation return (j = 0)",
           "mean_intrinsic_reward": "beta r^i fed to the loss"}


def arm_shares(root: str, seeds: Sequence[int], variant: str = "agent57"
               ) -> Optional[Dict[str, np.ndarray]]:
  """The bandits' arm shares of `variant`'s runs, mean over seeds.

  Returns {"env_steps": [R], "shares": [R, N] (rows with no window yet are
  NaN), "seeds": [S] the seeds found}, on the env-step grid of the first
  seed's rows (rows are aligned by index: every seed of a vmapped run logs
  the same steps); None when no run has `arm_<j>` columns.
  """
  per_seed, steps, found = [], None, []
  for seed in seeds:
    run, _ = compare.locate_run(root, variant, seed)
    path = os.path.join(run, "metrics.csv")
    if plotting.find_metrics(path) is None:  # Nor metrics.csv.gz.
      continue
    data = compare.read_metrics(path)
    arms = sorted((int(k[4:]), k) for k in data
                  if k.startswith("arm_") and k[4:].isdigit())
    if not arms or "env_steps" not in data:
      continue
    per_seed.append(np.stack([data[k] for _, k in arms], axis=-1))
    found.append(seed)
    if steps is None or len(data["env_steps"]) < len(steps):
      steps = data["env_steps"]                # a run cut short: its rows
  if not per_seed:
    return None
  if len({x.shape[1] for x in per_seed}) > 1:
    raise ValueError(f"{root}: the runs of {variant} have different numbers "
                     f"of arms: {[x.shape[1] for x in per_seed]}.")
  per_seed = [x[:len(steps)] for x in per_seed]
  with np.errstate(invalid="ignore"):
    stacked = np.stack(per_seed)                       # [S, R, N]
    count = np.isfinite(stacked).all(-1).sum(0)        # seeds with a window
    mean = np.where(count[:, None] > 0,
                    np.nansum(stacked, axis=0) / np.maximum(count, 1)[:, None],
                    np.nan)
  return {"env_steps": steps, "shares": mean, "seeds": np.asarray(found)}


def final_arm_shares(root: str, seeds: Sequence[int]
                     ) -> Optional[np.ndarray]:
  """The agent57 runs' arm shares [N] over the last 20% of the rows that
  have a window (mean over seeds); None without any."""
  got = arm_shares(root, seeds)
  if got is None:
    return None
  rows = got["shares"][np.isfinite(got["shares"]).all(-1)]
  return rows[-max(len(rows) // 5, 1):].mean(0) if len(rows) else None


def arm_choice_plot(root: str, seeds: Sequence[int], title: str = ""
                    ) -> Optional[str]:
  """ROOT/arm_choices.png: Agent57 Fig. 8 style, the share of each arm in
  the bandits' windows against env steps (mean over seeds), and the mean
  arm index; returns its path, or None without runs or matplotlib."""
  got = arm_shares(root, seeds)
  if got is None:
    return None
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  steps, shares = got["env_steps"], got["shares"]
  n = shares.shape[1]
  fig, (top, bottom) = plt.subplots(
      2, 1, figsize=(6.4, 4.6), sharex=True,
      gridspec_kw={"height_ratios": [2, 1]})
  image = top.imshow(np.nan_to_num(shares.T, nan=0.), aspect="auto",
                     origin="lower", interpolation="nearest",
                     extent=(steps[0], steps[-1], -0.5, n - 0.5),
                     vmin=0., vmax=1., cmap="viridis")
  top.set_ylabel("arm j (0 = exploit)")
  top.set_title(title or "Agent57 bandits: arm shares (mean over seeds)",
                fontsize=9)
  fig.colorbar(image, ax=top, label="share of window")
  mean_arm = np.nansum(shares * np.arange(n), axis=1)
  mean_arm[~np.isfinite(shares).all(-1)] = np.nan
  bottom.plot(steps, mean_arm)
  bottom.axhline((n - 1) / 2., color="grey", lw=0.8, ls="--",
                 label="uniform over arms")
  bottom.set_ylim(-0.2, n - 0.8)
  bottom.set_ylabel("mean arm")
  bottom.set_xlabel("env steps")
  bottom.legend(fontsize=7)
  fig.tight_layout()
  out = os.path.join(root, "arm_choices.png")
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


def _env_of(task: str) -> Tuple[str, Dict[str, Any]]:
  """(environment name, its kwargs) of a task in `TASKS`."""
  return chance_lib.env_of(TASKS[task])


def chance_return(task: str, episodes: int = 1024, seed: int = 0) -> float:
  """Chance: a uniform random policy's mean undiscounted episode return on
  the task's environment, over `episodes` whole episodes (each lane one
  episode, cut at the environment's time limit; its own reset and step:
  `experiments.chance.random_policy`)."""
  name, kwargs = _env_of(task)
  return chance_lib.random_policy(name, episodes, seed, **kwargs)["return"]


def claim_verdict(probability: float, low: float, high: float) -> str:
  """Agent57's claim on one task, from P(Agent57 > the better of NGU and
  R2D2) with its 95% CI: "worse" when the CI lies below 1/2, "better" when
  above, "no difference resolved" otherwise (too few runs: "n/a")."""
  if not np.isfinite(probability):
    return "n/a"
  if high < 0.5:
    return "worse"
  if low > 0.5:
    return "better"
  return "no difference resolved"


def suite_summary(output_root: str, seeds: Sequence[int],
                  tasks: Sequence[str] = tuple(TASKS), reps: int = 2000,
                  chance: bool = True) -> str:
  """ROOT/results.md: the suite in one table, a row per task with runs.

  Per variant the greedy (j = 0) evaluation return's IQM [95% CI], final
  20% of the budget and the mean over every evaluation (area under the
  curve); P(Agent57 > the better of NGU and R2D2 by IQM) with its CI and
  the verdict on Agent57's claim (`claim_verdict`); the bandits' final mean
  arm (j = 0 exploits; (N - 1) / 2 is uniform). Returns the markdown ("" when
  no task has runs).
  """
  stats_lib = compare.stats
  stats_lib.require_rliable()
  names = [v.name for v in VARIANTS]
  labels = {v.name: v.label.split(" (")[0] for v in VARIANTS}
  head = (["task"] + (["random policy"] if chance else [])
          + [f"{labels[n]} final" for n in names]
          + [f"{labels[n]} AUC" for n in names]
          + ["better of NGU / R2D2", "P(Agent57 > it), final",
             "verdict", "P(Agent57 > it), AUC", "verdict (AUC)",
             "final mean arm", "runs finished"])
  lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
  steps_seen = set()
  for task in tasks:
    root = os.path.join(output_root, task)
    data, _, unfinished = compare.load_runs(root, VARIANTS, seeds)
    finals = {n: compare.final_values(data, n, seeds, "eval_return", 0.2)
              for n in names}
    if all(not np.isfinite(f).any() for f in finals.values()):
      continue
    aucs = {n: compare.final_values(data, n, seeds, "eval_return", 1.0)
            for n in names}
    iqm = {n: stats_lib.iqm_ci(finals[n], reps=reps) for n in names}
    cells = [task] + ([f"{chance_return(task):.3f}"] if chance else [])
    cells += [compare.format_ci(*iqm[n]) for n in names]
    cells += [compare.format_ci(*stats_lib.iqm_ci(aucs[n], reps=reps))
              for n in names]
    others = [n for n in ("ngu", "r2d2") if np.isfinite(iqm[n][0])]
    if others and np.isfinite(iqm["agent57"][0]):
      best = max(others, key=lambda n: iqm[n][0])
      cells.append(labels[best])
      for table in (finals, aucs):
        p = stats_lib.probability_of_improvement(table["agent57"], table[best],
                                                 reps=reps)
        cells += [compare.format_ci(*p), claim_verdict(*p)]
    else:
      cells += ["n/a"] * 5
    final = final_arm_shares(root, seeds)
    cells.append("n/a" if final is None else
                 f"{float(final @ np.arange(len(final))):.2f} "
                 f"(uniform {(len(final) - 1) / 2:.1f})")
    cells.append(f"{len(data) - len(unfinished)}/{len(names) * len(seeds)}")
    lines.append("| " + " | ".join(cells) + " |")
    steps_seen.update(int(columns["env_steps"][-1])
                      for columns in data.values())
  if len(lines) == 2:
    return ""
  budget = ", ".join(map(str, sorted(steps_seen))) or "n/a"
  text = "\n".join([
      "# Agent57 suite: every task", "",
      "Greedy evaluation return (j = 0; `eval_return`) per variant: IQM "
      "[95% stratified bootstrap CI] over seeds " + ", ".join(map(str, seeds))
      + " of the final 20% of the budget, and of the mean over every "
      "evaluation (AUC: area under the evaluation curve). Agent57's claim "
      "(Sec. 4) is that on each task it does at least as well as the better "
      "of NGU and R2D2: P(Agent57 > the better, by final IQM) is the "
      "probability of improvement (Agarwal et al. 2021) with its CI; "
      "verdict: worse / better when the CI excludes 1/2. Random policy: a "
      "uniform random policy's mean episode return (1,024 episodes; chance). "
      "Final mean arm: "
      "the bandits' mean arm index j over the last 20% of the rows (j = 0 "
      "exploits). Runs finished: (variant, seed) pairs with done.json; the "
      "last logged env steps of the runs: " + budget + ".", "",
      *lines, "",
      "Per task: " + ", ".join(
          f"[{t}]({t}/results.md)" for t in tasks
          if os.path.isfile(os.path.join(output_root, t, "results.md")))
      + ".", ""])
  return compare.write_results(output_root, text)


def _comparison(task: str) -> compare.GroupComparison:
  """The task's comparison (`compare.group_main`)."""
  return compare.GroupComparison(
      COMMON + TASKS[task],
      f"Agent57 suite: {task}, {{env_steps}} env steps per run",
      baseline=("r2d2",))


def _arm_section(task: str, root: str, args) -> str:
  """Appends the arm choices (`arm_choice_plot`, the final shares) to the
  task's results.md and returns them ("" without agent57 runs)."""
  if "agent57" not in args.variants:
    return ""
  plot = arm_choice_plot(root, args.seeds,
                         f"Agent57 bandits on {task}: arm shares")
  if not plot:
    return ""
  final = final_arm_shares(root, args.seeds)
  line = "" if final is None else (
      "Final arm shares (last 20% of the rows with a window, mean "
      "over seeds " + ", ".join(
          map(str, arm_shares(root, args.seeds)["seeds"])) + "): "
      + ", ".join(f"j={j}: {v:.2f}" for j, v in enumerate(final))
      + ".\n\n")
  return compare.write_results(
      root, f"\n## Arm choices\n\n{line}![arm choices]"
      f"({os.path.basename(plot)})\n", mode="a")


def main(argv: Optional[Sequence[str]] = None) -> str:
  parsed = compare.group_main(argv, __doc__, "--tasks", list(TASKS),
                              VARIANTS, METRICS, "runs/agent57_suite", 60_000,
                              _comparison, after=_arm_section)
  if parsed is None:
    return ""
  args, texts = parsed
  summary = suite_summary(args.output_root, args.seeds)
  if summary:
    texts.append(summary)
  return "\n".join(texts)


if __name__ == "__main__":
  main()
