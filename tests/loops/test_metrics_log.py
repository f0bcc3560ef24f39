"""Tests of `ngu_jax.loops.metrics_log`: the metrics rows kept on disk
(`MetricsRows`, `MetricsWriter`, `read_rows`) and `release_freed_memory`.

The rest of metrics_log is tested through the loops (tests/loops/*,
tests/experiments/test_train.py) and `tests/test_plotting.py`.
"""

import csv
import gc
import json
import math
import os
import platform

import numpy as np
import pytest

from ngu_jax.loops import checkpointing
from ngu_jax.loops import metrics_log

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _rss_mb() -> float:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith("VmRSS:"):
        return int(line.split()[1]) / 1024.
  raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_release_returns_fragmented_pages_to_the_os():
  # 200 MB of 1 kB objects (glibc's malloc, not pymalloc) of which every
  # 64th stays alive: the freed memory is scattered over the whole heap, so
  # glibc keeps it resident until malloc_trim(0) hands its pages back.
  blocks = [bytes(1000) for _ in range(200_000)]
  keep = blocks[::64]
  del blocks
  gc.collect()
  before = _rss_mb()
  assert metrics_log.release_freed_memory()
  after = _rss_mb()
  assert len(keep) == 3125
  assert before - after > 100., (before, after)


def test_release_without_malloc_trim_only_collects(monkeypatch):
  monkeypatch.setattr(metrics_log, "_LIBC", False)
  assert not metrics_log.release_freed_memory()


def test_periodic_plots_are_drawn_at_most_every_interval(tmp_path,
                                                        monkeypatch):
  drawn = []
  monkeypatch.setattr(metrics_log.plotting, "plot_curves",
                      lambda m, c: drawn.append(c) or c)
  clock = [1000.]
  monkeypatch.setattr(metrics_log.time, "monotonic", lambda: clock[0])
  a, b = str(tmp_path / "a.png"), str(tmp_path / "b.png")
  metrics = str(tmp_path / "metrics.csv")
  every = metrics_log.CHECKPOINT_PLOT_INTERVAL_S
  assert metrics_log.plot_curves(metrics, a, min_interval_s=every) == a
  clock[0] += every - 1.
  assert metrics_log.plot_curves(metrics, a, min_interval_s=every) is None
  assert metrics_log.plot_curves(metrics, b, min_interval_s=every) == b
  assert metrics_log.plot_curves(metrics, a) == a  # The end: always.
  clock[0] += every - 1.
  assert metrics_log.plot_curves(metrics, a, min_interval_s=every) is None
  clock[0] += 1.
  assert metrics_log.plot_curves(metrics, a, min_interval_s=every) == a
  assert drawn == [a, b, a, a]


@pytest.mark.parametrize("fails", [False, True])
def test_plot_curves_releases_memory_even_when_it_fails(tmp_path, monkeypatch,
                                                        fails):
  calls = []
  monkeypatch.setattr(metrics_log, "release_freed_memory",
                      lambda: calls.append(1) or True)

  def plot(metrics_path, curves_path):
    if fails:
      raise RuntimeError("no display")
    return curves_path

  monkeypatch.setattr(metrics_log.plotting, "plot_curves", plot)
  png = str(tmp_path / "curves.png")
  got = metrics_log.plot_curves(str(tmp_path / "metrics.csv"), png)
  assert got == (None if fails else png)
  assert calls == [1]


def test_evaluation_plots_release_memory(tmp_path, monkeypatch):
  calls = []
  monkeypatch.setattr(metrics_log, "release_freed_memory",
                      lambda: calls.append(1) or True)
  counts = {"eval_j0": ("j = 0", np.ones((3, 4), np.int64))}
  metrics_log.write_heatmaps(str(tmp_path), 100, counts)
  sums = np.zeros((2, 2, 3))
  sums[0, 0, 0] = 1.
  metrics_log.write_cell_maps(str(tmp_path / "cells"), 100, sums)
  assert len(calls) == 2
  assert os.path.exists(tmp_path / "eval_100.npz")


