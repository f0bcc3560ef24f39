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
* variants (`VARIANTS`), the same N = 8 mixtures and budget everywhere:
  `ngu` (fixed mixtures, one network), `agent57` (`split_values` and
  `meta_controller="ucb"`), `r2d2` (`intrinsic_reward="none"`, beta = 0:
  no intrinsic reward computed, fed to the network or learned from);
* 5 seeds vmapped per run in the compiled loop; IQM with 95% stratified
  bootstrap CIs of the training and evaluation returns
  (`experiments.compare`); with `agent57` the arm shares of the bandits
  (`arm_<j>` columns) over time in each run's curves.png.

Usage:
  python -m experiments.agent57_suite [--output-root runs/agent57_suite]
      [--tasks catch cartpole deep_sea breakout] [--env-steps 50000]
      [--seeds 0 1 2 3 4] [--variants ngu agent57 r2d2] [--aggregate-only]
      [--set FIELD=VALUE]

Writes ROOT/<task>/results.md (tables, curves) per task. Interrupted runs
resume; finished ones are skipped.
"""

import os
import sys
from typing import Dict, List, Optional, Sequence

from experiments import compare

VARIANTS = (
    compare.Variant("ngu", "NGU (fixed mixtures)", []),
    compare.Variant("agent57", "Agent57 (split values + UCB bandits)",
                    ["--set", "split_values=True",
                     "--set", "meta_controller='ucb'"]),
    compare.Variant("r2d2", "R2D2 (no intrinsic reward)",
                    ["--set", "beta=0.0", "--set", "intrinsic_reward='none'",
                     "--set", "use_rnd=False"]),
)
# Laptop scale, the same for every variant (ours): N = 8 mixtures, 16 lanes.
COMMON = ["--loop", "compiled", "--num-lanes", "16",
          "--set", "num_mixtures=8", "--set", "lstm_size=64",
          "--set", "head_hidden=64", "--set", "batch_size=32"]
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


def main(argv: Optional[Sequence[str]] = None) -> str:
  argv = sys.argv[1:] if argv is None else list(argv)
  parser = compare.group_parser("runs/agent57_suite", "--tasks", list(TASKS),
                                VARIANTS, 50_000)
  args, rest = parser.parse_known_args(argv)
  if args.help:
    print(__doc__)
    return ""
  texts = []
  for task in args.tasks:
    root = os.path.join(args.output_root, task)
    texts.append(compare.main(
        compare.group_argv(root, args, rest),
        __doc__.split("\n")[0], VARIANTS, COMMON + TASKS[task], METRICS,
        default_root=root, default_env_steps=args.env_steps,
        title=f"Agent57 suite: {task}, {{env_steps}} env steps per run",
        baseline=("r2d2",)))
  return "\n".join(texts)


if __name__ == "__main__":
  main()
