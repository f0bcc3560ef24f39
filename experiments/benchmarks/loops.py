r"""Benchmark: the Python loop against the compiled loop, side by side.

Spec: "for the same config and the same environment (MiniGrid
DoorKey-8x8 with the minigrid preset's networks; Disco Maze with the
disco_maze laptop networks), env steps/s and learner steps/s of the Python
loop and of the compiled loop (1 seed, and 8 seeds vmapped: per-seed cost),
printed side by side in one run, plus the share of the machine's matmul
peak the compiled loop's network FLOPs reach. Targets: the compiled loop
>= 20x the Python loop's env steps/s at the same pacing, and 8 vmapped seeds
cost <= 3x one seed."

Settings (`--settings`, default both), each on the SAME pure-JAX environment
in both loops (the Python loop runs it through
`envs.functional.FunctionalBatchedEnv`, name "jax/<name>"):
  * minigrid: minigrid/MiniGrid-DoorKey-8x8-v0 (xland-minigrid), the
    `minigrid()` preset at the laptop scale of
    experiments/minigrid_exploration.py (16 lanes, batch 32, LSTM / head
    128), N = 8;
  * disco_maze: the 11x11 maze, the `disco_maze()` preset at the laptop
    scale of experiments/disco_maze_coverage.py (16 lanes, batch 32, LSTM /
    head / torso 128, sequences of 10 every 5).
Both loops use one config: the presets' pacing (samples_per_insert 4 per
`replay_period` env steps of a lane), `min_replay_size` lowered to
`--min-replay` sequences so the learner runs during the measurement, and
the episodic memory fitted to the episode length
(`loops.compiled.fit_memory_to_episodes`, which changes no result).

Measured, in one process, one after the other:
  * Python loop: `run_experiment` for `--python-steps` env steps; the rate
    is taken between the first metrics row with learner steps and the last
    (compile time and replay warm-up excluded);
  * compiled loop, 1 seed and `--seeds` seeds vmapped: chunks of
    `--chunk` actor steps are run until the learner has started, then
    `--timed-chunks` chunks are timed (`jax.block_until_ready`).
env steps/s count every lane of every seed ("per seed" divides by the
seeds); learner steps/s likewise. The same three are then measured acting
only (min_replay_size = capacity: no learner step), which isolates what the
loops cost around the actor step from the learner's arithmetic. The FLOP share: XLA's cost analysis of
one jitted `select_action` over the lanes and one jitted `sgd_step`
(networks forward / backward, episodic memory), times the actor and learner
steps done per second by the compiled loop, over the measured peak of a
float32 matmul (1024 x 1024, jitted) on this machine.

Against an older revision (`--baseline-rev`, default BASELINE_REV, the
reference revision of the published speed-up: before the learner and actor
fast path): the same command runs in a temporary git worktree of that
revision and here, in the same call, and every figure is printed with its
ratio (experiments/benchmarks/baseline.py). `--baseline-rev none` measures
this checkout alone.

Usage:
  python -m experiments.benchmarks.loops [--settings minigrid,disco_maze]
      [--lanes 16] [--seeds 8] [--python-steps 6000] [--chunk 50]
      [--timed-chunks 4] [--min-replay 50] [--quick]
      [--baseline-rev REV|none] [--baseline-rounds K] [--json PATH]
"""

import argparse
import re
from typing import Any, Dict, List

import jax
import numpy as np

from experiments.benchmarks import baseline
from experiments.benchmarks import timing
from ngu_jax import envs
from ngu_jax import loops
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.loops.compiled import loop as compiled

# The revision before the learner and actor fast path (2026-11-23): the
# baseline of the compiled loop's published speed-up.
BASELINE_REV = "3b473ec"

SETTINGS = {
    "minigrid": dict(
        env="minigrid/MiniGrid-DoorKey-8x8-v0", env_kwargs={},
        config=lambda: config_lib.minigrid(batch_size=32, lstm_size=128,
                                           head_hidden=128)),
    "disco_maze": dict(
        env="disco_maze", env_kwargs={"size": 11},
        config=lambda: config_lib.disco_maze(
            batch_size=32, lstm_size=128, head_hidden=128,
            grid_output_size=128, trace_length=10, replay_period=5)),
}


def _config(name: str, args, env, learn: bool = True
            ) -> config_lib.NGUConfig:
  """The setting's config; without `learn` the learner never starts
  (min_replay_size = replay_capacity, never reached in the measurement)."""
  config = SETTINGS[name]["config"]()
  min_size = args.min_replay if learn else config.replay_capacity
  config = config.__class__(**{**config.to_dict(),
                               "min_replay_size": min_size})
  return compiled.fit_memory_to_episodes(config, env.max_episode_steps)


