"""Tests of experiments.probes.greedy_rollout."""

import json
import math

import numpy as np
import pytest

from experiments.probes import greedy_rollout
from ngu_jax.envs import base as env_base
from tests.experiments import test_exploit_values_probe as tiny


def _timestep(observation, position=None):
  extras = {} if position is None else {"position": np.asarray(position)}
  b = len(observation)
  return env_base.TimeStep(
      step_type=np.full(b, env_base.StepType.MID), reward=np.zeros(b),
      discount=np.ones(b), observation=np.asarray(observation),
      extras=extras)


def test_unchanged_needs_the_same_view_and_position():
  before = _timestep([[[1, 2]], [[1, 2]], [[1, 2]]], [[0, 0], [0, 0], [0, 0]])
  after = _timestep([[[1, 2]], [[1, 3]], [[1, 2]]], [[0, 0], [0, 0], [1, 0]])
  np.testing.assert_array_equal(greedy_rollout._unchanged(before, after),
                                [True, False, False])
  # Without positions, the observation alone decides.
  np.testing.assert_array_equal(
      greedy_rollout._unchanged(_timestep([[1], [2]]), _timestep([[1], [3]])),
      [True, False])


def test_summarise_counts_by_hand():
  episodes = [
      {"actions": [2, 6, 2], "unchanged": [False, True, False],
       "return": 0.5, "success": True, "timed_out": False},
      {"actions": [6, 6, 0, 6], "unchanged": [True, True, False, True],
       "return": 0., "success": False, "timed_out": True}]
  out = greedy_rollout.summarise(episodes, 7, gaps=[0.1, 0.3],
                                 scales=[0.01, 0.03])
  assert out["success"] == 0.5 and out["return"] == 0.25
  assert out["length"] == 3.5 and out["length_success"] == 3.
  assert out["timed_out"] == 0.5
  assert out["action_share"] == pytest.approx(
      {"left": 1 / 7, "right": 0., "forward": 2 / 7, "pickup": 0.,
       "drop": 0., "toggle": 0., "done": 4 / 7})
  assert out["unchanged_share"] == pytest.approx(4 / 7)
  assert out["unchanged_share_success"] == pytest.approx(1 / 3)
  assert out["q_top2_gap"] == pytest.approx(0.2)
  assert out["q_noop_cost"] == pytest.approx(0.02)
  assert out["lanes"][1]["actions"] == "6,6,0,6"
  assert out["lanes"][1]["unchanged"] == "1101"
  no_success = greedy_rollout.summarise(episodes[1:], 7, [0.], [0.])
  assert math.isnan(no_success["unchanged_share_success"])
  assert greedy_rollout.action_names(3) == ["0", "1", "2"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  return tiny.tiny_run(tmp_path_factory, "greedy_rollout")


@pytest.mark.slow  # A compiled run and the actor's compile.
def test_rollout_on_a_tiny_run(run_dir, tmp_path):
  path = tmp_path / "rollout.json"
  out = greedy_rollout.main(["--run-dir", run_dir, "--epsilon", "0.5",
                             "--json", str(path)])
  assert out["epsilon"] == 0.5
  (seed,) = out["seeds"]
  assert seed["episodes"] == 8 == len(seed["lanes"])
  assert sum(seed["action_share"].values()) == pytest.approx(1.)
  lengths = [len(lane["actions"].split(",")) for lane in seed["lanes"]]
  assert lengths == [len(lane["unchanged"]) for lane in seed["lanes"]]
  assert max(lengths) <= tiny.ENV_KWARGS["max_episode_steps"]
  assert seed["length"] == pytest.approx(np.mean(lengths))
  for lane in seed["lanes"]:
    # A successful episode ends on the goal, a timed-out one at the limit.
    assert not (lane["success"] and lane["timed_out"])
    if lane["timed_out"]:
      assert len(lane["unchanged"]) == tiny.ENV_KWARGS["max_episode_steps"]
  assert seed["success"] == pytest.approx(
      np.mean([lane["success"] for lane in seed["lanes"]]))
  assert json.loads(path.read_text())["seeds"][0]["episodes"] == 8
  with pytest.raises(SystemExit, match="seed index"):
    greedy_rollout.main(["--run-dir", run_dir, "--seed-index", "2"])
  with pytest.raises(SystemExit, match="epsilon"):
    greedy_rollout.main(["--run-dir", run_dir, "--epsilon", "1.5"])
