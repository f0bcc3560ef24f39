r"""Which running statistics keep NGU's intrinsic reward informative.

NGU's intrinsic reward depends on two running averages whose inputs are
non-stationary: the mean / std of the RND errors behind the life-long
modulator alpha (Sec. 2; the RND predictor learns and the observation
normaliser in front of it moves) and d_m^2, the average k-NN squared distance
of the episodic kernel (Alg. 1 line 6; the embedding f trains). This probe
trains the agent once and feeds the very same streams -- the actor's RND
errors and f(x_t) of every lane, computed with the embedding parameters the
lane acts with -- into several variants of each statistic side by side:

* RND error statistics: the all-time mean / std with every error (the code
  as first written: errors computed before the learner's observation
  statistics reached the actor included), the all-time mean / std of the
  errors computed after that, and moving averages over horizons of H errors
  (`lifelong.update_stats`). Reported: the fraction of steps with alpha > 1
  and the mean of (err - mu_e) / sigma_e (0 for statistics that track the
  errors).
* d_m^2: the lifetime mean and moving averages over H k-NN distances
  (`EpisodicMemoryConfig.distance_horizon`), each as a ratio to the current
  scale (the mean k-NN squared distance of the window, measured by a memory
  with a 10-distance horizon, i.e. about one step).

The agent itself acts with the config's own settings (`--set` to change
them). Writes `probe.csv` (one row per window) and prints a table.

Usage:
  python -m experiments.probes.intrinsic_statistics --env-steps 40000 \
      [--output runs/probe] [--set FIELD=VALUE ...]
"""

import argparse
import ast
import csv
import dataclasses
import functools
import os
import sys
import time
from typing import Dict, List

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import envs
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.agents.ngu.variants import intrinsic as variant_intrinsic

RND_HORIZONS = (1_000, 10_000, 100_000)
DM2_HORIZONS = (0, 1_000, 10_000, 100_000)
CURRENT_HORIZON = 10  # ~ one step of k = 10 distances: the current scale.
# Disco Maze at the laptop scale of experiments.disco_maze_coverage.
DISCO_LAPTOP = dict(batch_size=32, lstm_size=128, head_hidden=128,
                    grid_output_size=128, trace_length=10, replay_period=5)


def _rnd_variants(stats, errors, ready):
  """Updates every RND-statistics variant; per variant (alpha > 1 count,
  sum of z over the counted errors, counted errors)."""
  out, new = [], []
  specs = [("all_errors_all_time", 0, jnp.asarray(True)),
           ("all_time", 0, ready)] + [
               (f"horizon_{h}", h, ready) for h in RND_HORIZONS]
  for s, (_, horizon, valid) in zip(stats, specs):
    alpha, s = lifelong.modulator(s, errors, horizon=horizon, valid=valid)
    w = jnp.broadcast_to(valid, errors.shape).astype(jnp.float32)
    out.append(jnp.stack([jnp.sum(w * (alpha > 1)), jnp.sum(w * (alpha - 1)),
                          jnp.sum(w)]))
    new.append(s)
  return tuple(new), jnp.stack(out)


RND_NAMES = ["all_errors_all_time", "all_time"] + [
    f"horizon_{h}" for h in RND_HORIZONS]


