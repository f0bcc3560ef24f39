r"""Does NGU's episodic reward pay a new cell more than a revisit, within an episode?

The noisy-TV comparison found no variant covering more cells than a uniform
random walk. This probe asks whether the reward is the problem: for uniform
random walks on the noisy grid's fixed maze (the comparison's episodes:
`envs.noisy_grid`, 60 steps), each step onto a cell not yet visited in the
episode and each revisit gets the episodic reward of NGU Alg. 1
(`ngu_jax.intrinsic.episodic`, with the comparison's memory config: the
agent's `variants.intrinsic.episodic_memory_config` of a run's config.json, or the
Disco Maze preset's) on one-hot cell embeddings, which is what a perfect
inverse-dynamics f keeps. The memory is wiped at each episode start and
d_m^2 runs on, as in the actor; the first `--warmup` episodes of every lane
only warm d_m^2 up.

Printed per band of steps within the episode: the share of steps that enter
a new cell, the mean reward of those and of revisits, and their ratio. A
ratio well above 1 means the reward does separate exploring from
revisiting, and an agent that covers no more than a random walk has not
learned to collect it.

Usage:
  python -m experiments.probes.episodic_by_step [--config RUN/config.json] \
      [--noise none] [--episodes 256] [--warmup 2] [--seed 0]
"""

import argparse
import json
from typing import Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.envs import noisy_grid
from ngu_jax.intrinsic import episodic
from ngu_jax.agents.ngu.variants import intrinsic as variant_intrinsic

BANDS = ((1, 5), (5, 15), (15, 30), (30, 60))


def random_walk_cells(env: noisy_grid.NoisyGrid, episodes: int,
                      seed: int) -> np.ndarray:
  """Flat cell indices x_0 .. x_{T-1} of uniform random walks, [E, T]."""
  steps = env.max_episode_steps
  num_actions = int(env.action_spec().num_values)
  width = env.walls.shape[1]

  def episode(key):
    k_reset, k_actions = jax.random.split(key)
    state, ts = env.reset(k_reset)
    actions = jax.random.randint(k_actions, (steps,), 0, num_actions)

    def body(state, action):
      state, ts = env.step(state, action)
      return state, ts.extras["position"]

    _, positions = jax.lax.scan(body, state, actions)
    positions = jnp.concatenate([ts.extras["position"][None],
                                 positions[:-1]], 0)
    return positions[:, 0] * width + positions[:, 1]

  keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
  return np.asarray(jax.vmap(episode)(keys))


def new_cell_mask(cells: np.ndarray) -> np.ndarray:
  """True where a step enters a cell not visited earlier in its episode."""
  out = np.zeros(cells.shape, bool)
  for e in range(cells.shape[0]):
    seen = set()
    for t, c in enumerate(cells[e]):
      out[e, t] = c not in seen
      seen.add(c)
  return out


def episodic_rewards(memory_config: episodic.EpisodicMemoryConfig,
                     cells: np.ndarray, num_cells: int,
                     warmup: int) -> np.ndarray:
  """Alg. 1 rewards of one-hot cell embeddings, [E, T] (after warm-up)."""
  lanes, steps = cells.shape
  embeddings = np.eye(num_cells, dtype=np.float32)[cells]
  state = episodic.init(memory_config, lanes, num_cells)
  step = jax.jit(lambda s, e: episodic.step(memory_config, s, e))
  rewards = np.zeros((lanes, steps), np.float32)
  for _ in range(warmup + 1):
    state = episodic.reset(state, jnp.ones((lanes,), bool))
    for t in range(steps):
      r, state = step(state, jnp.asarray(embeddings[:, t]))
      rewards[:, t] = np.asarray(r)
  return rewards


def bands(rewards: np.ndarray, new: np.ndarray) -> List[Dict[str, float]]:
  rows = []
  for lo, hi in BANDS:
    r, n = rewards[:, lo:hi], new[:, lo:hi]
    r_new = float(r[n].mean()) if n.any() else float("nan")
    r_old = float(r[~n].mean()) if (~n).any() else float("nan")
    rows.append(dict(steps=f"{lo}-{hi - 1}", new_share=float(n.mean()),
                     reward_new=r_new, reward_revisit=r_old,
                     ratio=r_new / r_old if r_old else float("nan")))
  return rows


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, float]]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default=None,
                      help="a run's config.json (default: the disco_maze "
                           "preset, as the comparison)")
  parser.add_argument("--noise", default="none",
                      choices=noisy_grid.NOISES)
  parser.add_argument("--episodes", type=int, default=256)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.episodes < 1 or args.warmup < 0:
    raise SystemExit("--episodes must be >= 1 and --warmup >= 0.")
  env = noisy_grid.NoisyGrid(args.noise)
  if args.config:
    with open(args.config) as f:
      config = config_lib.NGUConfig.from_dict(json.load(f))
  else:
    config = config_lib.disco_maze(memory_capacity=env.max_episode_steps + 1)
  cells = random_walk_cells(env, args.episodes, args.seed)
  num_cells = int(np.prod(env.walls.shape))
  rewards = episodic_rewards(variant_intrinsic.episodic_memory_config(config), cells,
                             num_cells, args.warmup)
  new = new_cell_mask(cells)
  rows = bands(rewards, new)
  print(f"{args.episodes} random-walk episodes of {cells.shape[1]} steps, "
        f"noise {args.noise}, one-hot cells; {new.sum(1).mean():.1f} "
        "distinct cells per episode")
  print("| steps | share of steps onto a new cell | r, new cell | "
        "r, revisit | ratio |")
  print("|---|---:|---:|---:|---:|")
  for row in rows:
    print(f"| {row['steps']} | {row['new_share']:.2f} | "
          f"{row['reward_new']:.3g} | {row['reward_revisit']:.3g} | "
          f"{row['ratio']:.1f} |")
  return rows


if __name__ == "__main__":
  main()
