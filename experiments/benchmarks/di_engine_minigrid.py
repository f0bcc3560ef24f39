r"""Wall time to the peers' MiniGrid budgets: DI-engine's NGU against ours.

Issue 38's wall-time target: FourRooms return >= 0.6 in less wall time than
DI-engine's NGU would need on the same 2 cores, from DI-engine's published
curve (return 0.6 after about 10M env steps) at its own env steps/s. This
benchmark measures the rates that conversion needs, all in one call on one
machine, one after the other (never side by side):

  * DI-engine's NGU (`ding.entry.serial_pipeline_ngu`, DI-engine 0.5.3) with
    its published MiniGrid config (`dizoo/minigrid/config/
    minigrid_ngu_config.py`: 8 collector envs in subprocesses, n-step 5,
    sequences of 2 + 298 steps, batch 64, 16 learner updates per collection
    of 32 sequences; `DI_ENGINE_CONFIG`), `cuda=False`, on `--env-id`. It runs
    in its own environment (`make .venv-di-engine`:
    requirements/di-engine.txt; torch, gym 0.25 and numpy < 2, which the
    core does not take), as a child process: this module is run there as a
    script with `--child`, imports no ngu_jax, wraps the pipeline's
    collector to record (wall time, env steps) after each collection and
    writes them as JSON;
  * ours, in this environment, each for `--ours-env-steps` per seed: the
    recurrent PPO example with NGU's reward (`examples.ppo_ngu`, the
    study's `ppo_ngu_lr1e-3_std`, 3 vmapped seeds) and the NGU agent's
    compiled loop (`experiments.train`, the study's `ngu_zs_cmr`, 3 vmapped
    seeds), each a child process with every core.

Rates are steady-state: env steps / wall time between the first and the last
record after the warm-up (`--warmup-fraction` of the records: compilation,
env start-up, the first evaluation; DI-engine's first collection, which no
learner update follows, is always dropped, so its window needs
`--di-engine-env-steps` of at least 3 collections, 28,800 env steps at the
published config's 32 sequences of 300 steps). DI-engine's include its
learner updates and reward-model training (and an evaluation, at its default
frequency, if one falls in the window), as a run of its pipeline does; ours
include the learner and an evaluation every third of the run. A rate of ours
is given for every vmapped seed together and per seed: a study run of 3
seeds takes env_steps / per-seed rate.

Wall time to a budget = env steps / rate. The report prints, per env-step
budget given with `--budget NAME=ENV_STEPS` (e.g. DI-engine's 10M on FourRooms,
ours' measured solve points), the hours each would take at the rates measured
here.

Usage (the figures: docs/performance.md, "MiniGrid wall time against
DI-engine's NGU"; about 20 minutes):

  make .venv-di-engine
  python -m experiments.benchmarks.di_engine_minigrid \
      --budget "DI-engine FourRooms 0.6=10000000" \
      --json runs/bench/di_engine_fourrooms.json

(the defaults: FourRooms, 28,800 env steps of DI-engine, 100,000 per seed of
ours, seeds 0 1 2).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# DI-engine's published MiniGrid NGU config (DI-engine, dizoo/minigrid/config/
# minigrid_ngu_config.py at commit d0b21d0), restated as values; only the
# env id, `cuda` and the experiment's name are set by the benchmark.
DI_ENGINE_CONFIG = {
    "collector_env_num": 8,
    "evaluator_env_num": 8,
    "nstep": 5,
    "max_step": 300,
    "stop_value": 0.96,
    "reward_model_learning_rate": 5e-4,
    "reward_model_batch_size": 320,
    "reward_model_update_per_collect": 10,
    "reward_model_clear_buffer_per_iters": 10,
    "reward_model_hidden_size_list": [128, 128, 64],
    # The published 2835 (RND) and 2739 (the rest): the flat view plus a
    # one-hot mission string. DI-engine 0.5.3's own FlatObsWrapper flattens
    # the 7x7x3 view alone, 147 values, so its networks take 147 here
    # (smaller first layers than the published run's: if anything, faster).
    "rnd_obs_shape": 147,
    "episodic_obs_shape": 147,
    "last_nonzero_reward_weight": 100,
    "discount_factor": 0.997,
    "burnin_step": 2,
    "learn_unroll_len": 298,
    "encoder_hidden_size_list": [128, 128, 512],
    "update_per_collect": 16,
    "batch_size": 64,
    "learning_rate": 1e-4,
    "target_update_theta": 0.001,
    "n_sample": 32,
    "eps": {"type": "exp", "start": 0.95, "end": 0.05, "decay": 100000},
    "replay_buffer_size": 30000,
    "priority_alpha": 0.6,
    "priority_beta": 0.4,
}

# Ours: the MiniGrid study's variants of these names, with the study's own
# flags (`experiments.minigrid`: the PPO settings, or the laptop config and
# the compiled loop), so the rates are those of the study's runs.
OURS = ("ppo_ngu_lr1e-3_std", "ngu_zs_cmr")

# Env steps of one collection: `n_sample` sequences of burn-in + unroll
# steps (9,600, as measured on FourRooms).
DI_ENGINE_COLLECTION = DI_ENGINE_CONFIG["n_sample"] * (
    DI_ENGINE_CONFIG["burnin_step"] + DI_ENGINE_CONFIG["learn_unroll_len"])


def ours_command(name: str):
  """[-m MODULE, flags...] of the study's variant `name` (no env, budget,
  seeds or output dir)."""
  from experiments import minigrid  # pylint: disable=import-outside-toplevel
  variant = {v.name: v for v in minigrid.VARIANTS}[name]
  if minigrid.is_ppo(variant):
    return ["-m", minigrid.PPO_MODULE, *minigrid.PPO_SETTINGS, *variant.args]
  return ["-m", "experiments.train", *minigrid.LAPTOP, "--loop", "compiled",
          *variant.args]


def _di_engine_configs(env_id: str, exp_name: str):
  """(main_config, create_config) for `serial_pipeline_ngu`."""
  from easydict import EasyDict  # pylint: disable=import-outside-toplevel
  c = DI_ENGINE_CONFIG
  reward_model = dict(
      intrinsic_reward_type="add",
      learning_rate=c["reward_model_learning_rate"],
      action_shape=7, batch_size=c["reward_model_batch_size"],
      update_per_collect=c["reward_model_update_per_collect"],
      only_use_last_five_frames_for_icm_rnd=False,
      clear_buffer_per_iters=c["reward_model_clear_buffer_per_iters"],
      nstep=c["nstep"], hidden_size_list=c["reward_model_hidden_size_list"])
  main = dict(
      exp_name=exp_name,
      env=dict(collector_env_num=c["collector_env_num"],
               evaluator_env_num=c["evaluator_env_num"],
               n_evaluator_episode=c["evaluator_env_num"], env_id=env_id,
               obs_plus_prev_action_reward=True, max_step=c["max_step"],
               stop_value=c["stop_value"],
               # DI-engine 0.5.3's MiniGridEnv reads these three without
               # defaults (added with its DreamerV3 config, after the NGU
               # config was published): off is the NGU config's older
               # behaviour, the flat partial view only.
               flat_obs=True, full_obs=False, onehot_obs=False,
               move_bonus=False,
               # Its shared-memory buffers take arrays only, and this
               # release's MiniGridEnv declares the dict observation as a
               # shapeless Box: observations go through the pipes instead.
               manager=dict(shared_memory=False)),
      rnd_reward_model=dict(reward_model, obs_shape=c["rnd_obs_shape"],
                            type="rnd-ngu"),
      episodic_reward_model=dict(
          reward_model, obs_shape=c["episodic_obs_shape"], type="episodic",
          last_nonzero_reward_rescale=True,
          last_nonzero_reward_weight=c["last_nonzero_reward_weight"]),
      policy=dict(
          cuda=False, priority=True, priority_IS_weight=True,
          discount_factor=c["discount_factor"], nstep=c["nstep"],
          burnin_step=c["burnin_step"], learn_unroll_len=c["learn_unroll_len"],
          model=dict(obs_shape=c["episodic_obs_shape"], action_shape=7,
                     encoder_hidden_size_list=c["encoder_hidden_size_list"],
                     collector_env_num=c["collector_env_num"]),
          learn=dict(update_per_collect=c["update_per_collect"],
                     batch_size=c["batch_size"],
                     learning_rate=c["learning_rate"],
                     target_update_theta=c["target_update_theta"]),
          collect=dict(n_sample=c["n_sample"], traj_len_inf=True,
                       env_num=c["collector_env_num"]),
          eval=dict(env_num=c["evaluator_env_num"]),
          other=dict(eps=dict(c["eps"]),
                     replay_buffer=dict(
                         replay_buffer_size=c["replay_buffer_size"],
                         alpha=c["priority_alpha"],
                         beta=c["priority_beta"]))))
  create = dict(
      env=dict(type="minigrid",
               import_names=["dizoo.minigrid.envs.minigrid_env"]),
      env_manager=dict(type="subprocess"), policy=dict(type="ngu"),
      rnd_reward_model=dict(type="rnd-ngu"),
      episodic_reward_model=dict(type="episodic"))
  return EasyDict(main), EasyDict(create)


def _patch_prev_action_reward_wrapper() -> None:
  """Gives DI-engine 0.5.3's MiniGrid env a Gymnasium-API twin of
  `ding.envs.ObsPlusPrevActRewWrapper`.

  In that release `dizoo.minigrid.envs.minigrid_env` builds Gymnasium
  environments (`reset() -> (obs, info)`, 5-tuple `step`) but wraps them,
  when `obs_plus_prev_action_reward` is set as in its NGU config, in
  `ObsPlusPrevActRewWrapper`, written for gym 0.25 (old-API spaces and
  calls): the published config fails at the first reset. The twin does
  what that wrapper does -- observation {'obs', 'prev_action',
  'prev_reward_extrinsic'}, previous action -1 and reward 0 after a reset
  -- through Gymnasium's API, and casts the view to float32. The env
  manager forks its workers after this patch, so they inherit it.
  """
  import gymnasium  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from dizoo.minigrid.envs import minigrid_env  # pylint: disable=import-outside-toplevel

  class PrevActionRewardWrapper(gymnasium.Wrapper):

    def __init__(self, env):
      super().__init__(env)
      self.observation_space = gymnasium.spaces.Dict({
          "obs": env.observation_space,
          "prev_action": env.action_space,
          "prev_reward_extrinsic": gymnasium.spaces.Box(
              low=env.reward_range[0], high=env.reward_range[1],
              shape=(1,), dtype=np.float32)})
      self.prev_action, self.prev_reward_extrinsic = -1, 0

    def _wrap(self, obs):
      # float32, as the config's networks take (this release's wrapper
      # passes MiniGrid's uint8 view through).
      return {"obs": np.asarray(obs, np.float32),
              "prev_action": self.prev_action,
              "prev_reward_extrinsic": self.prev_reward_extrinsic}

    def reset(self, **kwargs):
      obs, info = self.env.reset(**kwargs)
      self.prev_action, self.prev_reward_extrinsic = -1, 0
      return self._wrap(obs), info

    def step(self, action):
      obs, reward, terminated, truncated, info = self.env.step(action)
      obs = self._wrap(obs)
      self.prev_action, self.prev_reward_extrinsic = action, reward
      return obs, reward, terminated, truncated, info

  minigrid_env.ObsPlusPrevActRewWrapper = PrevActionRewardWrapper


def _child(args) -> None:
  """Runs DI-engine's NGU pipeline (inside DI-engine's environment)."""
  import ding  # pylint: disable=import-outside-toplevel
  from ding.entry import serial_entry_ngu  # pylint: disable=import-outside-toplevel
  records = []
  start = time.perf_counter()
  make_collector = serial_entry_ngu.create_serial_collector

  def recording_collector(*a, **k):
    collector = make_collector(*a, **k)
    collect = collector.collect

    def collect_and_record(*ca, **ck):
      out = collect(*ca, **ck)
      records.append((time.perf_counter() - start, int(collector.envstep),
                      int(ck.get("train_iter", -1))))
      return out

    collector.collect = collect_and_record
    return collector

  serial_entry_ngu.create_serial_collector = recording_collector
  _patch_prev_action_reward_wrapper()
  os.chdir(args.workdir)
  main, create = _di_engine_configs(args.env_id, "di_engine_ngu")
  serial_entry_ngu.serial_pipeline_ngu([main, create], seed=0,
                                       max_env_step=args.di_engine_env_steps)
  import torch  # pylint: disable=import-outside-toplevel
  with open(args.json, "w") as f:
    json.dump({"records": records, "ding_version": ding.__version__,
               "torch_version": torch.__version__,
               "torch_threads": torch.get_num_threads(),
               "total_s": time.perf_counter() - start}, f)


def steady_rate(records, warmup_fraction: float, min_dropped: int = 0
                ) -> dict:
  """Env steps/s between the first record past the warm-up and the last.

  Args:
    records: [(seconds since start, cumulative env steps, ...)],
      time-ordered; fields past the second are ignored.
    warmup_fraction: share of the records (by count) dropped from the front.
    min_dropped: drop at least this many (at most all but the last two).

  Returns:
    {"env_steps_per_s", "env_steps", "seconds", "records"} over the window.
  """
  if len(records) < 3:
    raise ValueError(f"steady_rate: need >= 3 records, got {len(records)}")
  first = min(max(int(len(records) * warmup_fraction), min_dropped),
              len(records) - 2)
  (t0, s0), (t1, s1) = records[first][:2], records[-1][:2]
  return {"env_steps_per_s": (s1 - s0) / (t1 - t0), "env_steps": s1 - s0,
          "seconds": t1 - t0, "records": len(records) - first}


def _ours_records(output_dir: str):
  """[(elapsed_s, env_steps)] of seed 0's metrics.csv (vmapped seeds share
  the wall clock, so seed 0's rows time every seed)."""
  from ngu_jax import plotting  # pylint: disable=import-outside-toplevel
  rows = plotting.read_metrics(
      os.path.join(output_dir, "seed_0", "metrics.csv"))
  return list(zip(rows["elapsed_s"].tolist(), rows["env_steps"].tolist()))


