"""Tests of experiments/benchmarks/baseline.py: a benchmark and its baseline
revision measured in the same call, on a throwaway git repository whose two
commits print different figures."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from experiments.benchmarks import baseline

# A benchmark module as a revision holds it: the old commit prints a rate of
# 100/s and a time of 8 ms and knows nothing of --baseline-rev; the new one
# prints 250/s and 2 ms and takes the flag (as this project's benchmarks do).
_OLD = textwrap.dedent("""\
    import sys
    assert "--baseline" + "-rev" not in sys.argv, sys.argv  # Knows no such flag.
    print("float32 matmul peak 10.0 GFLOP/s")
    print("rate", 100 * float(sys.argv[sys.argv.index("--scale") + 1]))
    print("time 8")
    """)
_NEW = textwrap.dedent("""\
    import sys
    # --baseline-rev none: this side is measured, not compared.
    assert sys.argv[sys.argv.index("--baseline-rev") + 1] == "none"
    print("float32 matmul peak 12.0 GFLOP/s")
    print("rate", 250 * float(sys.argv[sys.argv.index("--scale") + 1]))
    print("time 2")
    """)


def _parse(text):
  figures = {}
  for line in text.splitlines():
    if line.startswith("rate "):
      figures["rate /s"] = float(line.split()[1])
    if line.startswith("time "):
      figures["step ms"] = float(line.split()[1])
  return figures


def _git(repo, *args):
  return subprocess.run(["git", "-C", repo, *args], check=True,
                        capture_output=True, text=True).stdout.strip()


@pytest.fixture
def two_revisions(tmp_path, monkeypatch):
  repo = str(tmp_path / "repo")
  os.makedirs(os.path.join(repo, "bench"))
  _git(tmp_path, "init", "--quiet", repo)
  _git(repo, "config", "user.email", "t@example.com")
  _git(repo, "config", "user.name", "t")
  path = os.path.join(repo, "bench", "speed.py")
  for text in (_OLD, _NEW):
    with open(path, "w") as f:
      f.write(text)
    _git(repo, "add", "bench/speed.py")
    _git(repo, "commit", "--quiet", "-m", "x")
  monkeypatch.setattr(baseline, "REPO", repo)
  return repo, _git(repo, "rev-parse", "HEAD~1")


def _args(rev, rounds=1, json_path=None):
  import argparse  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  parser.add_argument("--scale", type=float)
  baseline.add_argument(parser, default="HEAD~1")
  argv = ["--scale", "2", "--baseline-rev", rev,
          f"--baseline-rounds={rounds}"]
  if json_path:
    argv += ["--json", json_path]
  return argv, parser.parse_args(argv)


def test_both_revisions_run_the_same_command_and_the_ratio_is_here_over_base(
    two_revisions, tmp_path, capsys):
  repo, old = two_revisions
  out = str(tmp_path / "figures.json")
  argv, args = _args(old, rounds=2, json_path=out)
  assert baseline.requested(args)
  result = baseline.main("bench.speed", argv, args, parse=_parse)
  table = result["table"]
  # --scale 2 reached both sides; the rate's ratio is here / base, the
  # time's base / here: both > 1 mean "here is faster".
  assert table["rate /s"] == {"base": 200., "here": 500., "ratio": 2.5}
  assert table["step ms"] == {"base": 8., "here": 2., "ratio": 4.}
  assert table[baseline.PEAK]["base"] == 10.
  assert table[baseline.PEAK]["here"] == 12.
  # Interleaved: base, here, base, here.
  assert [r["revision"] for r in result["rounds"]] == [
      old[:10], result["here"]] * 2
  with open(out) as f:
    assert json.load(f)["table"]["rate /s"]["ratio"] == 2.5
  printed = capsys.readouterr().out
  assert "speed-up" in printed and "2.50x" in printed
  # The temporary worktree is gone.
  assert _git(repo, "worktree", "list").count("\n") == 0


def test_none_is_this_checkout_only_and_bad_revisions_are_refused(
    two_revisions):
  _, _ = two_revisions
  _, args = _args("none")
  assert not baseline.requested(args)
  argv, args = _args("no-such-rev")
  with pytest.raises(SystemExit, match="no-such-rev.*not a commit"):
    baseline.main("bench.speed", argv, args, parse=_parse)
  argv, args = _args("HEAD~1", rounds=0)
  with pytest.raises(SystemExit, match="--baseline-rounds must be >= 1"):
    baseline.main("bench.speed", argv, args, parse=_parse)


def test_a_failing_side_stops_the_comparison(two_revisions):
  repo, old = two_revisions
  argv, args = _args(old)
  argv = [a for a in argv if a not in ("--scale", "2")]  # Old side asserts.
  with pytest.raises(SystemExit, match="exited with status"):
    baseline.main("bench.speed", argv, args, parse=_parse)
  assert _git(repo, "worktree", "list").count("\n") == 0


def test_strip_and_speedup():
  assert baseline.strip_baseline_args(
      ["--a", "1", "--baseline-rev", "x", "--json=f", "--baseline-rounds",
       "3", "--b"]) == ["--a", "1", "--b"]
  assert baseline.speedup("env steps/s", 100., 300.) == 3.
  assert baseline.speedup("sgd_step ms", 30., 10.) == 3.
  share = baseline.speedup("non-env share %", 30., 10.)
  assert share != share  # A share is no speed: NaN, printed as "-".
  assert baseline.parse_peak("... float32 matmul peak 460.1 GFLOP/s; x") == (
      460.1)
  assert baseline.parse_peak("peak: jnp.dot 4096x4096 float32: 360.4 "
                             "GFLOP/s") == 360.4
  assert baseline.parse_peak("nothing") != baseline.parse_peak("nothing")


def test_a_baseline_tree_already_on_disk_needs_no_history(two_revisions,
                                                          tmp_path):
  """--baseline-dir: a copy of the baseline's tree (as `git archive`
  writes it on a machine without the history) replaces the worktree."""
  repo, old = two_revisions
  tree = tmp_path / "old_tree"
  os.makedirs(tree / "ngu_jax")
  archive = subprocess.run(["git", "-C", repo, "archive", old],
                           check=True, capture_output=True).stdout
  subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
  argv, args = _args(old)
  argv += ["--baseline-dir", str(tree)]
  args.baseline_dir = str(tree)
  result = baseline.main("bench.speed", argv, args, parse=_parse)
  assert result["table"]["rate /s"]["ratio"] == 2.5
  args.baseline_dir = str(tmp_path / "missing")
  with pytest.raises(SystemExit, match="no ngu_jax/ there"):
    baseline.main("bench.speed", argv, args, parse=_parse)


def test_learner_step_figures_are_read_from_its_table():
  from experiments.benchmarks import learner_step  # pylint: disable=g-import-not-at-top
  text = textwrap.dedent("""\
      peak: jnp.dot 4096x4096 float32: 360.4 GFLOP/s
      variant                             ms/update   (mean)  GFLOP/s  % of peak
      one batch (M=1)                          3102     3200    127.1      35.3%
      4 micro-batches of 16 (M=4)              2429     2500    162.3      45.0%
      """)
  assert learner_step.parse_figures(text) == {
      "one batch (M=1), update ms": 3102.,
      "4 micro-batches of 16 (M=4), update ms": 2429.}
  assert baseline.parse_peak(text) == 360.4
