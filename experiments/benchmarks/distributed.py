r"""Benchmark: the distributed program on Ray against the single-process loop.

Prints, from one run, on one config, one environment and B lanes per actor:

1. Throughput (steady state): env steps/s and learner steps/s of the
   single-process Python loop (`loops.run_experiment`) and of
   `run_distributed` with K = 1, 2, 4 actor processes (`--actors`), with
   the ratio of each to the single-process loop. Start-up, process
   launch and compilation are excluded: the rates are the differences of
   env_steps, learner_steps and elapsed_s between the first metrics row
   with a learner step and the last row (for `run_distributed`, the last
   row taken while the program ran: its final row is made after the nodes
   were stopped). Both loops are paced by `samples_per_insert`, so on a
   CPU learner the learner's speed bounds the env steps/s of both. On a
   machine with fewer cores than K actors + the learner the processes
   share the cores (the header prints `os.cpu_count()`).
2. Hop costs over Ray's object store between separate processes (median
   and p90 over `--repeats`, ms; payloads in MB):
   * publish: `ray.put` of the learner's parameters (`jax.device_get` of
     the config's `NGUParams`), in the driver, as `LearnerNode` does once
     per version;
   * pull: `LearnerNode.get_params_ref` + `ray.get` of a parameters object
     the pulling process has not read yet (a fresh `ray.put` per repeat,
     i.e. a new version, as `VariableClient.get_variables` sees one),
     measured in a separate Ray actor process (`HopProbe`), not the driver;
   * insert: `ReplayClient.insert` of one actor step's worth of sequence
     items (B real `SequenceItem`s, made by stepping an `Actor` with a
     `SequenceAdder`) into a launched `ReplayNode` (without the rate limit,
     min_replay_size lowered to the batch size), from `HopProbe`;
   * sample: `ReplayClient.sample(batch_size)`, from `HopProbe`;
   * update: `ReplayClient.update_priorities` of a batch's keys and the
     wait for its acknowledgement, from `HopProbe`.
3. A scaling model (`scaling_model`) at K = 16, 64, 256 actors with the
   learner on one GPU, from the measured hop costs and two assumptions
   (flags, printed as assumptions):
   * `--gpu-learner-steps-per-s` (default 5): NGU App. A, "As in R2D2, we
     train the agent with a single GPU-based learner, performing
     approximately 5 network updates per second (each update on a
     mini-batch of 64 length-80 sequences)" -- Atari networks and batch;
     our configs' updates are smaller, so this is conservative for them;
   * `--actor-env-steps-per-s` (default: the per-actor env steps/s
     measured with K = 1 here, which on a CPU learner is paced by that
     learner; the acting-only rate of one actor, measured in the driver
     without replay or learner, is printed beside it). NGU App. A reports
     ~260 env steps/s per actor on Atari, with 256 actors.
   * `--bandwidth-gbps` (default 0: off): when > 0, each insert and each
     pull also pays its payload over a link of this bandwidth (actors on
     other machines than the replay and learner).

Usage:
  python -m experiments.benchmarks.distributed [--config cartpole]
      [--env-steps 15000] [--actors 1 2 4] [--num-lanes 8] [--repeats 30]
      [--gpu-learner-steps-per-s 5] [--actor-env-steps-per-s R]
      [--bandwidth-gbps 0] [--quick] [--json PATH]
"""

import argparse
import math
import os
from typing import Any, Dict, List, Optional, Sequence

# Token authentication (Ray 2.60's secure mode), never disabled; Ray reads
# the mode when it is imported, so it is set before anything imports Ray.
os.environ.setdefault("RAY_AUTH_MODE", "token")

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np

from experiments import cartpole_sanity
from experiments.benchmarks import actor_step
from experiments.benchmarks import local_ray
from experiments.benchmarks import timing
from ngu_jax import envs
from ngu_jax import loops
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.loops.distributed import clients
from ngu_jax.loops.distributed import launcher
from ngu_jax.loops.distributed import nodes
from ngu_jax.loops.distributed import program as program_lib
from ngu_jax.replay import prioritized

