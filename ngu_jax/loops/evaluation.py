"""Evaluation episodes, their metrics columns and their visit counts.

Evaluation (`eval_every_env_steps` > 0): every so often, one episode in
each of B fresh evaluation lanes (their own environment, seeded apart:
`ngu_jax.loops.acting`, which also builds the evaluation actors) with
`config.eval_epsilon` and the exploitative mixture j = 0, then with the most
exploratory one j = N - 1 (NGU App. A; with N = 1 both are j = 0), using the
learner's latest parameters and writing nothing to the replay. Columns
`eval_return` / `eval_coverage` (j = 0) and `eval_explore_return` /
`eval_explore_coverage` (j = N - 1) of `ngu_jax.loops.metrics_log.COLUMNS`;
NaN in rows without an evaluation. In grid worlds the visits of the
evaluation episodes go to the heatmaps (`heatmap_counts`,
`metrics_log.write_heatmaps`).
"""

import math
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from ngu_jax import diagnostics
from ngu_jax import envs
from ngu_jax.agents.ngu import actor as actor_lib


def evaluate(actor: actor_lib.Actor, env: envs.BatchedEnv,
             track_coverage: bool, visits_shape: Optional[Tuple[int, int]]
             = None) -> Dict[str, Any]:
  """One episode per lane of `env` with `actor` (no adder); mean results.

  Args:
    actor: the evaluation actor (it pulls the latest parameters first).
    env: the evaluation environment (reset here).
    track_coverage: measure the episodes' coverage with the tracker the
      environment declares (`BatchedEnv.make_coverage_tracker`: Disco Maze,
      Sec. 4.1); no coverage where it declares none.
    visits_shape: (H, W): also count the grid cells of every step of the
      episodes (`diagnostics.grid_positions`; the grid grows if a cell lies
      outside); None: no counts.

  Returns:
    {"return": mean episode return, "coverage": mean episode coverage
    (NaN unless `track_coverage` and the environment has a coverage)}, and with
    `visits_shape` "visits": int64 [H, W] visits of the episodes' steps
    (FIRST and LAST included), or None where the environment reports no
    positions.
  """
  lanes = env.num_envs
  tracker = env.make_coverage_tracker() if track_coverage else None
  actor.update(wait=True)  # The latest parameters for this evaluation.
  done = np.zeros(lanes, bool)
  episode_return = np.zeros(lanes, np.float64)
  final_coverage = np.full(lanes, math.nan)
  visits = (None if visits_shape is None
            else np.zeros(tuple(visits_shape), np.int64))
  timestep = env.reset()
  while True:
    live = ~done & ~timestep.first()
    episode_return += np.where(live, timestep.reward, 0.)
    if tracker is not None:
      lane_coverage = tracker.update(timestep)
      final_coverage = np.where(live & timestep.last(), lane_coverage,
                                final_coverage)
    if visits is not None:
      positions = diagnostics.grid_positions(timestep)
      visits = (None if positions is None
                else diagnostics.add_visits(visits, positions, ~done))
    done |= timestep.last()
    if done.all():
      break
    action = actor.select_action(timestep)
    actor.update()
    timestep = env.step(action)
  result = {"return": float(episode_return.mean()),
            "coverage": float(np.mean(final_coverage))}
  if visits_shape is not None:
    result["visits"] = visits
  return result


def evaluation_columns(results: Mapping[int, Dict[str, Any]],
                       num_mixtures: int) -> Dict[str, float]:
  """The eval_* metrics columns of evaluations by mixture.

  Args:
    results: mixture j -> `evaluate` result, for j = 0 and j = N - 1.
    num_mixtures: N.

  Returns:
    {"eval_return", "eval_coverage" (j = 0), "eval_explore_return",
    "eval_explore_coverage" (j = N - 1)}.
  """
  columns = {}
  for prefix, j in (("eval_", 0), ("eval_explore_", num_mixtures - 1)):
    columns[prefix + "return"] = results[j]["return"]
    columns[prefix + "coverage"] = results[j]["coverage"]
  return columns


def heatmap_counts(results: Mapping[int, Dict[str, Any]], num_mixtures: int,
                   train_visits: Optional[np.ndarray]
                   ) -> Dict[str, Tuple[str, np.ndarray]]:
  """The panels of `metrics_log.write_heatmaps` for one evaluation.

  Args:
    results: mixture j -> `evaluate` result with "visits".
    num_mixtures: N.
    train_visits: int64 [H, W] visits of the training lanes since the last
      evaluation, or None.

  Returns:
    "eval_j<j>" -> (title, visits) for every evaluation with visits, and
    "train" -> (title, `train_visits`) when there is any of them and
    `train_visits` is not None; {} when no evaluation has visits.
  """
  last = num_mixtures - 1
  names = {0: "exploit", last: "most exploratory"}
  if last == 0:
    names[0] = "the only mixture"
  counts = {f"eval_j{j}": (f"evaluation j = {j} ({names[j]})",
                           result["visits"])
            for j, result in sorted(results.items())
            if result["visits"] is not None}
  if counts and train_visits is not None:
    counts["train"] = ("training lanes since the last evaluation",
                       train_visits)
  return counts
