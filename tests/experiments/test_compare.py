"""Tests for experiments.compare (grids of runs, tables and plots)."""

import csv
import json
import math
import os
import sys

import numpy as np
import pytest

from experiments import compare

VARIANTS = [compare.Variant("a", "Agent A", []),
            compare.Variant("b", "Agent B", [])]


def _write_metrics(path, steps, values, eval_values):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=["env_steps", "score", "eval"])
    writer.writeheader()
    for s, v, e in zip(steps, values, eval_values):
      writer.writerow({"env_steps": s, "score": v, "eval": e})


def test_aggregate_tables_and_plots(tmp_path):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  steps = [10, 20, 30, 40, 50]
  for seed in (0, 1):
    _write_metrics(
        os.path.join(compare.run_dir(root, "a", seed), "metrics.csv"), steps,
        [0, 1, 2, 3, 4 + seed], ["nan", "nan", 5, "nan", 7])
  # Variant b has only seed 0.
  _write_metrics(os.path.join(compare.run_dir(root, "b", 0), "metrics.csv"),
                 steps, [1, 1, 1, 1, 1], ["nan"] * 5)
  with open(os.path.join(compare.run_dir(root, "a", 0), compare.DONE_FILE),
            "w") as f:
    json.dump({"seconds": 120.0}, f)
  text = compare.aggregate(root, VARIANTS, [0, 1],
                           {"score": "Score", "eval": "Eval"},
                           final_fraction=0.4, title="T", reps=200,
                           curve_reps=100)
  assert "Missing runs: b/seed1" in text
  assert "Unfinished runs (their rows so far are included): a/seed1, b/seed0" in text
  # Final = mean of rows with env_steps >= 50 * 0.6 = 30: (2 + 3 + 4) / 3
  # for seed 0 and (2 + 3 + 5) / 3 for seed 1.
  finals = [(2 + 3 + 4) / 3, (2 + 3 + 5) / 3]
  row = next(line for line in text.splitlines()
             if line.startswith("| Agent A |"))
  assert f"{finals[0]:.3f}" in row and f"{finals[1]:.3f}" in row
  assert f"{np.mean(finals):.3f} ± {np.std(finals):.3f}" in row
  # IQM of 2 runs is their mean; one run has no CI.
  assert f"| {np.mean(finals):.3f} [" in row
  assert "| Agent B | 1.000 | nan | 1.000 [n/a] | 1.000 ± 0.000 |" in text
  assert "n/a" in text  # b's eval column is all NaN.
  assert "1 runs, 2.0 run-minutes" in text
  for name in ("results.md", "score.png", "eval.png"):
    assert os.path.getsize(os.path.join(root, name)) > 0


def test_summary_table_means_every_row_with_fraction_one(tmp_path):
  """summary_table(final_fraction=1): each seed's mean over all its finite
  rows (the area under an evaluation curve); "" without runs."""
  pytest.importorskip("rliable")
  root = str(tmp_path)
  assert compare.summary_table(root, VARIANTS, [0], "eval", "Eval", 1.) == ""
  steps = [10, 20, 30, 40, 50]
  _write_metrics(os.path.join(compare.run_dir(root, "a", 0), "metrics.csv"),
                 steps, [0] * 5, ["nan", 1, "nan", 2, 6])
  _write_metrics(os.path.join(compare.run_dir(root, "b", 0), "metrics.csv"),
                 steps, [0] * 5, [0, 0, 0, 0, 1])
  text = compare.summary_table(root, VARIANTS, [0], "eval", "Eval AUC", 1.,
                               reps=100, baseline="b")
  assert text.startswith("## Eval AUC (`eval`), final 100% of the budget")
  assert "| Agent A | 3.000 | 3.000 [n/a] | 3.000 ± 0.000 | " in text
  assert "| Agent B | 0.200 | 0.200 [n/a] | 0.200 ± 0.000 | — |" in text


def test_read_metrics_derives_steps_per_episode(tmp_path):
  path = tmp_path / "metrics.csv"
  path.write_text("env_steps,episodes\n100,4\n200,4\n300,14\n")
  cols = compare.read_metrics(str(path))
  np.testing.assert_allclose(cols["env_steps_per_episode"][[0, 2]], [25, 10])
  assert math.isnan(cols["env_steps_per_episode"][1])


def test_fill_nan_carries_forward():
  out = compare._fill_nan(np.array([math.nan, 1., math.nan, 3., math.nan]))
  np.testing.assert_array_equal(out[1:], [1., 1., 3., 3.])
  assert math.isnan(out[0])


def test_single_thread_env():
  env = compare.single_thread_env(1)
  assert "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
  assert "--xla_cpu_multi_thread_eigen=false" in env["XLA_FLAGS"]
  assert env["OMP_NUM_THREADS"] == "1"