SETTINGS = {
    "cartpole": dict(env="gymnax/CartPole-v1",
                     config=lambda: config_lib.NGUConfig(
                         **cartpole_sanity.CONFIG)),
    # The presets on experiments/train.py's DEFAULT_ENVS.
    "disco_maze": dict(env="disco_maze", config=config_lib.disco_maze),
    "minigrid": dict(env="minigrid/MiniGrid-DoorKey-8x8-v0",
                     config=config_lib.minigrid),
}
MODEL_ACTORS = (16, 64, 256)
PAPER_LEARNER_STEPS_PER_S = 5.
"""NGU App. A (as R2D2): "a single GPU-based learner, performing
approximately 5 network updates per second" (batches of 64 sequences of
80 steps, Atari networks)."""
PAPER_ACTOR_ENV_STEPS_PER_S = 260.
"""NGU App. A: "each actor performing ~260 environment steps per second on
Atari" (printed for comparison only)."""
PAPER_ACTORS = 256
"""NGU Sec. 3 / App. A: 256 actors unless stated otherwise."""
PAPER_SETTING = dict(
    actor_env_steps_per_s=PAPER_ACTOR_ENV_STEPS_PER_S,
    learner_steps_per_s=PAPER_LEARNER_STEPS_PER_S, num_lanes=1,
    batch_size=64, replay_period=40, actor_update_period=100,
    # Implied by App. A's rates: 5 updates of 64 sequences per second
    # against 256 actors x 260 env steps/s / 40 steps per sequence.
    samples_per_insert=PAPER_LEARNER_STEPS_PER_S * 64 * 40
    / (PAPER_ACTORS * PAPER_ACTOR_ENV_STEPS_PER_S))
"""App. A's setting (one environment per actor, batch 64, Table 6's
replay period 40 and actor update period 100), for the model's second
table: the paper's agent with this library's measured hop costs."""
SHARED = ("replay", "broadcast", "learner")


# ------------------------------------------------------------- the model


