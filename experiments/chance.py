r"""Chance: what a uniform random policy scores on a study's environment.

Every study table reads against what no learning at all gives: a uniform
random policy (every action equally likely at every step) on the same
environment with the same settings, over whole episodes. `random_policy`
plays `episodes` of them, each lane one episode cut at the environment's
time limit, with the environment's own `reset` / `step` (the functional,
pure-JAX environment the compiled loop trains on), and reports the
statistics the loops log for their training episodes:

* `return`: the mean undiscounted episode return (`mean_episode_return`,
  `eval_return`);
* `success`: the fraction of episodes with a return > 0 (the loops'
  `episode_success_rate`);
* `coverage`: the mean of `extras["coverage"]` at the episode's LAST step,
  where the environment reports one (`mean_episode_coverage`,
  `eval_coverage`);
* `length`: the mean agent steps per episode (LAST included), and
  `env_steps_per_episode` = `length` + 1: the loops count the auto-reset
  step that follows every LAST as an env step (DeepSea-10's episodes take
  11 env steps in the runs' metrics.csv).

`columns` maps these onto the metrics.csv columns of the tables
(`experiments.compare` writes them as a last row), `env_of` reads the
environment and its kwargs from a study's `experiments.train` flags.

Usage (one environment, e.g. a table's chance row by hand):
  python -m experiments.chance --env disco_maze --env-kwarg size=11
      [--episodes 1024] [--seed 0]
"""

import argparse
import math
from typing import Any, Dict, Optional, Sequence, Tuple

# Episodes per chance estimate (each its own lane, vmapped): a standard
# error of 1/32 of the per-episode standard deviation.
EPISODES = 1024

# metrics.csv column -> `random_policy` key. The evaluation columns read the
# same numbers: a random policy has no greedy or exploratory mixture.
COLUMNS = {
    "mean_episode_return": "return",
    "eval_return": "return",
    "eval_explore_return": "return",
    "episode_success_rate": "success",
    "eval_success": "success",
    "mean_episode_coverage": "coverage",
    "eval_coverage": "coverage",
    "eval_explore_coverage": "coverage",
    "env_steps_per_episode": "env_steps_per_episode",
}
LABEL = "uniform random policy (chance)"
# (env name, episodes, seed, kwargs) -> `random_policy`'s result.
_CACHE: Dict[Tuple[Any, ...], Dict[str, float]] = {}


def env_of(flags: Sequence[str]) -> Tuple[str, Dict[str, Any]]:
  """(environment name, its kwargs) that `experiments.train` would build
  from `flags`: the last `--env` (else the `--preset`'s default
  environment) and every `--env-kwarg KEY=VALUE` (values as Python
  literals, as train.py reads them).

  Raises:
    ValueError: no `--env` and no preset with a default environment.
  """
  from experiments import train  # pylint: disable=g-import-not-at-top
  name, preset, pairs = None, None, []
  for flag, value in zip(flags, list(flags[1:]) + [None]):
    if flag == "--env":
      name = value
    elif flag == "--preset":
      preset = value
    elif flag == "--env-kwarg":
      pairs.append(value)
  if name is None:
    name = train.DEFAULT_ENVS.get(preset)
  if name is None:
    raise ValueError(f"chance.env_of: no --env and no preset with a default "
                     f"environment in {list(flags)}.")
  return name, train.key_values(pairs, "--env-kwarg")


def random_policy(env_name: str, episodes: int = EPISODES, seed: int = 0,
                  **env_kwargs: Any) -> Dict[str, float]:
  """A uniform random policy's mean episode statistics (module docstring).

  `episodes` whole episodes of `envs.make_functional(env_name,
  **env_kwargs)`, vmapped, each drawing its actions uniformly from
  jax.random.PRNGKey(seed) split per episode (deterministic: the same
  arguments give the same numbers; a repeated call returns the first
  call's result). Each episode runs until its first LAST (at the latest
  the time limit, `max_episode_steps`).

  Returns:
    {"return", "success", "coverage" (NaN when the environment reports
    none), "length", "env_steps_per_episode", "episodes"}.
  """
  key = (env_name, int(episodes), int(seed), repr(sorted(env_kwargs.items())))
  if key not in _CACHE:
    _CACHE[key] = _random_policy(env_name, int(episodes), int(seed),
                                 env_kwargs)
  return dict(_CACHE[key])


def _random_policy(env_name: str, episodes: int, seed: int,
                   env_kwargs: Dict[str, Any]) -> Dict[str, float]:
  """`random_policy`, computed."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from ngu_jax import envs  # pylint: disable=g-import-not-at-top
  from ngu_jax.envs import base  # pylint: disable=g-import-not-at-top
  if episodes < 1:
    raise ValueError(f"chance.random_policy: episodes must be >= 1, got "
                     f"{episodes}.")
  env = envs.make_functional(env_name, **env_kwargs)
  horizon = int(env.max_episode_steps)

  def episode(key):
    k_reset, k_actions = jax.random.split(key)
    state, ts = env.reset(k_reset)
    actions = jax.random.randint(k_actions, (horizon,), 0, env.num_actions)
    has_coverage = "coverage" in ts.extras
    coverage = jnp.float32(math.nan)

    def running(carry):
      t, _, _, done, _ = carry
      return ~done & (t < horizon)

    def body(carry):
      t, state, total, _, coverage = carry
      state, ts = env.step(state, actions[t])
      last = ts.step_type == base.StepType.LAST
      if has_coverage:
        coverage = jnp.where(last, ts.extras["coverage"].astype(jnp.float32),
                             coverage)
      return (t + 1, state, total + ts.reward.astype(jnp.float32), last,
              coverage)

    length, _, total, _, coverage = jax.lax.while_loop(
        running, body,
        (jnp.int32(0), state, jnp.float32(0.), jnp.bool_(False), coverage))
    return total, length, coverage

  keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
  total, length, coverage = jax.jit(jax.vmap(episode))(keys)
  length = float(jnp.mean(length.astype(jnp.float32)))
  return {"return": float(jnp.mean(total)),
          "success": float(jnp.mean(total > 0)),
          "coverage": float(jnp.mean(coverage)),
          "length": length,
          "env_steps_per_episode": length + 1.,
          "episodes": float(episodes)}


def columns(result: Dict[str, float]) -> Dict[str, float]:
  """`random_policy`'s result as metrics.csv column -> value (`COLUMNS`;
  NaN values, e.g. coverage where the environment reports none, left
  out)."""
  return {column: result[key] for column, key in COLUMNS.items()
          if key in result and math.isfinite(result[key])}


def for_flags(flags: Sequence[str], episodes: int = EPISODES, seed: int = 0
              ) -> Dict[str, float]:
  """The chance `columns` of the environment `experiments.train` builds
  from `flags` (`env_of`)."""
  name, kwargs = env_of(flags)
  return columns(random_policy(name, episodes, seed, **kwargs))


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, float]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--env", required=True)
  parser.add_argument("--env-kwarg", action="append", default=[],
                      metavar="KEY=VALUE")
  parser.add_argument("--episodes", type=int, default=EPISODES)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  flags = ["--env", args.env]
  for pair in args.env_kwarg:
    flags += ["--env-kwarg", pair]
  name, kwargs = env_of(flags)
  result = random_policy(name, args.episodes, args.seed, **kwargs)
  print(f"{LABEL}, {name}{f' {kwargs}' if kwargs else ''}, "
        f"{args.episodes} episodes, seed {args.seed}:")
  for key, value in result.items():
    print(f"  {key}: {value:.6g}")
  return result


if __name__ == "__main__":
  main()
