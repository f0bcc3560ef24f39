"""Smoke test of `make run`'s demonstration script."""

import sys

from experiments import demo


def test_demo_runs_and_ranks_lanes_by_coverage(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(sys, "argv", ["demo", "--steps", "120",
                                    "--output-dir", str(tmp_path)])
  demo.main()
  out = capsys.readouterr().out
  assert "ranks the lanes by coverage: True" in out
  assert (tmp_path / "intrinsic_rewards.png").exists()