def scaling_model(num_actors: int, *, actor_env_steps_per_s: float,
                  learner_steps_per_s: float, num_lanes: int,
                  batch_size: int, replay_period: int,
                  samples_per_insert: float, actor_update_period: int,
                  insert_s: float, sample_s: float, update_s: float,
                  publish_s: float, pull_s: float) -> Dict[str, Any]:
  """Env steps/s of K actors, one replay node and one learner (a model).

  Notation: K actors of B lanes, each offering `a` env steps/s; a learner
  doing at most L steps/s of `batch_size` sequences; replay period P
  (every lane inserts one sequence per P env steps); samples per insert
  S; actors pull parameters every U actor steps (of B env steps each).
  Costs (seconds) are of one call, and a node serves one call at a time
  (Python: one interpreter per node), so a node saturates when the sum
  of its calls' costs per second reaches 1 s/s.

  * actors:    E_act = K * a.
  * learner:   each learner step samples `batch_size` sequences, and the
               rate limiter grants S samples per inserted sequence, i.e.
               per P env steps:  E_learn = L * batch_size * P / S.
  * replay:    one actor step of B lanes inserts B items per P actor
               steps, one call of cost `insert_s`, so the node spends
               insert_s / (B * P) seconds per env step; it also serves the
               learner's sample and priority update, at most L of each per
               second (conservative: the assumed learner rate):
               E_replay = B * P / insert_s * max(0, 1 - L * (sample_s
               + update_s)).
  * broadcast: each actor pulls once per U actor steps, i.e. once per
               U * B env steps, at `pull_s` each on the learner node;
               the learner publishes (`ray.put`) at most once per learner
               step (conservative: a new version at every step):
               E_bcast = U * B / pull_s * max(0, 1 - L * publish_s).

  Env steps/s E = min(E_act, E_learn, E_replay, E_bcast); the limiter is
  the argmin. Learner steps/s = min(L, E * S / (batch_size * P)). The
  shared limits (learner, replay, broadcast) do not depend on K: the
  first of them that K * a reaches is the one that saturates first, at
  K = ceil(its limit / a) actors (the next one is reported too).

  Args:
    num_actors: K.
    actor_env_steps_per_s: a, env steps/s of one actor (all its lanes).
    learner_steps_per_s: L.
    num_lanes: B, lanes per actor.
    batch_size, replay_period, samples_per_insert, actor_update_period:
      the config's.
    insert_s: cost of one insert call of B items.
    sample_s: cost of sampling one batch.
    update_s: cost of one priority update of a batch.
    publish_s: cost of one parameter publish (`ray.put`).
    pull_s: cost of one parameter pull of a new version.

  Returns:
    {"num_actors", "limits": {"actors", "learner", "replay", "broadcast"}
    (env steps/s), "env_steps_per_s", "learner_steps_per_s", "limiter",
    "first_to_saturate" (of learner / replay / broadcast),
    "saturating_actors" (the K where it saturates: ceil(limit / a), at
    least 1), "next_to_saturate" and "next_saturating_actors" (the next
    shared limit, were the first one lifted)}.
  """
  lanes, period = num_lanes, replay_period
  rate = learner_steps_per_s
  limits = {
      "actors": num_actors * actor_env_steps_per_s,
      "learner": rate * batch_size * period / samples_per_insert,
      "replay": (lanes * period / insert_s
                 * max(0., 1. - rate * (sample_s + update_s))),
      "broadcast": (actor_update_period * lanes / pull_s
                    * max(0., 1. - rate * publish_s)),
  }
  env_rate = min(limits.values())
  limiter = min(limits, key=limits.get)
  order = sorted(SHARED, key=limits.get)

  def saturating(name):
    if actor_env_steps_per_s <= 0:
      return math.inf
    return max(1, math.ceil(limits[name] / actor_env_steps_per_s))

  return {"num_actors": num_actors, "limits": limits,
          "env_steps_per_s": env_rate,
          "learner_steps_per_s": min(rate, env_rate * samples_per_insert
                                     / (batch_size * period)),
          "limiter": limiter, "first_to_saturate": order[0],
          "saturating_actors": saturating(order[0]),
          "next_to_saturate": order[1],
          "next_saturating_actors": saturating(order[1])}


def transfer_s(megabytes: float, bandwidth_gbps: float) -> float:
  """Seconds to move `megabytes` over a `bandwidth_gbps` link (0: free)."""
  if bandwidth_gbps <= 0:
    return 0.
  return megabytes * 8e-3 / bandwidth_gbps


# ------------------------------------------------------------ throughput


def steady_rates(rows: Sequence[Dict[str, Any]],
                 drop_last: bool = False) -> Dict[str, float]:
  """Rates between the first row with a learner step and the last row.

  Args:
    rows: metrics rows (env_steps, learner_steps, elapsed_s).
    drop_last: leave out the last row (`run_distributed`'s final row is
      made after the nodes stopped), if two rows remain.

  Returns:
    {"env_steps_per_s", "learner_steps_per_s", "window_s",
    "window_env_steps"}; NaN rates if fewer than two rows qualify.
  """
  started = [r for r in rows if r["learner_steps"] > 0]
  if drop_last and len(started) > 2:
    started = started[:-1]
  if len(started) < 2:
    nan = float("nan")
    return {"env_steps_per_s": nan, "learner_steps_per_s": nan,
            "window_s": 0., "window_env_steps": 0}
  first, last = started[0], started[-1]
  dt = last["elapsed_s"] - first["elapsed_s"]
  return {"env_steps_per_s": (last["env_steps"] - first["env_steps"]) / dt,
          "learner_steps_per_s":
              (last["learner_steps"] - first["learner_steps"]) / dt,
          "window_s": dt,
          "window_env_steps": last["env_steps"] - first["env_steps"]}


