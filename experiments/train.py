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

Every bad invocation is refused with one line and exit status 2 before
anything is written: `python -m experiments.train: error: MESSAGE` on
stderr, the message naming the flag and what it accepts, no usage dump, no
traceback. Checked in this order: the flags (types, choices, the required
ones, unknown flags, `--list` alone); the config (`--preset`, `--set`);
the environment name for the loop (`ngu_jax.envs.check_name`); the
numeric ranges (`--total-env-steps`, `--num-lanes`, `--log-every` >= 1;
`--eval-every`, `--checkpoint-every` >= 0; seeds in 0..2**30 - 1, `--seeds`
distinct; `--max-minutes` finite, >= 0); conflicting switches (several
`--seeds` in the Python loop, `--seed` with `--seeds`, `--replay-backend`
with `--loop compiled`, reverb not installed); the output directory (not
a file, its nearest existing ancestor a writable directory) and, with
`--resume`, a checkpoint in it; then the environment is built once (and
closed) with the `--env-kwarg` keywords and the networks made for it (a
torso that does not fit its observations is refused), and with `--resume`
the checkpoint's configuration is compared with the run's. Only then are
DIR and DIR/config.json written (not rewritten on `--resume`). A
checkpoint found unreadable later in a resume is refused the same way,
before the run writes anything. Without `--resume`, a DIR that holds a run
is started afresh, its files replaced as the new run writes them
(`experiments.compare --fresh` relies on it). Other exit statuses: 1 for a
failure while training (a full disk while checkpointing: one line
`checkpoint: ...`, the previous checkpoint intact; anything else, a
traceback), 130 after Ctrl-C (the checkpoint saved, with the command that
continues the run).
"""

import argparse
import ast
import importlib.util
import json
import math
import os
import shlex
import sys
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

from ngu_jax import envs
from ngu_jax import loops
from ngu_jax import npz_io
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.envs import registry
from ngu_jax.loops import checkpointing

PROG = "python -m experiments.train"
DEFAULT_ENVS = {
    "atari": "atari/MontezumaRevenge",
    "agent57": "atari/MontezumaRevenge",
    "disco_maze": "disco_maze",
    "minigrid": "minigrid/MiniGrid-DoorKey-8x8-v0",
}
# The largest seed: envpool seeds its lanes with int32s, and the loops add
# offsets to the seed (`ngu_jax.loops.acting`: evaluation + 10,000; the
# distributed actors seed * 100,003 + i, taken modulo 2**31).
MAX_SEED = 2**30 - 1


# ------------------------------------------------------------ refusals

class BadInvocation(SystemExit):
  """A refused command line: `str()` is the one-line message, naming the
  flag.

  Raised as `SystemExit(message)` (uncaught, Python prints the message and
  exits with status 1, as before this class); `main` (and
  `experiments.launch.main`) print `PROG: error: MESSAGE` instead and exit
  with status 2 (`report`).
  """

  def __init__(self, message: str):
    super().__init__(one_line(message))


def one_line(text: str) -> str:
  """`text` on one line: its first line, then the others after "; "."""
  lines = [line.strip() for line in str(text).splitlines() if line.strip()]
  if not lines:
    return ""
  return lines[0] + ("" if len(lines) == 1 else " " + "; ".join(lines[1:]))


def refuse(message: str) -> NoReturn:
  raise BadInvocation(message)


def report(prog: str, error: BadInvocation) -> BadInvocation:
  """Prints `PROG: error: MESSAGE` (one line) on stderr; `error` now exits
  with status 2. Re-raise it."""
  print(f"{prog}: error: {error}", file=sys.stderr)
  error.code = 2
  return error


class ArgumentParser(argparse.ArgumentParser):
  """argparse's parser whose errors are `BadInvocation`s: one line, no
  usage dump (`--help` shows the usage)."""

  def error(self, message: str) -> NoReturn:
    refuse(message)


def check_int(flag: str, value: int, low: int,
              high: Optional[int] = None) -> None:
  """Refuses `value` < `low` (or > `high`)."""
  if value < low or (high is not None and value > high):
    allowed = f">= {low}" if high is None else f"in {low}..{high}"
    refuse(f"{flag} must be {allowed}, got {value}")


def check_number(flag: str, value: float, low: float = 0.) -> None:
  """Refuses `value` below `low`, NaN or infinite."""
  if not (math.isfinite(value) and value >= low):
    refuse(f"{flag} must be a finite number >= {low:g}, got {value}")


# ------------------------------------------------------------ the config

def key_values(pairs: Sequence[str], flag: str) -> Dict[str, Any]:
  """Parses KEY=VALUE strings; values as Python literals, else strings.

  Raises:
    BadInvocation: a pair without "=" or without a key.
  """
  out = {}
  for pair in pairs:
    key, sep, value = pair.partition("=")
    if not sep or not key:
      refuse(f"{flag}: expected KEY=VALUE, got {pair!r}.")
    try:
      out[key] = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError,
            RecursionError):
      out[key] = value
  return out


def make_config(preset: str, sets: Sequence[str]):
  """The preset's `NGUConfig` with `--set` overrides (nothing written:
  `write_config`).

  Raises:
    BadInvocation: an unknown preset or a rejected override.
  """
  if preset not in config_lib.PRESETS:
    refuse(f"--preset: choose one of {', '.join(sorted(config_lib.PRESETS))}"
           f"; got {preset!r}.")
  overrides = key_values(sets, "--set")
  try:
    return config_lib.PRESETS[preset](**overrides)
  except (TypeError, ValueError) as e:
    refuse(f"--set: {e}")


def write_config(output_dir: str, config) -> None:
  """Creates `output_dir` and writes `config` (an `NGUConfig`) to its
  config.json."""
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, "config.json"), "w") as f:
    json.dump(config.to_dict(), f, indent=1)


def environment_name(env: Optional[str], preset: str) -> str:
  """`--env`, else the preset's default environment.

  Raises:
    BadInvocation: no `--env` and a preset without a default.
  """
  if env is not None:
    if not env:
      refuse("--env must not be empty (see --list)")
    return env
  if preset not in DEFAULT_ENVS:
    refuse(f"--preset {preset} has no default environment: name one with "
           "--env (see --list).")
  return DEFAULT_ENVS[preset]


def check_env_name(name: str, loop: str) -> None:
  """`ngu_jax.envs.check_name`; its refusal as a `BadInvocation`."""
  try:
    envs.check_name(name, loop)
  except envs.EnvironmentNameError as e:
    refuse(f"--env: {e}")


def _close(env: Any) -> None:
  close = getattr(env, "close", None)
  if callable(close):
    close()


def check_environment(config, env_name: str, env_kwargs: Dict[str, Any],
                      loop: str, num_lanes: int, seed: int):
  """Builds the environment once as `loop` will (then closes it) and makes
  the networks for it; returns the config the run trains with
  (`effective_config`).

  Raises:
    BadInvocation: the environment cannot be built with these keywords, a
      factory returns the wrong kind, or the networks do not fit its
      observations.
  """
  flags = f"--env {env_name}" + "".join(
      f" --env-kwarg {k}={v!r}" for k, v in env_kwargs.items())
  env = None
  try:
    if loop == "compiled":
      env = envs.make_functional(env_name, **env_kwargs)
      config = loops.compiled.fit_memory_to_episodes(config,
                                                     env.max_episode_steps)
      num_actions = env.num_actions
    else:
      env = envs.make(env_name, num_lanes, seed=seed, **env_kwargs)
      num_actions = env.action_spec().num_values
    shape = env.observation_spec().shape
    encoding = env.observation_encoding()
  except envs.EnvironmentNameError as e:
    refuse(f"--env: {e}")
  except (TypeError, ValueError) as e:
    refuse(f"{flags}: cannot build the environment: {e}")
  finally:
    _close(env)
  try:
    networks_lib.make_networks(config, shape, int(num_actions), encoding)
  except (TypeError, ValueError) as e:
    refuse(f"{flags}: the networks of the config (--preset, --set) do not "
           f"fit its observations (try --set torso=auto): {e}")
  return config


# ------------------------------------------------------------ the output

def check_output_dir(output_dir: str) -> None:
  """Refuses an output directory that cannot hold the run: empty, not a
  directory, or whose nearest existing ancestor is not a writable
  directory. Writes nothing."""
  if not output_dir:
    refuse("--output-dir must not be empty")
  path = os.path.abspath(output_dir)
  if os.path.lexists(path) and not os.path.isdir(path):
    what = ("a broken symbolic link" if not os.path.exists(path)
            else "not a directory")
    refuse(f"--output-dir: {output_dir} exists and is {what}")
  existing = path
  while not os.path.lexists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    refuse(f"--output-dir: cannot create {output_dir}: {existing} is not a "
           "directory")
  if not os.access(existing, os.W_OK | os.X_OK):
    refuse(f"--output-dir: {output_dir} is not writable" if existing == path
           else f"--output-dir: cannot create {output_dir}: {existing} is "
           "not writable")


def find_checkpoint(output_dir: str) -> str:
  """The checkpoint directory `--resume` continues from (its files are
  checked against their checksums by the loop, once).

  Raises:
    BadInvocation: there is none in `output_dir`.
  """
  path = os.path.join(output_dir, checkpointing.CHECKPOINT_DIR)
  try:
    return npz_io.find_directory(path)
  except FileNotFoundError:
    refuse(f"--resume: no checkpoint to resume from in {output_dir} "
           f"(expected {path}/); start without --resume.")


def check_checkpoint_config(path: str, run_config: Dict[str, Any],
                            loop: str, where: str,
                            also_accept: Sequence[Dict[str, Any]] = ()
                            ) -> None:
  """`checkpointing.read_checkpoint_meta`, as the loop calls it on resume:
  another configuration (or format) is refused before the run starts."""
  try:
    checkpointing.read_checkpoint_meta(path, run_config, loop=loop,
                                       where=where, also_accept=also_accept)
  except checkpointing.ResumeError as e:
    refuse(f"--resume: {e}")


def exit_interrupted(module: str, argv: Optional[Sequence[str]],
                     what: str = "Interrupted.") -> None:
  """Prints the command that continues the run (`--resume`); exits 130."""
  flags = list(sys.argv[1:] if argv is None else argv)
  if "--resume" not in flags:
    flags.append("--resume")
  print(f"{what} Continue with:\n  python -m {module} "
        + shlex.join(flags), file=sys.stderr)
  raise SystemExit(130) from None


# ------------------------------------------------------------ the flags

def given_flags(parser: argparse.ArgumentParser, args: argparse.Namespace,
                skip: Sequence[str] = ()) -> List[str]:
  """The flags whose values differ from their defaults."""
  actions = parser._actions  # pylint: disable=protected-access
  return [action.option_strings[0] for action in actions
          if action.option_strings and action.dest not in ("help", *skip)
          and getattr(args, action.dest) != action.default]


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  """The flags, their types, choices and ranges, and their conflicts.

  Raises:
    BadInvocation: a bad flag (the message names it).
  """
  parser = ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
  parser.add_argument("--list", action="store_true",
                      help="print the environment names (by family, with "
                      "the loops that run each), exit")
  # Required unless --list (checked below).
  parser.add_argument("--preset", choices=sorted(config_lib.PRESETS))
  parser.add_argument("--total-env-steps", type=int)
  parser.add_argument("--output-dir")
  parser.add_argument("--seed", type=int, default=None,
                      help=f"0..{MAX_SEED} (default 0)")
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
  if args.list:
    others = given_flags(parser, args, skip=("list",))
    if others:
      parser.error(f"--list takes no other flag, got {', '.join(others)}")
    return args
  missing = [flag for flag, value in (
      ("--preset", args.preset),
      ("--total-env-steps", args.total_env_steps),
      ("--output-dir", args.output_dir)) if value is None]
  if missing:
    parser.error(f"the following arguments are required: "
                 f"{', '.join(missing)} (or --list)")
  check_number("--max-minutes", args.max_minutes)
  return args


def check_ranges(args: argparse.Namespace) -> None:
  """The numeric flags' ranges (`parse_args` has their types)."""
  for flag, value, low in (("--total-env-steps", args.total_env_steps, 1),
                           ("--num-lanes", args.num_lanes, 1),
                           ("--log-every", args.log_every, 1),
                           ("--eval-every", args.eval_every, 0),
                           ("--checkpoint-every", args.checkpoint_every, 0)):
    check_int(flag, value, low)
  if args.seed is not None:
    check_int("--seed", args.seed, 0, MAX_SEED)
  for seed in args.seeds or ():
    check_int("--seeds", seed, 0, MAX_SEED)
  if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
    refuse(f"--seeds must be distinct, got {' '.join(map(str, args.seeds))}")


