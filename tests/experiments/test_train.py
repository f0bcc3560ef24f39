"""Smoke test of `python -m experiments.train` (single-process NGU)."""

import csv
import json
import math

import pytest

from experiments import train


@pytest.mark.slow
def test_train_disco_maze_writes_metrics(tmp_path):
  out = tmp_path / "run"
  summary = train.main([
      "--preset", "disco_maze", "--total-env-steps", "240",
      "--output-dir", str(out), "--seed", "1", "--num-lanes", "2",
      "--log-every", "80", "--eval-every", "200", "--no-progress",
      "--set", "grid_output_size=16", "--set", "lstm_size=16",
      "--set", "head_hidden=16", "--set", "embedding_dim=8",
      "--set", "rnd_output_dim=8", "--set", "inverse_dynamics_hidden=16",
      "--set", "trace_length=10", "--set", "replay_period=5",
      "--set", "min_replay_size=4", "--set", "batch_size=4",
      "--set", "memory_capacity=50", "--set", "replay_capacity=100",
      "--set", "samples_per_insert=0.5",
      "--env-kwarg", "max_episode_steps=25"])
  with open(out / "metrics.csv") as f:
    rows = list(csv.DictReader(f))
  assert [int(r["env_steps"]) for r in rows] == [80, 160, 240]
  last = rows[-1]
  assert int(last["learner_steps"]) >= 2
  assert math.isfinite(float(last["learner_loss"]))
  assert int(last["episodes"]) > 0
  assert 0 < float(last["mean_episode_coverage"]) <= 1
  # One evaluation (N = 1: j = 0 is also the most exploratory), at 240.
  assert [math.isnan(float(r["eval_coverage"])) for r in rows] == [
      True, True, False]
  assert 0 < float(last["eval_coverage"]) <= 1
  assert float(last["eval_explore_return"]) == 0.  # Disco Maze: no reward.
  assert summary["learner_steps"] == int(last["learner_steps"])
  assert json.loads((out / "config.json").read_text())["lstm_size"] == 16
  # The end checkpoint and, with matplotlib, the learning curves.
  assert summary["checkpoint_path"] == str(out / "checkpoint")
  assert (out / "checkpoint" / "learner.npz").is_file()
  if summary["curves_path"] is not None:
    assert (out / "curves.png").stat().st_size > 0


def test_bad_override_exits(tmp_path):
  with pytest.raises(SystemExit):
    train.main(["--preset", "disco_maze", "--total-env-steps", "8",
                "--output-dir", str(tmp_path), "--set", "lstm_size=0"])
