r"""Noisy-TV grid worlds: who explores, who watches the noise (5 seeds).

NGU's central claim (Sec. 2, 4.1): an embedding f trained by inverse
dynamics keeps what the agent controls and drops what it does not, so the
episodic novelty is not fooled by noise, where a random projection of the
frame and RND are. RECODE's (003 Sec. 5.2): its never-reset clustering
memory keeps the life-long signal that NGU's RND modulator loses when every
frame carries noise. One fixed maze (`ngu_jax.envs.noisy_grid`: 15x15, the
same maze every episode, wall bumps stay in place, 60-step episodes, no
extrinsic reward) under four noise conditions:

  none    walls one fixed colour;
  disco   every wall's colour resampled every step (NGU Sec. 4.1);
  tv      a fifth action keeps the agent in place and fills the frame's
          bottom row with random colours for that step;
  frame   a uniform-noise frame concatenated to every frame (RECODE's noisy
          Montezuma at grid scale).

Five agents, the same budget, the same NGU(N=1) learner (Table 7 preset at
laptop size, `LAPTOP`):

* `ngu`: episodic x RND (eq. 1) with f learned by inverse dynamics;
* `random_projection`: the same with f fixed at its initialisation
  (`learn_embedding=False`, NGU Fig. 2's ablation);
* `rnd`: the RND-only reward (`intrinsic_reward="rnd"`, Fig. 2's baseline);
* `recode`: RECODE's reward (`intrinsic_reward="recode"`) on the learned f;
* `beta0`: no intrinsic reward (epsilon-greedy on a Q of zeros: the floor).

Metrics: the coverage of the training episodes (fraction of free cells
visited in an episode), the per-episode frontier (largest maze distance
from the start reached, `mean_episode_frontier`; the maze's farthest cell is
its `max_distance`), TV actions per episode (`mean_episode_tv_steps`, tv
only), the evaluation coverage (eps = 0), and the lifetime coverage: the
fraction of free cells the training lanes ever visited (from the visit
heatmaps). IQM over seeds with 95% stratified bootstrap CIs
(`experiments.compare`, rliable). Beside them, chance: a uniform random
walk's values on the same maze (`random_walk`, as many episodes as one
seed's lanes play), which a learning explorer should beat.

The seeds of a variant run vmapped in one compiled program (`--vmap-seeds`
of `experiments.compare`, on by default here): one compile per variant and
noise, and the 2 cores shared by the seeds' matrix work. Interrupted runs
resume (`--resume` from their checkpoints); finished ones are skipped.

Usage:
  python -m experiments.noisy_tv [--output-root runs/noisy_tv]
      [--noises none disco tv frame] [--env-steps 100000]
      [--seeds 0 1 2 3 4] [--variants ngu recode ...] [--jobs 1]
      [--threads 0] [--aggregate-only] [--fresh] [--set FIELD=VALUE]

Writes ROOT/<noise>/results.md (per-noise tables, curves, heatmaps) and
ROOT/results.md (final values, variant x noise, with CIs).
"""

import glob
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

from experiments import compare
from experiments import disco_maze_coverage
from experiments import stats
from ngu_jax import plotting
from ngu_jax.envs import noisy_grid

NOISES = noisy_grid.NOISES
VARIANTS = (
    compare.NGU_LEARNED_F, compare.NGU_RANDOM_F, compare.RND_ONLY,
    compare.Variant("recode", "RECODE (learned f)",
                    ["--set", "intrinsic_reward='recode'",
                     "--set", "learn_embedding=True"]),
    compare.Variant("beta0", "beta = 0 (no intrinsic reward)",
                    ["--set", "beta=0.0"]),
)
# Laptop scale (ours; the same for every variant): Table 7 otherwise, with
# the Disco Maze comparison's small networks and sequences of 20 every 10.
LAPTOP = ["--preset", "disco_maze", *disco_maze_coverage.SMALL,
          "--set", "trace_length=20", "--set", "replay_period=10"]
METRICS = {"mean_episode_coverage": "training-episode coverage",
           "mean_episode_frontier": "training-episode frontier (maze steps)",
           "mean_episode_tv_steps": "TV actions per training episode",
           "eval_coverage": "evaluation coverage (eps = 0)",
           "mean_intrinsic_reward": "beta r^i fed to the loss",
           "action_prediction_accuracy": "inverse-dynamics accuracy"}
