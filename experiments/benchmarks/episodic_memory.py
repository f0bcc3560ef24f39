r"""Benchmark: one episodic-memory step (NGU Alg. 1) for B lanes, full memory.

Prints, measured in the same run on this machine:
  (a) ngu_jax.intrinsic.episodic.step, jitted with the state donated;
  (b) the same work in plain numpy, per lane: one GEMV for the squared
      distances, argpartition for the k nearest, Alg. 1, ring-buffer insert;
  (c) rlax.episodic_memory_intrinsic_rewards called per lane (its k-NN query
      is jitted inside rlax and warmed up first).
Each figure is microseconds per lane-step; ratios are to (a).

Usage:
  python -m experiments.benchmarks.episodic_memory [--lanes 32]
      [--capacity 30000] [--dim 32] [--neighbors 10] [--repeats 20]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import rlax
# rlax does not re-export the state class of its episodic-memory function.
from rlax._src.exploration import IntrinsicRewardState

from experiments.benchmarks import timing
from ngu_jax.intrinsic import episodic


def full_state(config, lanes, dim, rng):
  """A state whose every lane holds `capacity` random embeddings."""
  state = episodic.init(config, lanes, dim)
  memory = rng.normal(size=state.memory.shape).astype(np.float32)
  return state._replace(
      memory=jnp.asarray(memory),
      sq_norms=jnp.asarray(np.sum(memory * memory, axis=-1)),
      size=jnp.full((lanes,), config.capacity, jnp.int32),
      write_index=jnp.full((lanes,), config.capacity, jnp.int32),
      mean_sq_distance=jnp.full((lanes,), 2.0 * dim, jnp.float32),
      distance_count=jnp.full((lanes,), 1000, jnp.int32),
  )


def _cycle(queries, repeats):
  """queries[i % len(queries)] for i < repeats (indexed as they are used)."""
  return (queries[i % len(queries)] for i in range(repeats))


def time_steps(step, config, state, queries, repeats, lanes):
  """Seconds per lane-step of a memory's steps, and its last state.

  `step(config, state, query)` -> (rewards, state), jitted with the state
  donated (`episodic.step`, `recode.step`), is warmed up on queries[0], then
  called on queries[i % len(queries)] for i < `repeats`, back to back, and
  waited for at the end (`timing.pipelined`: the steps' throughput).
  """
  _, state = jax.block_until_ready(step(config, state, queries[0]))
  seconds, state = timing.pipelined(lambda s, q: step(config, s, q)[1],
                                    state, _cycle(queries, repeats))
  return seconds / (repeats * lanes), state


def bench_ngu_jax(config, lanes, dim, queries, repeats, rng):
  """(a): seconds per lane-step of the jitted `episodic.step`, donated."""
  step = jax.jit(episodic.step, static_argnums=0, donate_argnums=1)
  state = full_state(config, lanes, dim, rng)
  return time_steps(step, config, state, queries, repeats, lanes)[0]


class NumpyLane:
  """Alg. 1 for one lane in plain numpy (GEMV + argpartition)."""

  def __init__(self, config, memory):
    self.c = config
    self.memory = memory  # [capacity, D]
    self.sq_norms = np.sum(memory * memory, axis=-1)
    self.index = 0
    self.mean, self.count = 2.0 * memory.shape[1], 1000

  def step(self, q):
    c = self.c
    d2 = self.sq_norms - 2.0 * (self.memory @ q) + q @ q
    nn = np.argpartition(d2, c.num_neighbors)[:c.num_neighbors]
    diff = self.memory[nn] - q
    d_k = np.einsum("kd,kd->k", diff, diff)
    self.count += d_k.size
    self.mean += (d_k.sum() - d_k.size * self.mean) / self.count
    d_n = np.maximum(d_k / self.mean - c.cluster_distance, 0.0)
    s = np.sqrt(np.sum(c.kernel_epsilon / (d_n + c.kernel_epsilon)))
    s += c.pseudo_count_constant
    reward = 0.0 if s > c.max_similarity else 1.0 / s
    self.memory[self.index] = q
    self.sq_norms[self.index] = q @ q
    self.index = (self.index + 1) % len(self.memory)
    return reward


def bench_numpy(config, lanes, dim, queries, repeats, rng):
  lane_objs = [NumpyLane(config, rng.normal(size=(config.capacity, dim))
                         .astype(np.float32)) for _ in range(lanes)]
  queries = np.asarray(queries)

  def step_all(_, q):
    for b, lane in enumerate(lane_objs):
      lane.step(q[b])

  step_all(None, queries[0])
  seconds, _ = timing.pipelined(step_all, None, _cycle(queries, repeats),
                                block=False)
  return seconds / (repeats * lanes)


def bench_rlax(config, lanes, dim, queries, repeats, rng):
  states = []
  for _ in range(lanes):
    memory = jnp.asarray(rng.normal(size=(config.capacity, dim)), jnp.float32)
    states.append(IntrinsicRewardState(
        memory=memory, next_memory_index=0, distance_sum=2.0 * dim * 1000,
        distance_count=1000))

  def call(b, q):
    reward, states[b] = rlax.episodic_memory_intrinsic_rewards(
        q[None], config.num_neighbors, 1.0, states[b],
        constant=config.pseudo_count_constant,
        epsilon=config.kernel_epsilon,
        cluster_distance=config.cluster_distance,
        max_similarity=config.max_similarity,
        max_memory_size=config.capacity)
    return reward

  def step_all(_, q):
    return [call(b, q[b]) for b in range(lanes)][-1]

  for b in range(lanes):  # Warm up the jitted k-NN query.
    call(b, queries[0, b]).block_until_ready()
  seconds, _ = timing.pipelined(step_all, None, _cycle(queries, repeats))
  return seconds / (repeats * lanes)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--lanes", type=int, default=32)
  parser.add_argument("--capacity", type=int, default=30000)
  parser.add_argument("--dim", type=int, default=32)
  parser.add_argument("--neighbors", type=int, default=10)
  parser.add_argument("--repeats", type=int, default=20)
  parser.add_argument("--rlax-repeats", type=int, default=3,
                      help="rlax is slow; fewer repeats keep the run short.")
  args = parser.parse_args()

  config = episodic.EpisodicMemoryConfig(capacity=args.capacity,
                                         num_neighbors=args.neighbors)
  rng = np.random.default_rng(0)
  queries = jnp.asarray(rng.normal(size=(8, args.lanes, args.dim)),
                        jnp.float32)
  print(f"episodic memory step: B={args.lanes} lanes, capacity "
        f"{args.capacity} (full), D={args.dim}, k={args.neighbors}")
  print(f"machine: {timing.processor()}, "
        f"jax {jax.__version__} on {jax.devices()[0].platform}")
  results = [
      ("(a) ngu_jax episodic.step (jit, donated)",
       bench_ngu_jax(config, args.lanes, args.dim, queries, args.repeats,
                     rng)),
      ("(b) numpy GEMV + argpartition per lane",
       bench_numpy(config, args.lanes, args.dim, queries, args.repeats, rng)),
      ("(c) rlax.episodic_memory_intrinsic_rewards per lane",
       bench_rlax(config, args.lanes, args.dim, queries, args.rlax_repeats,
                  rng)),
  ]
  base = results[0][1]
  print(f"{'implementation':<54} {'us/lane-step':>13} {'x (a)':>7}")
  for name, seconds in results:
    print(f"{name:<54} {seconds * 1e6:>13.1f} {seconds / base:>7.2f}")


if __name__ == "__main__":
  main()
