r"""Trains NGU in one process: the Python loop or the compiled loop.

Usage:
  python -m experiments.train --preset disco_maze --total-env-steps 100000 \
      --output-dir runs/disco --seed 0 [--num-lanes 8] [--env NAME] \
      [--eval-every N] [--checkpoint-every N] [--resume] \
      [--replay-backend embedded|reverb] [--loop python|compiled] \
      [--seeds S ...] [--set FIELD=VALUE ...] [--env-kwarg KEY=VALUE ...] \
      [--max-minutes M]
  python -m experiments.train --list     # every name, with its loops

`--preset` is one of `ngu_jax.agents.ngu.config.PRESETS`; `--set` overrides
any `NGUConfig` field (values parsed as Python literals, e.g.
`--set num_mixtures=8 --set mlp_hidden_sizes=(64,64)`; the config validates
them). Writes `DIR/metrics.csv`, `DIR/config.json`, `DIR/curves.png` (with
matplotlib) and `DIR/checkpoint/` (every `--checkpoint-every` env steps, at
the end and on Ctrl-C). The networks encode observations as the
environment declares them (pixels, MiniGrid's symbolic codes, gymnax's
binary grids or features); a preset's torso must fit the encoded shape,
e.g. `--preset minigrid --env gymnax/CartPole-v1 --set torso=auto` for
vector observations. `--resume` continues from `DIR/checkpoint/` with the
same flags (a larger `--total-env-steps` extends the run); a different
configuration is refused, naming the differing fields. `--max-minutes M`
also stops the run at the first metrics row past M minutes of training
(the rows' `elapsed_s`, continued by `--resume`): runs compared at equal
wall time (`experiments.samples_per_insert`) set it, with a
`--total-env-steps` they do not reach.

`--loop python` (default) runs `ngu_jax.loops.python.loop.run_experiment`
on `ngu_jax.envs.make(NAME, ...)`; `--loop compiled` runs the whole training
as one jitted JAX program (`ngu_jax.loops.compiled.runner.run_compiled`) on
`ngu_jax.envs.make_functional(NAME, ...)`, a pure-JAX environment, with the
same metrics.csv columns, plots, heatmaps and checkpoints. `--seeds 0 1 2`
trains several seeds side by side in one vmapped program (compiled loop
only), each in DIR/seed_<s>/.

Environments (`--env NAME`, `ngu_jax.envs.registry`): one name per
environment, the same in both loops. `--list` prints every name once, by
family, with the loops that accept it ("loops: python, compiled") and the
implementation each loop uses (disco_maze: numpy in the Python loop, pure
JAX in the compiled loop; minigrid: envpool / xland-minigrid; atari: Python
loop only; noisy_grid: pure JAX in both). A name a loop cannot run is
refused before anything is written, naming the loop that accepts it. Two
more forms:

* `--env jax/NAME` runs the compiled loop's pure-JAX implementation of NAME
  in the Python loop (e.g. `jax/disco_maze`): how the two loops are
  compared on the very same environment.
* `--env module:factory` (a module path importable from the current
  directory, a colon, an attribute) trains on your own environment. The
  factory is called with the `--env-kwarg` keywords; in the Python loop it
  also gets `num_envs=` (`--num-lanes`) and `seed=` (`--seed`) when it has
  parameters of those names. It returns an `ngu_jax.envs.BatchedEnv` of
  num_envs lanes, an `ngu_jax.envs.functional.FunctionalEnv` (one pure-JAX
  lane: runs in both loops) or a `gymnasium.vector.VectorEnv` of num_envs
  sub-environments in gymnasium's default auto-reset mode NEXT_STEP (Python
  loop; discrete actions, Box or Discrete observations). The compiled loop
  takes a FunctionalEnv only. Example:
  `--env my_envs:make_lane --env-kwarg size=9 --loop compiled`.
"""

import argparse
import ast
import json
import os
import shlex
import sys
from typing import Any, Dict, Optional, Sequence, Tuple

from ngu_jax import envs
from ngu_jax import loops
from ngu_jax import npz_io
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.envs import registry

DEFAULT_ENVS = {
    "atari": "atari/MontezumaRevenge",
    "agent57": "atari/MontezumaRevenge",
    "disco_maze": "disco_maze",
    "minigrid": "minigrid/MiniGrid-DoorKey-8x8-v0",
}


def key_values(pairs: Sequence[str], flag: str) -> Dict[str, Any]:
  """Parses KEY=VALUE strings; values as Python literals, else strings."""
  out = {}
  for pair in pairs:
    key, sep, value = pair.partition("=")
    if not sep or not key:
      raise SystemExit(f"{flag}: expected KEY=VALUE, got {pair!r}.")
    try:
      out[key] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
      out[key] = value
  return out


