r"""Disco Maze coverage (NGU Sec. 4.1, Fig. 2) at laptop scale, 3 seeds.

Three agents, same budget, same NGU(N=1) learner (Table 7 preset):

* `ngu`: the NGU intrinsic reward with the embedding f learned by inverse
  dynamics (the proposed model);
* `random_projection`: the same with f fixed at its random initialisation
  (`learn_embedding=False`), Fig. 2's "random projections";
* `rnd`: the RND-only intrinsic reward (`intrinsic_reward="rnd"`), Fig. 2's
  RND baseline.

Metric: the mean coverage of the training episodes (fraction of the
maze's free cells visited in an episode, `envs.disco_maze.coverage`), and
the evaluation coverage (ε = 0, Table 7) at a few points.

Laptop scale (our choices, all printed in each run's config.json): an 11x11
maze (5x5 cells) instead of 21x21, 16 lanes, batch 32, LSTM / dueling head
/ torso dense 128 instead of 512 / 512 / 256, and sequences of 10 steps
every 5 instead of 50 every 50: until the agent learns to avoid walls its
episodes last about 3 steps, so 50-step sequences were 94% padding and the
learner spent its time on it (a first try with them and 16 sampled
sequences per insert left the coverage flat at 4.5% after 550 updates);
every other setting is Table 7
(see `ngu_jax.agents.ngu.config.disco_maze`). Runs go one per process
(`experiments.compare`); interrupted comparisons continue where they were.

Usage:
  python -m experiments.disco_maze_coverage [--output-root runs/disco_maze]
      [--env-steps 50000] [--seeds 0 1 2] [--jobs 1] [--threads 0]
      [--variants ngu rnd] [--aggregate-only] [--fresh] [--show-progress]
"""

from typing import Optional, Sequence

from experiments import compare

VARIANTS = (
    compare.Variant("ngu", "NGU (learned f)", ["--set", "learn_embedding=True"]),
    compare.Variant("random_projection", "NGU, random-projection f",
                    ["--set", "learn_embedding=False"]),
    compare.Variant("rnd", "RND only",
                    ["--set", "intrinsic_reward='rnd'",
                     "--set", "learn_embedding=False"]),
    compare.Variant("beta0", "beta = 0 (no intrinsic reward)",
                    ["--set", "beta=0.0"]),
)
LAPTOP = ["--preset", "disco_maze", "--env-kwarg", "size=11",
          "--loop", "compiled", "--num-lanes", "16",
          "--set", "batch_size=16", "--set", "grid_filters=(8, 16)",
          "--set", "lstm_size=64", "--set", "head_hidden=64",
          "--set", "grid_output_size=64", "--set", "trace_length=10",
          "--set", "replay_period=5",
          # Lifetime running statistics (d_m^2 of Alg. 1, RND mu_e / sigma_e):
          # see the module docstring.
          "--set", "episodic_distance_horizon=0", "--set", "rnd_error_horizon=0"]
METRICS = {"mean_episode_coverage": "training-episode coverage",
           "eval_coverage": "evaluation coverage (eps = 0)",
           "env_steps_per_episode": "env steps per training episode",
           "alpha_above_one": "fraction of steps with alpha > 1",
           "mean_intrinsic_reward": "beta r^i fed to the loss",
           "action_prediction_accuracy": "inverse-dynamics accuracy"}


def main(argv: Optional[Sequence[str]] = None) -> str:
  return compare.main(argv, __doc__.split("\n")[0], VARIANTS, LAPTOP, METRICS,
                      default_root="runs/disco_maze", default_env_steps=50_000,
                      title="Disco Maze coverage, {env_steps} env steps per run",
                      baseline="random_projection")


if __name__ == "__main__":
  main()
