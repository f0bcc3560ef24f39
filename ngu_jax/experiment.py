"""Single-process NGU run loop: one batched env, actor, replay, learner.

Badia et al. (2020), "Never Give Up", App. A, run in one process: one
`BatchedEnv` of B lanes is stepped by one `Actor` (one jitted step for all
lanes), whose steps go through the `SequenceAdder` into the embedded
prioritised replay; once the replay holds `min_replay_size` sequences, the
learner runs at `config.samples_per_insert` sampled sequences per inserted
one, paced here (one thread cannot wait on the replay's rate limiter) with
inserts counted as fresh environment steps / `replay_period`: that is the
number of sequences for full-length sequences, and it keeps the many short,
padded sequences of early episodes (e.g. Disco Maze agents walking into
walls after a few steps) from multiplying the learner's work per step of
experience. So the replay ratio (transitions sampled per transition
generated) is samples_per_insert * trace_length / replay_period.
Actors pull parameters every `actor_update_period` steps (Table 6).

Logged to `output_dir/metrics.csv` every `log_every_env_steps` environment
steps (env steps count every lane): env steps, episodes, mean return of the
episodes finished since the last row, learner steps and mean loss since the
last row, the fraction of them with a positive return (the success rate
of sparse-reward tasks such as MiniGrid, whose only reward is for reaching
the goal), env steps/s, and for Disco Maze the mean coverage of the finished
episodes (Sec. 4.1, `CoverageTracker`). A progress line goes to stderr (a
tqdm bar when tqdm is installed).

Evaluation (`eval_every_env_steps` > 0): every so often, one episode in
each of B fresh evaluation lanes (their own environment, seeded apart) with
`config.eval_epsilon` and the exploitative mixture j = 0, then with the most
exploratory one j = N - 1 (App. A; with N = 1 both are j = 0), using the
learner's latest parameters and writing nothing to the replay. Columns
`eval_return` / `eval_coverage` (j = 0) and `eval_explore_return` /
`eval_explore_coverage` (j = N - 1); NaN in rows without an evaluation.

Not yet here (issue 6): checkpoints / resume, learning-curve PNGs.
"""

import csv
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional

import jax
import numpy as np

from ngu_jax import envs
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu.config import NGUConfig

try:  # Optional progress bar.
  import tqdm  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the environment.
  tqdm = None

METRICS_FILE = "metrics.csv"
COLUMNS = ("env_steps", "actor_steps", "episodes", "mean_episode_return",
           "episode_success_rate", "mean_episode_coverage", "learner_steps", "learner_loss",
           "replay_size", "env_steps_per_s", "elapsed_s", "eval_return",
           "eval_coverage", "eval_explore_return", "eval_explore_coverage")


class _Progress:
  """tqdm bar if available, else a simple line rewritten every ~2 s."""

  def __init__(self, total: int, enabled: bool):
    self._enabled = enabled
    self._bar = (tqdm.tqdm(total=total, unit="step", file=sys.stderr)
                 if enabled and tqdm is not None else None)
    self._total = total
    self._last_print = 0.

  def update(self, done: int, increment: int, text: str) -> None:
    if not self._enabled:
      return
    if self._bar is not None:
      self._bar.update(increment)
      self._bar.set_postfix_str(text, refresh=False)
      return
    now = time.time()
    if now - self._last_print >= 2. or done >= self._total:
      self._last_print = now
      sys.stderr.write(f"\r{done}/{self._total} env steps  {text}   ")
      sys.stderr.flush()

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
    elif self._enabled:
      sys.stderr.write("\n")


def _mean(values: List[float]) -> float:
  return float(np.mean(values)) if values else math.nan


