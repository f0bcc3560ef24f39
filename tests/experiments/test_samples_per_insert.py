"""Tests for experiments.samples_per_insert (equal-wall-time tables)."""

import csv
import os

import numpy as np
import pytest

from experiments import compare
from experiments import samples_per_insert as spi

COLUMNS = ("env_steps", "episodes", "learner_steps", "elapsed_s",
           "mean_episode_coverage")


def _write(root, ratio, seed, rows):
  path = os.path.join(compare.run_dir(root, spi.variant(ratio).name, seed),
                      "metrics.csv")
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(COLUMNS)
    writer.writerows(rows)


def _row(text, title, ratio):
  """The cells after the ratio of `ratio`'s row in the table `title`."""
  section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
  line = next(l for l in section.splitlines() if l.startswith(f"| {ratio:g} |"))
  return [c.strip() for c in line.strip("|").split("|")][1:]


def test_tables_at_equal_wall_time_and_at_equal_env_steps(tmp_path):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  # Ratio 1: 1,000 env steps per minute, coverage = minutes / 10.
  # Ratio 4: 500 env steps per minute, coverage = minutes / 5; it stops at
  # 4 minutes, so every table compares at 4 minutes / 2,000 env steps.
  for seed in (0, 1):
    _write(root, 1.0, seed, [(1000 * m, 10 * m, 20 * m, 60. * m, m / 10)
                             for m in range(1, 7)])
    _write(root, 4.0, seed, [(500 * m, 5 * m, 40 * m, 60. * m, m / 5 + seed)
                             for m in range(1, 5)])
  text = spi.aggregate(root, [1.0, 4.0], [0, 1], reps=100, curve_reps=50)
  assert "equal wall time (4.0 min per run)" in text
  wall = "training-episode coverage at equal wall time (4.0 min)"
  # The rows in [0.8 * 4, 4] minutes: only the 4-minute row.
  assert _row(text, wall, 1.0)[:2] == ["0.400", "0.400"]
  assert _row(text, wall, 4.0)[:3] == ["0.800", "1.800", "1.300 [0.800, 1.800]"]
  assert _row(text, wall, 4.0)[3] == "—"
  # P(ratio 1 > ratio 4): 0.4 is below both of ratio 4's seeds.
  assert _row(text, wall, 1.0)[3].startswith("0.000")
  steps = _row(text, "env steps reached in 4.0 min", 1.0)
  assert steps[:3] == ["4,000", "4,000", "4,000 [4,000, 4,000]"]
  assert _row(text, "learner updates reached in 4.0 min", 4.0)[:2] == [
      "160", "160"]
  # Equal env steps: the fewest reached, 2,000; rows in [1,600, 2,000].
  at_steps = "training-episode coverage at equal env steps (2,000)"
  assert _row(text, at_steps, 1.0)[:2] == ["0.200", "0.200"]
  assert _row(text, at_steps, 4.0)[:2] == ["0.800", "1.800"]
  per_episode = ("env steps per training episode at equal wall time "
                 "(4.0 min)")
  assert _row(text, per_episode, 1.0)[:2] == ["100.000", "100.000"]
  for name in ("results.md", "coverage_vs_elapsed_min.png",
               "coverage_vs_env_steps.png"):
    assert os.path.getsize(os.path.join(root, name)) > 0


def test_window_mean_falls_back_to_the_last_value():
  x = np.array([1., 2., 10.])
  v = np.array([5., np.nan, 7.])
  assert spi._window_mean(x, v, 10.) == 7.
  assert spi._window_mean(x, v, 9.) == 5.  # No row in [7.2, 9]: the last.
  assert np.isnan(spi._window_mean(x, v, 0.5))


@pytest.mark.parametrize("flags", [["--minutes", "0"], ["--minutes", "nan"],
                                   ["--ratios", "1", "-2"]])
def test_bad_flags_exit(tmp_path, flags):
  with pytest.raises(SystemExit):
    spi.main(["--output-root", str(tmp_path), *flags])
