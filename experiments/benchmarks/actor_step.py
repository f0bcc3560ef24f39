r"""Benchmark: env steps/s of the full NGU actor and the share of its parts.

Spec: "env steps/s of the full NGU actor (32 lanes, MiniGrid and Atari
torso) and the share of each part (env, Q-network, embedding+RND, episodic
memory, adder). Target: the parts that are neither environment nor network
forward cost <= 25% of the step."

Settings (`--settings`, default both):
  * minigrid: minigrid/MiniGrid-DoorKey-8x8-v0 with the `minigrid()` preset
    (grid torso, N = 8, LSTM 256, episodic memory 5000);
  * atari: atari/Pong with the `atari()` preset (Atari torso, N = 32,
    LSTM 512, episodic memory 30000).
Both with `--lanes` lanes (32), fresh parameters (fixed seed) and per-lane
embedding parameters as the presets have them.

Measured in one run, each part timed call by call with
`jax.block_until_ready` around device work (the actor step is synchronous
too: `Actor.select_action` reads the action back to the host every step):
  (a) full step: one step of the training loop of `ngu_jax.loops.python`
      with the builder's `Actor` (jitted `select_action`, state donated):
      `select_action` -> `observe` (extras to the host, `SequenceAdder.add`,
      sequences inserted into a `PrioritizedReplay`) -> `update` ->
      `env.step`;
  (b) env.step alone: the same env, stepped once more with the action (a)
      just took (so (a)'s lanes see every other env step);
  (c) the Q-network forward alone: jitted `networks.uvfa.apply` on the
      batch and network inputs (a) just fed it, LSTM state carried;
  (d) embedding + RND alone: f vmapped over per-lane embedding parameters
      (as `select_action` does with `embedding_params_per_lane`), RND input
      whitening, g and g_hat forward and the error, jitted, on that batch;
  (e) the episodic memory step alone: jitted `episodic.step` on a FULL
      memory of the preset's capacity, state donated;
  (f) `SequenceAdder.add` alone (host side, with its replay inserts) of the
      very step (a) just added, into a second adder and replay (so it sees
      the same stream of steps and emits the same sequences);
  (g) the remainder = (a) - (b + c + d + e + f): glue inside the jitted
      step (episode resets, per-lane parameter selects, modulator, action
      sampling), jit dispatch, host <-> device transfers, Python.
Every step of (a) is followed by (b)..(f) once each, in an order rotated
from round to round, so that all parts see the same machine load. Figures
are medians over rounds of the mean ms per step in the round (IQR: over
rounds); the remainder is computed from the medians. Parts timed alone each
pay their own jit dispatch, which the fused actor step pays once, so the
remainder is if anything underestimated. The line "inside (a)" splits (a)
by call, timed in the same loop. Rounds of `--steps` (default 40, a
multiple of both presets' replay periods, 40 and 20) keep the adder's
sequence emissions, which are synchronised across lanes that reset
together, evenly spread over rounds.

Target: (e + f + g) / a <= 25%: episodic memory, adder and remainder are
neither environment nor network forward.

Usage:
  python -m experiments.benchmarks.actor_step [--settings minigrid,atari]
      [--lanes 32] [--rounds 15] [--steps 40] [--replay-capacity 128]
      [--seed 0] [--quick] [--baseline-rev REV|none] [--baseline-rounds K]
      [--json PATH]

`--baseline-rev REV` (default BASELINE_REV: before the learner and actor
fast path) runs the same command at REV in a temporary git worktree and
here, in the same call, and prints each setting's ms per step of every part
and env steps/s side by side with their ratio
(experiments/benchmarks/baseline.py); `none` measures this checkout alone.
"""

import argparse
import ast
import functools
import os
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks import baseline
from experiments.benchmarks import timing
from ngu_jax import envs
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.intrinsic import episodic
from ngu_jax.losses import rnd as rnd_losses
from ngu_jax.networks import rnd as rnd_lib
from ngu_jax.networks import uvfa
from ngu_jax.replay import PrioritizedReplay
from ngu_jax.agents.ngu.variants import intrinsic as variant_intrinsic