def _flops(fn, *args) -> float:
  cost = jax.jit(fn).lower(*args).compile().cost_analysis()
  if isinstance(cost, (list, tuple)):  # jax < 0.4.3x returned a list.
    cost = cost[0]
  return float(cost.get("flops", float("nan"))) if cost else float("nan")


def network_flops(loop: compiled.CompiledLoop, state) -> Dict[str, float]:
  """FLOPs of one actor step (B lanes) and one learner step (cost analysis)."""
  config, networks = loop.config, loop.networks
  one = jax.tree_util.tree_map(lambda x: x[0], state)
  ts = one.timestep
  first = ts.step_type == envs.StepType.FIRST
  actor = _flops(
      lambda p, s, o, r, f: actor_lib.select_action(config, networks, p, s,
                                                    o, r, f),
      one.actor_params, one.actor, ts.observation, ts.reward, first)
  batch = loop.sample_batch(one, jax.random.PRNGKey(0))
  learner = _flops(lambda s, b: learning.sgd_step(config, networks, s, b),
                   one.learner, batch)
  return {"actor": actor, "learner": learner}


def bench_python(name: str, args, learn: bool = True) -> Dict[str, float]:
  setting = SETTINGS[name]
  env = envs.make_functional(setting["env"], **setting["env_kwargs"])
  config = _config(name, args, env, learn)
  summary = loops.run_experiment(
      config, "jax/" + setting["env"], args.python_steps,
      num_lanes=args.lanes, seed=0, env_kwargs=setting["env_kwargs"],
      log_every_env_steps=args.lanes * args.chunk // 2, progress=False)
  rows = summary["rows"][1:]  # After the first row: compiled, warmed up.
  if learn:
    rows = [r for r in summary["rows"] if r["learner_steps"] > 0]
  if len(rows) < 2:
    raise SystemExit(f"{name}: the Python loop's learner did not start "
                     "within --python-steps; raise it or lower --min-replay.")
  first, last = rows[0], rows[-1]
  dt = last["elapsed_s"] - first["elapsed_s"]
  return {"env_steps_per_s": (last["env_steps"] - first["env_steps"]) / dt,
          "learner_steps_per_s":
              (last["learner_steps"] - first["learner_steps"]) / dt}


def bench_compiled(name: str, args, num_seeds: int,
                   learn: bool = True) -> Dict[str, Any]:
  setting = SETTINGS[name]
  env = envs.make_functional(setting["env"], **setting["env_kwargs"])
  config = _config(name, args, env, learn)
  loop = compiled.make_compiled_loop(config, env, args.lanes, args.chunk)

  def chunk(state):
    return loop.reset_stats(loop.run_chunk(state))

  run = jax.jit(jax.vmap(chunk), donate_argnums=0)
  keys = jax.random.split(jax.random.PRNGKey(0), num_seeds)
  state = jax.jit(jax.vmap(loop.init))(keys)
  compile_s, state = timing.timed(run, state)
  while learn and int(np.min(state.counters.learner_steps)) == 0:
    state = jax.block_until_ready(run(state))
  state = jax.block_until_ready(run(state))  # one chunk of steady state
  env0 = np.asarray(state.counters.env_steps).sum()
  learn0 = np.asarray(state.counters.learner_steps).sum()
  dt, state = timing.pipelined(lambda s, _: run(s), state,
                               range(args.timed_chunks))
  env_rate = (np.asarray(state.counters.env_steps).sum() - env0) / dt
  learn_rate = (np.asarray(state.counters.learner_steps).sum() - learn0) / dt
  return {"env_steps_per_s": env_rate, "learner_steps_per_s": learn_rate,
          "first_chunk_s": compile_s, "loop": loop, "state": state}


def run_setting(name: str, args, peak: float) -> List[str]:
  py = bench_python(name, args)
  one = bench_compiled(name, args, 1)
  many = bench_compiled(name, args, args.seeds)
  flops = network_flops(one["loop"], one["state"])
  actor_steps_per_s = one["env_steps_per_s"] / args.lanes
  achieved = (flops["actor"] * actor_steps_per_s
              + flops["learner"] * one["learner_steps_per_s"])
  s = args.seeds
  act = {"python": bench_python(name, args, learn=False),
         "one": bench_compiled(name, args, 1, learn=False),
         "many": bench_compiled(name, args, s, learn=False)}
  lines = [
      f"{name}: {SETTINGS[name]['env']}, {args.lanes} lanes, pacing "
      f"{one['loop'].config.samples_per_insert} samples per insert",
      f"  {'loop':<28} {'env steps/s':>12} {'learner steps/s':>16} "
      f"{'x Python':>9}",
      f"  {'python (1 seed)':<28} {py['env_steps_per_s']:>12.0f} "
      f"{py['learner_steps_per_s']:>16.1f} {1.0:>9.1f}",
      f"  {'compiled, 1 seed':<28} {one['env_steps_per_s']:>12.0f} "
      f"{one['learner_steps_per_s']:>16.1f} "
      f"{one['env_steps_per_s'] / py['env_steps_per_s']:>9.1f}",
      f"  {f'compiled, {s} seeds (all)':<28} {many['env_steps_per_s']:>12.0f} "
      f"{many['learner_steps_per_s']:>16.1f} "
      f"{many['env_steps_per_s'] / py['env_steps_per_s']:>9.1f}",
      f"  {f'compiled, {s} seeds (per seed)':<28} "
      f"{many['env_steps_per_s'] / s:>12.0f} "
      f"{many['learner_steps_per_s'] / s:>16.1f} "
      f"{many['env_steps_per_s'] / s / py['env_steps_per_s']:>9.1f}",
      f"  cost of {s} vmapped seeds / 1 seed (wall time per env step of a "
      f"seed's run x {s}): "
      f"{s * one['env_steps_per_s'] / many['env_steps_per_s']:.2f}x "
      f"(target <= 3x)",
      f"  acting only (no learner steps), env steps/s: python "
      f"{act['python']['env_steps_per_s']:.0f}, compiled 1 seed "
      f"{act['one']['env_steps_per_s']:.0f} "
      f"({act['one']['env_steps_per_s'] / act['python']['env_steps_per_s']:.1f}x), "
      f"compiled {s} seeds {act['many']['env_steps_per_s'] / s:.0f} per seed "
      f"({act['many']['env_steps_per_s']:.0f} in all, "
      f"{s * act['one']['env_steps_per_s'] / act['many']['env_steps_per_s']:.2f}x"
      f" the cost of 1 seed)",
      f"  first chunk (compile + {args.chunk} steps): 1 seed "
      f"{one['first_chunk_s']:.1f} s, {s} seeds {many['first_chunk_s']:.1f} s",
      f"  network FLOPs: actor step {flops['actor'] / 1e6:.2f} MFLOP "
      f"({args.lanes} lanes), learner step {flops['learner'] / 1e9:.3f} "
      f"GFLOP; compiled (1 seed) reaches {achieved / 1e9:.2f} GFLOP/s = "
      f"{100 * achieved / peak:.1f}% of the measured matmul peak",
  ]
  return lines


_SETTING = re.compile(r"^(\w+): .* lanes, pacing")
_ROW = re.compile(r"^\s+(python \(1 seed\)|compiled, 1 seed|"
                  r"compiled, \d+ seeds \(all\))\s+([\d.]+)\s+([\d.]+)")
_ACTING = re.compile(r"acting only .*python ([\d.]+), compiled 1 seed "
                     r"([\d.]+) .*\(([\d.]+) in all")


def parse_figures(text: str) -> Dict[str, float]:
  """The rates this benchmark printed (also a revision's older copy, whose
  lines are the same): per setting, env and learner steps/s of each loop
  and env steps/s acting only."""
  figures, setting = {}, None
  for line in text.splitlines():
    match = _SETTING.match(line)
    if match:
      setting = match.group(1)
      continue
    match = _ROW.match(line)
    if match and setting:
      row = match.group(1).replace(" (all)", "")
      figures[f"{setting}: {row}, env steps/s"] = float(match.group(2))
      figures[f"{setting}: {row}, learner steps/s"] = float(match.group(3))
      continue
    match = _ACTING.search(line)
    if match and setting:
      for row, value in zip(("python", "compiled, 1 seed", "compiled, seeds"),
                            match.groups()):
        figures[f"{setting}: acting only, {row}, env steps/s"] = float(value)
  return figures


def main(argv=None) -> List[str]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--settings", default="minigrid,disco_maze")
  parser.add_argument("--lanes", type=int, default=16)
  parser.add_argument("--seeds", type=int, default=8)
  parser.add_argument("--python-steps", type=int, default=6000)
  parser.add_argument("--chunk", type=int, default=50)
  parser.add_argument("--timed-chunks", type=int, default=4)
  parser.add_argument("--min-replay", type=int, default=50)
  parser.add_argument("--quick", action="store_true",
                      help="tiny sizes, to check the script runs")
  baseline.add_argument(parser, default=BASELINE_REV)
  args = parser.parse_args(argv)
  if baseline.requested(args):
    return baseline.main("experiments.benchmarks.loops", argv, args,
                         parse=parse_figures)
  if args.quick:
    args.lanes, args.seeds, args.python_steps = 4, 2, 600
    args.chunk, args.timed_chunks, args.min_replay = 10, 1, 4
  peak = timing.matmul_peak()
  return timing.report(timing.peak_line(peak),
                       (run_setting(name, args, peak)
                        for name in args.settings.split(",")))


if __name__ == "__main__":
  main()
