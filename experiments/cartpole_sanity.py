r"""Sanity check of the whole agent on a task it must learn: gymnax CartPole.

With beta = 0 and N = 1 the NGU agent is R2D2 with transformed Retrace
(App. A, E): this runs actor -> adder -> prioritised replay -> learner on
gymnax's CartPole-v1 (return = steps balanced, at most 500) and prints the
training and evaluation (eps = 0) returns. If the return does not climb
well above a random policy's (~22), something in the pipeline is broken;
it is the check to run after changing the actor, adder, replay or loss.
About 4 minutes on 2 CPU cores.

Usage:
  python -m experiments.cartpole_sanity [--env-steps 40000] [--seed 0]
      [--output-dir runs/cartpole_sanity]
"""

import argparse
import math
from typing import Any, Dict, Optional, Sequence

from ngu_jax import loops
from ngu_jax.agents.ngu.config import NGUConfig

# Small R2D2: MLP torso, LSTM 64, 10-step sequences every 5, Adam 1e-3,
# target update 100, gamma 0.99, replay 5000 sequences from 250.
CONFIG = dict(
    num_mixtures=1, beta=0.0, gamma_max=0.99, gamma_min=0.99, torso="mlp",
    mlp_hidden_sizes=(64,), lstm_size=64, head_hidden=64, trace_length=10,
    replay_period=5, batch_size=32, learning_rate=1e-3,
    target_update_period=100, replay_capacity=5000, min_replay_size=250,
    memory_capacity=600, eval_epsilon=0.0)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--env-steps", type=int, default=40_000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output-dir", default="runs/cartpole_sanity")
  parser.add_argument("--no-progress", action="store_true")
  args = parser.parse_args(argv)
  summary = loops.run_experiment(
      NGUConfig(**CONFIG), "gymnax/CartPole-v1", args.env_steps,
      num_lanes=16, seed=args.seed, output_dir=args.output_dir,
      log_every_env_steps=max(args.env_steps // 10, 1),
      eval_every_env_steps=max(args.env_steps // 5, 1),
      progress=not args.no_progress)
  print("| env steps | learner steps | training return | eval return |")
  print("| ---: | ---: | ---: | ---: |")
  for row in summary["rows"]:
    ev = row["eval_return"]
    print(f"| {row['env_steps']} | {row['learner_steps']} | "
          f"{row['mean_episode_return']:.1f} | "
          f"{'' if math.isnan(ev) else f'{ev:.1f}'} |")
  print(f"curves: {summary['curves_path']}")
  return summary


if __name__ == "__main__":
  main()
