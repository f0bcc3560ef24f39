"""Tests for experiments.noisy_tv (the noisy-TV comparison's bookkeeping).

The training itself is `experiments.compare` + `experiments.train` (tested
there); here: the lifetime coverage from visit heatmaps, the summary table
and the flags each noise condition's runs get.
"""

import csv
import os

import numpy as np
import pytest

from experiments import compare
from experiments import noisy_tv


def _heatmap(path, train):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  np.savez(path, train=np.asarray(train, np.int64),
           eval_j0=np.zeros_like(train))


def test_lifetime_coverage_is_the_union_of_training_visits(tmp_path):
  run = str(tmp_path)
  a = np.zeros((5, 5), np.int64)
  b = np.zeros((5, 5), np.int64)
  a[1, 1], a[1, 2] = 3, 1
  b[1, 2], b[3, 3] = 2, 5
  _heatmap(os.path.join(run, "heatmaps", "eval_100.npz"), a)
  _heatmap(os.path.join(run, "heatmaps", "eval_200.npz"), b)
  assert noisy_tv.lifetime_coverage(run, num_free_cells=9) == 3 / 9
  assert np.isnan(noisy_tv.lifetime_coverage(str(tmp_path / "none"), 9))


def test_lifetime_coverage_adds_the_visits_after_the_last_evaluation(
    tmp_path):
  # A vmapped run of seeds [3, 7]: seed 7 is row 1 of the program's
  # checkpoint, whose visits since the last evaluation count too.
  program = str(tmp_path / "seeds")
  seed_dir = os.path.join(program, "seed_7")
  a = np.zeros((5, 5), np.int64)
  a[1, 1] = 2
  _heatmap(os.path.join(seed_dir, "heatmaps", "eval_100.npz"), a)
  rest = np.zeros((2, 5, 5), np.int64)
  rest[0, 2, 2] = 1  # Seed 3's: not seed 7's.
  rest[1, 3, 3] = 4
  os.makedirs(os.path.join(program, "checkpoint"))
  np.savez(os.path.join(program, "checkpoint", "visits.npz"), train=rest,
           train_cells=np.zeros((2, 5, 5, 3), np.int64))
  with open(os.path.join(program, "checkpoint", "config.json"), "w") as f:
    f.write('{"seeds": [3, 7]}')
  assert noisy_tv.lifetime_coverage(seed_dir, num_free_cells=8) == 2 / 8
  # A run of its own: its checkpoint's visits (one seed).
  own = str(tmp_path / "own")
  _heatmap(os.path.join(own, "heatmaps", "eval_100.npz"), a)
  os.makedirs(os.path.join(own, "checkpoint"))
  np.savez(os.path.join(own, "checkpoint", "visits.npz"), train=rest[:1])
  assert noisy_tv.lifetime_coverage(own, num_free_cells=8) == 2 / 8


def test_summary_table_reads_vmapped_seeds(tmp_path):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  variant = noisy_tv.VARIANTS[0]
  for seed, frontier in ((0, 4.), (1, 6.)):
    directory = os.path.join(
        compare.vmapped_run_dir(os.path.join(root, "tv"), variant.name),
        f"seed_{seed}")
    os.makedirs(directory)
    with open(os.path.join(directory, "metrics.csv"), "w", newline="") as f:
      writer = csv.DictWriter(f, fieldnames=["env_steps",
                                             "mean_episode_frontier"])
      writer.writeheader()
      writer.writerow({"env_steps": 10, "mean_episode_frontier": 0.})
      writer.writerow({"env_steps": 100, "mean_episode_frontier": frontier})
  lines = noisy_tv.summary_table(root, ["tv"], [variant], [0, 1],
                                 num_free_cells=97, reps=100)
  table = "\n".join(lines)
  # Final = the rows in the last 20% of the run: 4 and 6; IQM of two = 5.
  assert f"| {variant.label} | 5 [" in table
  # No heatmaps: lifetime coverage has no value.
  assert f"| {variant.label} | - |" in table


def test_each_noise_runs_its_environment(tmp_path, monkeypatch):
  calls = []
  monkeypatch.setattr(noisy_tv.compare, "main",
                      lambda argv, *a, **k: calls.append(argv) or "")
  monkeypatch.setattr(noisy_tv, "summary_table", lambda *a, **k: [])
  noisy_tv.main(["--output-root", str(tmp_path), "--noises", "none", "frame",
                 "--env-steps", "1000", "--variants", "recode", "--jobs", "2"])
  assert [c[c.index("--env") + 1] for c in calls] == [
      "noisy_grid/none", "noisy_grid/frame"]
  assert all("--vmap-seeds" in c and c[-2:] == ["--jobs", "2"]
             for c in calls)
  assert os.path.exists(os.path.join(str(tmp_path), "results.md"))


def test_random_walk_is_chance_on_the_maze():
  from ngu_jax.envs import noisy_grid  # pylint: disable=g-import-not-at-top
  env = noisy_grid.NoisyGrid("none")
  none = noisy_tv.random_walk("none", episodes=64)
  tv = noisy_tv.random_walk("tv", episodes=64)
  for walk in (none, tv):
    assert 1 / env.num_free_cells <= walk["mean_episode_coverage"] <= (
        env.max_episode_steps + 1) / env.num_free_cells
    assert 0 < walk["mean_episode_frontier"] <= env.max_distance
    assert walk["mean_episode_coverage"] <= walk["lifetime_coverage"] <= 1
  assert none["mean_episode_tv_steps"] == 0
  # One action in five is the TV's (60 steps: 12 expected).
  assert 8 < tv["mean_episode_tv_steps"] < 16
  assert noisy_tv.random_walk("none", episodes=64) == none  # Seeded.


def test_summary_table_has_a_chance_row(tmp_path):
  chance = {"tv": {metric: 0.5 for metric in noisy_tv.SUMMARY}}
  lines = noisy_tv.summary_table(str(tmp_path), ["tv", "frame"],
                                 [noisy_tv.VARIANTS[0]], [0, 1],
                                 num_free_cells=97, reps=10, chance=chance)
  rows = [l for l in lines if l.startswith("| uniform random walk")]
  assert rows == ["| uniform random walk (chance, no learning) | 0.5 | - |"
                 ] * len(noisy_tv.SUMMARY)
