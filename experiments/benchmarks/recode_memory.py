r"""Benchmark: RECODE's shared memory step against NGU's episodic step.

At EQUAL MEMORY BYTES: B lanes, D-dim embeddings; NGU's episodic memory
(`ngu_jax.intrinsic.episodic.step`) holds C slots per lane, RECODE's memory
(`ngu_jax.intrinsic.recode.step`) M = B * C atoms shared by all lanes. Both
memories start full of random N(0, I) embeddings; the queries are, with
probability `--far-fraction` (0.1), new N(0, I) points (RECODE inserts them,
evicting an atom: the costlier path) and otherwise an atom plus
N(0, 0.05^2 I) noise (RECODE merges them). Both steps are jitted with the
state donated and timed side by side in the same run, for each C of
`--capacities`. Printed: microseconds per lane-step, lane-steps per second
and the ratio of RECODE's time to episodic's.

Expected asymptotics: episodic's step is B independent O(C D) passes, done
in parallel (one batched GEMV). RECODE's step is one O(B M D) batched pass
(the distances to the memory at the start of the step, for the rewards and
the updates), then a `lax.scan` over lanes (Alg. 1 applies the updates in
lane order on one shared memory): B SEQUENTIAL O(k M + B D) passes, plus M
Gumbel draws and one more O(M D) pass per eviction. With M = B C, RECODE's
batched pass alone is B times episodic's arithmetic (its cost per
lane-step grows like M D = B C D), and its sequential updates cannot be
spread over cores or a GPU the way episodic's independent lanes are.

Usage:
  python -m experiments.benchmarks.recode_memory [--lanes 32] [--dim 32]
      [--capacities 128,1024] [--neighbors 10] [--far-fraction 0.1]
      [--repeats 20] [--quick]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks import episodic_memory
from experiments.benchmarks import timing
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import recode


def full_recode_state(config, dim, rng):
  """A full RECODE memory of random atoms with counts of a stationary mix."""
  m = config.capacity
  atoms = rng.normal(size=(m, dim)).astype(np.float32)
  # Counts spread over [1e-3, 1e2], as a discounted memory's are.
  log_counts = rng.uniform(np.log(1e-3), np.log(1e2), size=m)
  # d_m^2 at the scale of random nearest-neighbour distances: half the mean
  # squared distance between random points (2 D), so inserts and merges mix.
  return recode.init(config, dim, jax.random.PRNGKey(0))._replace(
      atoms=jnp.asarray(atoms),
      log_counts=jnp.asarray(log_counts, jnp.float32),
      occupied=jnp.ones((m,), bool),
      mean_sq_distance=jnp.float32(dim),
      has_distance=jnp.bool_(True))


def bench_episodic(capacity, lanes, dim, neighbors, queries, repeats, rng):
  config = episodic.EpisodicMemoryConfig(capacity=capacity,
                                         num_neighbors=neighbors)
  return episodic_memory.bench_ngu_jax(config, lanes, dim, queries, repeats,
                                       rng)


def make_queries(atoms, lanes, far_fraction, rng, batches):
  """[batches, B, D] queries (new points, or atoms plus small noise), and
  the [n, D] new points among them."""
  m, dim = atoms.shape
  near = (atoms[rng.integers(0, m, size=(batches, lanes))]
          + 0.05 * rng.normal(size=(batches, lanes, dim)))
  far = rng.normal(size=(batches, lanes, dim))
  is_far = rng.random((batches, lanes, 1)) < far_fraction
  queries = np.where(is_far, far, near).astype(np.float32)
  return jnp.asarray(queries), queries[is_far[..., 0]]


def bench_recode(atoms, lanes, dim, neighbors, far_fraction, repeats, rng):
  config = recode.RecodeConfig(capacity=atoms, num_neighbors=neighbors)
  step = jax.jit(recode.step, static_argnums=0, donate_argnums=1)
  state = full_recode_state(config, dim, rng)
  # One batch per call, none repeated: a repeated new point would merge.
  queries, new_points = make_queries(np.asarray(state.atoms), lanes,
                                     far_fraction, rng, repeats + 1)
  seconds, state = episodic_memory.time_steps(step, config, state, queries,
                                              repeats, lanes)
  # Each new point that was inserted is still an atom, exactly.
  atoms = np.asarray(state.atoms)
  inserted = sum(bool(np.any(np.all(atoms == p, axis=-1)))
                 for p in new_points)
  return seconds, inserted / queries.shape[0] / lanes, queries


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--lanes", type=int, default=32)
  parser.add_argument("--dim", type=int, default=32)
  parser.add_argument("--capacities", default="128,1024",
                      help="episodic slots per lane C, comma-separated; "
                      "RECODE gets lanes * C atoms.")
  parser.add_argument("--neighbors", type=int, default=10)
  parser.add_argument("--far-fraction", type=float, default=0.1,
                      help="share of queries that are new points.")
  parser.add_argument("--repeats", type=int, default=20)
  parser.add_argument("--quick", action="store_true",
                      help="tiny sizes for a smoke test (seconds).")
  args = parser.parse_args(argv)
  if args.quick:
    args.lanes, args.dim, args.capacities = 4, 8, "16,32"
    args.neighbors, args.repeats = 4, 2
  capacities = [int(c) for c in args.capacities.split(",") if c]
  if not capacities or min(capacities) < 1 or args.lanes < 1:
    parser.error("--capacities and --lanes must be positive")

  rng = np.random.default_rng(0)
  print(f"memory step at equal bytes: B={args.lanes} lanes, D={args.dim}, "
        f"k={args.neighbors}; episodic C slots per lane (full), RECODE "
        f"M = B*C atoms (full), both jitted with the state donated; "
        f"{100 * args.far_fraction:g}% of queries new points")
  print(f"machine: {timing.processor()}, "
        f"{jax.local_device_count()} x {jax.devices()[0].device_kind}, "
        f"jax {jax.__version__}")
  print(f"{'C':>6} {'M':>8} {'step':>14} {'us/lane-step':>13} "
        f"{'lane-steps/s':>13} {'x episodic':>11}")
  results = {}
  for c in capacities:
    m = args.lanes * c
    t_rec, inserted, queries = bench_recode(
        m, args.lanes, args.dim, args.neighbors, args.far_fraction,
        args.repeats, rng)
    t_epi = bench_episodic(c, args.lanes, args.dim, args.neighbors, queries,
                           args.repeats, rng)
    results[c] = dict(atoms=m, episodic_s=t_epi, recode_s=t_rec,
                      ratio=t_rec / t_epi, inserted_fraction=inserted)
    for name, seconds in (("episodic", t_epi), ("recode", t_rec)):
      print(f"{c:>6} {m:>8} {name:>14} {seconds * 1e6:>13.2f} "
            f"{1 / seconds:>13.0f} {seconds / t_epi:>11.2f}")
    print(f"{'':>6} {'':>8} {'':>14} (RECODE inserted {100 * inserted:.1f}%"
          " of the queries, evicting an atom for each)")
  return results


if __name__ == "__main__":
  main()
