r"""Benchmark: one NGU learner update (forward + backward of the Retrace loss).

Times `jax.value_and_grad(ngu_jax.agents.ngu.learning.loss)`, jitted, on a
batch of B sequences of L stored steps (the [T + 1, B] convention of
`SequenceBatch`: L = T + 1 steps give T Retrace transitions; the default
L = 80 as in docs/design.md#sequences) with the Atari network of
NGU App. H.3 (84x84x1 uint8 observations, A = 18, N = 32, LSTM 512, dueling
head 512). The update unrolls the online and the target network over the
whole sequence and back-propagates through the online one.

Prints, measured in the same run on this machine:
  (a) ms per update and its achieved GFLOP/s, with the FLOP count taken from
      XLA (`compiled.cost_analysis()`), next to an analytic count of the
      network's matmul/conv FLOPs (XLA's cost analysis may count the body of
      a while loop, i.e. the LSTM scan, once rather than once per step);
  (b) GFLOP/s of a large float32 matmul, best of --repeats (the machine's
      practical peak, `timing.matmul_peak`);
  (c) the ratio (a) / (b).
With --profile it also times the parts of the update on their own (forward +
backward of the conv torso on all B * L frames, of the LSTM scan, and the
forward-only target-network unroll).

Usage:
  python -m experiments.benchmarks.learner_step [--batch-size 64]
      [--seq-len 80] [--repeats 3] [--dot-size 4096] [--burn-in 0]
      [--profile] [--baseline-rev REV|none] [--baseline-rounds K]
      [--json PATH]

`--baseline-rev REV` (default BASELINE_REV: before the learner and actor
fast path and the convolutions as one GEMM) runs the same command at REV in
a temporary git worktree and here, in the same call, and prints the ms per
update of each variant side by side with their ratio
(experiments/benchmarks/baseline.py); `none` measures this checkout alone.
"""

import argparse
import functools
import re

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks import baseline
from experiments.benchmarks import timing
from ngu_jax import mixtures
from ngu_jax.agents.ngu import learning
from ngu_jax.networks import torsos
from ngu_jax.networks import uvfa
from ngu_jax.types import SequenceBatch

OBS_SHAPE = (84, 84, 1)
NUM_ACTIONS = 18
NUM_MIXTURES = 32
LSTM_SIZE = 512


def _flops_from_cost(cost):
  """FLOPs from `cost_analysis()` (a dict, or a list of dicts, by version)."""
  if cost is None:
    return float("nan")
  if isinstance(cost, (list, tuple)):
    return float(sum(c.get("flops", 0.) for c in cost if c))
  return float(cost.get("flops", float("nan")))


def _batch(batch_size, seq_len, rng):
  shape = (seq_len, batch_size)
  first = np.zeros(shape, bool)
  first[0, ::2] = True
  action = rng.integers(0, NUM_ACTIONS, size=shape).astype(np.int32)
  r_ext = rng.normal(size=shape).astype(np.float32)
  r_int = rng.uniform(size=shape).astype(np.float32)
  return SequenceBatch(
      observation=rng.integers(0, 256, size=shape + OBS_SHAPE, dtype=np.uint8),
      action=action,
      extrinsic_reward=r_ext,
      intrinsic_reward=r_int,
      discount=np.ones(shape, np.float32),
      step_is_first=first,
      behaviour_prob=rng.uniform(0.1, 1., size=shape).astype(np.float32),
      mask=np.ones(shape, np.float32),
      prev_action=np.concatenate([np.zeros((1, batch_size), np.int32),
                                  action[:-1]]),
      prev_extrinsic_reward=r_ext,
      prev_intrinsic_reward=r_int,
      mixture_index=(np.arange(batch_size) % NUM_MIXTURES).astype(np.int32),
      initial_state=uvfa.LSTMState(
          hidden=np.zeros((batch_size, LSTM_SIZE), np.float32),
          cell=np.zeros((batch_size, LSTM_SIZE), np.float32)),
      importance_weights=np.ones(batch_size, np.float32))


