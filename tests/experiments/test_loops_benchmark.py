"""Smoke test of the loops benchmark, in its --quick mode."""

import re

import pytest

from experiments.benchmarks import loops


@pytest.mark.slow  # About a minute on 2 shared cores, mostly compiling.
def test_quick_disco_maze_prints_both_loops_side_by_side():
  lines = loops.main(["--quick", "--settings", "disco_maze"])
  text = "\n".join(lines)
  for label in ("python (1 seed)", "compiled, 1 seed",
                "compiled, 2 seeds (all)", "compiled, 2 seeds (per seed)"):
    row = re.search(re.escape(label) + r"\s+(\d+)\s+([\d.]+)\s+([\d.]+)",
                    text)
    assert row, (label, text)
    assert float(row.group(1)) > 0
  assert re.search(r"cost of 2 vmapped seeds / 1 seed .*: [\d.]+x", text)
  assert re.search(r"acting only \(no learner steps\), env steps/s: python "
                   r"\d+, compiled 1 seed \d+", text)
  assert re.search(r"reaches [\d.]+ GFLOP/s = [\d.]+% of the measured "
                   r"matmul peak", text)
