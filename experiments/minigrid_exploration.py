r"""MiniGrid hard exploration: NGU (N = 8) vs beta = 0 vs RND only, 5 seeds.

The earlier, smaller comparison (300,000 env steps; docs/results/minigrid).
The study at the peers' budgets, with RECODE and PPO, is
`experiments.minigrid`.

Three agents, same budget, same learner (the `minigrid` preset):

* `ngu`: NGU with N = 8 mixtures, beta = 0.3 (Table 6);
* `beta0`: the same agent with beta = 0 -- every mixture then optimises the
  extrinsic reward only, so this is R2D2 with transformed Retrace and
  epsilon_l-greedy exploration (the intrinsic reward is still computed, so
  both cost the same per step);
* `rnd`: the RND-only intrinsic reward (`intrinsic_reward="rnd"`, no
  episodic memory), N = 8 and beta = 0.3 as NGU.

DoorKey-8x8's only reward is 1 - 0.9 t / T on reaching the goal (after
picking up the key and opening the door), so the metric is the success
rate of the training episodes (fraction with a positive return), plus the
mean return and the evaluation return of the exploitative mixture j = 0
(eps = 0.01) and of the most exploratory one j = N - 1; chance, a uniform
random policy's success rate and return on the same task, ends those
tables (`experiments.chance`).

Laptop scale (ours, in each run's config.json): 16 lanes, batch 32, LSTM
and dueling head 128, the compiled loop (`--loop compiled`: xland-minigrid's
JAX port of MiniGrid, `ngu_jax.envs.xminigrid_env`). Runs go one per process
(`experiments.compare`; interrupted runs resume from their checkpoints).
Other tasks: `--env minigrid/MiniGrid-DoorKey-16x16-v0`,
`--env minigrid/MiniGrid-FourRooms-v0`.

Usage:
  python -m experiments.minigrid_exploration [--output-root runs/minigrid]
      [--env-steps 300000] [--seeds 0 1 2 3 4] [--jobs 1] [--threads 0]
      [--env minigrid/MiniGrid-DoorKey-8x8-v0] [--aggregate-only] [--fresh] [--show-progress]
"""

from typing import Optional, Sequence

from experiments import compare

VARIANTS = (
    compare.Variant("ngu", "NGU (N=8, beta=0.3)", ["--set", "beta=0.3"]),
    compare.Variant("beta0", "beta=0 (R2D2, eps-greedy)",
                    ["--set", "beta=0.0"]),
    compare.Variant("rnd", "RND only (N=8, beta=0.3)",
                    ["--set", "beta=0.3", "--set", "intrinsic_reward='rnd'",
                     "--set", "learn_embedding=False"]),
)
LAPTOP = ["--preset", "minigrid", "--loop", "compiled", "--num-lanes", "16",
          "--set", "batch_size=32", "--set", "lstm_size=128",
          "--set", "head_hidden=128"]
METRICS = {"episode_success_rate": "success rate (training episodes)",
           "mean_episode_return": "episode return (training episodes)",
           "eval_return": "evaluation return, j = 0",
           "eval_explore_return": "evaluation return, j = N - 1",
           "alpha_above_one": "fraction of steps with alpha > 1",
           "mean_intrinsic_reward": "beta_j r^i fed to the loss",
           "action_prediction_accuracy": "inverse-dynamics accuracy"}


def main(argv: Optional[Sequence[str]] = None) -> str:
  return compare.main(argv, __doc__.split("\n")[0], VARIANTS, LAPTOP, METRICS,
                      default_root="runs/minigrid", default_env_steps=300_000,
                      title="{env}, {env_steps} env steps per run",
                      default_env="minigrid/MiniGrid-DoorKey-8x8-v0",
                      baseline=("beta0",), chance=True)


if __name__ == "__main__":
  main()
