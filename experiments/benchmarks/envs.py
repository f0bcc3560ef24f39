r"""Benchmark: agent steps per second of each `ngu_jax.envs` adapter.

For every adapter, with uniformly random actions (drawn before timing):
  * adapter: `ngu_jax.envs` `step` (action checks, FIRST/MID/LAST and
    discount bookkeeping, channel-last observation, extras);
  * raw: the very same envpool pool (`env.pool`, so the same config and
    threads) stepped through envpool's own gymnasium API with the same
    actions, measured in the same run.
Each round times both back to back on the same
actions, alternating which goes first, so both see the same machine load.
The table shows medians over rounds in lane-steps/s (agent steps summed over
lanes; an Atari agent step is 4 frames) and the adapter cost: the median over
rounds of 1 - adapter/raw (target: <= 10%), with its interquartile
range. Disco Maze has no envpool counterpart (target: >= 20,000
lane-steps/s).

Usage:
  python -m experiments.benchmarks.envs [--steps 100] [--rounds 30]
"""

import argparse
import os

import envpool
import numpy as np

from experiments.benchmarks import timing
from ngu_jax.envs import atari
from ngu_jax.envs import minigrid


def _rate(step, actions) -> float:
  """Lane-steps/s of calling `step` on every row of `actions` [T, B], timed
  as one loop (`timing.pipelined`; host work, no JAX wait)."""
  seconds, _ = timing.pipelined(lambda _, a: step(a), None, actions,
                                block=False)
  return actions.size / seconds


def _bench_pair(env, steps, rounds, rng):
  """Lane-steps/s per round of raw envpool and of the adapter, interleaved.

  Both step the same envpool pool (`env.pool`, through envpool's own
  gymnasium API for "raw"), so they share its threads and config; each
  round times both on the same actions back to back, alternating which goes
  first, so that both see the same machine load. Resets are not timed.
  """
  b = env.num_envs
  num_actions = env.action_spec().num_values
  actions = rng.integers(0, num_actions, size=(steps, b)).astype(np.int32)
  raw_pool = env.pool

  def raw_round():
    raw_pool.reset()
    return _rate(raw_pool.step, actions)

  def adapter_round():
    env.reset()
    return _rate(env.step, actions)

  raw_round()  # Warm-up.
  adapter_round()
  raw_rates, rates = [], []
  for i in range(rounds):
    if i % 2 == 0:
      raw_rates.append(raw_round())
      rates.append(adapter_round())
    else:
      rates.append(adapter_round())
      raw_rates.append(raw_round())
  return raw_rates, rates


def _bench_alone(env, steps, rounds, rng):
  b = env.num_envs
  num_actions = env.action_spec().num_values
  actions = rng.integers(0, num_actions, size=(steps, b)).astype(np.int32)
  env.reset()
  _rate(env.step, actions[:20])  # Warm-up.
  return [_rate(env.step, actions) for _ in range(rounds)]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=100,
                      help="batched steps per timed round")
  parser.add_argument("--rounds", type=int, default=30)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  rng = np.random.default_rng(args.seed)
  print(f"machine: {timing.processor()}, "
        f"{os.cpu_count()} CPUs; envpool {envpool.__version__}; "
        f"{args.rounds} rounds x {args.steps} batched steps (x4 for MiniGrid "
        "and Disco Maze)")

  rows = []
  # Atari Pong, NGU preset (Table 8), 8 lanes; raw = same envpool config.
  env = atari.make_atari("Pong", 8, seed=args.seed)
  raw_rates, rates = _bench_pair(env, args.steps, args.rounds, rng)
  rows.append(("atari/Pong (NGU preset)", 8, raw_rates, rates))
  env.close()

  # MiniGrid, 32 lanes.
  env_id = "MiniGrid-DoorKey-8x8-v0"
  env = minigrid.make_minigrid(env_id, 32, seed=args.seed)
  raw_rates, rates = _bench_pair(env, args.steps * 4, args.rounds, rng)
  rows.append((f"minigrid/{env_id}", 32, raw_rates, rates))
  env.close()

  # Disco Maze, 64 lanes (no envpool counterpart).
  try:
    from ngu_jax.envs import disco_maze  # pylint: disable=g-import-not-at-top
  except ImportError:
    disco_maze = None
  if disco_maze is None:
    rows.append(("disco_maze", 64, None, None))
  else:
    env = disco_maze.DiscoMaze(64, seed=args.seed)
    rows.append(("disco_maze", 64, None,
                 _bench_alone(env, args.steps * 4, args.rounds, rng)))
    env.close()

  header = (f"{'environment':<34} {'lanes':>5} {'raw envpool/s':>14} "
            f"{'adapter/s':>10} {'adapter cost':>13} {'(IQR)':>11}")
  print(header)
  print("-" * len(header))
  for name, lanes, raw_rates, rates in rows:
    if rates is None:
      print(f"{name:<34} {lanes:>5} {'not available':>14}")
      continue
    rate = np.median(rates)
    if raw_rates is None:
      print(f"{name:<34} {lanes:>5} {'n/a':>14} {rate:>10,.0f} {'n/a':>13} "
            f"{'n/a':>11}")
      continue
    raw_rate = np.median(raw_rates)
    ratios = np.asarray(rates) / np.asarray(raw_rates)  # Paired by round.
    cost = 1 - np.median(ratios)
    spread = np.percentile(1 - ratios, [25, 75])
    print(f"{name:<34} {lanes:>5} {raw_rate:>14,.0f} {rate:>10,.0f} "
          f"{cost:>13.1%} {spread[0]:>5.0%}..{spread[1]:.0%}")
  print("lane-steps/s (medians over rounds) = agent steps summed over lanes "
        "(Atari: 4 frames each).\nadapter cost = median over rounds of "
        "1 - adapter/raw, each round timing both back to back (target <= "
        "10%);\nIQR: its interquartile range over rounds. Disco Maze target "
        ">= 20,000/s.")


if __name__ == "__main__":
  main()