COLUMNS = ("env_steps", "loss", "note")


def _row(i):
  # Values of every kind a row holds: ints, floats that need all 17 digits,
  # NaN and infinities, and an empty column.
  return {"env_steps": 10 * i, "loss": [0.1, 1. / 3., math.nan, -math.inf,
                                        1e-300, 2.5][i % 6],
          "note": ""}


def _csv(path):
  with open(path, newline="") as f:
    return list(csv.reader(f))


@pytest.mark.parametrize("text, want", [
    ("12", 12), ("-3", -3), ("0.1", 0.1), ("1e-300", 1e-300),
    ("inf", math.inf), ("-inf", -math.inf), ("abc", "abc")])
def test_parse_cell(text, want):
  got = metrics_log.parse_cell(text)
  assert got == want and type(got) is type(want)


@pytest.mark.parametrize("text", ["nan", "", None])
def test_parse_cell_reads_nan_and_empty_cells_as_the_one_nan(text):
  assert metrics_log.parse_cell(text) is math.nan


def test_rows_read_back_are_the_rows_written(tmp_path):
  path = str(tmp_path / "metrics.csv")
  rows = [_row(i) for i in range(12)]
  with metrics_log.MetricsWriter(path, columns=COLUMNS) as writer:
    for row in rows:
      writer.write(row)
  got = metrics_log.read_rows(path)
  want = [dict(r, note=math.nan) for r in rows]
  assert [list(r) for r in got] == [list(COLUMNS)] * 12
  np.testing.assert_equal(got, want)
  assert [type(r["env_steps"]) for r in got] == [int] * 12
  assert [type(r["loss"]) for r in got] == [float] * 12


def test_rows_with_a_file_keep_only_the_last_in_memory(tmp_path):
  path = str(tmp_path / "metrics.csv")
  rows = metrics_log.MetricsRows(path, COLUMNS)
  rows.open(resume=False)
  sizes = []
  for i in range(200):
    rows.append(_row(i))
    sizes.append(len(json.dumps(rows.state())))
  rows.close()
  assert len(rows) == 200 and rows.last == _row(199)
  assert rows._kept == []  # pylint: disable=protected-access
  # The checkpoint's share does not grow with the run: rows 5 and 197 hold
  # the same loss; num_rows 6 and 198, env_steps 50 and 1970 differ by
  # two digits each.
  assert sizes[197] - sizes[5] == 4, (sizes[5], sizes[197])
  assert rows.state() == {"num_rows": 200,
                          "last_row": checkpointing.rows_to_json(
                              [_row(199)])[0]}
  np.testing.assert_equal(rows.all(),
                          [dict(_row(i), note=math.nan) for i in range(200)])


def test_rows_without_a_file_are_kept_in_memory():
  rows = metrics_log.MetricsRows(None, COLUMNS)
  rows.open(resume=False)
  assert not rows and rows.all() == []
  for i in range(3):
    rows.append(_row(i))
  assert rows and len(rows) == 3 and rows.all() == [_row(i) for i in range(3)]


def test_a_resume_cuts_the_file_back_to_the_checkpoint(tmp_path):
  path = str(tmp_path / "metrics.csv")
  rows = metrics_log.MetricsRows(path, COLUMNS)
  rows.open(resume=False)
  for i in range(5):
    rows.append(_row(i))
    if i == 2:
      saved = json.loads(json.dumps(rows.state()))  # The checkpoint.
  rows.close()
  resumed = metrics_log.MetricsRows(path, COLUMNS)
  resumed.restore(saved)
  assert len(resumed) == 3
  np.testing.assert_equal(resumed.last, _row(2))
  resumed.open(resume=True)
  assert len(_csv(path)) == 1 + 3  # Rows 3 and 4 came after it: dropped.
  resumed.append(_row(7))
  resumed.close()
  assert len(resumed) == 4
  assert [r["env_steps"] for r in resumed.all()] == [0, 10, 20, 70]