def make_config(preset: str, sets: Sequence[str], output_dir: str,
                resume: bool):
  """The preset's `NGUConfig` with `--set` overrides; writes config.json
  in `output_dir` (created) unless resuming (the checkpoint's is checked).

  Raises:
    SystemExit: an unknown preset or a rejected override.
  """
  if preset not in config_lib.PRESETS:
    raise SystemExit(f"--preset: choose one of "
                     f"{', '.join(sorted(config_lib.PRESETS))}; got "
                     f"{preset!r}.")
  try:
    config = config_lib.PRESETS[preset](**key_values(sets, "--set"))
  except (TypeError, ValueError) as e:
    raise SystemExit(f"--set: {e}") from e
  os.makedirs(output_dir, exist_ok=True)
  if not resume:
    with open(os.path.join(output_dir, "config.json"), "w") as f:
      json.dump(config.to_dict(), f, indent=1)
  return config


def exit_interrupted(module: str, argv: Optional[Sequence[str]],
                     what: str = "Interrupted.") -> None:
  """Prints the command that continues the run (`--resume`); exits 130."""
  flags = list(sys.argv[1:] if argv is None else argv)
  if "--resume" not in flags:
    flags.append("--resume")
  print(f"{what} Continue with:\n  python -m {module} "
        + shlex.join(flags), file=sys.stderr)
  raise SystemExit(130) from None


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--list", action="store_true",
                      help="print the environment names (by family, with "
                      "the loops that run each), exit")
  # Required unless --list (checked below).
  parser.add_argument("--preset", choices=sorted(config_lib.PRESETS))
  parser.add_argument("--total-env-steps", type=int)
  parser.add_argument("--output-dir")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--num-lanes", type=int, default=8)
  parser.add_argument("--env", default=None,
                      help="environment name from --list, jax/NAME or "
                      "module:factory (default: the preset's)")
  parser.add_argument("--log-every", type=int, default=1000,
                      help="env steps between metrics rows")
  parser.add_argument("--eval-every", type=int, default=0,
                      help="env steps between evaluations (0: none)")
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE", help="override a config field")
  parser.add_argument("--env-kwarg", action="append", default=[],
                      metavar="KEY=VALUE", help="keyword of the "
                      "environment (or of its factory)")
  parser.add_argument("--checkpoint-every", type=int, default=0,
                      help="env steps between checkpoints (0: only at the "
                      "end and on Ctrl-C)")
  parser.add_argument("--resume", action="store_true",
                      help="continue from OUTPUT_DIR/checkpoint")
  parser.add_argument("--replay-backend", default="embedded",
                      choices=builder_lib.NGUBuilder.REPLAY_BACKENDS,
                      help="embedded (default) or reverb (needs the [reverb] "
                      "extra)")
  parser.add_argument("--loop", default="python",
                      choices=("python", "compiled"),
                      help="python (default): one process, any environment; "
                      "compiled: one jitted JAX program, pure-JAX "
                      "environments")
  parser.add_argument("--seeds", type=int, nargs="+", default=None,
                      help="seeds vmapped in one program (--loop compiled); "
                      "default: --seed")
  parser.add_argument("--max-minutes", type=float, default=0.,
                      help="also stop at the first metrics row past this "
                      "many minutes of training (0: no limit)")
  parser.add_argument("--no-progress", action="store_true")
  args = parser.parse_args(argv)
  if not (args.max_minutes >= 0 and args.max_minutes != float("inf")):
    parser.error(f"--max-minutes must be a finite number >= 0, got "
                 f"{args.max_minutes}")
  if not args.list:
    missing = [flag for flag, value in (
        ("--preset", args.preset),
        ("--total-env-steps", args.total_env_steps),
        ("--output-dir", args.output_dir)) if value is None]
    if missing:
      parser.error(f"the following arguments are required: "
                   f"{', '.join(missing)} (or --list)")
    if args.seeds is not None and args.loop != "compiled" and len(
        args.seeds) > 1:
      parser.error("--seeds with several seeds needs --loop compiled (the "
                   "Python loop trains one seed: --seed)")
    if args.loop == "compiled" and args.replay_backend != "embedded":
      parser.error("--loop compiled keeps its replay on the device; "
                   "--replay-backend applies to the Python loop")
  return args


_LIST_FOOTER = """\
Also:
  jax/NAME        the pure-JAX implementation of NAME (a name whose loops
                  include compiled) in the Python loop, e.g. jax/disco_maze:
                  how the two loops are compared on the same environment;
                  the compiled loop reads it as NAME
  module:factory  your own environment: the factory gets the --env-kwarg
                  keywords (and num_envs=, seed= in the Python loop) and
                  returns a BatchedEnv, a FunctionalEnv (both loops) or a
                  gymnasium VectorEnv (experiments/train.py's docstring)"""


