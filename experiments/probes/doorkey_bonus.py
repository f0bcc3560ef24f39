"""Where a trained PPO example's bonus pays on DoorKey, and where its policy goes.

A probe of the MiniGrid study's PPO runs (`experiments.minigrid`,
`examples.ppo_ngu`): it loads one seed of a run's checkpoint and plays
`--steps` steps in each of the run's lanes twice, once with a uniform random
policy and once with the trained policy (sampled, as in training), with the
bonus's networks and statistics frozen at the checkpoint. Each step's state
falls in one of DoorKey's phases:

* `room 1`: left of the wall, not carrying the key;
* `key`: left of the wall, carrying the key;
* `door`: standing in the (open) doorway;
* `room 2`: right of the wall (where the goal is).

Per policy and phase it prints the share of steps and the mean raw bonus of
the observations there (`ppo_ngu.intrinsic_reward`: RND's err / sigma for
`rnd`, NGU's r^episodic * clip(alpha) for `ngu`), and the share of episodes
that reach the goal. A bonus that explores pays most where the policy
rarely goes; one that pays least there keeps the policy in the first room.

    python -m experiments.probes.doorkey_bonus \
        --run-dir runs/minigrid_study/doorkey8/ppo_rnd/seeds --seed 0
"""

import argparse
import dataclasses
import os
from typing import Dict

import jax
import jax.numpy as jnp
import numpy as np

from examples import ppo_ngu
from experiments.probes import json_safe
from ngu_jax import npz_io
from ngu_jax.envs import base as env_base

PHASES = ("room 1", "key", "door", "room 2")
_KEY_TILE, _DOORS = 7, (8, 9, 10)  # xminigrid's Tiles: KEY, DOOR_*


def _phase(state) -> jax.Array:
  """DoorKey's phase (index into PHASES) of one lane's state."""
  level = state.level
  grid, agent = level.grid, level.agent
  is_door = jnp.isin(grid[..., 0], jnp.asarray(_DOORS))
  door_col = jnp.argmax(jnp.any(is_door, axis=0))
  col = agent.position[1]
  carrying = agent.pocket[0] == _KEY_TILE
  return jnp.where(col > door_col, 3, jnp.where(
      col == door_col, 2, jnp.where(carrying, 1, 0)))


def probe(run_dir: str, seed: int, steps: int, key: int = 0
          ) -> Dict[str, Dict[str, np.ndarray]]:
  """Plays both policies from the checkpoint (module docstring).

  Returns:
    {policy: {"share" [4], "bonus" [4], "success", "episodes"}}.
  """
  saved = npz_io.read_json(os.path.join(run_dir, "config.json"))
  fields = {f.name for f in dataclasses.fields(ppo_ngu.PPOConfig)}
  config = ppo_ngu.PPOConfig(**{k: v for k, v in saved["ppo"].items()
                                if k in fields})
  seeds = list(saved["seeds"])
  if seed not in seeds:
    raise ValueError(f"probe: seed {seed} is not one of the run's {seeds}.")
  pieces = ppo_ngu.make_pieces(config, saved["env_name"], saved["env_kwargs"])
  env = pieces.env
  template = jax.vmap(pieces.init)(
      jnp.stack([jax.random.PRNGKey(s) for s in seeds]))
  directory = npz_io.find_directory(os.path.join(run_dir, "checkpoint"))
  runner = npz_io.load_pytree(os.path.join(directory, "runner.npz"),
                              template)
  runner = jax.tree_util.tree_map(lambda x: x[seeds.index(seed)], runner)
  params, _, bonus_state, *_ = runner
  bonus = ppo_ngu.make_bonus(env, config)
  net = ppo_ngu._make_actor_critic(env, config)  # pylint: disable=protected-access
  b = config.num_envs

  def play(random_policy: bool, rng):
    rng, k_env = jax.random.split(rng)
    env_state, ts = jax.vmap(env.reset)(jax.random.split(k_env, b))
    h = jnp.zeros((b, config.gru_size))

    def step(carry, _):
      env_state, ts, h, state, rng = carry
      rng, k_act = jax.random.split(rng)
      first = ts.step_type == env_base.StepType.FIRST
      logits, _, h = net.apply(params, ts.observation[None], first[None], h)
      logits = jnp.where(random_policy, jnp.zeros_like(logits[0]), logits[0])
      action = jax.random.categorical(k_act, logits)
      env_state, ts = jax.vmap(env.step)(env_state, action)
      next_first = ts.step_type == env_base.StepType.FIRST
      raw, _, state = ppo_ngu.intrinsic_reward(bonus, config, state,
                                               ts.observation, next_first)
      last = ts.step_type == env_base.StepType.LAST
      return (env_state, ts, h, state, rng), (
          jax.vmap(_phase)(env_state), raw, next_first, last,
          last & (ts.reward > 0))

    _, out = jax.lax.scan(step, (env_state, ts, h, bonus_state, rng), None,
                          steps)
    return out

  results = {}
  for name, random_policy in (("uniform random", True), ("trained", False)):
    phase, raw, first, last, success = jax.device_get(jax.jit(
        play, static_argnums=0)(random_policy, jax.random.PRNGKey(key)))
    keep = ~first  # a new episode's first observation pays nothing
    share = np.array([np.mean(phase[keep] == p) for p in range(4)])
    bonus_mean = np.array([raw[keep & (phase == p)].mean()
                           if np.any(keep & (phase == p)) else np.nan
                           for p in range(4)])
    results[name] = {"share": share, "bonus": bonus_mean,
                     "success": float(success.sum() / max(last.sum(), 1)),
                     "episodes": int(last.sum())}
  return results


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--run-dir", required=True,
                      help="a PPO run's seeds directory (config.json, "
                      "checkpoint/)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--steps", type=int, default=2000,
                      help="steps per lane and policy")
  parser.add_argument("--json", default=None, help="also write results here")
  args = parser.parse_args(argv)
  results = probe(args.run_dir, args.seed, args.steps)
  print(f"{args.run_dir} seed {args.seed}, {args.steps} steps x lanes")
  print("| policy | goal reached | " + " | ".join(
      f"{p}: share / bonus" for p in PHASES) + " |")
  print("|" + " --- |" * (2 + len(PHASES)))
  for name, r in results.items():
    print(f"| {name} | {r['success']:.3f} of {r['episodes']} | " + " | ".join(
        f"{s:.3f} / {v:.3f}" for s, v in zip(r["share"], r["bonus"])) + " |")
  if args.json:
    npz_io.write_json(args.json, {
        "run_dir": args.run_dir, "seed": args.seed, "steps": args.steps,
        "results": json_safe(results)})  # a phase never visited: null
  return results


if __name__ == "__main__":
  main()
