r"""Disco Maze coverage (NGU Sec. 4.1, Fig. 2) at laptop scale, 5 seeds.

Six agents, same budget, same NGU(N=1) learner (Table 7 preset):

* `ngu`: the NGU intrinsic reward with the embedding f learned by inverse
  dynamics (the proposed model);
* `random_projection`: the same with f fixed at its random initialisation
  (`learn_embedding=False`), Fig. 2's "random projections";
* `rnd`: the RND-only intrinsic reward (`intrinsic_reward="rnd"`), Fig. 2's
  RND baseline;
* `beta0`: beta = 0, no intrinsic reward in the loss (the maze pays no
  extrinsic reward, so this is epsilon-greedy on a Q-function of zeros: the
  floor);
* `ngu_lifetime_dm2`, `random_projection_lifetime_dm2`: the two NGU
  variants with d_m^2 of Alg. 1 line 6 a lifetime average
  (`episodic_distance_horizon=0`: the mean of every k-NN distance of the
  lane) instead of the library's moving average over the lane's last 1,000
  distances (`NGUConfig.episodic_distance_horizon`, 1000).

Metric: the mean coverage of the training episodes (fraction of the
maze's free cells visited in an episode, `envs.disco_maze.coverage`), and
the evaluation coverage (eps = 0, Table 7) at five points. Statistics: IQM
over seeds with 95% stratified bootstrap CIs (`experiments.stats`, rliable)
and P(variant > random projection); chance, a uniform random policy's
coverage and episode length on the same maze, ends each table
(`experiments.chance`).

Laptop scale (our choices, the same for every variant, all in each run's
config.json): an 11x11 maze (49 free cells) instead of 21x21; the compiled
loop (`--loop compiled`) with 16 lanes; batch 16; LSTM / dueling head /
torso dense 64 instead of 512 / 512 / 256 and conv filters (8, 16) instead
of Table 7's (16, 32) (`grid_filters`; about 4x fewer learner FLOPs); and
sequences of 10 steps every 5 instead of 50 every 50 (until the agent
learns to avoid walls its episodes last about 3 steps, so 50-step sequences
were 94% padding). Every other setting is Table 7
(`ngu_jax.agents.ngu.config.disco_maze`).

The d_m^2 question: a moving average follows the agent's current
behaviour, so an oscillating agent normalises its k-NN distances by their
own mean (`experiments.probes.controllable_state` measured the reward
separating exploring from oscillating 1.33x with the moving average against
1.8x with the lifetime one); the lifetime average lags the growing distance
scale while f trains. The comparison at 400,000 env steps settles it for
this task in favour of the moving average (README, Results), the library
default. `beta0` keeps the lifetime average it ran with (d_m^2 reaches a
beta = 0 agent only as the network's r^i input; RND only never uses it).

Runs go one per process (`experiments.compare`, `--jobs 2 --threads 1` on 2
cores); an interrupted comparison continues where it was (finished runs are
skipped, the others resume from their checkpoints).

Usage:
  python -m experiments.disco_maze_coverage [--output-root runs/disco_maze]
      [--env-steps 400000] [--seeds 0 1 2 3 4] [--jobs 2] [--threads 1]
      [--variants ngu rnd] [--set FIELD=VALUE] [--aggregate-only] [--fresh]
      [--show-progress]
"""

from typing import Optional, Sequence

from experiments import compare

LIFETIME_DM2 = ["--set", "episodic_distance_horizon=0"]
VARIANTS = (
    compare.NGU_LEARNED_F, compare.NGU_RANDOM_F, compare.RND_ONLY,
    compare.Variant("beta0", "beta = 0 (no intrinsic reward)",
                    ["--set", "beta=0.0", *LIFETIME_DM2]),
    compare.Variant("ngu_lifetime_dm2", "NGU (learned f), lifetime d_m^2",
                    ["--set", "learn_embedding=True", *LIFETIME_DM2]),
    compare.Variant("random_projection_lifetime_dm2",
                    "NGU, random-projection f, lifetime d_m^2",
                    ["--set", "learn_embedding=False", *LIFETIME_DM2]),
)
# The laptop scale's loop, lanes, batch and networks (module docstring),
# shared with `experiments.noisy_tv`.
SMALL = ["--loop", "compiled", "--num-lanes", "16",
         "--set", "batch_size=16", "--set", "grid_filters=(8, 16)",
         "--set", "lstm_size=64", "--set", "head_hidden=64",
         "--set", "grid_output_size=64"]
LAPTOP = ["--preset", "disco_maze", "--env-kwarg", "size=11", *SMALL,
          "--set", "trace_length=10", "--set", "replay_period=5"]
METRICS = {"mean_episode_coverage": "training-episode coverage",
           "eval_coverage": "evaluation coverage (eps = 0)",
           "env_steps_per_episode": "env steps per training episode",
           "alpha_above_one": "fraction of steps with alpha > 1",
           "mean_intrinsic_reward": "beta r^i fed to the loss",
           "action_prediction_accuracy": "inverse-dynamics accuracy"}


def main(argv: Optional[Sequence[str]] = None) -> str:
  return compare.main(argv, __doc__.split("\n")[0], VARIANTS, LAPTOP, METRICS,
                      default_root="runs/disco_maze", default_env_steps=400_000,
                      title="Disco Maze coverage, {env_steps} env steps per run",
                      baseline=("random_projection", "beta0"), chance=True)


if __name__ == "__main__":
  main()