def test_run_grid_skips_done_runs_and_reports_failures(tmp_path, monkeypatch):
  root = str(tmp_path)
  os.makedirs(compare.run_dir(root, "a", 0))
  with open(os.path.join(compare.run_dir(root, "a", 0), compare.DONE_FILE),
            "w") as f:
    json.dump({"seconds": 1.0}, f)
  launched = []

  class FakePopen:
    def __init__(self, cmd, **kwargs):
      del kwargs
      launched.append(cmd)
      out = cmd[cmd.index("--output-dir") + 1]
      self.returncode = 3 if out.endswith(os.path.join("b", "seed0")) else 0

    def poll(self):
      return self.returncode

  monkeypatch.setattr(compare.subprocess, "Popen", FakePopen)
  monkeypatch.setattr(compare.time, "sleep", lambda s: None)
  with pytest.raises(RuntimeError, match="1 run"):
    compare.run_grid(root, VARIANTS, [0], ["--preset", "x"], jobs=2)
  assert len(launched) == 1 and launched[0][0] == sys.executable
  assert launched[0][1:4] == ["-m", "experiments.train", "--preset"]
  assert "--no-progress" in launched[0]
  assert not os.path.exists(os.path.join(compare.run_dir(root, "b", 0),
                                         compare.DONE_FILE))
  with pytest.raises(ValueError, match="jobs"):
    compare.run_grid(root, VARIANTS, [0], [], jobs=2, show_progress=True)


def test_aggregate_without_rliable_says_how_to_install(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "rliable", None)  # Import fails.
  with pytest.raises(ImportError, match=r'pip install -e "\.\[results\]"'):
    compare.aggregate(str(tmp_path), VARIANTS, [0], {"score": "Score"})


def test_run_grid_runs_seed_major_and_resumes_checkpointed_runs(
    tmp_path, monkeypatch):
  root = str(tmp_path)
  # Run (b, seed 1) was interrupted: it has a checkpoint but no done.json.
  os.makedirs(os.path.join(compare.run_dir(root, "b", 1), "checkpoint"))
  launched = []

  class FakePopen:
    def __init__(self, cmd, **kwargs):
      del kwargs
      launched.append(cmd)
      self.returncode = 0

    def poll(self):
      return self.returncode

  monkeypatch.setattr(compare.subprocess, "Popen", FakePopen)
  monkeypatch.setattr(compare.time, "sleep", lambda s: None)
  compare.run_grid(root, VARIANTS, [0, 1], ["--preset", "x"], jobs=1)
  order = [(cmd[cmd.index("--output-dir") + 1], "--resume" in cmd)
           for cmd in launched]
  assert order == [(compare.run_dir(root, "a", 0), False),
                   (compare.run_dir(root, "b", 0), False),
                   (compare.run_dir(root, "a", 1), False),
                   (compare.run_dir(root, "b", 1), True)]
  launched.clear()  # --fresh starts every run over, checkpoint or not.
  compare.run_grid(root, VARIANTS, [1], ["--preset", "x"], fresh=True)
  assert not any("--resume" in cmd for cmd in launched)


def test_vmapped_seeds_one_run_per_variant_and_aggregate(tmp_path,
                                                        monkeypatch):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  launched = []

  class FakePopen:
    def __init__(self, cmd, **kwargs):
      del kwargs
      launched.append(cmd)
      # The compiled loop writes seed_<s>/metrics.csv per vmapped seed.
      out = cmd[cmd.index("--output-dir") + 1]
      seeds = cmd[cmd.index("--seeds") + 1:cmd.index("--output-dir")]
      for s in seeds:
        _write_metrics(os.path.join(out, f"seed_{s}", "metrics.csv"),
                       [10, 20], [1, 2 + int(s)], ["nan", 5])
      self.returncode = 0

    def poll(self):
      return self.returncode

  monkeypatch.setattr(compare.subprocess, "Popen", FakePopen)
  monkeypatch.setattr(compare.time, "sleep", lambda s: None)
  compare.run_grid(root, VARIANTS, [0, 1], ["--loop", "compiled"],
                   vmap_seeds=True)
  assert [cmd[cmd.index("--output-dir") + 1] for cmd in launched] == [
      compare.vmapped_run_dir(root, "a"), compare.vmapped_run_dir(root, "b")]
  assert all(cmd[cmd.index("--seeds") + 1:cmd.index("--seeds") + 3]
             == ["0", "1"] for cmd in launched)
  directory, done = compare.locate_run(root, "a", 1)
  assert directory == os.path.join(compare.vmapped_run_dir(root, "a"),
                                   "seed_1")
  assert os.path.exists(done)  # One done.json for the vmapped run.
  launched.clear()
  compare.run_grid(root, VARIANTS, [0, 1], ["--loop", "compiled"],
                   vmap_seeds=True)
  assert not launched  # Done runs are skipped.
  text = compare.aggregate(root, VARIANTS, [0, 1], {"score": "Score"},
                           final_fraction=0.4, reps=100, curve_reps=50)
  row = next(line for line in text.splitlines()
             if line.startswith("| Agent A |"))
  assert "| 2.000 | 3.000 |" in row
  assert "Missing runs" not in text and "Unfinished" not in text
  assert "2 runs," in text  # Two vmapped runs, not four.