def evaluate(actor: builder_lib.Actor, env: envs.BatchedEnv,
             track_coverage: bool) -> Dict[str, float]:
  """One episode per lane of `env` with `actor` (no adder); mean results.

  Returns:
    {"return": mean episode return, "coverage": mean episode coverage
    (NaN unless `track_coverage`, i.e. Disco Maze)}.
  """
  lanes = env.num_envs
  tracker = None
  if track_coverage:
    from ngu_jax.envs import disco_maze  # pylint: disable=g-import-not-at-top
    tracker = disco_maze.CoverageTracker(lanes, size=env.size)
  actor.update(wait=True)  # The latest parameters for this evaluation.
  done = np.zeros(lanes, bool)
  episode_return = np.zeros(lanes, np.float64)
  final_coverage = np.full(lanes, math.nan)
  timestep = env.reset()
  while True:
    live = ~done & ~timestep.first()
    episode_return += np.where(live, timestep.reward, 0.)
    if tracker is not None:
      lane_coverage = tracker.update(timestep)
      final_coverage = np.where(live & timestep.last(), lane_coverage,
                                final_coverage)
    done |= timestep.last()
    if done.all():
      break
    action = actor.select_action(timestep)
    actor.update()
    timestep = env.step(action)
  return {"return": float(episode_return.mean()),
          "coverage": float(np.mean(final_coverage))}