def _run_logged(cmd, log_path: str) -> float:
  """Runs `cmd` with its output in `log_path`; returns its wall time. On a
  failure, prints the log's last lines and raises SystemExit(1)."""
  t = time.perf_counter()
  with open(log_path, "w") as log:
    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                        check=False).returncode
  if rc != 0:
    with open(log_path) as log:
      tail = log.read().splitlines()[-40:]
    print("\n".join(tail), file=sys.stderr)
    raise SystemExit(f"di_engine_minigrid: {cmd[1]} ... exited with {rc} "
                     f"(its last lines above)")
  return time.perf_counter() - t


def _run_ours(name: str, env_id: str, env_steps: int, seeds, workdir: str):
  out = os.path.join(workdir, name)
  log_every = max(env_steps // 12, 1)
  cmd = [sys.executable] + ours_command(name) + [
      "--env", f"minigrid/{env_id}", "--total-env-steps", str(env_steps),
      "--seeds", *map(str, seeds), "--output-dir", out, "--no-progress",
      "--log-every", str(log_every), "--eval-every", str(env_steps // 3)]
  wall = _run_logged(cmd, os.path.join(workdir, name + ".log"))
  return _ours_records(out), wall, cmd


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m experiments.benchmarks.di_engine_minigrid",
      description=__doc__.split("\n\n")[0])
  parser.add_argument("--env-id", default="MiniGrid-FourRooms-v0")
  parser.add_argument("--di-engine-python",
                      default=os.path.join(".venv-di-engine", "bin", "python"))
  parser.add_argument("--di-engine-env-steps", type=int,
                      default=3 * DI_ENGINE_COLLECTION,
                      help="more than two collections of "
                      f"{DI_ENGINE_COLLECTION} env steps (default: three)")
  parser.add_argument("--ours-env-steps", type=int, default=100000,
                      help="env steps per seed of each of ours")
  parser.add_argument("--ours", nargs="*", default=list(OURS),
                      choices=OURS)
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
  parser.add_argument("--warmup-fraction", type=float, default=0.25)
  parser.add_argument("--budget", action="append", default=[],
                      metavar="NAME=ENV_STEPS",
                      help="an env-step budget to convert to hours")
  parser.add_argument("--json")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--workdir", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    _child(args)
    return 0
  if not (0.0 <= args.warmup_fraction < 1.0):
    parser.error("--warmup-fraction must be in [0, 1)")
  if args.di_engine_env_steps <= 2 * DI_ENGINE_COLLECTION:
    parser.error(f"--di-engine-env-steps must be > {2 * DI_ENGINE_COLLECTION}"
                 " (three collections: the first is never timed)")
  if args.ours_env_steps < 12:
    parser.error("--ours-env-steps must be >= 12 (a log row each twelfth)")
  budgets = {}
  for item in args.budget:
    name, sep, value = item.partition("=")
    if not sep or not value.replace("_", "").isdigit():
      parser.error(f"--budget wants NAME=ENV_STEPS, got {item!r}")
    budgets[name] = int(value)
  if not os.access(args.di_engine_python, os.X_OK):
    parser.error(f"--di-engine-python: {args.di_engine_python} is not an "
                 "executable; `make .venv-di-engine` makes it")
  report = {"env_id": args.env_id, "cpus": os.cpu_count(),
            "di_engine_config": DI_ENGINE_CONFIG, "runs": {}}
  with tempfile.TemporaryDirectory(prefix="di_engine_minigrid_") as tmp:
    child_json = os.path.join(tmp, "di_engine.json")
    wall = _run_logged(
        [args.di_engine_python, os.path.abspath(__file__), "--child",
         "--env-id", args.env_id, "--di-engine-env-steps",
         str(args.di_engine_env_steps), "--workdir", tmp, "--json",
         child_json], os.path.join(tmp, "di_engine.log"))
    with open(child_json) as f:
      child = json.load(f)
    # Its first collection comes before any learner update (the replay holds
    # 32 sequences, a batch takes 64): always outside the window.
    rate = steady_rate(child["records"], args.warmup_fraction, min_dropped=1)
    records = child["records"]
    updates = records[-1][2] - records[-2][2]
    report["runs"]["di_engine_ngu"] = dict(
        rate, seeds=1, per_seed_env_steps_per_s=rate["env_steps_per_s"],
        wall_s=wall, ding_version=child["ding_version"],
        learner_updates_per_collection=updates,
        env_steps_per_collection=records[-1][1] - records[-2][1],
        torch_version=child["torch_version"],
        torch_threads=child["torch_threads"])
    for name in args.ours:
      records, wall, cmd = _run_ours(name, args.env_id, args.ours_env_steps,
                                     args.seeds, tmp)
      rate = steady_rate(records, args.warmup_fraction)
      per_seed, n = rate["env_steps_per_s"], len(args.seeds)
      # `env_steps` stays the window's steps of one seed.
      report["runs"][name] = dict(
          rate, seeds=n, env_steps_per_s=n * per_seed,
          per_seed_env_steps_per_s=per_seed, wall_s=wall,
          command=" ".join(cmd[1:]))
  print(f"{args.env_id}, {os.cpu_count()} CPUs; steady-state env steps/s "
        f"(after the first {args.warmup_fraction:.0%} of records)")
  print(f"{'run':24s} {'seeds':>5s} {'all seeds':>10s} {'per seed':>10s}")
  for name, run in report["runs"].items():
    print(f"{name:24s} {run['seeds']:5d} {run['env_steps_per_s']:10.0f} "
          f"{run['per_seed_env_steps_per_s']:10.0f}")
  if budgets:
    report["hours"] = {}
    print("\nhours to reach a budget of env steps per seed (all seeds of a "
          "run together)")
    for bname, steps in budgets.items():
      report["hours"][bname] = {
          name: steps / run["per_seed_env_steps_per_s"] / 3600
          for name, run in report["runs"].items()}
      print(f"{bname} ({steps:,}): " + ", ".join(
          f"{name} {h:.2f} h" for name, h in report["hours"][bname].items()))
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
      json.dump(report, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
