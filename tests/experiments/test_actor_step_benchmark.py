"""Smoke test of the actor-step benchmark, in its --quick mode."""

import re

import pytest

from experiments.benchmarks import actor_step


@pytest.mark.slow  # 15-22 s on 2 shared cores, most of it compiling.
def test_quick_minigrid_prints_every_part_and_the_target(capsys):
  results = actor_step.main(["--quick", "--settings", "minigrid",
                             "--lanes", "4", "--rounds", "2", "--steps", "4",
                             "--baseline-rev", "none"])
  out = capsys.readouterr().out
  for _, label in actor_step.PARTS:
    assert label in out
  match = re.search(r"non-env, non-network share = \(episodic \+ adder \+ "
                    r"remainder\)/full = (-?[\d.]+)% \(target <= 25%\): "
                    r"(met|MISSED)", out)
  assert match, out

  figures = results["minigrid"]
  med, shares = figures["median_s"], figures["shares"]
  assert med["full"] > 0
  for part in actor_step.MEASURED:
    # Each part timed alone is work the full step does too.
    assert 0 < shares[part] < 1, (part, shares)
  parts = [p for p, _ in actor_step.PARTS if p != "full"]
  assert sum(shares[p] for p in parts) == pytest.approx(1.0)
  share = figures["non_env_non_network_share"]
  assert share == pytest.approx(
      1 - shares["env"] - shares["q"] - shares["embed_rnd"])
  assert float(match.group(1)) == pytest.approx(100 * share, abs=0.06)
  assert (match.group(2) == "met") == figures["target_met"]
  # What a comparison with a baseline revision reads from this output.
  parsed = actor_step.parse_figures(out)
  for part, _ in actor_step.PARTS:
    assert parsed[f"minigrid: {part} ms"] == pytest.approx(
        1e3 * med[part], abs=0.006), part
  assert parsed["minigrid: full loop, env steps/s"] == pytest.approx(
      4 / med["full"], abs=1)
  assert parsed["minigrid: non-env, non-network share %"] == (
      float(match.group(1)))


def test_unknown_setting_is_rejected(capsys):
  # Checked before any baseline worktree or measurement starts.
  with pytest.raises(SystemExit):
    actor_step.main(["--settings", "minigrid,nope"])
  assert "unknown ['nope']" in capsys.readouterr().err
