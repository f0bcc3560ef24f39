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
"""

import argparse
import os
import sys
from typing import Any, Dict, Optional, Sequence


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--log-every", type=int, default=1000,
                      help="env steps between metrics rows")
  parser.add_argument("--eval-every", type=int, default=0,
                      help="env steps between evaluations (0: none)")
  parser.add_argument("--eval-lanes", type=int, default=0,
                      help="evaluation lanes (default: --num-lanes)")
  parser.add_argument("--checkpoint-every", type=int, default=0,
                      help="env steps between checkpoints (0: only at the "
                      "end)")
  parser.add_argument("--resume", action="store_true",
                      help="continue from OUTPUT_DIR/checkpoint")
  parser.add_argument("--max-restarts", type=int, default=3,
                      help="restarts of each actor process (-1: always)")
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
                           ("--total-env-steps", args.total_env_steps, 1)):
    if value < low:
      parser.error(f"{flag} must be >= {low}, got {value}")
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
             _node_ip_address="127.0.0.1")
  return ray.cluster_resources()


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  args = parse_args(argv)
  try:
    import ray  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise SystemExit("launch: Ray is not installed; pip install -e "
                     "'.[distributed]'.") from None
  started_here = not ray.is_initialized()
  if started_here:
    init_ray(args.num_cpus, args.address)
  # JAX starts after Ray (the imports below only define functions).
  from experiments import train  # pylint: disable=g-import-not-at-top
  from ngu_jax import loops  # pylint: disable=g-import-not-at-top
  from ngu_jax import npz_io  # pylint: disable=g-import-not-at-top
  from ngu_jax.loops.distributed import launcher  # pylint: disable=g-import-not-at-top
  try:
    config = train.make_config(args.preset, args.set, args.output_dir,
                               args.resume)
    env_name = args.env or train.DEFAULT_ENVS[args.preset]
    try:
      summary = launcher.run_distributed(
          config, env_name, args.total_env_steps,
          num_actors=args.num_actors, num_lanes=args.num_lanes,
          seed=args.seed, output_dir=args.output_dir,
          env_kwargs=train.key_values(args.env_kwarg, "--env-kwarg"),
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
      raise SystemExit(f"--resume: {e}") from e
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