def check_switches(args: argparse.Namespace) -> None:
  """Switches that conflict, or that this installation cannot honour."""
  if args.seeds is not None and args.seed is not None:
    refuse("--seed and --seeds conflict: give one (--seeds vmaps several "
           "seeds in the compiled loop)")
  if args.seeds is not None and args.loop != "compiled" and len(
      args.seeds) > 1:
    refuse("--seeds with several seeds needs --loop compiled (the Python "
           "loop trains one seed: --seed)")
  if args.loop == "compiled" and args.replay_backend != "embedded":
    refuse("--loop compiled keeps its replay on the device; "
           "--replay-backend applies to the Python loop")
  if (args.replay_backend == "reverb"
      and importlib.util.find_spec("reverb") is None):
    refuse("--replay-backend reverb: dm-reverb is not installed (the "
           "[reverb] extra: requirements/reverb.txt, `make test-reverb`); "
           "use --replay-backend embedded")


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


def check_run(args: argparse.Namespace
              ) -> Tuple[Any, Any, Dict[str, Any]]:
  """Everything `main` checks before it writes (module docstring, in that
  order).

  Returns:
    (the config of `--preset` and `--set`, the config the run trains with
    (what DIR/config.json records: `effective_config`), the `--env-kwarg`
    keywords).

  Raises:
    BadInvocation: the first check that fails.
  """
  config = make_config(args.preset, args.set)
  env_name = environment_name(args.env, args.preset)
  check_env_name(env_name, args.loop)
  env_kwargs = key_values(args.env_kwarg, "--env-kwarg")
  check_ranges(args)
  check_switches(args)
  check_output_dir(args.output_dir)
  where = "run_compiled" if args.loop == "compiled" else "run_experiment"
  checkpoint = find_checkpoint(args.output_dir) if args.resume else None
  seeds = args.seeds or [0 if args.seed is None else args.seed]
  trained = check_environment(config, env_name, env_kwargs, args.loop,
                              args.num_lanes, seeds[0])
  if checkpoint is not None:
    if args.loop == "compiled":
      check_checkpoint_config(
          checkpoint, loops.compiled.compiled_config(
              trained, env_name, args.num_lanes, seeds, env_kwargs,
              args.log_every, args.eval_every), "compiled", where,
          also_accept=[loops.compiled.compiled_config(
              config, env_name, args.num_lanes, seeds, env_kwargs,
              args.log_every, args.eval_every)])
    else:
      check_checkpoint_config(
          checkpoint, checkpointing.run_config(
              config, env_name, args.num_lanes, seeds[0], env_kwargs,
              args.log_every, args.eval_every), "python", where)
  return config, trained, env_kwargs


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  """Runs the command line `argv` (default: sys.argv[1:]).

  Raises:
    SystemExit: 2 for a refused command line (one line on stderr, nothing
      written), 130 after Ctrl-C, or the one-line message of a full disk.
  """
  try:
    return _main(argv)
  except BadInvocation as e:
    raise report(PROG, e) from None


