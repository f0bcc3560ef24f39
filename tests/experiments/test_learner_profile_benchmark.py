"""Smoke test of the learner profile benchmark, in its --quick mode."""

import re

import pytest

from experiments.benchmarks import learner_profile


@pytest.mark.slow  # About a minute on 2 shared cores, mostly compiling.
def test_quick_disco_maze_prints_the_step_and_its_parts():
  lines = learner_profile.main(["--quick", "--settings", "disco_maze"])
  text = "\n".join(lines)
  assert re.search(r"model FLOPs per update [\d.]+ GFLOP", text)
  for label in ("fast path (library default)",
                "fast path, 10 steps in a lax.scan, per step",
                "plain LSTM unroll (hk.dynamic_unroll)",
                "fast path, run-time value checks off"):
    row = re.search(re.escape(label) + r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%",
                    text)
    assert row, (label, text)
    assert float(row.group(1)) > 0 and float(row.group(2)) > 0
  for part in ("torso conv layers: fwd + bwd", "LSTM scan: fwd + bwd",
               "dueling head: fwd", "Retrace + loss: fwd + bwd",
               "Q online + target (loss_and_grad)",
               "f, h and RND (losses, gradients, Adams)",
               "Q-network Adam (clip + update)"):
    assert re.search(re.escape(part) + r"\s+[\d.]+ \(\s*\d+%\)", text), part
