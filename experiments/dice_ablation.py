r"""DiCE's own ablation (004 Sec. 4.3, Table 4) at laptop scale.

DiCE (Directly Control Entropy) makes a policy-based learner explore like
epsilon-greedy does for a value-based one: Boltzmann behaviour policies
softmax(A / tau) whose temperatures each lane's Bandits Vote ensemble
chooses per episode (App. A), a learner that is objective-invariant (no
entropy term in its loss). Table 4 ablates the two properties it can:

* `baseline`: one fixed temperature, tau = 1 (no adaptive trade-off, no
  diversity across lanes -- the policy-based baseline's softmax);
* `random`: tau drawn per episode from the ensemble's initial distribution
  and never learned (Alg. 1 without "update Omega by (tau, G)");
* `dice`: the full method (the `dice` preset);
* `entropy`: DiCE plus an entropy regulariser with coefficient 1 in the
  loss (`dice_entropy_weight=1`: not objective-invariant any more).

Tasks (`TASKS`): gymnax Catch, CartPole and MinAtar Breakout, sized as in
`experiments.agent57_suite`; every variant has the same budget, network and
settings (`COMMON`): 16 lanes, 5 seeds vmapped in one compiled-loop run.
Tables (IQM with 95% stratified bootstrap CIs over seeds, via
`experiments.compare`) of the final training and evaluation returns, the
sample efficiency (the mean greedy evaluation return over all evaluations:
the area under the evaluation curve), the policy's entropy and the
temperature percentiles (the return tables end with chance, a uniform
random policy's mean return: `experiments.chance`); each run's curves.png
draws its tau percentiles over time, bva/values.png its ensembles' pooled
value curves; the tau histogram per variant is `tau_histogram.png` (from
the runs' logged tau_p10 / tau_median / tau_p90).

Usage:
  python -m experiments.dice_ablation [--output-root runs/dice_ablation]
      [--tasks catch cartpole breakout] [--env-steps 30000]
      [--seeds 0 1 2 3 4] [--variants baseline random dice entropy]
      [--aggregate-only] [--set FIELD=VALUE]

Writes ROOT/<task>/results.md (tables, curves) per task. Interrupted runs
resume; finished ones are skipped.
"""

import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from experiments import compare
from ngu_jax import plotting

VARIANTS = (
    compare.Variant("baseline", "fixed tau = 1",
                    ["--set", "temperature_source='fixed'",
                     "--set", "boltzmann_tau=1.0"]),
    compare.Variant("random", "random tau (never learned)",
                    ["--set", "temperature_source='random'"]),
    compare.Variant("dice", "DiCE (Bandits Vote tau)", []),
    compare.Variant("entropy", "DiCE + entropy regulariser (1)",
                    ["--set", "dice_entropy_weight=1.0"]),
)
# Laptop scale, the same for every variant (ours): the dice preset (Table 5)
# with small networks, 16 lanes and the minigrid preset's replay settings.
COMMON = ["--preset", "dice", "--loop", "compiled", "--num-lanes", "16",
          "--set", "lstm_size=64", "--set", "head_hidden=64",
          "--set", "batch_size=32", "--set", "learning_rate=5e-4",
          "--set", "target_update_period=250",
          "--set", "replay_capacity=10000", "--set", "min_replay_size=500"]
TASKS: Dict[str, List[str]] = {
    "catch": ["--env", "gymnax/Catch-bsuite",
              "--set", "torso='mlp'", "--set", "mlp_hidden_sizes=(64, 64)",
              "--set", "trace_length=10", "--set", "replay_period=5"],
    "cartpole": ["--env", "gymnax/CartPole-v1",
                 "--set", "torso='mlp'", "--set", "mlp_hidden_sizes=(64,)",
                 "--set", "trace_length=20", "--set", "replay_period=10"],
    "breakout": ["--env", "gymnax/Breakout-MinAtar",
                 "--set", "torso='grid'", "--set", "grid_filters=(8, 16)",
                 "--set", "grid_output_size=64",
                 "--set", "trace_length=20", "--set", "replay_period=10"],
}
METRICS = {"mean_episode_return": "training return",
           "eval_return": "evaluation return (greedy)",
           "policy_entropy": "behaviour policy entropy (nats)",
           "tau_median": "median tau over lanes"}
TAU_COLUMNS = ("tau_p10", "tau_median", "tau_p90")


