r"""Trains NGU distributed on Ray: K actor processes, a learner, a replay.

Usage:
  python -m experiments.launch --preset disco_maze --num-actors 2 \
      --total-env-steps 100000 --output-dir runs/dist [--num-lanes 8] \
      [--env NAME] [--seed 0] [--eval-every N] [--checkpoint-every N] \
      [--resume] [--max-restarts 3] [--actor-cpus C] [--learner-cpus C] \
      [--num-cpus N | --address HOST:PORT] [--set FIELD=VALUE ...] \
      [--env-kwarg KEY=VALUE ...]

Without `--address` a local Ray cluster of `--num-cpus` CPUs (default: all
of this machine's) is started for the run and stopped after it, on the
loopback address, without Ray's dashboard, and with Ray's token
authentication left on (Ray 2.60's default: the token is made once in
~/.ray/auth_token). With `--address` the program joins a cluster started
with `ray start` (README: "Several machines"); every node of that cluster
must hold the cluster's token.

Ray is initialised here before JAX starts in this process; every node sizes
XLA's thread pools to the CPUs Ray gives it (`ngu_jax.loops.distributed.program`).
Writes DIR/metrics.csv (the Python loop's columns plus learner steps/s,
parameter staleness, acknowledged inserts, replay counts and actor
restarts), DIR/config.json, DIR/curves.png and DIR/checkpoint/ (the
learner, the replay and the counts: `--resume` continues from it with the
same flags; the number of actors may change). `--preset`, `--set`,
`--env` and `--env-kwarg` are those of `experiments.train`.

Every bad invocation is refused with one line and exit status 2 before
anything is written: `python -m experiments.launch: error: MESSAGE` on
stderr, naming the flag, no usage dump, no traceback (as
`experiments.train`). Before Ray starts: the flags (types, the required
ones, `--num-cpus` or `--address`), the ranges (`--num-actors`,
`--num-lanes`, `--total-env-steps`, `--log-every` >= 1; `--eval-every`,
`--checkpoint-every`, `--eval-lanes` >= 0, `--eval-lanes` only with
`--eval-every`; `--max-restarts` >= -1; `--seed` in 0..2**30 - 1,
`experiments.train.MAX_SEED`; `--actor-cpus`, `--learner-cpus` finite,
>= 0; `--num-cpus` >= 1), the
config (`--preset`, `--set`), the environment name (the Python loop's),
the output directory (not a file, its nearest existing ancestor a
writable directory) and, with `--resume`, its checkpoint and the
checkpoint's configuration. After Ray starts (building an environment may
start JAX, which must come after Ray) and still before anything is
written: the environment is built once in this process with the
`--env-kwarg` keywords (then closed) and the networks made for it. A wrong
`--address` (no cluster there) is refused the same way. Other exit
statuses: 1 for a failure while training (a full disk while
checkpointing: one line `checkpoint: ...`; anything else, a traceback),
130 after Ctrl-C (the checkpoint saved).
"""

import argparse
import os
import sys
from typing import Any, Dict, Optional, Sequence

LOCAL_CLUSTER_SYSTEM_CONFIG = {"task_events_max_num_task_in_gcs": 10_000}
"""Ray settings of a local cluster this command (and the benchmarks) start:
Ray's GCS keeps an event per remote call, up to 100,000 by default, and grew
17% after minute 10 of a 1-hour soak for them (docs/performance.md#soak);
10,000 keep the last seconds of calls for `ray list tasks`. (Defined here,
not in `ngu_jax.loops.distributed`, which imports JAX: Ray starts first.)"""

