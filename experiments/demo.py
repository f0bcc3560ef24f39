r"""Demonstration of NGU's intrinsic-reward components (`make run`).

Until the full agent exists, `make run` shows what the components do. Three
scripted lanes walk a 15x15 open grid for one 400-step episode, sharing one
batched episodic memory (NGU Alg. 1):
  * "sweep":  a boustrophedon path that visits a new cell every step;
  * "random": a uniform random walk, which keeps revisiting cells;
  * "stay":   oscillates between two neighbouring cells.
Each lane's controllable state f(x) is a fixed random projection of its
one-hot position (a stand-in for the learned embedding). The episodic reward
should rank the lanes by how many distinct cells they cover: this is the
incentive NGU's exploratory policies learn from. Then the RND modulator
(lifelong.modulator) scales the rewards, and eq. (1) combines them.

Prints a table and, if matplotlib is installed, saves a plot.

Usage:
  python -m experiments.demo [--steps 400] [--output-dir runs/demo]
"""

import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong

GRID = 15
LANES = ("sweep", "random", "stay")


def scripted_positions(steps: int, rng: np.random.Generator) -> np.ndarray:
  """Positions [steps, 3, 2] of the three scripted lanes."""
  sweep = []
  for row in range(GRID):
    cols = range(GRID) if row % 2 == 0 else range(GRID - 1, -1, -1)
    sweep.extend((row, col) for col in cols)
  sweep = np.array((sweep * (steps // len(sweep) + 1))[:steps])
  walk = [np.array([GRID // 2, GRID // 2])]
  moves = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]])
  for _ in range(steps - 1):
    walk.append(np.clip(walk[-1] + moves[rng.integers(4)], 0, GRID - 1))
  stay = np.array([[7, 7], [7, 8]] * (steps // 2 + 1))[:steps]
  return np.stack([sweep, np.array(walk), stay], axis=1)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=400)
  parser.add_argument("--embedding-dim", type=int, default=32)
  parser.add_argument("--output-dir", default=os.path.join("runs", "demo"))
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  rng = np.random.default_rng(args.seed)

  positions = scripted_positions(args.steps, rng)  # [T, B, 2]
  projection = rng.normal(size=(GRID * GRID, args.embedding_dim)) / np.sqrt(
      args.embedding_dim)
  cell = positions[..., 0] * GRID + positions[..., 1]  # [T, B]
  embeddings = projection[cell].astype(np.float32)  # [T, B, D]

  config = episodic.EpisodicMemoryConfig(capacity=5000)  # Table 7 capacity.
  step = jax.jit(episodic.step, static_argnums=0, donate_argnums=1)
  modulator = jax.jit(lifelong.modulator)
  memory = episodic.init(config, len(LANES), args.embedding_dim)
  stats = lifelong.init()
  visit_counts = np.zeros((len(LANES), GRID * GRID))
  r_episodic = np.zeros((args.steps, len(LANES)), np.float32)
  r_intrinsic = np.zeros_like(r_episodic)
  for t in range(args.steps):
    rewards, memory = step(config, memory, jnp.asarray(embeddings[t]))
    visit_counts[np.arange(len(LANES)), cell[t]] += 1
    # A stand-in for the RND error: large for rarely visited cells, as a
    # trained RND predictor's error would be (NGU Sec. 2).
    errors = 1.0 / np.sqrt(visit_counts[np.arange(len(LANES)), cell[t]])
    alpha, stats = modulator(stats, jnp.asarray(errors, jnp.float32))
    r_episodic[t] = np.asarray(rewards)
    r_intrinsic[t] = np.asarray(
        lifelong.ngu_intrinsic_reward(rewards, alpha, max_scale=5.0))

  print(f"One {args.steps}-step episode on a {GRID}x{GRID} grid, "
        f"episodic memory {config}")
  print(f"{'lane':<8} {'distinct cells':>15} {'sum r_episodic':>15} "
        f"{'sum r_intrinsic':>16}")
  for b, name in enumerate(LANES):
    distinct = len(set(cell[:, b].tolist()))
    print(f"{name:<8} {distinct:>15d} {r_episodic[:, b].sum():>15.2f} "
          f"{r_intrinsic[:, b].sum():>16.2f}")
  order_cover = np.argsort([-len(set(cell[:, b].tolist())) for b in range(3)])
  order_reward = np.argsort(-r_episodic.sum(axis=0))
  print("episodic return ranks the lanes by coverage:",
        bool(np.all(order_cover == order_reward)))

  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("matplotlib not installed: no plot.")
    return
  os.makedirs(args.output_dir, exist_ok=True)
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for b, name in enumerate(LANES):
    axes[0].plot(r_episodic[:, b], label=name, lw=0.8)
    axes[1].plot(np.cumsum(r_intrinsic[:, b]), label=name)
  axes[0].set(title="episodic reward r^episodic_t (Alg. 1)", xlabel="step")
  axes[1].set(title="cumulative NGU intrinsic reward (eq. 1)", xlabel="step")
  axes[0].legend()
  fig.tight_layout()
  path = os.path.join(args.output_dir, "intrinsic_rewards.png")
  fig.savefig(path, dpi=100)
  print(f"plot: {path}")


if __name__ == "__main__":
  main()