def bench_throughput(config, env_name: str, args) -> Dict[str, Any]:
  """The single-process loop, then `run_distributed` for each K."""
  log_every = max(args.num_lanes, args.env_steps // 40)
  out = {}
  total_s, summary = timing.timed(
      loops.run_experiment, config, env_name, args.env_steps, block=False,
      num_lanes=args.num_lanes, seed=args.seed, progress=False,
      log_every_env_steps=log_every)
  out["single_process"] = dict(steady_rates(summary["rows"]),
                               num_actors=0, total_s=total_s)
  print(f"  single process: {out['single_process']}", flush=True)
  for k in args.actors:
    total_s, summary = timing.timed(
        launcher.run_distributed, config, env_name, args.env_steps,
        block=False, num_actors=k, num_lanes=args.num_lanes, seed=args.seed,
        progress=False, log_every_env_steps=log_every)
    out[f"distributed_{k}"] = dict(
        steady_rates(summary["rows"], drop_last=True), num_actors=k,
        total_s=total_s)
    print(f"  {k} actor(s): {out[f'distributed_{k}']}", flush=True)
  return out


# ------------------------------------------------------------ hop costs


class HopProbe:
  """A Ray actor process timing calls to the replay and learner nodes."""

  def __init__(self, replay: Any, learner: Any):
    self._replay = clients.ReplayClient(program_lib.resolve(replay))
    self._learner = program_lib.resolve(learner)

  def pull(self, fresh_refs: List[Any]) -> List[float]:
    """Seconds of get_params_ref + ray.get of a new version, per ref."""
    import ray  # pylint: disable=g-import-not-at-top
    refs = iter(fresh_refs)

    def pull():
      ray.get(self._learner.get_params_ref.remote())
      return ray.get(next(refs))

    return timing.times(pull, repeats=len(fresh_refs), warmup=0,
                        block=False).tolist()

  def insert(self, items: List[Any], repeats: int) -> List[float]:
    """Seconds of each insert of `items`, after one warm-up insert."""
    return timing.times(self._replay.insert, items, repeats=repeats,
                        block=False).tolist()

  def sample(self, batch_size: int, repeats: int) -> List[float]:
    """Seconds of each sample of a batch, after one warm-up sample."""
    return timing.times(self._replay.sample, batch_size, repeats=repeats,
                        block=False).tolist()

  def update(self, batch_size: int, repeats: int) -> List[float]:
    """Seconds of each priority update of a batch's keys (new priorities
    every call) and the wait for it, after one warm-up update."""
    keys, _, _ = self._replay.sample(batch_size)
    priorities = iter(np.random.default_rng(0).uniform(
        0.1, 1., size=(repeats + 1, len(keys))))

    def update():
      self._replay.update_priorities(keys, next(priorities))
      self._replay.wait_for_updates()

    return timing.times(update, repeats=repeats, block=False).tolist()


class _Collect:
  """A replay stand-in: keeps the items of every insert call."""

  def __init__(self):
    self.calls: List[List[Any]] = []

  def insert(self, items, priorities=None):
    del priorities
    self.calls.append(list(items))


def make_items(config, env_name: str, num_lanes: int, seed: int,
               timed_steps: int) -> Dict[str, Any]:
  """Real items of one actor step, the parameters, the acting-only rate.

  Steps an `Actor` (fresh parameters, its adder writing to a list) until
  an actor step emits B items, then `timed_steps` more actor steps, timed
  (env step, action, adder; no replay or learner).
  """
  env = envs.make(env_name, num_lanes, seed=seed)
  spec = builder_lib.make_environment_spec(env)
  builder = builder_lib.NGUBuilder(config)
  networks = builder.make_networks(spec)
  params = jax.device_get(
      networks_lib.init_params(networks, jax.random.PRNGKey(seed)))
  policy = builder.make_policy(networks, spec)
  sink = _Collect()
  adder = builder.make_adder(sink, spec, policy)
  actor = builder.make_actor(jax.random.PRNGKey(seed + 1), policy, spec,
                             actor_step.FixedParams(params), adder)
  timestep = env.reset()

  def step():
    nonlocal timestep
    action = actor.select_action(timestep)
    actor.observe(timestep, action)
    actor.update()
    timestep = env.step(action)

  items = None
  for _ in range(50 * (config.trace_length + config.burn_in)):
    step()
    full = [c for c in sink.calls if len(c) == num_lanes]
    if full:
      items = full[0]
      break
  if items is None:
    raise RuntimeError("make_items: no actor step emitted B items.")
  seconds, _ = timing.pipelined(lambda _, __: step(), None,
                                range(timed_steps), block=False)
  acting = timed_steps * num_lanes / seconds
  env.close()
  return {"items": items, "params": params,
          "acting_env_steps_per_s": acting}


def _megabytes(tree) -> float:
  return sum(np.asarray(x).nbytes
             for x in prioritized.flatten(tree)[0]) / 2**20


def _stats(times: Sequence[float], megabytes: float, where: str
           ) -> Dict[str, Any]:
  ms = 1e3 * np.asarray(times, np.float64)
  return {"median_ms": float(np.median(ms)),
          "p90_ms": float(np.percentile(ms, 90)), "repeats": len(ms),
          "payload_mb": megabytes, "measured_from": where}


def bench_hops(config, env_name: str, args, made: Dict[str, Any]
               ) -> Dict[str, Any]:
  """Hop costs (module docstring, 2.) on a launched replay + learner."""
  import ray  # pylint: disable=g-import-not-at-top
  items, params = made["items"], made["params"]
  repeats = args.repeats
  # Puts of the learner's parameters, as LearnerNode.get_params_ref does.
  ray.put(params)  # Warm-up.
  fresh = []  # The new versions the pulls read.
  keep = fresh.append
  put_times = timing.times(lambda: keep(ray.put(params)), repeats=repeats,
                           warmup=0, block=False)
  hop_config = config.__class__(**{
      **config.to_dict(),
      "min_replay_size": min(config.batch_size, config.replay_capacity)})
  program = program_lib.Program("hops")
  replay = program.add_node("replay", nodes.ReplayNode, hop_config,
                            seed=args.seed, rate_limit=False, num_cpus=0,
                            threads=1)
  learner = program.add_node("learner", nodes.LearnerNode,
                             hop_config, env_name, None, replay,
                             seed=args.seed, num_cpus=0, threads=1)
  program.add_node("probe", HopProbe, replay, learner, num_cpus=0,
                   threads=1)
  handles = program_lib.launch(program)
  probe = handles["probe"]
  try:
    ray.get(handles["learner"].steps.remote())  # Constructed.
    ray.get(probe.pull.remote(fresh[:1]))  # Warm-up (a used ref).
    pull_times = ray.get(probe.pull.remote(fresh))
    insert_times = ray.get(probe.insert.remote(items, repeats))
    while ray.get(handles["replay"].info.remote())["size"] < (
        hop_config.min_replay_size):
      ray.get(probe.insert.remote(items, 1))
    sample_times = ray.get(probe.sample.remote(config.batch_size, repeats))
    update_times = ray.get(probe.update.remote(config.batch_size, repeats))
  finally:
    for handle in handles.values():
      ray.kill(handle, no_restart=True)
    del fresh
  item_mb = _megabytes(items[0])
  batch = config.batch_size
  probe_where = "Ray actor process (HopProbe)"
  return {
      "publish": _stats(put_times, _megabytes(params), "driver (ray.put)"),
      "pull": _stats(pull_times, _megabytes(params), probe_where),
      "insert": _stats(insert_times, item_mb * len(items), probe_where),
      "sample": _stats(sample_times, item_mb * batch, probe_where),
      "update": _stats(update_times, batch * 16 / 2**20, probe_where),
      "items_per_insert": len(items),
  }


# ---------------------------------------------------------------- report


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]
           ) -> List[str]:
  lines = ["| " + " | ".join(header) + " |",
           "| :--- |" + "|".join(" ---: " for _ in header[1:]) + "|"]
  lines += ["| " + " | ".join(row) + " |" for row in rows]
  return lines