PROG = "python -m experiments.launch"


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  """The flags, their types and ranges, and their conflicts.

  Raises:
    experiments.train.BadInvocation: a bad flag (the message names it).
  """
  from experiments import train  # pylint: disable=g-import-not-at-top
  parser = train.ArgumentParser(prog=PROG,
                                description=__doc__.split("\n")[0])
  parser.add_argument("--preset", required=True,
                      help="atari, disco_maze or minigrid (config PRESETS)")
  parser.add_argument("--total-env-steps", type=int, required=True)
  parser.add_argument("--output-dir", required=True)
  parser.add_argument("--num-actors", type=int, default=2,
                      help="actor processes (K)")
  parser.add_argument("--num-lanes", type=int, default=8,
                      help="environment lanes per actor (B)")
  parser.add_argument("--env", default=None,
                      help="environment name (default: the preset's)")
  parser.add_argument("--seed", type=int, default=0,
                      help=f"0..{train.MAX_SEED}")
  parser.add_argument("--log-every", type=int, default=1000,
                      help="env steps between metrics rows")
  parser.add_argument("--eval-every", type=int, default=0,
                      help="env steps between evaluations (0: none)")
  parser.add_argument("--eval-lanes", type=int, default=0,
                      help="evaluation lanes (default: --num-lanes)")
  parser.add_argument("--checkpoint-every", type=int, default=0,
                      help="env steps between checkpoints (0: only at the "
                      "end; a learner or replay whose process dies then "
                      "restarts afresh)")
  parser.add_argument("--resume", action="store_true",
                      help="continue from OUTPUT_DIR/checkpoint")
  parser.add_argument("--max-restarts", type=int, default=3,
                      help="restarts of each node's process (-1: always); "
                      "a restarted learner or replay reloads the last "
                      "checkpoint (--checkpoint-every)")
  parser.add_argument("--actor-cpus", type=float, default=None,
                      help="CPUs per actor (default: what the learner "
                      "leaves, shared, at most 1)")
  parser.add_argument("--learner-cpus", type=float, default=1.)
  cluster = parser.add_mutually_exclusive_group()
  cluster.add_argument("--num-cpus", type=int, default=None,
                       help="CPUs of the local cluster (default: all)")
  cluster.add_argument("--address", default=None,
                       help="join the Ray cluster at HOST:PORT (or 'auto')")
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE", help="override a config field")
  parser.add_argument("--env-kwarg", action="append", default=[],
                      metavar="KEY=VALUE", help="keyword of envs.make")
  parser.add_argument("--no-progress", action="store_true")
  args = parser.parse_args(argv)
  for flag, value, low in (("--num-actors", args.num_actors, 1),
                           ("--num-lanes", args.num_lanes, 1),
                           ("--total-env-steps", args.total_env_steps, 1),
                           ("--log-every", args.log_every, 1),
                           ("--eval-every", args.eval_every, 0),
                           ("--checkpoint-every", args.checkpoint_every, 0),
                           ("--eval-lanes", args.eval_lanes, 0),
                           ("--max-restarts", args.max_restarts, -1)):
    train.check_int(flag, value, low)
  train.check_int("--seed", args.seed, 0, train.MAX_SEED)
  if args.num_cpus is not None:
    train.check_int("--num-cpus", args.num_cpus, 1)
  if args.actor_cpus is not None:
    train.check_number("--actor-cpus", args.actor_cpus)
  train.check_number("--learner-cpus", args.learner_cpus)
  if args.address is not None and not args.address.strip():
    parser.error("--address must not be empty (HOST:PORT or 'auto')")
  if args.eval_lanes and not args.eval_every:
    parser.error("--eval-lanes needs --eval-every (without it nothing is "
                 "evaluated)")
  return args


def init_ray(num_cpus: Optional[int] = None,
             address: Optional[str] = None) -> Dict[str, Any]:
  """Starts a local Ray cluster (loopback, no dashboard) or joins one.

  Call before JAX starts in this process. Returns the cluster's resources.
  """
  import ray  # pylint: disable=g-import-not-at-top
  if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
    sys.stderr.write("launch: RAY_AUTH_MODE=disabled: this cluster accepts "
                     "unauthenticated connections on every interface its "
                     "processes listen on.\n")
  if address is not None:
    ray.init(address=address)
  else:
    ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
             _node_ip_address="127.0.0.1",
             _system_config=dict(LOCAL_CLUSTER_SYSTEM_CONFIG))
  return ray.cluster_resources()


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  """Runs the command line `argv` (default: sys.argv[1:]).

  Raises:
    SystemExit: 2 for a refused command line (one line on stderr, nothing
      written, Ray not started unless the environment could not be built),
      130 after Ctrl-C, or the one-line message of a full disk.
  """
  # Imports JAX (its backend starts later, after Ray): experiments.train,
  # the config, the environment registry, the checkpoint checks.
  from experiments import train  # pylint: disable=g-import-not-at-top
  try:
    return _main(argv)
  except train.BadInvocation as e:
    raise train.report(PROG, e) from None


