"""Tests of experiments.probes.replay_refit on a tiny compiled run."""

import json

import numpy as np
import pytest

from experiments.probes import exploit_values
from experiments.probes import replay_refit
from tests.experiments import test_exploit_values_probe as tiny

# A compiled run and the learner's compile: `make test-slow`.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  return tiny.tiny_run(tmp_path_factory, "replay_refit")


def test_refit_rows_and_json(run_dir, tmp_path):
  path = tmp_path / "refit.json"
  out = replay_refit.main(["--run-dir", run_dir, "--blocks", "2",
                           "--updates", "3", "--rounds", "2",
                           "--max-unrewarded", "8", "--json", str(path)])
  (seed,) = out["seeds"]
  steps = [row["learner_steps"] for row in seed["rows"]]
  assert steps[1] - steps[0] == 3 and steps[2] - steps[1] == 3
  for row in seed["rows"]:
    assert 0. <= row["greedy_success"] <= 1.
    assert len(row["greedy_success_rounds"]) == 2
    # The greedy success is the mean of the rounds' successes, each a
    # multiple of 1 / lanes.
    assert row["greedy_success"] == pytest.approx(
        np.mean(row["greedy_success_rounds"]))
    for s in row["greedy_success_rounds"]:
      assert s * out["lanes"] == pytest.approx(round(s * out["lanes"]))
  saved = json.loads(path.read_text())
  assert len(saved["seeds"][0]["rows"]) == 3
  with pytest.raises(SystemExit, match="seed index"):
    replay_refit.main(["--run-dir", run_dir, "--seed-index", "3"])
  with pytest.raises(SystemExit, match="updates"):
    replay_refit.main(["--run-dir", run_dir, "--updates", "0"])
  with pytest.raises(ValueError, match="num_updates"):
    replay_refit.make_learn(exploit_values.load_run(run_dir).loop, 0)