def _ratio(x: float, base: float) -> str:
  if not (base > 0 and math.isfinite(x)):
    return "n/a"
  return f"{x / base:.2f}"


def report(results: Dict[str, Any]) -> List[str]:
  """The printed report of `results` (main's)."""
  s = results["settings"]
  lines = [
      f"machine: {results['machine']}, os.cpu_count() = "
      f"{results['cpu_count']}, jax {results['jax']} "
      f"({results['backend']}), ray {results['ray']}",
      f"config {s['config']} on {s['env']}: {s['num_lanes']} lanes per "
      f"actor, batch {s['batch_size']}, replay period "
      f"{s['replay_period']}, samples per insert "
      f"{s['samples_per_insert']}, min replay {s['min_replay_size']}, "
      f"actor update period {s['actor_update_period']}, "
      f"{s['env_steps']} env steps per run",
      f"note: K actors + the learner + replay share {results['cpu_count']} "
      "CPU cores here (oversubscribed for K >= 2).",
      "",
      "## Throughput (steady state: rates between the first metrics row "
      "with a learner step and the last row taken while running; start-up "
      "and compilation excluded)",
  ]
  thr = results["throughput"]
  base = thr["single_process"]
  rows = []
  for name, r in thr.items():
    label = ("single process (Python loop)" if name == "single_process"
             else f"distributed, {r['num_actors']} actor(s)")
    rows.append([label, f"{r['env_steps_per_s']:.0f}",
                 f"{r['learner_steps_per_s']:.1f}",
                 _ratio(r["env_steps_per_s"], base["env_steps_per_s"]),
                 _ratio(r["learner_steps_per_s"],
                        base["learner_steps_per_s"]),
                 f"{r['window_s']:.1f}", f"{r['total_s']:.0f}"])
  lines += _table(["run", "env steps/s", "learner steps/s",
                   "env x single", "learner x single", "window s",
                   "wall s (incl. start-up)"], rows)
  lines += [f"acting only (one actor in the driver, no replay / learner): "
            f"{results['acting_env_steps_per_s']:.0f} env steps/s", "",
            "## Hop costs over Ray's object store (separate processes)"]
  hops = results["hops"]
  what = {"publish": "parameter publish (ray.put)",
          "pull": "parameter pull (get_params_ref + ray.get, new version)",
          "insert": f"replay insert ({hops['items_per_insert']} items)",
          "sample": f"replay sample ({s['batch_size']} sequences)",
          "update": f"update_priorities ({s['batch_size']} keys)"}
  rows = [[what[k], f"{hops[k]['median_ms']:.2f}", f"{hops[k]['p90_ms']:.2f}",
           f"{hops[k]['payload_mb']:.3f}", hops[k]["measured_from"]]
          for k in what]
  lines += _table(["hop", "median ms", "p90 ms", "payload MB",
                   "measured from"], rows)
  model = results["model"]
  a = model["assumptions"]
  lines += [
      "", "## Scaling model (learner on one GPU; formulas in "
      "`scaling_model`'s docstring)",
      "assumptions (flags):",
      f"  --gpu-learner-steps-per-s {a['learner_steps_per_s']:g}: "
      f"{a['learner_source']}",
      f"  --actor-env-steps-per-s {a['actor_env_steps_per_s']:.0f}: "
      f"{a['actor_source']}",
      f"  --bandwidth-gbps {a['bandwidth_gbps']:g}: "
      + ("off (costs as measured on this machine)"
         if a["bandwidth_gbps"] <= 0 else
         "each insert and pull also moves its payload over this link"),
      "  replay sample and priority-update load, and one publish per "
      "learner step, at the assumed learner rate (conservative)",
  ]
  lines += _model_table(model["rows"])
  p = model["paper_setting"]
  lines += [
      "", "### The same model in NGU App. A's setting, with the costs "
      "measured here",
      f"  {p['actor_env_steps_per_s']:g} env steps/s per actor, "
      f"{p['num_lanes']} environment per actor, learner "
      f"{p['learner_steps_per_s']:g} steps/s of {p['batch_size']} "
      f"sequences, replay period {p['replay_period']}, actor update period "
      f"{p['actor_update_period']}, samples per insert "
      f"{p['samples_per_insert']:.3f} (implied by App. A's rates with "
      f"{PAPER_ACTORS} actors); Atari payloads (a 0.57 MB sequence) are "
      "larger than the ones measured"]
  lines += _model_table(model["paper_rows"])
  lines += ["(limits in env steps/s)"]
  return lines