from experiments.benchmarks import episodic_memory

SETTINGS = {
    "minigrid": ("minigrid/MiniGrid-DoorKey-8x8-v0", config_lib.minigrid),
    "atari": ("atari/Pong", config_lib.atari),
}
PARTS = (
    ("full", "(a) full step (env + actor + adder)"),
    ("env", "(b) env.step"),
    ("q", "(c) Q-network forward (uvfa.apply)"),
    ("embed_rnd", "(d) embedding f (per lane) + RND forward"),
    ("episodic", "(e) episodic memory step (full, donated)"),
    ("adder", "(f) adder.add (host, incl. replay inserts)"),
    ("remainder", "(g) remainder (glue, dispatch, transfers)"),
)
MEASURED = ("env", "q", "embed_rnd", "episodic", "adder")
INSIDE = ("select_action", "observe", "env.step")  # Calls timed inside (a).
TARGET = 0.25
# The revision before the learner and actor fast path (as the loops
# benchmark's baseline).
BASELINE_REV = "3b473ec"


class FixedParams:
  """A variable source publishing fixed parameters: an `Actor` stepped
  without a learner (this benchmark, and `distributed.make_items`)."""

  def __init__(self, params):
    self._params = params

  def get_variables(self, names=None):
    del names
    return self._params


class _RecordingAdder:
  """Forwards to a `SequenceAdder` and keeps the last step it was given."""

  def __init__(self, adder):
    self.adder = adder
    self.last = None

  def add(self, step):
    self.last = step
    self.adder.add(step)

  def flush(self):
    self.adder.flush()


