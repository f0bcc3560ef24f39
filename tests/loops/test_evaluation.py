"""Tests for ngu_jax.loops.evaluation's evaluator bandit (Agent57 Sec. 3.2).

The loops' use of it (arms per evaluation, checkpoints) is tested in
tests/loops/test_host.py (Python loop) and tests/loops/compiled/test_loop.py.
"""

import numpy as np
import pytest

from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.loops import evaluation
from ngu_jax.meta import sliding_window_ucb as ucb


def _config(**overrides):
  return config_lib.NGUConfig(**{"num_mixtures": 3, "meta_controller": "ucb",
                                 "eval_ucb_window": 5, **overrides})


def test_defaults_are_agent57s_evaluator():
  config = config_lib.NGUConfig()
  assert (config.meta.eval_window, config.meta.eval_epsilon,
          config.meta.eval_beta) == tuple(ucb.EVALUATOR_DEFAULTS)


def test_each_arm_once_then_greedy_on_the_windowed_mean():
  """Lane returns are episodes of the evaluation's arm; beta 0, epsilon 0:
  after the first round the arm with the best windowed mean, which moves
  when old evaluations leave the window (5 episodes)."""
  bandit = evaluation.EvaluatorBandit(_config(eval_ucb_epsilon=0.), seed=3,
                                       num_lanes=2)
  picks = []
  lane_returns = {0: [1., 1.], 1: [3., 2.], 2: [0., 2.]}
  for _ in range(3):
    arm = bandit.select()
    picks.append(arm)
    bandit.record(arm, np.asarray(lane_returns[arm]))
  # Window (5): arm 0's first episode left; means 1, 2.5, 1 -> arm 1.
  arm = bandit.select()
  picks.append(arm)
  bandit.record(arm, np.asarray([0., 0.]))
  # The last 5 episodes: (1: 2), (2: 0, 2), (1: 0, 0); means: arm 0 unseen
  # in the window -> +inf, so arm 0.
  picks.append(bandit.select())
  assert picks == [0, 1, 2, 1, 0]
  assert int(bandit.state.num_episodes) == 8
  with pytest.raises(ValueError, match="2 lane returns"):
    bandit.record(0, np.zeros(3))


def test_tree_round_trip_continues_identically():
  config = _config(eval_ucb_epsilon=0.5, eval_ucb_beta=1.)
  bandit = evaluation.EvaluatorBandit(config, seed=0, num_lanes=2)
  for returns in ([1., 0.], [2., 2.], [0., 1.], [5., 5.]):
    bandit.record(bandit.select(), np.asarray(returns))
  copy = evaluation.EvaluatorBandit(config, seed=99, num_lanes=2)
  copy.restore({k: np.array(v) for k, v in bandit.tree().items()})
  assert ([bandit.select() for _ in range(20)]
          == [copy.select() for _ in range(20)])
  with pytest.raises(ValueError, match="window"):
    evaluation.EvaluatorBandit(_config(eval_ucb_window=7), 0, 2).restore(
        bandit.tree())


def test_evaluation_columns_with_the_bandit():
  results = {0: {"return": 1., "coverage": 0.5,
                 "returns": np.array([0., 0.5, 2.5, -1.])},
             2: {"return": 2., "coverage": 0.25,
                 "returns": np.array([2., 2.])}}
  columns = evaluation.evaluation_columns(
      results, 3, {"arm": 1, "return": 4., "coverage": np.nan})
  # eval_success: j = 0's episodes with a positive return, 2 of 4.
  assert columns == {"eval_return": 1., "eval_success": 0.5,
                     "eval_coverage": 0.5,
                     "eval_explore_return": 2.,
                     "eval_explore_coverage": 0.25, "eval_arm": 1.,
                     "eval_bandit_return": 4.}
  assert "eval_arm" not in evaluation.evaluation_columns(results, 3)
  with pytest.raises(ValueError, match="no episodes"):
    evaluation.success_rate([])