def analytic_flops(frames):
  """Matmul/conv FLOPs (2 per multiply-add) of one update on `frames` steps.

  Forward of one network per frame: conv 8x8x1->32 on 20x20, conv 4x4x32->64
  on 9x9, conv 3x3x64->64 on 7x7, Linear 3136->512, LSTM (512 + 52 + 512 ->
  4 x 512), dueling head (2 x 512x512, 512x1, 512x18). Update = online
  forward + target forward + online backward (~2x forward).
  """
  conv = 2 * (20 * 20 * 32 * 8 * 8 * 1 + 9 * 9 * 64 * 4 * 4 * 32
              + 7 * 7 * 64 * 3 * 3 * 64)
  dense = 2 * (3136 * 512)
  lstm = 2 * ((512 + NUM_ACTIONS + 2 + NUM_MIXTURES + LSTM_SIZE)
              * 4 * LSTM_SIZE)
  head = 2 * (2 * 512 * 512 + 512 * 1 + 512 * NUM_ACTIONS)
  forward = conv + dense + lstm + head
  return {"total": 4 * forward * frames,
          "lstm_share": lstm / forward}


def bench_update(batch_size, seq_len, burn_in, repeats, microbatches=1):
  network = uvfa.make_uvfa_network(OBS_SHAPE, NUM_ACTIONS, NUM_MIXTURES,
                                   lstm_size=LSTM_SIZE, head_hidden=512)
  params = network.init(jax.random.PRNGKey(0))
  target_params = jax.tree_util.tree_map(lambda x: x + 0.01, params)
  batch = _batch(batch_size, seq_len, np.random.default_rng(0))
  update = jax.jit(functools.partial(
      learning.loss_and_grad, network, betas=mixtures.betas(NUM_MIXTURES),
      gammas=mixtures.gammas(NUM_MIXTURES), burn_in=burn_in,
      num_microbatches=microbatches))
  compile_s, compiled = timing.timed(
      lambda: update.lower(params, target_params, batch).compile(),
      block=False)
  flops = _flops_from_cost(compiled.cost_analysis())
  seconds = timing.times(compiled, params, target_params, batch,
                         repeats=repeats)
  return flops, seconds.min(), seconds.mean(), compile_s


def profile_parts(batch_size, seq_len, repeats):
  """Forward + backward time of the torso and the LSTM scan on their own."""
  frames = batch_size * seq_len
  rng = np.random.default_rng(2)

  torso = hk.without_apply_rng(hk.transform(
      lambda x: torsos.AtariTorso()(x)))
  obs = jnp.asarray(rng.integers(0, 256, size=(frames,) + OBS_SHAPE,
                                 dtype=np.uint8))
  torso_params = torso.init(jax.random.PRNGKey(0), obs[:1])
  torso_step = jax.jit(jax.grad(lambda p, x: torso.apply(p, x).sum()))
  torso_fwd = jax.jit(torso.apply)

  def lstm_fn(x):
    core = hk.LSTM(LSTM_SIZE)
    out, _ = hk.dynamic_unroll(core, x, core.initial_state(batch_size))
    return out

  lstm = hk.without_apply_rng(hk.transform(lstm_fn))
  x = jnp.asarray(rng.normal(size=(seq_len, batch_size, 564)).astype(
      np.float32))
  lstm_params = lstm.init(jax.random.PRNGKey(0), x)
  lstm_step = jax.jit(jax.grad(lambda p, x: lstm.apply(p, x).sum()))
  lstm_fwd = jax.jit(lstm.apply)
  return {
      "conv torso fwd+bwd": timing.times(torso_step, torso_params, obs,
                                         repeats=repeats).min(),
      "conv torso fwd": timing.times(torso_fwd, torso_params, obs,
                                     repeats=repeats).min(),
      "LSTM scan fwd+bwd": timing.times(lstm_step, lstm_params, x,
                                        repeats=repeats).min(),
      "LSTM scan fwd": timing.times(lstm_fwd, lstm_params, x,
                                    repeats=repeats).min(),
  }