class ActorBench:
  """One setting: the full loop and its parts, each callable per round."""

  def __init__(self, name, lanes, replay_capacity, seed, overrides=None):
    env_name, preset = SETTINGS[name]
    self.name, self.env_name, self.lanes = name, env_name, lanes
    self.config = config = preset(**(overrides or {}))
    self.env = envs.make(env_name, lanes, seed=seed)
    spec = builder_lib.make_environment_spec(self.env)
    builder = builder_lib.NGUBuilder(config)
    self.networks = networks = builder.make_networks(spec)
    policy = builder.make_policy(networks, spec)
    key_params, key_actor = jax.random.split(jax.random.PRNGKey(seed))
    self.params = networks_lib.init_params(networks, key_params)
    # Small replays: an insert costs the same in a full replay of any size.
    replay = PrioritizedReplay(replay_capacity, min_size=1, seed=seed)
    self.adder = _RecordingAdder(builder.make_adder(replay, spec))
    self.actor = builder.make_actor(key_actor, policy, spec,
                                    FixedParams(self.params), self.adder)
    self.adder_alone = builder.make_adder(
        PrioritizedReplay(replay_capacity, min_size=1, seed=seed), spec)
    self.timestep = self.env.reset()
    self.action = None  # The action (a) took last.

    # (c) Q-network forward.
    self.q_apply = jax.jit(networks.uvfa.apply)
    self.q_state = networks.uvfa.initial_state(lanes)
    # (d) Embedding f with per-lane parameters (as select_action) + RND.
    self.embed_rnd = jax.jit(functools.partial(_embed_rnd, config, networks))
    self.lane_embedding = jax.tree_util.tree_map(
        lambda x: jnp.asarray(np.broadcast_to(x, (lanes,) + x.shape)),
        self.params.embedding)
    # (e) Episodic memory, full, donated.
    self.memory_config = variant_intrinsic.episodic_memory_config(config)
    self.episodic_step = jax.jit(episodic.step, static_argnums=0,
                                 donate_argnums=1)
    rng = np.random.default_rng(seed)
    dim = networks.embedding.embedding_dim
    self.memory = episodic_memory.full_state(self.memory_config, lanes, dim,
                                             rng)
    self.queries = jnp.asarray(rng.normal(size=(8, lanes, dim)), jnp.float32)
    self.num_queries = 0

  def describe(self):
    c, n = self.config, self.networks
    return (f"{self.name}: {self.env_name}, {c.torso} torso, obs "
            f"{n.uvfa.observation_shape}, A={n.uvfa.num_actions}, "
            f"N={c.num_mixtures}, LSTM {c.lstm_size}, memory "
            f"{c.memory_capacity} x D={n.embedding.embedding_dim}, "
            f"k={c.num_neighbors}, per-lane embedding params "
            f"{c.embedding_params_per_lane}, {self.lanes} lanes")

  # ------------------------------------------------------------- the parts

  def step(self):
    """(a): one step of the training loop; seconds of the step and inside.

    As `ngu_jax.loops.run_experiment`: select_action, observe (extras
    to the host, adder.add, replay inserts), update, env.step.
    """
    actor, timestep = self.actor, self.timestep
    # Synchronous: select_action reads the action back to the host.
    select, action = timing.timed(actor.select_action, timestep, block=False)
    observe, _ = timing.timed(actor.observe, timestep, action, block=False)
    update, _ = timing.timed(actor.update, block=False)
    env, self.timestep = timing.timed(self.env.step, action, block=False)
    self.action = action
    return select + observe + update + env, (select, observe, env)

  def env_step(self):
    """(b): env.step alone, with the action (a) just took."""
    return timing.timed(self.env.step, self.action, block=False)[0]

  def q_forward(self):
    """(c): the UVFA forward on the batch and network inputs (a) just saw."""
    s = self.adder.last
    x = jax.device_put(uvfa.UVFAInputs(
        observation=s.observation, prev_action=s.prev_action,
        prev_extrinsic_reward=s.prev_extrinsic_reward,
        prev_intrinsic_reward=s.prev_intrinsic_reward,
        mixture_index=s.mixture_index))
    jax.block_until_ready(x)
    seconds, (_, self.q_state) = timing.timed(self.q_apply, self.params.q, x,
                                              self.q_state)
    return seconds

  def embedding_rnd(self):
    """(d): per-lane f + RND forward on the observations (a) just saw."""
    observation = jax.device_put(self.adder.last.observation)
    jax.block_until_ready(observation)
    return timing.timed(self.embed_rnd, self.params, self.lane_embedding,
                        observation)[0]

  def episodic_memory(self):
    """(e): episodic.step on a full memory, donated."""
    self.num_queries += 1
    query = self.queries[self.num_queries % len(self.queries)]
    seconds, (_, self.memory) = timing.timed(
        self.episodic_step, self.memory_config, self.memory, query)
    return seconds

  def adder_add(self):
    """(f): SequenceAdder.add of the step (a) just added, second adder."""
    return timing.timed(self.adder_alone.add, self.adder.last,
                        block=False)[0]

  def round(self, steps, order):
    """`steps` steps of (a), each followed by the parts alone in `order`.

    Returns:
      {part: mean seconds per step} for "full", MEASURED and INSIDE.
    """
    parts = {"env": self.env_step, "q": self.q_forward,
             "embed_rnd": self.embedding_rnd,
             "episodic": self.episodic_memory, "adder": self.adder_add}
    totals = dict.fromkeys(("full",) + MEASURED + INSIDE, 0.)
    for _ in range(steps):
      seconds, inside = self.step()
      totals["full"] += seconds
      for call, call_seconds in zip(INSIDE, inside):
        totals[call] += call_seconds
      for part in order:
        totals[part] += parts[part]()
    return {part: total / steps for part, total in totals.items()}

  def close(self):
    self.env.close()


