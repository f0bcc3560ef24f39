r"""Benchmark: prioritised sequence replay of Atari-sized NGU sequences.

Items are `ngu_jax.replay.SequenceItem`s of 80 steps with 84x84x1 uint8
observations (~0.56 MB each) and a 512-unit LSTM state; the replay holds
`--capacity` of them (4,000: ~2.3 GB). Prints, measured in the same run:

  (a) inserts/s: `insert` of one item per call (as an actor lane finishing a
      sequence) and of 16 items per call, into a full replay (FIFO eviction);
  (b) samples/s: `sample(64)` (sum-tree draw, gather of 64 items, importance
      weights) and `update_priorities` of 64 keys;
  (c) the memory-bandwidth floor: a plain numpy copy of the same bytes as one
      sampled batch (contiguous `.copy()` of 64 stored items, every leaf,
      at varying offsets), and the same copy into preallocated arrays.

Target: a sampled batch within 3x of floor (c, `.copy()`).
If Reverb is importable (the `[reverb]` environment), the same figures for
`ReverbReplay` are printed beside.

Usage:
  python -m experiments.benchmarks.replay [--capacity 4000] [--batch 64]
      [--length 80] [--repeats 30] [--no-reverb]
"""

import argparse
import gc
import itertools

import numpy as np

from experiments.benchmarks import timing
from ngu_jax.networks import LSTMState
from ngu_jax.replay import PrioritizedReplay, SequenceItem

OBS = (84, 84, 1)
LSTM = 512


def make_items(count, length, seed=0):
  """`count` distinct items (inserted cyclically; contents are irrelevant)."""
  rng = np.random.default_rng(seed)
  items = []
  for _ in range(count):
    f32 = lambda: rng.normal(size=length).astype(np.float32)
    items.append(SequenceItem(
        observation=rng.integers(0, 256, size=(length,) + OBS, dtype=np.uint8),
        action=rng.integers(0, 18, size=length).astype(np.int32),
        extrinsic_reward=f32(), intrinsic_reward=f32(),
        discount=np.ones(length, np.float32),
        step_is_first=np.zeros(length, bool),
        behaviour_prob=np.full(length, 0.5, np.float32),
        mask=np.ones(length, np.float32),
        prev_action=rng.integers(0, 18, size=length).astype(np.int32),
        prev_extrinsic_reward=f32(), prev_intrinsic_reward=f32(),
        mixture_index=np.int32(3),
        initial_state=LSTMState(hidden=rng.normal(size=LSTM).astype(np.float32),
                                cell=rng.normal(size=LSTM).astype(np.float32)),
        epsilon=np.float32(0.4)))
  return items


def item_bytes(item):
  from ngu_jax.replay import prioritized  # pylint: disable=g-import-not-at-top
  return sum(x.nbytes for x in prioritized.flatten(item)[0])


def mem_available_gb():
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) / 2**20
  except OSError:
    pass
  return float("nan")


def bench_backend(replay, items, capacity, batch, repeats):
  """Fills the replay to capacity, then times inserts, samples, updates.

  Host work: timed without waiting for JAX (`block=False`); the i-th
  insert of one item inserts items[i % len(items)].
  """
  n_items = len(items)
  cycle = itertools.cycle(items)
  fill, _ = timing.pipelined(lambda _, __: replay.insert([next(cycle)]),
                             None, range(capacity), block=False)
  cycle = itertools.cycle(items)
  one = timing.median(lambda: replay.insert([next(cycle)]),
                      repeats=4 * repeats, warmup=0, block=False)
  group = [items[i % n_items] for i in range(16)]
  sixteen = timing.median(replay.insert, group, repeats=repeats, warmup=0,
                          block=False) / 16
  samp = timing.median(replay.sample, batch, repeats=repeats, block=False)
  keys, _, _ = replay.sample(batch)
  prio = np.random.default_rng(0).uniform(0.1, 2., size=batch)
  upd = timing.median(replay.update_priorities, keys, prio, repeats=repeats,
                      warmup=0, block=False)
  return dict(fill=fill / capacity, one=one, sixteen=sixteen, sample=samp,
              update=upd)


