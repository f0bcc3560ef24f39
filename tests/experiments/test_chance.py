"""Tests for experiments.chance (a uniform random policy's scores) and the
chance rows of the tables that use it."""

import csv
import math
import os

import pytest

from experiments import chance
from experiments import compare
from experiments import deep_sea
from experiments import samples_per_insert as spi


def test_random_policy_on_deep_sea_is_the_exact_random_walk():
  """DeepSea-4 under a uniform random policy: every episode is 4 moves (5
  env steps with the auto-reset step), the treasure is reached with
  probability 2^-4, each right move costs 0.01 / 4 and half the moves are
  right on average: E[return] = 2^-4 - 0.005. 4,096 episodes: a standard
  error of about 0.004 on both."""
  pytest.importorskip("gymnax")
  got = chance.random_policy("gymnax/DeepSea-bsuite", 4096, 0, size=4)
  p = 2. ** -4
  assert got["length"] == 4. and got["env_steps_per_episode"] == 5.
  assert got["episodes"] == 4096.
  std = math.sqrt(p * (1 - p) / 4096)
  assert abs(got["success"] - p) < 4 * std, got
  assert abs(got["return"] - (p - 0.005)) < 4 * std + 1e-3, got
  assert math.isnan(got["coverage"])          # DeepSea reports no coverage
  # The DeepSea study's budget in episodes counts the same N + 1 env steps.
  assert deep_sea.budget_episodes(4, 5 * 7) == 7
  # Deterministic under the seed; a second call is the first one's result.
  assert chance.random_policy("gymnax/DeepSea-bsuite", 4096, 0,
                              size=4) == got


def test_columns_name_the_metrics_csv_columns():
  result = {"return": -0.5, "success": 0.25, "coverage": math.nan,
            "length": 3., "env_steps_per_episode": 4., "episodes": 8.}
  assert chance.columns(result) == {
      "mean_episode_return": -0.5, "eval_return": -0.5,
      "eval_explore_return": -0.5, "episode_success_rate": 0.25,
      "eval_success": 0.25,
      "env_steps_per_episode": 4.}               # NaN coverage left out


def test_env_of_reads_the_train_flags():
  assert chance.env_of(["--preset", "disco_maze", "--env-kwarg", "size=11",
                        "--loop", "compiled"]) == ("disco_maze", {"size": 11})
  assert chance.env_of(["--preset", "minigrid", "--env", "gymnax/Catch-bsuite",
                        "--env", "gymnax/CartPole-v1"]) == (
                            "gymnax/CartPole-v1", {})
  with pytest.raises(ValueError, match="no --env"):
    chance.env_of(["--preset", "dice", "--num-lanes", "16"])


def _write(path, header, rows):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(rows)


def _chance_row(text, title):
  section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
  line = next(l for l in section.splitlines()
              if l.startswith(f"| {chance.LABEL} |"))
  return [c.strip() for c in line.strip("|").split("|")]


def test_compare_tables_end_with_the_chance_row(tmp_path):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  variants = [compare.Variant("a", "Agent A", [])]
  for seed in (0, 1):
    _write(os.path.join(compare.run_dir(root, "a", seed), "metrics.csv"),
           ["env_steps", "mean_episode_return", "alpha_above_one"],
           [(10, 1., 0.5), (20, 2., 0.5)])
  text = compare.aggregate(
      root, variants, [0, 1], {"mean_episode_return": "Return",
                               "alpha_above_one": "Alpha"},
      reps=50, curve_reps=20, baseline="a",
      chance={"mean_episode_return": -0.25})
  # seed 0, seed 1, IQM, mean +- std, P(> baseline): the value under IQM.
  assert _chance_row(text, "Return")[1:] == ["", "", "-0.250", "", ""]
  alpha = text.split("## Alpha", 1)[1]
  assert chance.LABEL not in alpha                 # no chance value there
  assert "Chance: a uniform random policy's mean over 1,024" in text
  # summary_table computes it from the runs' flags only when there are runs.
  assert compare.summary_table(str(tmp_path / "none"), variants, [0],
                               "mean_episode_return", "R", 1.,
                               chance_flags=["--no-env"]) == ""


def test_samples_per_insert_tables_end_with_the_chance_row(tmp_path):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  for ratio in (1.0, 4.0):
    for seed in (0, 1):
      _write(os.path.join(compare.run_dir(root, spi.variant(ratio).name,
                                          seed), "metrics.csv"),
             ["env_steps", "episodes", "learner_steps", "elapsed_s",
              "mean_episode_coverage"],
             [(1000 * m, 10 * m, 20 * m, 60. * m, m / 10) for m in (1, 2)])
  text = spi.aggregate(root, [1.0, 4.0], [0, 1], reps=50, curve_reps=20,
                       chance={"mean_episode_coverage": 0.035,
                               "env_steps_per_episode": 2.985})
  wall = "training-episode coverage at equal wall time (2.0 min)"
  assert _chance_row(text, wall)[1:] == ["", "", "0.035", ""]
  assert _chance_row(
      text, "env steps per training episode at equal wall time (2.0 min)"
  )[1:4] == ["", "", "2.985"]
  assert chance.LABEL not in text.split("## env steps reached", 1)[1].split(
      "\n## ", 1)[0]
