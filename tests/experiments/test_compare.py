"""Tests for experiments.compare (grids of runs, tables and plots)."""

import csv
import gzip
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


def test_read_metrics_and_load_runs_read_gzip_copies(tmp_path):
  """docs/results/ keeps metrics.csv.gz: read_metrics reads it, named as
  the .gz or as the metrics.csv it stands for, and load_runs finds it."""
  root = str(tmp_path)
  text = "env_steps,episodes,score\n100,4,1\n200,4,2\n300,14,3\n"
  run = compare.run_dir(root, "a", 0)
  os.makedirs(run)
  with gzip.open(os.path.join(run, "metrics.csv.gz"), "wt") as f:
    f.write(text)
  for name in ("metrics.csv.gz", "metrics.csv"):
    cols = compare.read_metrics(os.path.join(run, name))
    np.testing.assert_array_equal(cols["score"], [1., 2., 3.])
    np.testing.assert_allclose(cols["env_steps_per_episode"][[0, 2]],
                               [25, 10])
  data, missing, unfinished = compare.load_runs(root, VARIANTS, [0])
  np.testing.assert_array_equal(data[("a", 0)]["score"], [1., 2., 3.])
  assert missing == ["b/seed0"] and unfinished == ["a/seed0"]
  with pytest.raises(FileNotFoundError):
    compare.read_metrics(os.path.join(compare.run_dir(root, "b", 0),
                                      "metrics.csv"))


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


def test_progress_line_reads_the_slowest_seeds_metrics(tmp_path):
  out = str(tmp_path)
  cmd = ["python", "-m", "experiments.train", "--total-env-steps", "1000",
         "--output-dir", out]
  assert "no metrics row yet" in compare.progress_line(
      "a", out, cmd, 0.0, None, 60.0)
  _write_metrics(os.path.join(out, "seed_0", "metrics.csv"), [100, 400],
                 [1, 2], [3, 4])
  _write_metrics(os.path.join(out, "seed_1", "metrics.csv"), [100, 300],
                 [1, 2], [3, 4])
  # 300 - 100 env steps in 100 s since the job started: 2 per s, and the
  # 700 left take 350 s.
  line = compare.progress_line("kc beta0", out, cmd, 0.0, 100, 100.0)
  assert line == ("[compare] kc beta0: 300 / 1,000 env steps (30%), 2 env "
                  "steps/s per seed, about 6 min left (1.7 min)")
  without_total = compare.progress_line("b", out, cmd[:3], 0.0, None, 100.0)
  assert without_total.startswith("[compare] b: 300 env steps, 3 env steps")


def test_run_jobs_reports_progress_every_report_every_seconds(
    tmp_path, monkeypatch, capsys):
  out = os.path.join(str(tmp_path), "a")
  polls = []

  class FakePopen:
    def __init__(self, cmd, **kwargs):
      del cmd, kwargs
      self.returncode = None

    def poll(self):
      polls.append(1)
      if len(polls) == 2:  # The run writes its first row ...
        _write_metrics(os.path.join(out, "metrics.csv"), [50], [1], [1])
      if len(polls) == 4:  # ... and ends.
        self.returncode = 0
      return self.returncode

  clock = iter(range(0, 10_000, 100))
  monkeypatch.setattr(compare.subprocess, "Popen", FakePopen)
  monkeypatch.setattr(compare.time, "sleep", lambda s: None)
  monkeypatch.setattr(compare.time, "time", lambda: float(next(clock)))
  compare.run_jobs([compare.Job("a", out, ["--total-env-steps", "100"])],
                   report_every=150.0)
  lines = [line for line in capsys.readouterr().out.splitlines()
           if "env steps" in line or "no metrics" in line]
  # The clock ticks 100 s per call: start 0, launch 100, reports at 200
  # (before the first row) and at 400 (50 env steps in 300 s; the 50 left
  # take another 300 s).
  assert lines == [
      "[compare] a: no metrics row yet (1.7 min)",
      "[compare] a: 50 / 100 env steps (50%), 0 env steps/s per seed, "
      "about 5 min left (5.0 min)"]
  capsys.readouterr()
  polls.clear()
  compare.run_jobs([compare.Job("b", out + "b", [])], report_every=0.0)
  assert "no metrics" not in capsys.readouterr().out


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


def test_group_main_runs_one_comparison_per_group(monkeypatch, tmp_path):
  calls, after = [], []
  monkeypatch.setattr(compare, "main",
                      lambda argv, *a, **k: calls.append((argv, a, k))
                      or f"text {len(calls)}")

  def comparison(group):
    return compare.GroupComparison(
        ["--preset", group], f"{group}, {{env_steps}} steps",
        argv=["--env", f"env/{group}"] if group == "y" else [],
        default_env=f"env/{group}", baseline=("b",), chance=group == "y")

  def then(group, root, args):
    after.append((group, root, args.seeds))
    return f" + {group}"

  args, texts = compare.group_main(
      ["--output-root", str(tmp_path), "--groups", "x", "y", "--seeds", "3",
       "--variants", "a", "--env-steps", "50", "--set", "beta=0"],
      "Compares.\n\nMore.", "--groups", ["x", "y", "z"], VARIANTS,
      {"score": "Score"}, "runs/default", 1000, comparison, after=then)
  assert texts == ["text 1 + x", "text 2 + y"]
  assert args.groups == ["x", "y"] and args.env_steps == 50
  assert after == [("x", str(tmp_path / "x"), [3]),
                   ("y", str(tmp_path / "y"), [3])]
  argv, positional, kwargs = calls[1]
  assert argv == ["--output-root", str(tmp_path / "y"), "--env-steps", "50",
                  "--seeds", "3", "--variants", "a", "--vmap-seeds",
                  "--env", "env/y", "--set", "beta=0"]
  assert positional == ("Compares.", VARIANTS, ["--preset", "y"],
                        {"score": "Score"})
  assert kwargs == dict(default_root=str(tmp_path / "y"),
                        default_env_steps=50, title="y, {env_steps} steps",
                        default_env="env/y", baseline=("b",), chance=True)
  assert "--env" not in calls[0][0] and calls[0][2]["chance"] is False


def test_group_main_help_prints_the_doc(monkeypatch, capsys):
  monkeypatch.setattr(compare, "main", lambda *a, **k: pytest.fail("ran"))
  assert compare.group_main(["-h"], "The doc.", "--groups", ["x"], VARIANTS,
                            {}, "runs/x", 10, lambda g: None) is None
  assert capsys.readouterr().out == "The doc.\n"


def test_write_results_writes_then_appends(tmp_path):
  assert compare.write_results(str(tmp_path), "# A\n") == "# A\n"
  assert compare.write_results(str(tmp_path), "b\n", mode="a") == "b\n"
  assert (tmp_path / "results.md").read_text() == "# A\nb\n"
  compare.write_results(str(tmp_path), "new\n")
  assert (tmp_path / "results.md").read_text() == "new\n"


def test_save_plot_labels_writes_and_closes(tmp_path):
  plt = pytest.importorskip("matplotlib.pyplot")
  fig, ax = plt.subplots()
  ax.plot([0, 1], [1, 2], label="a line")
  path = str(tmp_path / "curve.png")
  assert compare.save_plot(fig, ax, path, "steps", "score") == path
  assert (ax.get_xlabel(), ax.get_ylabel()) == ("steps", "score")
  assert ax.get_legend() is not None
  assert os.path.getsize(path) > 0
  assert not plt.fignum_exists(fig.number)