def bench_floor(storage, capacity, batch, repeats):
  """Contiguous copies of `batch` stored items of every leaf."""
  rng = np.random.default_rng(1)
  offsets = rng.integers(0, capacity - batch, size=repeats)
  starts = iter(offsets)

  def copy():
    start = next(starts)
    return [s[start:start + batch].copy() for s in storage]

  out = [np.empty((batch,) + s.shape[1:], s.dtype) for s in storage]
  starts_to = iter(offsets)

  def copyto():
    start = next(starts_to)
    for o, s in zip(out, storage):
      np.copyto(o, s[start:start + batch])

  return (timing.median(copy, repeats=repeats, warmup=0, block=False),
          timing.median(copyto, repeats=repeats, warmup=0, block=False))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--capacity", type=int, default=4000)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--length", type=int, default=80)
  parser.add_argument("--repeats", type=int, default=30)
  parser.add_argument("--no-reverb", action="store_true")
  args = parser.parse_args()

  items = make_items(64, args.length)
  per_item = item_bytes(items[0])
  total_gb = per_item * args.capacity / 2**30
  batch_mb = per_item * args.batch / 2**20
  available = mem_available_gb()
  print(f"machine: {timing.processor()}, "
        f"numpy {np.__version__}, MemAvailable {available:.1f} GB")
  print(f"items: {args.length} steps x {OBS} uint8 + extras = "
        f"{per_item / 2**20:.3f} MB; capacity {args.capacity} = "
        f"{total_gb:.2f} GB; batch {args.batch} = {batch_mb:.1f} MB")
  if available == available and available < 1.5 * total_gb:
    raise SystemExit(f"Not enough free memory for {total_gb:.2f} GB of "
                     "replay; lower --capacity.")

  replay = PrioritizedReplay(args.capacity, min_size=args.batch)
  embedded = bench_backend(replay, items, args.capacity, args.batch,
                           args.repeats)
  floor_copy, floor_copyto = bench_floor(replay._storage, args.capacity,  # pylint: disable=protected-access
                                         args.batch, args.repeats)
  del replay
  gc.collect()

  results = {"embedded": embedded}
  if not args.no_reverb:
    try:
      from ngu_jax.replay import reverb_tables  # pylint: disable=g-import-not-at-top
    except ImportError:
      print("reverb: not importable here (run in the [reverb] environment).")
    else:
      with reverb_tables.ReverbReplay(args.capacity,
                                      min_size=args.batch) as reverb_replay:
        results["reverb"] = bench_backend(reverb_replay, items, args.capacity,
                                          args.batch, args.repeats)

  names = list(results)
  print()
  print(f"{'':44s}" + "".join(f"{n:>16s}" for n in names))

  def row(label, key, fmt):
    print(f"{label:44s}" + "".join(f"{fmt(results[n][key]):>16s}"
                                    for n in names))

  row("fill to capacity, insert([item]) items/s", "fill",
      lambda t: f"{1 / t:,.0f}")
  row("full (FIFO), insert([item]) items/s", "one", lambda t: f"{1 / t:,.0f}")
  row("full (FIFO), insert(16 items) items/s", "sixteen",
      lambda t: f"{1 / t:,.0f}")
  row(f"sample({args.batch}) batches/s", "sample", lambda t: f"{1 / t:,.1f}")
  row(f"sample({args.batch}) ms/batch", "sample", lambda t: f"{1e3 * t:.2f}")
  row(f"sample({args.batch}) sequences/s", "sample",
      lambda t: f"{args.batch / t:,.0f}")
  row(f"sample({args.batch}) GB/s", "sample",
      lambda t: f"{batch_mb / 1024 / t:.2f}")
  row(f"update_priorities({args.batch}) ms", "update",
      lambda t: f"{1e3 * t:.3f}")
  print()
  print(f"floor: numpy .copy() of one batch's bytes   {1e3 * floor_copy:8.2f} ms"
        f"  ({batch_mb / 1024 / floor_copy:.2f} GB/s)")
  print(f"       np.copyto into preallocated arrays    "
        f"{1e3 * floor_copyto:8.2f} ms  "
        f"({batch_mb / 1024 / floor_copyto:.2f} GB/s)")
  for n in names:
    ratio = results[n]["sample"] / floor_copy
    print(f"{n}: sample / floor(.copy) = {ratio:.2f}x "
          f"(target <= 3x: {'met' if ratio <= 3 else 'NOT met'}); "
          f"sample / floor(copyto) = "
          f"{results[n]['sample'] / floor_copyto:.2f}x")


if __name__ == "__main__":
  main()
