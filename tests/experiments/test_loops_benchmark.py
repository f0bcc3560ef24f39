"""Smoke test of the loops benchmark, in its --quick mode."""

import re

import pytest

from experiments.benchmarks import loops


@pytest.mark.slow  # About a minute on 2 shared cores, mostly compiling.
def test_quick_disco_maze_prints_both_loops_side_by_side():
  lines = loops.main(["--quick", "--settings", "disco_maze",
                      "--baseline-rev", "none"])
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
  # What a comparison with a baseline revision reads from this output.
  figures = loops.parse_figures(text)
  assert sorted(figures) == sorted(
      f"disco_maze: {row}" for row in (
          "python (1 seed), env steps/s", "python (1 seed), learner steps/s",
          "compiled, 1 seed, env steps/s", "compiled, 1 seed, learner steps/s",
          "compiled, 2 seeds, env steps/s", "compiled, 2 seeds, learner steps/s",
          "acting only, python, env steps/s",
          "acting only, compiled, 1 seed, env steps/s",
          "acting only, compiled, seeds, env steps/s"))
  assert all(v > 0 for v in figures.values()), figures