def tau_histogram(root: str, variants: Sequence[compare.Variant],
                  seeds: Sequence[int], bins: int = 30) -> Optional[str]:
  """Histograms of the lanes' logged temperatures, per variant, early and
  late in training; writes ROOT/tau_histogram.png and returns its path
  (None when no run has tau columns or matplotlib is missing).

  The runs log three lane percentiles per row (p10, median, p90), not every
  lane's tau; the histogram pools them over rows and seeds, in the first
  and the last third of the budget, on a log axis.
  """
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  pooled = {}
  for variant in variants:
    early, late = [], []
    for seed in seeds:
      run, _ = compare.locate_run(root, variant.name, seed)
      path = os.path.join(run, "metrics.csv")
      if plotting.find_metrics(path) is None:  # Nor metrics.csv.gz.
        continue
      data = compare.read_metrics(path)
      if "env_steps" not in data or not all(c in data for c in TAU_COLUMNS):
        continue
      steps = data["env_steps"]
      if not len(steps):
        continue
      taus = np.stack([data[c] for c in TAU_COLUMNS], axis=-1)
      ok = np.all(np.isfinite(taus) & (taus > 0), axis=-1)
      third = steps.max() / 3.
      early.append(taus[ok & (steps <= third)].ravel())
      late.append(taus[ok & (steps > 2 * third)].ravel())
    early = np.concatenate(early or [np.zeros(0)])
    late = np.concatenate(late or [np.zeros(0)])
    if early.size or late.size:
      pooled[variant.label] = (early, late)
  if not pooled:
    return None
  everything = np.concatenate([v for pair in pooled.values() for v in pair])
  edges = np.geomspace(max(everything.min(), 1e-3) * 0.9,
                       everything.max() * 1.1 + 1e-6, bins + 1)
  fig, axes = plt.subplots(1, len(pooled), figsize=(3.2 * len(pooled), 2.8),
                           squeeze=False, sharey=False)
  for ax, (title, (early, late)) in zip(axes[0], pooled.items()):
    for values, label, alpha in ((early, "first third", 0.5),
                                 (late, "last third", 0.8)):
      if values.size:
        ax.hist(values, bins=edges, alpha=alpha, label=label)
    ax.set_xscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("tau (lane p10 / median / p90)")
    ax.legend(fontsize=7)
  axes[0][0].set_ylabel("rows x seeds")
  fig.tight_layout()
  out = os.path.join(root, "tau_histogram.png")
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


def _comparison(task: str) -> compare.GroupComparison:
  """The task's comparison (`compare.group_main`)."""
  return compare.GroupComparison(
      COMMON + TASKS[task],
      f"DiCE ablation (Table 4): {task}, {{env_steps}} env steps per run",
      baseline=("baseline",), chance=True)


def _efficiency_and_temperatures(task: str, root: str, args) -> str:
  """Appends the sample-efficiency table and the tau histogram to the
  task's results.md; returns the text they add to the task's."""
  chosen = [v for v in VARIANTS if v.name in args.variants]
  text = ""
  # Sample efficiency: the mean greedy return over every evaluation (the
  # area under the evaluation curve), beside the final one.
  auc = compare.summary_table(
      root, chosen, args.seeds, "eval_return",
      "evaluation return (greedy), mean over all evaluations (area under "
      "the curve)", final_fraction=1.0,
      baseline="baseline" if "baseline" in args.variants else None,
      chance_flags=COMMON + TASKS[task])
  if auc:
    text += compare.write_results(root, "\n" + auc + "\n", mode="a")
  histogram = tau_histogram(root, chosen, args.seeds)
  if histogram:
    text += (f"\n\nTemperatures: ![tau histogram]"
             f"({os.path.basename(histogram)})\n")
    compare.write_results(
        root, f"\n## Temperatures\n\nLane tau percentiles (p10, median, "
        f"p90 of each logged row) pooled over rows and seeds, first and last "
        f"third of the budget:\n\n"
        f"![tau histogram]({os.path.basename(histogram)})\n", mode="a")
  return text


def main(argv: Optional[Sequence[str]] = None) -> str:
  parsed = compare.group_main(argv, __doc__, "--tasks", list(TASKS),
                              VARIANTS, METRICS, "runs/dice_ablation", 30_000,
                              _comparison, after=_efficiency_and_temperatures)
  return "" if parsed is None else "\n".join(parsed[1])


if __name__ == "__main__":
  main()