def list_environments(file=None) -> Dict[str, Dict[str, Tuple[str, ...]]]:
  """Prints every environment name once, by family, with its loops.

  Each family's header names the implementation each loop uses
  (`ngu_jax.envs.registry.FAMILY_INFO`); each name is followed by "loops:"
  and the loops that accept it (`ngu_jax.envs.loops_of`). A footer explains
  the `jax/NAME` and `module:factory` forms.

  Returns:
    {family: {name: loops}} for every family of `ngu_jax.envs.FAMILIES`,
    e.g. {"disco_maze": {"disco_maze": ("python", "compiled")}, ...}.
  """
  groups = {family: dict(registry.listing(family))
            for family in envs.FAMILIES}
  width = max((len(n) for names in groups.values() for n in names),
              default=0) + 2
  print("Environment names for --env, with the loops (--loop) that run "
        "each:", file=file)
  for family, names in groups.items():
    info = registry.FAMILY_INFO[family]
    implementations = f"python: {info.python}" + (
        f"; compiled: {info.compiled}" if info.compiled else "")
    note = "" if names else "  (none: is its optional extra installed?)"
    print(f"{family} ({len(names)})  [{implementations}]{note}", file=file)
    for name, accepted in names.items():
      print(f"  {name.ljust(width)}loops: {', '.join(accepted)}", file=file)
  print(_LIST_FOOTER, file=file)
  return groups


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  args = parse_args(argv)
  if args.list:
    return {"environments": list_environments()}
  if not args.env and args.preset not in DEFAULT_ENVS:
    raise SystemExit(f"--preset {args.preset} has no default environment: "
                     "name one with --env (see --list).")
  try:  # Before anything is written.
    envs.check_name(args.env or DEFAULT_ENVS[args.preset], args.loop)
  except envs.EnvironmentNameError as e:
    raise SystemExit(f"--env: {e}") from e
  config = make_config(args.preset, args.set, args.output_dir, args.resume)
  try:
    summary = _run(args, config)
  except envs.EnvironmentNameError as e:  # E.g. what a factory returned.
    raise SystemExit(f"--env: {e}") from e
  except npz_io.CheckpointWriteError as e:  # A full disk: one line.
    raise SystemExit(f"checkpoint: {e.strerror}") from e
  except (FileNotFoundError, loops.ResumeError) as e:
    if not args.resume:
      raise
    raise SystemExit(f"--resume: {e}") from e
  except KeyboardInterrupt:
    exit_interrupted("experiments.train", argv)
  if args.loop == "compiled":
    for seed, path, curves in zip(summary["seeds"], summary["metrics_paths"],
                                  summary["curves_paths"]):
      print(f"seed {seed}: metrics {path}, curves "
            f"{curves or '(matplotlib not installed)'}")
  else:
    print(f"metrics: {summary['metrics_path']}")
    print(f"curves: {summary['curves_path'] or '(matplotlib not installed)'}")
  print(f"checkpoint: {summary['checkpoint_path']}")
  return summary


def effective_config(config, loop: str, env_name: str,
                     env_kwargs: Dict[str, Any]):
  """The config a run of `loop` trains with (what DIR/config.json records).

  The compiled loop fits the episodic memory to the episodes
  (`loops.compiled.fit_memory_to_episodes`); the other loops use `config`.
  """
  if loop != "compiled":
    return config
  env = envs.make_functional(env_name, **env_kwargs)
  return loops.compiled.fit_memory_to_episodes(config, env.max_episode_steps)


def _run(args: argparse.Namespace, config) -> Dict[str, Any]:
  """Runs the loop `args.loop` asks for; returns its summary."""
  env_name = args.env or DEFAULT_ENVS[args.preset]
  env_kwargs = key_values(args.env_kwarg, "--env-kwarg")
  if args.loop == "compiled" and not args.resume:
    with open(os.path.join(args.output_dir, "config.json"), "w") as f:
      json.dump(effective_config(config, args.loop, env_name,
                                 env_kwargs).to_dict(), f, indent=1)
  common = dict(
      output_dir=args.output_dir,
      env_kwargs=env_kwargs,
      log_every_env_steps=args.log_every,
      eval_every_env_steps=args.eval_every, progress=not args.no_progress,
      checkpoint_every_env_steps=args.checkpoint_every, resume=args.resume,
      max_minutes=args.max_minutes)
  if args.loop == "compiled":
    return loops.run_compiled(
        config, env_name, args.total_env_steps, num_lanes=args.num_lanes,
        seeds=args.seeds or [args.seed], **common)
  seed = args.seeds[0] if args.seeds else args.seed
  return loops.run_experiment(
      config, env_name, args.total_env_steps, num_lanes=args.num_lanes,
      seed=seed, replay_backend=args.replay_backend, **common)


if __name__ == "__main__":
  main()
