"""Tests for experiments.probes.episodic_by_step (deterministic facts)."""

import numpy as np

from experiments.probes import episodic_by_step


def test_new_cell_mask_by_hand():
  cells = np.array([[3, 4, 3, 5, 4], [1, 1, 1, 2, 1]])
  np.testing.assert_array_equal(
      episodic_by_step.new_cell_mask(cells),
      [[1, 1, 0, 1, 0], [1, 0, 0, 1, 0]])


def test_revisits_pay_at_most_one_and_new_cells_more():
  # A revisit has a neighbour at distance 0 (kernel 1), so its reward is at
  # most 1 / (1 + c); a one-hot new cell has none.
  rows = episodic_by_step.main(["--episodes", "8", "--warmup", "1"])
  assert [r["steps"] for r in rows] == ["1-4", "5-14", "15-29", "30-59"]
  for row in rows:
    assert 0 < row["new_share"] < 1
    assert row["reward_revisit"] <= 1.
    assert row["ratio"] > 2.