def main(argv=None) -> Dict[str, np.ndarray]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--env", default="disco_maze")
  parser.add_argument("--preset", default="disco_maze")
  parser.add_argument("--env-kwarg", action="append", default=["size=11"])
  parser.add_argument("--num-lanes", type=int, default=16)
  parser.add_argument("--env-steps", type=int, default=40_000)
  parser.add_argument("--window", type=int, default=2_000,
                      help="env steps per row")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output", default="runs/probe_intrinsic_statistics")
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE")
  args = parser.parse_args(argv)
  overrides = dict(DISCO_LAPTOP) if args.preset == "disco_maze" else {}
  for item in args.set:
    name, _, value = item.partition("=")
    overrides[name] = ast.literal_eval(value)
  config = config_lib.PRESETS[args.preset](**overrides)
  env_kwargs = {k: ast.literal_eval(v) for k, v in
                (item.partition("=")[::2] for item in args.env_kwarg)}
  if args.env != "disco_maze":
    env_kwargs.pop("size", None)

  env = envs.make(args.env, args.num_lanes, seed=args.seed, **env_kwargs)
  spec = builder_lib.make_environment_spec(env)
  builder = builder_lib.NGUBuilder(config)
  learner_key, actor_key = jax.random.split(jax.random.PRNGKey(args.seed))
  networks = builder.make_networks(spec)
  policy = builder.make_policy(networks, spec)
  replay = builder.make_replay_tables(spec, policy, rate_limit=False,
                                      seed=args.seed)
  learner = builder.make_learner(
      learner_key, networks, builder.make_dataset_iterator(replay),
      env_spec=spec, replay_client=replay)
  adder = builder.make_adder(replay, spec, policy)
  actor = builder.make_actor(actor_key, policy, spec, learner, adder)

  b = args.num_lanes
  memory_base = variant_intrinsic.episodic_memory_config(config)
  mem_configs = [dataclasses.replace(memory_base, distance_horizon=h)
                 for h in DM2_HORIZONS + (CURRENT_HORIZON,)]
  memories = [episodic.init(c, b, config.embedding_dim) for c in mem_configs]

  @functools.partial(jax.jit, donate_argnums=(0,))
  def memory_step(memories, embedding_params, observation, wipe):
    embeddings = jax.vmap(
        lambda p, x: networks.embedding.embed(p, x[None])[0])(
            embedding_params, observation)
    new = []
    for c, m in zip(mem_configs, memories):
      _, m = episodic.step(c, episodic.reset(m, wipe), embeddings)
      new.append(m)
    return tuple(new), jnp.stack([jnp.mean(m.mean_sq_distance)
                                  for m in new])

  rnd_step = jax.jit(_rnd_variants)
  rnd_stats = tuple(lifelong.init() for _ in RND_NAMES)
  memories = tuple(memories)

  rows: List[Dict[str, float]] = []
  window_rnd = np.zeros((len(RND_NAMES), 3))
  window_dm2 = np.zeros(len(mem_configs))
  window_steps = 0
  env_steps = learner_steps = 0
  ready_at = None
  samples_per_env_step = config.samples_per_insert / config.replay_period
  timestep = env.reset()
  start = time.time()
  next_row = args.window
  while env_steps < args.env_steps:
    action = actor.select_action(timestep)
    actor.observe(timestep, action)
    state, params = actor.state, actor.params
    ready = (params.rnd_observation_stats.count > 0
             if config.rnd_observation_normalization else jnp.asarray(True))
    rnd_stats, counts = rnd_step(rnd_stats, state.extras.rnd_error, ready)
    memories, dm2 = memory_step(memories, state.embedding_params,
                                jnp.asarray(timestep.observation),
                                jnp.asarray(timestep.first()))
    window_rnd += np.asarray(counts)
    window_dm2 += np.asarray(dm2)
    window_steps += 1
    actor.update()
    timestep = env.step(action)
    env_steps += b
    if ready_at is None and replay.size >= config.min_replay_size:
      ready_at = env_steps
    while (ready_at is not None and learner_steps * config.batch_size
           <= samples_per_env_step * (env_steps - ready_at)):
      learner.step()
      learner_steps += 1
    if env_steps >= next_row:
      next_row += args.window
      row = dict(env_steps=env_steps, learner_steps=learner_steps)
      for name, (above, z, n) in zip(RND_NAMES, window_rnd):
        row[f"rnd_{name}_alpha_above_one"] = above / n if n else np.nan
        row[f"rnd_{name}_mean_z"] = z / n if n else np.nan
      dm2_mean = window_dm2 / window_steps
      current = dm2_mean[-1]
      row["dm2_current"] = current
      for h, value in zip(DM2_HORIZONS, dm2_mean[:-1]):
        row[f"dm2_horizon_{h}_over_current"] = (value / current
                                                if current > 0 else np.nan)
      rows.append(row)
      window_rnd[:] = 0
      window_dm2[:] = 0
      window_steps = 0
      sys.stderr.write(f"\r{env_steps}/{args.env_steps} env steps, "
                       f"{learner_steps} learner steps, "
                       f"{env_steps / (time.time() - start):.0f} steps/s ")
  sys.stderr.write("\n")
  env.close()

  os.makedirs(args.output, exist_ok=True)
  path = os.path.join(args.output, "probe.csv")
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  _print_table(rows)
  print(f"\nwrote {path}")
  return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def _print_table(rows: List[Dict[str, float]]) -> None:
  picks = sorted({max(0, int(len(rows) * f) - 1)
                  for f in (0.1, 0.25, 0.5, 0.75, 1.0)})
  print("\nRND modulator: fraction of steps with alpha > 1 "
        "(mean z = (err - mu_e) / sigma_e in brackets)")
  print("| env steps | learner steps | " + " | ".join(RND_NAMES) + " |")
  print("|" + "---:|" * (2 + len(RND_NAMES)))
  for i in picks:
    r = rows[i]
    cells = [f"{r[f'rnd_{n}_alpha_above_one']:.3f} "
             f"({r[f'rnd_{n}_mean_z']:+.2f})" for n in RND_NAMES]
    print(f"| {r['env_steps']} | {r['learner_steps']} | "
          + " | ".join(cells) + " |")
  print("\nd_m^2 / current k-NN scale (current = mean k-NN squared distance "
        "of the window)")
  names = [f"horizon_{h}" for h in DM2_HORIZONS]
  print("| env steps | current scale | " + " | ".join(names) + " |")
  print("|" + "---:|" * (2 + len(names)))
  for i in picks:
    r = rows[i]
    cells = [f"{r[f'dm2_{n}_over_current']:.2f}" for n in names]
    print(f"| {r['env_steps']} | {r['dm2_current']:.3g} | "
          + " | ".join(cells) + " |")


if __name__ == "__main__":
  main()
