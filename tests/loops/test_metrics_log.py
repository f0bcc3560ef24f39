"""Tests of `ngu_jax.loops.metrics_log.release_freed_memory` and its use.

The rest of metrics_log is tested through the loops (tests/loops/*,
tests/experiments/test_train.py) and `tests/test_plotting.py`.
"""

import gc
import os
import platform

import numpy as np
import pytest

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