def _model_table(model_rows: Sequence[Dict[str, Any]]) -> List[str]:
  """The markdown table of `scaling_model` rows."""
  rows = []
  for m in model_rows:
    lim = m["limits"]
    rows.append([str(m["num_actors"]), f"{lim['actors']:.0f}",
                 f"{lim['learner']:.0f}", f"{lim['replay']:.0f}",
                 f"{lim['broadcast']:.0f}", f"{m['env_steps_per_s']:.0f}",
                 f"{m['learner_steps_per_s']:.2f}", m["limiter"],
                 f"{m['first_to_saturate']} (K={m['saturating_actors']})",
                 f"{m['next_to_saturate']} "
                 f"(K={m['next_saturating_actors']})"])
  return _table(["K", "actors offer", "learner limit", "replay limit",
                 "broadcast limit", "env steps/s", "learner steps/s",
                 "limited by", "saturates first", "then"], rows)


# ------------------------------------------------------------------ main


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", choices=sorted(SETTINGS),
                      default="cartpole")
  parser.add_argument("--env-steps", type=int, default=None,
                      help="env steps per throughput run (default 15000; "
                      "--quick 2400)")
  parser.add_argument("--actors", type=int, nargs="+", default=None,
                      help="actor processes of the distributed runs "
                      "(default 1 2 4; --quick 1)")
  parser.add_argument("--num-lanes", type=int, default=8,
                      help="lanes per actor (and of the single process)")
  parser.add_argument("--repeats", type=int, default=None,
                      help="repeats per hop (default 30; --quick 8)")
  parser.add_argument("--min-replay", type=int, default=None,
                      help="min_replay_size of every run (default: the "
                      "config's; --quick 64)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--gpu-learner-steps-per-s", type=float,
                      default=PAPER_LEARNER_STEPS_PER_S,
                      help="ASSUMPTION: the GPU learner's steps/s (default "
                      "5: NGU App. A, as in R2D2)")
  parser.add_argument("--actor-env-steps-per-s", type=float, default=None,
                      help="ASSUMPTION: env steps/s of one actor (default: "
                      "measured here with the fewest actors)")
  parser.add_argument("--bandwidth-gbps", type=float, default=0.,
                      help="ASSUMPTION: link bandwidth actors <-> replay / "
                      "learner; 0 (default): costs as measured locally")
  parser.add_argument("--quick", action="store_true",
                      help="tiny budgets, to check that the script runs")
  parser.add_argument("--json", default=None, help="write all figures here")
  return parser


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  """Runs the benchmark; prints the report; returns every figure.

  Ray is initialised here (before JAX computes anything) unless it already
  is, and then shut down again; a cluster that was already up is kept.
  """
  args = _parser().parse_args(argv)
  quick = args.quick
  if args.env_steps is None:
    args.env_steps = 2400 if quick else 15_000
  if args.actors is None:
    args.actors = [1] if quick else [1, 2, 4]
  if args.repeats is None:
    args.repeats = 8 if quick else 30
  if args.min_replay is None and quick:
    args.min_replay = 64
  return local_ray.run_and_report(lambda: _run(args), args.json, ray_cpus=2)


