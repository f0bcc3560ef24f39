"""Tests for experiments.stats (IQM and bootstrap CIs via rliable)."""

import csv
import math
import os

import numpy as np
import pytest

pytest.importorskip("rliable")

from scipy import stats as scipy_stats  # pylint: disable=g-import-not-at-top

from experiments import compare  # pylint: disable=g-import-not-at-top
from experiments import stats  # pylint: disable=g-import-not-at-top

REPS = 500


def _iqm_by_hand(x):
  """Sorts, drops the lowest and highest quarter, averages (n % 4 == 0)."""
  x = np.sort(np.asarray(x, np.float64))
  assert x.size % 4 == 0
  quarter = x.size // 4
  return x[quarter:x.size - quarter].mean()


def test_iqm_matches_hand_formula_and_trim_mean():
  x = np.array([9., -3., 0.5, 100., 2., 7., -50., 4.])
  # Sorted: -50 -3 0.5 2 4 7 9 100; middle half: 0.5 2 4 7.
  assert _iqm_by_hand(x) == pytest.approx((0.5 + 2 + 4 + 7) / 4)
  iqm, _, _ = stats.iqm_ci(x, reps=REPS)
  assert iqm == pytest.approx(_iqm_by_hand(x))
  assert iqm == pytest.approx(scipy_stats.trim_mean(x, 0.25))
  assert iqm != pytest.approx(np.mean(x))


def test_ci_contains_estimate_and_is_deterministic():
  x = np.array([1., 2., 3., 4., 5., 6., 7., 100.])
  first = stats.iqm_ci(x, reps=REPS, seed=3)
  assert first == stats.iqm_ci(x, reps=REPS, seed=3)
  iqm, low, high = first
  assert low <= iqm <= high and low < high
  assert stats.iqm_ci(x, reps=REPS, seed=4) != first


def test_ci_leaves_global_rng_as_it_was():
  np.random.seed(7)
  expected = np.random.rand()
  np.random.seed(7)
  stats.iqm_ci(np.arange(8.), reps=50)
  assert np.random.rand() == expected


def test_ci_narrows_with_spread():
  z = np.array([-1.3, 0.2, 0.9, -0.4, 2.1, -2.2, 0.6, 1.1])
  _, low_wide, high_wide = stats.iqm_ci(5. + z, reps=REPS)
  _, low_narrow, high_narrow = stats.iqm_ci(5. + 0.1 * z, reps=REPS)
  # Same seed, same resamples; IQM is affine-equivariant.
  assert high_narrow - low_narrow == pytest.approx(
      0.1 * (high_wide - low_wide))
  assert high_narrow - low_narrow < high_wide - low_wide


def test_ci_confidence_level_widens_interval():
  x = np.array([1., 4., 2., 8., 5., 7., 3., 6.])
  _, low_90, high_90 = stats.iqm_ci(x, reps=REPS, confidence=0.9)
  _, low_99, high_99 = stats.iqm_ci(x, reps=REPS, confidence=0.99)
  assert high_99 - low_99 > high_90 - low_90


def test_nan_handling():
  x = np.array([math.nan, 1., 2., 3., 4., math.nan])
  assert stats.iqm_ci(x, reps=REPS) == stats.iqm_ci(x[1:5], reps=REPS)
  value, low, high = stats.iqm_ci(np.array([math.nan, 2.5]))
  assert value == 2.5 and math.isnan(low) and math.isnan(high)
  assert all(math.isnan(v) for v in stats.iqm_ci(np.array([math.nan])))
  assert all(math.isnan(v) for v in stats.iqm_ci(np.zeros(0)))
  with pytest.raises(ValueError, match="num_runs"):
    stats.iqm_ci(np.zeros((2, 2)))


def test_iqm_curve_single_point_equals_iqm_ci():
  x = np.array([0.3, 1.7, 0.2, 4.0, 2.2])
  curve = stats.iqm_curve(x[:, None], reps=REPS, seed=1)
  # One point draws the same resamples as iqm_ci with the same seed.
  np.testing.assert_allclose([v[0] for v in curve],
                             stats.iqm_ci(x, reps=REPS, seed=1))