def run_experiment(config: NGUConfig, env_name: str, total_env_steps: int,
                   num_lanes: int = 8, seed: int = 0,
                   output_dir: Optional[str] = None,
                   env_kwargs: Optional[Dict[str, Any]] = None,
                   log_every_env_steps: int = 1000,
                   eval_every_env_steps: int = 0,
                   progress: bool = True) -> Dict[str, Any]:
  """Trains NGU in one process for `total_env_steps` environment steps.

  Args:
    config: the agent's config.
    env_name: a name `ngu_jax.envs.make` accepts, e.g. "disco_maze".
    total_env_steps: budget in environment steps over all lanes (the run
      takes ceil(total / num_lanes) actor steps).
    num_lanes: B, lanes of the batched environment (one actor).
    seed: seeds the environment, the replay and the agent's keys.
    output_dir: where `metrics.csv` goes (created); None writes nothing.
    env_kwargs: extra keyword arguments of `envs.make`.
    log_every_env_steps: a metrics row every this many env steps (and one
      at the end).
    eval_every_env_steps: evaluate (see the module docstring) at the first
      metrics row past every multiple of this; 0 never.
    progress: show a progress bar / line on stderr.

  Returns:
    A summary dict: the last metrics row plus "rows" (all rows) and
    "metrics_path" (or None).
  """
  if total_env_steps < 1 or num_lanes < 1 or log_every_env_steps < 1:
    raise ValueError("run_experiment: `total_env_steps`, `num_lanes` and "
                     "`log_every_env_steps` must be >= 1, got "
                     f"{total_env_steps}, {num_lanes}, {log_every_env_steps}.")
  env = envs.make(env_name, num_lanes, seed=seed, **(env_kwargs or {}))
  spec = builder_lib.make_environment_spec(env)
  builder = builder_lib.NGUBuilder(config)
  learner_key, actor_key = jax.random.split(jax.random.PRNGKey(seed))
  networks = builder.make_networks(spec)
  policy = builder.make_policy(networks, spec)
  replay = builder.make_replay_tables(spec, policy, rate_limit=False,
                                      seed=seed)
  learner = builder.make_learner(
      learner_key, networks, builder.make_dataset_iterator(replay),
      env_spec=spec, replay_client=replay)
  actor = builder.make_actor(actor_key, policy, spec, learner,
                             builder.make_adder(replay, spec, policy))
  coverage = None
  if env_name == "disco_maze":
    from ngu_jax.envs import disco_maze  # pylint: disable=g-import-not-at-top
    coverage = disco_maze.CoverageTracker(num_lanes, size=env.size)

  eval_actors = {}  # mixture j -> evaluation actor
  if eval_every_env_steps > 0:
    eval_env = envs.make(env_name, num_lanes, seed=seed + 10_000,
                         **(env_kwargs or {}))
    for mixture in sorted({0, config.num_mixtures - 1}):
      eval_policy = builder.make_policy(networks, spec, evaluation=True,
                                        eval_mixture_index=mixture)
      eval_actors[mixture] = builder.make_actor(
          jax.random.PRNGKey(seed + 1 + mixture), eval_policy, spec, learner)
  next_eval = eval_every_env_steps

  metrics_path = None
  writer = csv_file = None
  if output_dir is not None:
    os.makedirs(output_dir, exist_ok=True)
    metrics_path = os.path.join(output_dir, METRICS_FILE)
    csv_file = open(metrics_path, "w", newline="")
    writer = csv.DictWriter(csv_file, fieldnames=COLUMNS)
    writer.writeheader()

  batch_size = config.batch_size
  min_size = config.min_replay_size
  # Sampled sequences allowed per fresh env step (see the module docstring).
  samples_per_env_step = config.samples_per_insert / config.replay_period
  ready_at = None  # env steps when the replay first held min_size items
  episode_return = np.zeros(num_lanes, np.float64)
  returns, coverages, losses, rows = [], [], [], []
  episodes = learner_steps = env_steps = actor_steps = 0
  next_log = log_every_env_steps
  start = time.time()
  bar = _Progress(total_env_steps, progress)
  timestep = env.reset()
  try:
    while env_steps < total_env_steps:
      # Episode statistics of the step just received.
      first, last = timestep.first(), timestep.last()
      episode_return = np.where(first, 0., episode_return) + np.where(
          first, 0., timestep.reward)
      if coverage is not None:
        lane_coverage = coverage.update(timestep)
        coverages.extend(lane_coverage[last].tolist())
      returns.extend(episode_return[last].tolist())
      episodes += int(last.sum())

      # Act.
      action = actor.select_action(timestep)
      actor.observe(timestep, action)
      actor.update()
      timestep = env.step(action)
      actor_steps += 1
      env_steps += num_lanes

      # Learn at `samples_per_insert` once the replay holds min_size items
      # (the first batch as soon as it does).
      if ready_at is None and replay.size >= min_size:
        ready_at = env_steps
      while (ready_at is not None and learner_steps * batch_size
             <= samples_per_env_step * (env_steps - ready_at)):
        losses.append(learner.step()["loss"])
        learner_steps += 1

      elapsed = time.time() - start
      rate = env_steps / max(elapsed, 1e-9)
      bar.update(env_steps, num_lanes,
                 f"{rate:.0f} env steps/s, {episodes} episodes, "
                 f"{learner_steps} learner steps")
      if env_steps >= next_log or env_steps >= total_env_steps:
        next_log += log_every_env_steps
        row = dict(
            env_steps=env_steps, actor_steps=actor_steps, episodes=episodes,
            mean_episode_return=_mean(returns),
            episode_success_rate=_mean([float(r > 0) for r in returns]),
            mean_episode_coverage=(_mean(coverages) if coverage is not None
                                   else math.nan),
            learner_steps=learner_steps, learner_loss=_mean(losses),
            replay_size=replay.size, env_steps_per_s=rate, elapsed_s=elapsed,
            eval_return=math.nan, eval_coverage=math.nan,
            eval_explore_return=math.nan, eval_explore_coverage=math.nan)
        if eval_actors and env_steps >= next_eval:
          next_eval += eval_every_env_steps
          results = {j: evaluate(eval_actor, eval_env, coverage is not None)
                     for j, eval_actor in eval_actors.items()}
          for prefix, j in (("eval_", 0),
                            ("eval_explore_", config.num_mixtures - 1)):
            row[prefix + "return"] = results[j]["return"]
            row[prefix + "coverage"] = results[j]["coverage"]
        rows.append(row)
        if writer is not None:
          writer.writerow(row)
          csv_file.flush()
        returns, coverages, losses = [], [], []
  finally:
    bar.close()
    if csv_file is not None:
      csv_file.close()
    env.close()
    if eval_actors:
      eval_env.close()
  summary = dict(rows[-1]) if rows else {}
  summary.update(rows=rows, metrics_path=metrics_path)
  return summary