def _run(args) -> Dict[str, Any]:
  import ray  # pylint: disable=g-import-not-at-top
  setting = SETTINGS[args.config]
  env_name = setting["env"]
  config = setting["config"]()
  if args.min_replay is not None:
    config = config.__class__(**{**config.to_dict(),
                                 "min_replay_size": args.min_replay})
  print(f"distributed benchmark: {args.config} on {env_name}, "
        f"{os.cpu_count()} CPUs", flush=True)
  throughput = bench_throughput(config, env_name, args)
  made = make_items(config, env_name, args.num_lanes, args.seed,
                    timed_steps=20 if args.quick else 200)
  hops = bench_hops(config, env_name, args, made)
  print("  hops measured", flush=True)
  fewest = min(args.actors)
  measured = throughput[f"distributed_{fewest}"]["env_steps_per_s"] / fewest
  if args.actor_env_steps_per_s is not None:
    actor_rate = args.actor_env_steps_per_s
    actor_source = "given on the command line"
  else:
    actor_rate = measured
    actor_source = (
        f"measured: distributed with {fewest} actor(s), per actor (paced "
        f"here by the CPU learner); acting only: "
        f"{made['acting_env_steps_per_s']:.0f}; NGU App. A on Atari: "
        f"~{PAPER_ACTOR_ENV_STEPS_PER_S:.0f}")
  gbps = args.bandwidth_gbps
  costs = dict(
      insert_s=hops["insert"]["median_ms"] / 1e3
      + transfer_s(hops["insert"]["payload_mb"], gbps),
      sample_s=hops["sample"]["median_ms"] / 1e3,
      update_s=hops["update"]["median_ms"] / 1e3,
      publish_s=hops["publish"]["median_ms"] / 1e3,
      pull_s=hops["pull"]["median_ms"] / 1e3
      + transfer_s(hops["pull"]["payload_mb"], gbps))
  model_rows = [scaling_model(
      k, actor_env_steps_per_s=actor_rate,
      learner_steps_per_s=args.gpu_learner_steps_per_s,
      num_lanes=args.num_lanes, batch_size=config.batch_size,
      replay_period=config.replay_period,
      samples_per_insert=config.samples_per_insert,
      actor_update_period=config.actor_update_period, **costs)
                for k in MODEL_ACTORS]
  paper_rows = [scaling_model(k, **PAPER_SETTING, **costs)
                for k in MODEL_ACTORS]
  results = {
      "machine": timing.processor(),
      "cpu_count": os.cpu_count(), "jax": jax.__version__,
      "backend": jax.default_backend(), "ray": ray.__version__,
      "settings": dict(
          config=args.config, env=env_name, num_lanes=args.num_lanes,
          env_steps=args.env_steps, actors=list(args.actors),
          repeats=args.repeats, batch_size=config.batch_size,
          replay_period=config.replay_period,
          samples_per_insert=config.samples_per_insert,
          min_replay_size=config.min_replay_size,
          actor_update_period=config.actor_update_period, quick=args.quick),
      "throughput": throughput,
      "acting_env_steps_per_s": made["acting_env_steps_per_s"],
      "hops": hops,
      "model": {
          "assumptions": dict(
              learner_steps_per_s=args.gpu_learner_steps_per_s,
              learner_source=(
                  "NGU App. A: 'a single GPU-based learner, performing "
                  "approximately 5 network updates per second' (batches of "
                  "64 length-80 sequences, Atari networks)"
                  if args.gpu_learner_steps_per_s
                  == PAPER_LEARNER_STEPS_PER_S
                  else "given on the command line"),
              actor_env_steps_per_s=actor_rate, actor_source=actor_source,
              bandwidth_gbps=gbps),
          "costs_s": costs, "rows": model_rows,
          "paper_setting": PAPER_SETTING, "paper_rows": paper_rows},
  }
  results["lines"] = report(results)
  return results


if __name__ == "__main__":
  main()