def _main(argv: Optional[Sequence[str]]) -> Dict[str, Any]:
  args = parse_args(argv)
  if args.list:
    return {"environments": list_environments()}
  config, trained, env_kwargs = check_run(args)  # Before any writing.
  if not args.resume:
    write_config(args.output_dir, trained)
  try:
    summary = _run(args, config, env_kwargs)
  except envs.EnvironmentNameError as e:  # What a factory returned.
    refuse(f"--env: {e}")
  except npz_io.CheckpointWriteError as e:  # A full disk: one line.
    raise SystemExit(f"checkpoint: {e.strerror}") from e
  except (FileNotFoundError, loops.ResumeError) as e:
    if not args.resume:
      raise
    refuse(f"--resume: {e}")
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


def _run(args: argparse.Namespace, config,
         env_kwargs: Dict[str, Any]) -> Dict[str, Any]:
  """Runs the loop `args.loop` asks for (`config`: that of `--preset` and
  `--set`); returns its summary."""
  env_name = args.env or DEFAULT_ENVS[args.preset]
  seeds = args.seeds or [0 if args.seed is None else args.seed]
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
        seeds=seeds, **common)
  return loops.run_experiment(
      config, env_name, args.total_env_steps, num_lanes=args.num_lanes,
      seed=seeds[0], replay_backend=args.replay_backend, **common)


if __name__ == "__main__":
  main()