def test_a_version_1_checkpoint_rewrites_the_file_with_its_rows(tmp_path):
  path = str(tmp_path / "metrics.csv")
  with open(path, "w") as f:
    f.write("env_steps,loss,note\n0,9,\n10,9,\n20,9,\n")
  old = {"rows": checkpointing.rows_to_json([_row(0), _row(1)])}
  rows = metrics_log.MetricsRows(path, COLUMNS)
  rows.restore(old)
  assert len(rows) == 2 and rows.last == _row(1)
  rows.open(resume=True)
  rows.close()
  np.testing.assert_equal(rows.all(),
                          [dict(_row(i), note=math.nan) for i in range(2)])


def test_a_resume_refuses_a_file_shorter_than_the_checkpoint(tmp_path):
  path = str(tmp_path / "metrics.csv")
  with open(path, "w") as f:
    f.write("env_steps,loss,note\n0,1.0,\n")
  rows = metrics_log.MetricsRows(path, COLUMNS)
  rows.restore({"num_rows": 3, "last_row": _row(2)})
  with pytest.raises(checkpointing.ResumeError,
                     match=f"counts 3 metrics rows but {path} holds 1"):
    rows.open(resume=True)
  os.remove(path)
  with pytest.raises(checkpointing.ResumeError, match="cannot be read"):
    rows.open(resume=True)


def test_a_row_before_open_is_refused(tmp_path):
  rows = metrics_log.MetricsRows(str(tmp_path / "metrics.csv"), COLUMNS)
  with pytest.raises(RuntimeError, match="before open"):
    rows.append(_row(0))


def test_a_resume_before_restore_is_refused_and_keeps_the_file(tmp_path):
  path = str(tmp_path / "metrics.csv")
  text = "env_steps,loss,note\n0,1.0,\n10,1.0,\n"
  with open(path, "w") as f:
    f.write(text)
  rows = metrics_log.MetricsRows(path, COLUMNS)
  with pytest.raises(RuntimeError, match="before restore"):
    rows.open(resume=True)
  with open(path) as f:
    assert f.read() == text
  metrics_log.MetricsRows(None, COLUMNS).open(resume=True)  # No file: fine.


def test_saved_metrics_reads_both_versions_of_one_run():
  state = {"num_rows": 3, "last_row": checkpointing.rows_to_json([_row(2)])[0]}
  assert metrics_log.saved_metrics({"metrics": state, "other": 1}) is state
  old = {"rows": checkpointing.rows_to_json([_row(0), _row(1)]), "other": 1}
  assert metrics_log.saved_metrics(old) is old
  for meta in ({"metrics": state}, old):
    rows = metrics_log.MetricsRows(None, COLUMNS)
    rows.restore(metrics_log.saved_metrics(meta))
    assert len(rows) == (3 if meta is not old else 2)
  with pytest.raises(checkpointing.ResumeError, match="no metrics rows"):
    metrics_log.saved_metrics({"other": 1})


def test_saved_metrics_reads_both_versions_per_seed():
  states = [{"num_rows": n, "last_row": None} for n in (0, 4)]
  assert metrics_log.saved_metrics({"metrics": states}, num_seeds=2) == states
  per_seed = [checkpointing.rows_to_json([_row(0)]),
              checkpointing.rows_to_json([_row(0), _row(1), _row(2)])]
  saved = metrics_log.saved_metrics({"rows": per_seed}, num_seeds=2)
  assert saved == [{"rows": per_seed[0]}, {"rows": per_seed[1]}]
  counts = []
  for s in saved:
    rows = metrics_log.MetricsRows(None, COLUMNS)
    rows.restore(s)
    counts.append(len(rows))
  assert counts == [1, 3]
  for meta in ({"metrics": states}, {"rows": per_seed}):
    with pytest.raises(checkpointing.ResumeError, match="of 2 seeds, not 3"):
      metrics_log.saved_metrics(meta, num_seeds=3)
  with pytest.raises(checkpointing.ResumeError, match="no list of seeds"):
    metrics_log.saved_metrics({"metrics": states[0]}, num_seeds=1)
