"""Smoke test of the RECODE memory benchmark, in its --quick mode."""

import re

import pytest

from experiments.benchmarks import recode_memory


def test_quick_prints_both_memories_at_equal_bytes(capsys):
  results = recode_memory.main(["--quick"])
  out = capsys.readouterr().out
  lanes = 4  # --quick's.
  assert set(results) == {16, 32}
  for c, figures in results.items():
    assert figures["atoms"] == lanes * c
    assert figures["episodic_s"] > 0 and figures["recode_s"] > 0
    assert figures["ratio"] == pytest.approx(
        figures["recode_s"] / figures["episodic_s"])
    assert 0 <= figures["inserted_fraction"] <= 1
    for name in ("episodic", "recode"):
      assert re.search(rf"^\s+{c}\s+{lanes * c}\s+{name}\s+[\d.]+\s+\d+\s+"
                       r"[\d.]+$", out, re.MULTILINE), out


def test_bad_capacities_are_rejected():
  with pytest.raises(SystemExit):
    recode_memory.main(["--capacities", "0"])
