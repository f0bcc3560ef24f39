"""Evaluation episodes, their metrics columns and their visit counts.

Evaluation (`eval_every_env_steps` > 0): every so often, one episode in
each of B fresh evaluation lanes (their own environment, seeded apart:
`ngu_jax.loops.acting`, which also builds the evaluation actors) with
`config.eval_epsilon` and the exploitative mixture j = 0, then with the most
exploratory one j = N - 1 (NGU App. A; with N = 1 both are j = 0), using the
learner's latest parameters and writing nothing to the replay. Columns
`eval_return` / `eval_success` (the fraction of its episodes with a
positive return: the success rate of goal tasks such as MiniGrid's, whose
only reward is paid at the goal) / `eval_coverage` (j = 0) and `eval_explore_return` /
`eval_explore_coverage` (j = N - 1) of `ngu_jax.loops.metrics_log.COLUMNS`;
NaN in rows without an evaluation. In grid worlds the visits of the
evaluation episodes go to the heatmaps (`heatmap_counts`,
`metrics_log.write_heatmaps`).

With Agent57's meta-controller (`config.has_meta_controller`) each
evaluation also plays the evaluator's own sliding-window UCB bandit
(`EvaluatorBandit`; Agent57 Sec. 3.2, App. G: window 3600, epsilon 0.01,
greedy on the windowed mean): it picks one arm j, every evaluation lane
plays one episode of j, and each lane's return is one episode of arm j for
the bandit, which persists from evaluation to evaluation (and in the Python
and compiled loops' checkpoints). Columns `eval_arm` and
`eval_bandit_return` (`metrics_log.columns_for`).
"""

import math
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import envs
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.meta import sliding_window_ucb as ucb

# The evaluator bandit's key: PRNGKey(seed + EVAL_BANDIT_SEED_OFFSET).
EVAL_BANDIT_SEED_OFFSET = 20_000


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
    {"return": mean episode return, "returns": float64 [B] each lane's
    episode return, "coverage": mean episode coverage
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
            "returns": episode_return,
            "coverage": float(np.mean(final_coverage))}
  if visits_shape is not None:
    result["visits"] = visits
  return result


class EvaluatorBandit:
  """The evaluator's own Agent57 meta-controller (Sec. 3.2, App. G).

  One sliding-window UCB bandit over the N mixtures
  (`ngu_jax.meta.sliding_window_ucb`) with the evaluator's window, epsilon and
  beta (`config.eval_ucb_*`: 3600, 0.01, 0 -- greedy on the windowed mean),
  kept across evaluations. Each evaluation `select`s one arm; every
  evaluation lane plays one episode of it; `record` adds each lane's return
  as one episode of that arm. Used by the host loops (Python loop, the
  distributed evaluator node); the compiled loop carries the same `UCBState`
  in its `TrainState` (`ngu_jax.loops.compiled`).

  Args:
    config: the agent's config (N mixtures, the eval_ucb_* fields).
    seed: the run's seed; the arm draws are keyed
      PRNGKey(seed + EVAL_BANDIT_SEED_OFFSET).
    num_lanes: B, the evaluation lanes (episodes recorded per evaluation;
      the first round plays each arm in one evaluation).
  """

  def __init__(self, config: NGUConfig, seed: int, num_lanes: int):
    self._num_arms = config.num_mixtures
    self._num_lanes = int(num_lanes)
    self._epsilon = config.meta.eval_epsilon
    self._beta = config.meta.eval_beta
    self.state = ucb.init(config.meta.eval_window)
    self.key = jax.random.PRNGKey(int(seed) + EVAL_BANDIT_SEED_OFFSET)

  def select(self) -> int:
    """The arm of the next evaluation (each arm once first)."""
    self.key, key = jax.random.split(self.key)
    return int(ucb.select(self.state, key, self._num_arms, self._epsilon,
                          self._beta, episodes_per_pull=self._num_lanes))

  def record(self, arm: int, returns: np.ndarray) -> None:
    """Records the lanes' returns [B] as B episodes of `arm`."""
    if np.shape(returns) != (self._num_lanes,):
      raise ValueError(f"EvaluatorBandit.record: expected {self._num_lanes} "
                       f"lane returns, got shape {np.shape(returns)}.")
    self.state = ucb.update_many(self.state, jnp.asarray(arm, jnp.int32),
                                 np.asarray(returns, np.float32),
                                 self._num_arms)

  def tree(self) -> Dict[str, np.ndarray]:
    """The bandit as numpy arrays (for `npz_io.save_pytree`)."""
    return {"arms": np.asarray(self.state.arms),
            "returns": np.asarray(self.state.returns),
            "num_episodes": np.asarray(self.state.num_episodes),
            "key": np.asarray(self.key)}

  def restore(self, tree: Mapping[str, np.ndarray]) -> None:
    """Restores a `tree` of this bandit (same window)."""
    arms = np.asarray(tree["arms"])
    if arms.shape != self.state.arms.shape:
      raise ValueError(f"EvaluatorBandit.restore: the checkpoint's window is "
                       f"{arms.shape[0]}, the config's "
                       f"{self.state.arms.shape[0]}.")
    self.state = ucb.UCBState(
        arms=jnp.asarray(arms, jnp.int32),
        returns=jnp.asarray(tree["returns"], jnp.float32),
        num_episodes=jnp.asarray(tree["num_episodes"], jnp.int32))
    self.key = jnp.asarray(tree["key"], jnp.uint32)