SUMMARY = ("lifetime_coverage", "mean_episode_coverage",
           "mean_episode_frontier", "mean_episode_tv_steps")


def _visits_after_last_evaluation(run_directory: str) -> Optional[np.ndarray]:
  """The training visits [H, W] the run's final checkpoint holds (those
  since its last evaluation), or None. A seed of a vmapped run
  (`compare.vmapped_run_dir`: `<dir>/seed_<s>`) reads row s of the
  program's checkpoint."""
  own = os.path.join(run_directory, "checkpoint")
  parent = os.path.join(os.path.dirname(run_directory), "checkpoint")
  for directory, vmapped in ((own, False), (parent, True)):
    path = os.path.join(directory, "visits.npz")
    if not os.path.exists(path):
      continue
    with np.load(path) as data:
      train = np.asarray(data["train"])
    if not vmapped:
      return train.reshape((-1,) + train.shape[-2:])[0]
    with open(os.path.join(directory, "config.json")) as f:
      seeds = json.load(f).get("seeds")
    seed = int(os.path.basename(run_directory).rsplit("_", 1)[-1])
    if seeds is None or seed not in seeds:
      return None
    return train[seeds.index(seed)]
  return None


def lifetime_coverage(run_directory: str, num_free_cells: int) -> float:
  """Fraction of free cells the training lanes ever visited (NaN: no data).

  Sums the training visits of every heatmaps/eval_<steps>.npz of the run
  (each holds the visits since the previous evaluation) and those after
  the last evaluation, which the final checkpoint holds.
  """
  paths = glob.glob(os.path.join(run_directory, "heatmaps", "eval_*.npz"))
  if not paths:
    return float("nan")
  visited = None
  for path in paths:
    with np.load(path) as data:
      train = data["train"] > 0
    visited = train if visited is None else visited | train
  rest = _visits_after_last_evaluation(run_directory)
  if rest is not None and rest.shape == visited.shape:
    visited = visited | (rest > 0)
  return float(visited.sum()) / num_free_cells


