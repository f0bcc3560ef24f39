r"""Benchmark: lane-steps/s of `XMiniGrid.step`, new level drawn in a loop vs a cond.

`XMiniGrid.step` draws an episode's next level inside a `lax.while_loop` of
at most one trip (`_maybe_fresh_level`). The baseline is the previous step,
a `lax.cond(done, reset, advance)`, which under `vmap` becomes a select that
runs the level generator on every lane at every step. Both are timed in the
same call, alternating rounds, on B lanes vmapped inside one jitted
`lax.scan` of T steps with uniformly random actions (the compiled loop's
shape), for each task; the table gives medians over rounds and the ratio.

Usage:
  python -m experiments.benchmarks.xminigrid_step [--lanes 48] [--steps 500]
      [--rounds 5] [--tasks MiniGrid-KeyCorridorS3R3-v0 ...]
"""

import argparse
import time

import jax
import numpy as np

from ngu_jax.envs import xminigrid_env

TASKS = ("MiniGrid-DoorKey-8x8-v0", "MiniGrid-DoorKey-16x16-v0",
         "MiniGrid-FourRooms-v0", "MiniGrid-KeyCorridorS3R3-v0",
         "MiniGrid-MultiRoom-N6-v0")


class _CondStep(xminigrid_env.XMiniGrid):
  """The baseline: the step before the while_loop (a `lax.cond`)."""

  def step(self, state, action):
    def advance():
      level, step_type, reward, discount, last = self._advance(state.level,
                                                               action)
      new = xminigrid_env.XMiniGridState(level=level, key=state.key,
                                         done=last)
      return new, self._timestep(level, step_type, reward, discount)
    return jax.lax.cond(state.done, lambda: self.reset(state.key), advance)


def _runner(env, lanes, steps):
  """jit: (states, key) -> (states, rewards summed) after `steps` steps."""
  def run(states, key):
    def body(states, k):
      actions = jax.random.randint(k, (lanes,), 0, 7)
      states, ts = jax.vmap(env.step)(states, actions)
      return states, ts.reward.sum()
    return jax.lax.scan(body, states, jax.random.split(key, steps))
  return jax.jit(run)


def bench(task, lanes, steps, rounds):
  """{"loop": [rates], "cond": [rates]} in lane-steps/s, interleaved."""
  out = {}
  runs = {}
  for name, cls in (("loop", xminigrid_env.XMiniGrid), ("cond", _CondStep)):
    env = cls(task)
    states, _ = jax.vmap(env.reset)(
        jax.random.split(jax.random.PRNGKey(0), lanes))
    run = _runner(env, lanes, steps)
    states, rewards = run(states, jax.random.PRNGKey(1))  # Compile.
    rewards.block_until_ready()
    runs[name] = [run, states]
    out[name] = []
  for r in range(rounds):
    order = ("loop", "cond") if r % 2 == 0 else ("cond", "loop")
    for name in order:
      run, states = runs[name]
      start = time.perf_counter()
      states, rewards = run(states, jax.random.PRNGKey(2 + r))
      rewards.block_until_ready()
      out[name].append(lanes * steps / (time.perf_counter() - start))
      runs[name][1] = states
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--lanes", type=int, default=48)
  parser.add_argument("--steps", type=int, default=500)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--tasks", nargs="+", default=list(TASKS))
  args = parser.parse_args(argv)
  print(f"| task | new level in a loop | in a cond (before) | ratio |  "
        f"(lane-steps/s, {args.lanes} lanes x {args.steps} steps, median of "
        f"{args.rounds} rounds)")
  print("|---|---|---|---|")
  for task in args.tasks:
    rates = bench(task, args.lanes, args.steps, args.rounds)
    loop, cond = np.median(rates["loop"]), np.median(rates["cond"])
    print(f"| {task} | {loop:,.0f} | {cond:,.0f} | {loop / cond:.1f}x |",
          flush=True)


if __name__ == "__main__":
  main()