def _embed_rnd(config, networks, params, lane_embedding, observation):
  """f(x) with each lane's parameters, and err(x), as in select_action."""
  if config.embedding_params_per_lane:
    embeddings = jax.vmap(
        lambda p, x: networks.embedding.embed(p, x[None])[0])(
            lane_embedding, observation)
  else:
    embeddings = networks.embedding.embed(params.embedding, observation)
  if not config.use_rnd:
    return embeddings, None
  rnd_input = observation
  if config.rnd_observation_normalization:
    rnd_input = rnd_lib.normalize_observation(params.rnd_observation_stats,
                                              observation)
  error = rnd_losses.rnd_error(
      networks.rnd.predictor(params.rnd_predictor, rnd_input),
      networks.rnd.target(params.rnd_target, rnd_input))
  return embeddings, error


def run_setting(name, lanes, rounds, steps, replay_capacity, seed,
                overrides=None):
  """{part: [mean seconds per step of each round]} of one setting.

  `overrides`: NGUConfig fields replacing the preset's (e.g.
  {"memory_capacity": 640}).
  """
  bench = ActorBench(name, lanes, replay_capacity, seed, overrides)
  print(bench.describe())
  start = time.perf_counter()
  bench.round(steps, MEASURED)  # Warm-up: compiles, fills the adder buffers.
  print(f"  warm-up ({steps} steps, compiles) "
        f"{time.perf_counter() - start:.1f} s")
  times = {}
  start = time.perf_counter()
  for r in range(rounds):
    order = MEASURED[r % len(MEASURED):] + MEASURED[:r % len(MEASURED)]
    for part, seconds in bench.round(steps, order).items():
      times.setdefault(part, []).append(seconds)
  print(f"  timed {rounds} rounds x {steps} steps in "
        f"{time.perf_counter() - start:.1f} s; load average "
        f"{os.getloadavg()[0]:.2f}")
  bench.close()
  return times


def summarize(times):
  """Medians (s/step), the remainder and the shares of the full step."""
  med = {p: float(np.median(times[p])) for p in ("full",) + MEASURED}
  med["remainder"] = med["full"] - sum(med[p] for p in MEASURED)
  shares = {p: med[p] / med["full"] for p in med}
  non_env_non_net = (med["episodic"] + med["adder"] + med["remainder"]
                     ) / med["full"]
  return med, shares, non_env_non_net


def print_table(lanes, times):
  """Prints the table of one setting; returns its figures."""
  med, shares, non_env_non_net = summarize(times)
  header = f"{'part':<44} {'ms/step':>8} {'share':>7} {'IQR (ms)':>15}"
  print(header)
  print("-" * len(header))
  for part, label in PARTS:
    if part in times:
      q1, q3 = np.percentile(times[part], [25, 75]) * 1e3
      spread = f"{q1:.2f}..{q3:.2f}"
    else:
      spread = ""
    print(f"{label:<44} {med[part] * 1e3:>8.2f} {shares[part]:>7.1%} "
          f"{spread:>15}")
  print(f"env steps/s (lane-steps/s, full loop, {lanes} lanes): "
        f"{lanes / med['full']:,.0f}; env.step alone: "
        f"{lanes / med['env']:,.0f}")
  inside = {call: float(np.median(times[call])) for call in INSIDE}
  in_jit = inside["select_action"] - (med["q"] + med["embed_rnd"]
                                      + med["episodic"])
  print("inside (a), medians: " + ", ".join(
      f"{call} {seconds * 1e3:.2f} ms" for call, seconds in inside.items()))
  print(f"  select_action - (c + d + e) = {in_jit * 1e3:.2f} ms; observe - "
        f"(f) = {(inside['observe'] - med['adder']) * 1e3:.2f} ms")
  network = (med["q"] + med["embed_rnd"]) / med["full"]
  print(f"env share = {shares['env']:.1%}; network forward share (Q + "
        f"embedding/RND) = {network:.1%}")
  verdict = "met" if non_env_non_net <= TARGET else "MISSED"
  print(f"non-env, non-network share = (episodic + adder + remainder)/full "
        f"= {non_env_non_net:.1%} (target <= {TARGET:.0%}): {verdict}")
  return {"median_s": med, "shares": shares, "inside_s": inside,
          "non_env_non_network_share": non_env_non_net,
          "target_met": non_env_non_net <= TARGET}