def _check(args: argparse.Namespace):
  """The checks before Ray starts; returns (config, env name, env kwargs)."""
  from experiments import train  # pylint: disable=g-import-not-at-top
  from ngu_jax.loops.distributed import launcher  # pylint: disable=g-import-not-at-top
  config = train.make_config(args.preset, args.set)
  env_name = train.environment_name(args.env, args.preset)
  train.check_env_name(env_name, "python")
  env_kwargs = train.key_values(args.env_kwarg, "--env-kwarg")
  train.check_output_dir(args.output_dir)
  if args.resume:
    checkpoint = train.find_checkpoint(args.output_dir)
    run_config = launcher.distributed_run_config(
        config, env_name, args.num_lanes, args.seed, env_kwargs,
        args.log_every, args.eval_every)
    legacy = {k: v for k, v in run_config.items() if k != "pacing"}
    train.check_checkpoint_config(checkpoint, run_config, "distributed",
                                  "run_distributed", also_accept=[legacy])
  return config, env_name, env_kwargs


def _main(argv: Optional[Sequence[str]]) -> Dict[str, Any]:
  from experiments import train  # pylint: disable=g-import-not-at-top
  args = parse_args(argv)
  config, env_name, env_kwargs = _check(args)
  try:
    import ray  # pylint: disable=g-import-not-at-top
  except ImportError:
    train.refuse("Ray is not installed; pip install -e '.[distributed]'.")
  started_here = not ray.is_initialized()
  if started_here:
    try:
      init_ray(args.num_cpus, args.address)
    except ConnectionError as e:
      if args.address is None:
        raise
      train.refuse(f"--address {args.address}: cannot join a Ray cluster "
                   f"there: {e}")
  # JAX starts after Ray.
  from ngu_jax import loops  # pylint: disable=g-import-not-at-top
  from ngu_jax import npz_io  # pylint: disable=g-import-not-at-top
  from ngu_jax.loops.distributed import launcher  # pylint: disable=g-import-not-at-top
  try:
    # Before anything is written; the nodes build it as the Python loop.
    train.check_environment(config, env_name, env_kwargs, "python",
                            args.num_lanes, args.seed)
    if not args.resume:
      train.write_config(args.output_dir, config)
    try:
      summary = launcher.run_distributed(
          config, env_name, args.total_env_steps,
          num_actors=args.num_actors, num_lanes=args.num_lanes,
          seed=args.seed, output_dir=args.output_dir,
          env_kwargs=env_kwargs,
          log_every_env_steps=args.log_every,
          eval_every_env_steps=args.eval_every, eval_lanes=args.eval_lanes,
          checkpoint_every_env_steps=args.checkpoint_every,
          resume=args.resume, progress=not args.no_progress,
          max_restarts=args.max_restarts, actor_cpus=args.actor_cpus,
          learner_cpus=args.learner_cpus)
    except npz_io.CheckpointWriteError as e:  # A full disk: one line.
      raise SystemExit(f"checkpoint: {e.strerror}") from e
    except (FileNotFoundError, loops.ResumeError) as e:
      if not args.resume:
        raise
      train.refuse(f"--resume: {e}")
    except KeyboardInterrupt:
      train.exit_interrupted("experiments.launch", argv,
                             "Interrupted (checkpoint saved).")
  finally:
    if started_here:
      ray.shutdown()
  last = summary
  print(f"{last['env_steps']} env steps, {last['learner_steps']} learner "
        f"steps, {last['episodes']} episodes; actor process deaths "
        f"{summary['failures']}; replay {summary['replay']}")
  print(f"metrics: {summary['metrics_path']}")
  print(f"curves: {summary['curves_path'] or '(matplotlib not installed)'}")
  print(f"checkpoint: {summary['checkpoint_path']}")
  return summary


if __name__ == "__main__":
  main()