# The revision before the learner and actor fast path (as the loops
# benchmark's baseline).
BASELINE_REV = "3b473ec"
_ROW = re.compile(r"^(one batch \(M=1\)|\d+ micro-batches of \d+ \(M=\d+\))"
                  r"\s+([\d.]+)\s+([\d.]+)")


def parse_figures(text: str):
  """The best ms per update of each variant, as printed (also by an older
  copy of this benchmark, whose rows are the same)."""
  figures = {}
  for line in text.splitlines():
    match = _ROW.match(line)
    if match:
      figures[f"{match.group(1)}, update ms"] = float(match.group(2))
  return figures


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch-size", type=int, default=64)
  parser.add_argument("--seq-len", type=int, default=80,
                      help="stored steps per sequence, T + 1")
  parser.add_argument("--burn-in", type=int, default=0)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--dot-size", type=int, default=4096)
  parser.add_argument("--microbatches", type=int, default=4,
                      help="also time the update accumulated over this many "
                           "equal chunks of the batch (same gradients)")
  parser.add_argument("--profile", action="store_true")
  baseline.add_argument(parser, default=BASELINE_REV)
  args = parser.parse_args(argv)
  if baseline.requested(args):
    return baseline.main("experiments.benchmarks.learner_step", argv, args,
                         parse=parse_figures)

  print(timing.jax_line())
  print(f"update: B={args.batch_size} sequences x {args.seq_len} stored steps "
        f"(T + 1; {args.seq_len - 1 - args.burn_in} Retrace transitions), "
        f"burn-in {args.burn_in}, Atari torso 84x84x1 uint8, A={NUM_ACTIONS}, "
        f"N={NUM_MIXTURES}, LSTM {LSTM_SIZE}")
  model = analytic_flops(args.batch_size * args.seq_len)
  print(f"FLOPs per update (analytic matmul/conv model): "
        f"{model['total'] / 1e9:.1f} GFLOP (LSTM {100 * model['lstm_share']:.0f}"
        "% of it)")
  rows = []
  for m in sorted({1, args.microbatches}):
    flops, best, mean, compile_s = bench_update(
        args.batch_size, args.seq_len, args.burn_in, args.repeats, m)
    rows.append((m, flops, best, mean, compile_s))
  peak = timing.matmul_peak(args.dot_size, args.repeats) / 1e9
  print(f"peak: jnp.dot {args.dot_size}x{args.dot_size} float32: "
        f"{peak:.1f} GFLOP/s")
  print(f"{'variant':<34} {'ms/update':>10} {'(mean)':>8} {'GFLOP/s':>8} "
        f"{'% of peak':>10}")
  for m, flops, best, mean, compile_s in rows:
    name = ("one batch (M=1)" if m == 1 else
            f"{m} micro-batches of {args.batch_size // m} (M={m})")
    achieved = model["total"] / best / 1e9
    print(f"{name:<34} {best * 1e3:>10.0f} {mean * 1e3:>8.0f} "
          f"{achieved:>8.1f} {100 * achieved / peak:>9.1f}%")
  m1 = rows[0]
  print(f"XLA cost_analysis of M=1: {m1[1] / 1e9:.1f} GFLOP, "
        f"{100 * m1[1] / m1[2] / 1e9 / peak:.1f}% of peak (it counts the body "
        "of the LSTM scan once, not once per step)")
  print("target: >= 25% of peak (analytic count)")
  if args.profile:
    for name, seconds in profile_parts(args.batch_size, args.seq_len,
                                       args.repeats).items():
      print(f"profile: {name}: {seconds * 1e3:.0f} ms")


if __name__ == "__main__":
  main()