_SETTING = re.compile(r"^(\w+): \S+, \S+ torso, obs")
_PART = re.compile(r"^\((\w)\) .*?\s+(-?[\d.]+)\s+-?[\d.]+%")
_RATE = re.compile(r"^env steps/s \(lane-steps/s, full loop, \d+ lanes\): "
                   r"([\d,]+)")
_SHARE = re.compile(r"^non-env, non-network share = .* = ([\d.]+)%")


def parse_figures(text: str):
  """What a comparison with another revision reads from this benchmark's
  output (also an older copy's, whose lines are the same): per setting, the
  ms per step of each part (a)-(g), env steps/s of the full loop, and the
  share the target is about (in %: shown on both sides, no speed-up)."""
  figures, setting = {}, None
  labels = {label[1]: part for part, label in PARTS}
  for line in text.splitlines():
    match = _SETTING.match(line)
    if match:
      setting = match.group(1)
      continue
    if setting is None:
      continue
    match = _PART.match(line)
    if match and match.group(1) in labels:
      figures[f"{setting}: {labels[match.group(1)]} ms"] = float(
          match.group(2))
      continue
    match = _RATE.match(line)
    if match:
      figures[f"{setting}: full loop, env steps/s"] = float(
          match.group(1).replace(",", ""))
      continue
    match = _SHARE.match(line)
    if match:
      figures[f"{setting}: non-env, non-network share %"] = float(
          match.group(1))
  return figures


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--settings", default="minigrid,atari",
                      help="comma-separated, from: " + ", ".join(SETTINGS))
  parser.add_argument("--lanes", type=int, default=32)
  parser.add_argument("--rounds", type=int, default=None,
                      help="timed rounds (default 15; 3 with --quick)")
  parser.add_argument("--steps", type=int, default=None,
                      help="actor steps per round and part (default 40; 10 "
                           "with --quick)")
  parser.add_argument("--replay-capacity", type=int, default=128,
                      help="items of each (small) replay the adders insert "
                           "into")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE",
                      help="override a config field of every setting, e.g. "
                           "--set memory_capacity=640")
  parser.add_argument("--quick", action="store_true",
                      help="few short rounds: a sanity run, not figures")
  baseline.add_argument(parser, default=BASELINE_REV)
  args = parser.parse_args(argv)
  rounds = args.rounds if args.rounds is not None else (
      3 if args.quick else 15)
  steps = args.steps if args.steps is not None else (10 if args.quick else 40)
  settings = [s.strip() for s in args.settings.split(",") if s.strip()]
  unknown = [s for s in settings if s not in SETTINGS]
  if unknown or not settings:
    parser.error(f"--settings: unknown {unknown}; known: {list(SETTINGS)}")
  if args.lanes < 1 or rounds < 1 or steps < 1:
    parser.error("--lanes, --rounds and --steps must be >= 1")
  overrides = {}
  for pair in args.set:
    key, sep, value = pair.partition("=")
    if not sep:
      parser.error(f"--set: expected FIELD=VALUE, got {pair!r}")
    try:
      overrides[key] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
      overrides[key] = value
  if baseline.requested(args):
    return baseline.main("experiments.benchmarks.actor_step", argv, args,
                         parse=parse_figures)

  print(timing.jax_line())
  print(f"{rounds} rounds x {steps} actor steps per part; medians over "
        f"rounds; seed {args.seed}")
  results = {}
  for name in settings:
    print()
    times = run_setting(name, args.lanes, rounds, steps,
                        args.replay_capacity, args.seed, overrides)
    results[name] = print_table(args.lanes, times)
  return results


if __name__ == "__main__":
  main()