def test_iqm_curve_per_point():
  rng = np.random.default_rng(0)
  curves = rng.normal(size=(5, 40)) + np.linspace(0., 10., 40)
  curves[:, 0] = math.nan  # No finite run: NaN.
  curves[1:, 1] = math.nan  # One finite run: its value, no CI.
  curves[2, 2] = math.nan  # Four finite runs: iqm_ci on them.
  iqm, low, high = stats.iqm_curve(curves, reps=REPS)
  assert iqm.shape == low.shape == high.shape == (40,)
  assert np.isnan([iqm[0], low[0], high[0], low[1], high[1]]).all()
  assert iqm[1] == curves[0, 1]
  np.testing.assert_allclose([iqm[2], low[2], high[2]],
                             stats.iqm_ci(curves[:, 2], reps=REPS))
  for j in range(3, 40, 6):
    point, low_j, high_j = stats.iqm_ci(curves[:, j], reps=REPS)
    assert iqm[j] == pytest.approx(point)
    assert low[j] <= iqm[j] <= high[j]
    # Different resamples, same bootstrap distribution.
    width = high_j - low_j
    assert low[j] == pytest.approx(low_j, abs=0.3 * width)
    assert high[j] == pytest.approx(high_j, abs=0.3 * width)


def test_probability_of_improvement():
  x = np.array([1., 2., 3., 10.])
  y = np.array([0., 0., 4., 4.])
  # Pairs with x > y: 2 + 2 + 2 + 4 of 16.
  p, low, high = stats.probability_of_improvement(x, y, reps=200)
  assert p == pytest.approx(10 / 16)
  assert low <= p <= high
  assert stats.probability_of_improvement(y, y, reps=200)[0] == 0.5
  assert math.isnan(stats.probability_of_improvement(x, y[:1])[0])


def _write_run(root, variant, seed, value):
  """A finished-looking run whose metric is `value` at every row."""
  directory = compare.run_dir(root, variant, seed)
  os.makedirs(directory)
  with open(os.path.join(directory, "metrics.csv"), "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["env_steps", "episodes", "coverage"])
    for i in range(1, 6):
      writer.writerow([100 * i, 2 * i, value])
  return directory


def test_aggregate_reports_iqm_and_heatmaps(tmp_path):
  root = str(tmp_path)
  finals = {"a": [1., 2., 3., 10.], "b": [0., 0., 4., 4.]}
  for variant, values in finals.items():
    for seed, value in enumerate(values):
      _write_run(root, variant, seed, value)
  # Heatmaps: a's seed 0 under heatmaps/, b's only for seed 1, in the run dir.
  heatmaps = os.path.join(compare.run_dir(root, "a", 0), "heatmaps")
  os.makedirs(heatmaps)
  for steps in (1000, 200):
    open(os.path.join(heatmaps, f"eval_{steps}.png"), "wb").close()
  open(os.path.join(compare.run_dir(root, "b", 1), "eval_300.png"),
       "wb").close()
  variants = [compare.Variant("a", "Agent A", []),
              compare.Variant("b", "Agent B", [])]
  text = compare.aggregate(root, variants, [0, 1, 2, 3],
                           {"coverage": "Coverage"}, title="T", reps=200,
                           curve_reps=100, baseline="b")
  assert "IQM" in text and "95%" in text and "rliable 1.2" in text
  row_a = next(l for l in text.splitlines() if l.startswith("| Agent A |"))
  row_b = next(l for l in text.splitlines() if l.startswith("| Agent B |"))
  # IQM by hand: a -> mean(2, 3) = 2.5 (mean 4.0); b -> mean(0, 4) = 2.0.
  assert "| 2.500 [" in row_a and "| 4.000 ± " in row_a
  assert "| 2.000 [" in row_b
  assert "P(> Agent B) [95% CI]" in text
  assert "| 0.625 [" in row_a  # P(a > b), see test_probability_...
  assert "## Visit heatmaps" in text
  links = [l for l in text.splitlines() if l.startswith("![Agent")]
  assert links == ["![Agent A eval_200](a/seed0/heatmaps/eval_200.png)",
                   "![Agent A eval_1000](a/seed0/heatmaps/eval_1000.png)",
                   "![Agent B eval_300](b/seed1/eval_300.png)"]
  assert "Missing" not in text
  with open(os.path.join(root, "results.md")) as f:
    assert f.read() == text
  pytest.importorskip("matplotlib")
  assert os.path.getsize(os.path.join(root, "coverage.png")) > 0


def test_aggregate_rejects_unknown_baseline(tmp_path):
  with pytest.raises(ValueError, match="baseline"):
    compare.aggregate(str(tmp_path), [compare.Variant("a", "A", [])], [0],
                      {"coverage": "Coverage"}, baseline="c")