def random_walk(noise: str, episodes: int = 512, seed: int = 0
                ) -> Dict[str, float]:
  """Chance: a uniform random policy's mean training metrics on the maze.

  `episodes` whole episodes of `NoisyGrid(noise)` (every action, the TV's
  included, equally likely; the environment's own step and extras), so
  the agents' rows can be read against what no learning at all gives.

  Returns:
    {"mean_episode_coverage", "mean_episode_frontier",
    "mean_episode_tv_steps", "lifetime_coverage"} (lifetime: the cells
    the `episodes` episodes visited in all, as the agents' 16 lanes x
    their episodes do).
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  env = noisy_grid.NoisyGrid(noise)
  num_actions = int(env.action_spec().num_values)
  height, width = env.walls.shape

  def episode(key):
    k_reset, k_actions = jax.random.split(key)
    state, ts = env.reset(k_reset)
    actions = jax.random.randint(k_actions, (env.max_episode_steps,), 0,
                                 num_actions)

    def body(carry, action):
      state, visits = carry
      state, ts = env.step(state, action)
      r, c = ts.extras["position"][0], ts.extras["position"][1]
      return (state, visits.at[r, c].set(True)), ts.extras

    r0, c0 = ts.extras["position"][0], ts.extras["position"][1]
    visits = jnp.zeros((height, width), bool).at[r0, c0].set(True)
    (_, visits), extras = jax.lax.scan(body, (state, visits), actions)
    last = jax.tree_util.tree_map(lambda x: x[-1], extras)
    return last["coverage"], last["frontier"], last["tv_steps"], visits

  keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
  coverage, frontier, tv_steps, visits = jax.jit(jax.vmap(episode))(keys)
  return {"mean_episode_coverage": float(jnp.mean(coverage)),
          "mean_episode_frontier": float(jnp.mean(frontier)),
          "mean_episode_tv_steps": float(jnp.mean(tv_steps)),
          "lifetime_coverage": float(jnp.any(visits, 0).sum()) /
                               env.num_free_cells}


def summary_table(root: str, noises: Sequence[str],
                  variants: Sequence[compare.Variant], seeds: Sequence[int],
                  num_free_cells: int, final_fraction: float = 0.2,
                  reps: int = 2000,
                  chance: Optional[Dict[str, Dict[str, float]]] = None
                  ) -> List[str]:
  """Markdown: per metric, a variant x noise table of IQM [95% CI], and
  a last row with `chance[noise][metric]` (`random_walk`) if given."""
  lines = []
  for metric in SUMMARY:
    lines += [f"### {metric}", "",
              "| variant | " + " | ".join(noises) + " |",
              "|---|" + "---:|" * len(noises)]
    for variant in variants:
      cells = []
      for noise in noises:
        scores = []
        for seed in seeds:
          directory, _ = compare.locate_run(os.path.join(root, noise),
                                            variant.name, seed)
          if metric == "lifetime_coverage":
            scores.append(lifetime_coverage(directory, num_free_cells))
            continue
          path = os.path.join(directory, "metrics.csv")
          if plotting.find_metrics(path) is None:  # Nor metrics.csv.gz.
            scores.append(float("nan"))
            continue
          data = compare.read_metrics(path)
          if metric not in data:
            scores.append(float("nan"))
            continue
          keep = data["env_steps"] >= data["env_steps"][-1] * (
              1 - final_fraction)
          values = data[metric][keep]
          values = values[np.isfinite(values)]
          scores.append(float(np.mean(values)) if len(values) else
                        float("nan"))
        scores = np.asarray(scores)
        if np.isfinite(scores).sum() < 2:
          cells.append("-")
          continue
        iqm, low, high = stats.iqm_ci(scores, reps=reps)
        cells.append(f"{iqm:.3g} [{low:.3g}, {high:.3g}]")
      lines.append(f"| {variant.label} | " + " | ".join(cells) + " |")
    if chance:
      lines.append("| uniform random walk (chance, no learning) | " + " | ".join(
          f"{chance[noise][metric]:.3g}" if noise in chance else "-"
          for noise in noises) + " |")
    lines.append("")
  return lines


def _comparison(noise: str) -> compare.GroupComparison:
  """The noise condition's comparison (`compare.group_main`)."""
  return compare.GroupComparison(
      LAPTOP, f"Noisy grid ({noise}), {{env_steps}} env steps per run",
      argv=["--env", f"noisy_grid/{noise}"],
      default_env=f"noisy_grid/{noise}", baseline=("beta0",))


def main(argv: Optional[Sequence[str]] = None) -> str:
  argv = sys.argv[1:] if argv is None else list(argv)
  parsed = compare.group_main(argv, __doc__, "--noises", NOISES, VARIANTS,
                              METRICS, "runs/noisy_tv", 100_000, _comparison)
  if parsed is None:
    return ""
  args, texts = parsed
  env = noisy_grid.NoisyGrid("none")
  chosen = [v for v in VARIANTS if v.name in args.variants]
  lines = [f"# Noisy-TV grid worlds, {args.env_steps} env steps per run, "
           f"seeds {args.seeds}", "",
           f"Final values (mean of the last 20% of each run's rows; lifetime "
           f"coverage: cells ever visited / {env.num_free_cells} free cells; "
           f"the maze's farthest cell is {env.max_distance} steps from the "
           "start); IQM over seeds [95% stratified bootstrap CI]. Per-noise "
           "tables, curves and heatmaps: " + ", ".join(
               f"[{n}]({n}/results.md)" for n in args.noises) + ".", "",
           f"Command: `python -m experiments.noisy_tv {' '.join(argv)}`", ""]
  # Chance with as many episodes as one seed's training lanes play.
  episodes = max(1, args.env_steps // env.max_episode_steps)
  chance = {noise: random_walk(noise, episodes) for noise in args.noises}
  lines += summary_table(args.output_root, args.noises, chosen, args.seeds,
                         env.num_free_cells, chance=chance)
  text = compare.write_results(args.output_root, "\n".join(lines) + "\n")
  print(text)
  return text


if __name__ == "__main__":
  main()