def _set_mixture(actor: actor_lib.Actor, mixture: int) -> None:
  """Makes every lane of `actor` play `mixture` from its next step on."""
  state = actor.state
  actor.restore(state._replace(mixture_index=jnp.full_like(
      state.mixture_index, mixture)), actor.params, actor.num_updates)


def evaluate_bandit(actor: actor_lib.Actor, bandit: EvaluatorBandit,
                    env: envs.BatchedEnv, track_coverage: bool
                    ) -> Dict[str, Any]:
  """One evaluation of the evaluator bandit's arm (module docstring).

  The bandit picks arm j; `actor` (an evaluation actor; its mixture is
  restored afterwards) plays one episode per lane of `env` with j; the
  bandit records each lane's return.

  Returns:
    The `evaluate` result and "arm": j.
  """
  arm = bandit.select()
  mixture = int(np.asarray(actor.state.mixture_index)[0])
  _set_mixture(actor, arm)
  try:
    result = evaluate(actor, env, track_coverage)
  finally:
    _set_mixture(actor, mixture)
  bandit.record(arm, result["returns"])
  result["arm"] = arm
  return result


def success_rate(returns: Any) -> float:
  """The fraction of episodes with a positive return (`eval_success`)."""
  returns = np.asarray(returns, np.float64)
  if returns.size == 0:
    raise ValueError("success_rate: no episodes.")
  return float(np.mean(returns > 0))


def evaluation_columns(results: Mapping[int, Dict[str, Any]],
                       num_mixtures: int,
                       bandit_result: Optional[Dict[str, Any]] = None
                       ) -> Dict[str, float]:
  """The eval_* metrics columns of evaluations by mixture.

  Args:
    results: mixture j -> `evaluate` result, for j = 0 and j = N - 1.
    num_mixtures: N.
    bandit_result: the `evaluate_bandit` result, if any.

  Returns:
    {"eval_return", "eval_success", "eval_coverage" (j = 0),
    "eval_explore_return",
    "eval_explore_coverage" (j = N - 1)}, and with `bandit_result`
    "eval_arm" and "eval_bandit_return".
  """
  columns = {}
  for prefix, j in (("eval_", 0), ("eval_explore_", num_mixtures - 1)):
    columns[prefix + "return"] = results[j]["return"]
    columns[prefix + "coverage"] = results[j]["coverage"]
  columns["eval_success"] = success_rate(results[0]["returns"])
  if bandit_result is not None:
    columns["eval_arm"] = float(bandit_result["arm"])
    columns["eval_bandit_return"] = bandit_result["return"]
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
