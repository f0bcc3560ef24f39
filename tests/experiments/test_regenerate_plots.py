"""Tests for experiments.regenerate_plots on a tiny synthetic run folder."""

import gzip
import os

import numpy as np
import pytest

from experiments import regenerate_plots
from ngu_jax.agents.ngu import diagnostics
from ngu_jax import npz_io
from ngu_jax.loops import evaluation
from ngu_jax.loops import metrics_log

pytest.importorskip("matplotlib")


def _run_folder(root):
  """A run as the loops leave it, less its PNGs: metrics.csv, and the
  heatmaps' npz written by the library's own writers."""
  run = root / "study" / "variant" / "seed_0"
  run.mkdir(parents=True)
  rows = [{"env_steps": s, "episodes": s // 10, "mean_episode_return": 0.1 * i,
           "episode_success_rate": 0.05 * i, "mean_episode_coverage": 0.01 * i}
          for i, s in enumerate((100, 200, 300))]
  metrics_log.write_metrics_rows(str(run / "metrics.csv"), rows)
  heatmaps = str(run / "heatmaps")
  rng = np.random.default_rng(0)
  visits = {j: {"visits": rng.integers(0, 5, (4, 5))} for j in (0, 2)}
  counts = evaluation.heatmap_counts(visits, 3, rng.integers(0, 9, (4, 5)))
  metrics_log.write_heatmaps(heatmaps, 300, counts)
  sums = rng.uniform(0.0, 2.0, (4, 5, len(diagnostics.cell_channels(2))))
  metrics_log.write_cell_maps(heatmaps, 300, sums,
                              np.zeros((4, 5), np.int64))
  return run


def test_draws_every_per_run_plot_from_the_kept_data(tmp_path):
  run = _run_folder(tmp_path)
  heatmaps = run / "heatmaps"
  npz_bytes = {}
  for name in ("eval_300", "cells_300"):
    assert (heatmaps / f"{name}.png").exists()   # the library drew both
    (heatmaps / f"{name}.png").unlink()          # docs/results keeps none
    npz_bytes[name] = (heatmaps / f"{name}.npz").read_bytes()
  assert not (run / "curves.png").exists()

  written = regenerate_plots.main([str(tmp_path / "study")])

  expected = {str(run / "curves.png"), str(heatmaps / "eval_300.png"),
              str(heatmaps / "cells_300.png")}
  assert set(written) == expected
  for path in expected:
    with open(path, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n", path
  for name, data in npz_bytes.items():            # read, never rewritten
    assert (heatmaps / f"{name}.npz").read_bytes() == data
  assert sorted(os.listdir(heatmaps)) == [
      "cells_300.npz", "cells_300.png", "eval_300.npz", "eval_300.png"]


def test_draws_curves_from_a_gzip_copy_of_the_metrics(tmp_path):
  """docs/results/ keeps metrics.csv.gz only: curves.png is drawn from it."""
  run = _run_folder(tmp_path)
  with open(run / "metrics.csv", "rb") as f_in:
    with gzip.open(run / "metrics.csv.gz", "wb") as f_out:
      f_out.write(f_in.read())
  (run / "metrics.csv").unlink()
  written = regenerate_plots.regenerate(str(tmp_path), missing_only=True)
  assert written == [str(run / "curves.png")]
  assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_drawn_from_names_the_data_of_each_redrawn_png():
  heatmaps = os.path.join("run", "heatmaps")
  files = ["eval_3.npz", "eval_3.png", "cells_3.png", "bva_3.png",
           "bva_3.npz"]
  assert regenerate_plots.drawn_from("run", "curves.png",
                                     ["metrics.csv.gz"]) == "metrics.csv.gz"
  assert regenerate_plots.drawn_from("run", "curves.png",
                                     ["metrics.csv", "metrics.csv.gz"]
                                     ) == "metrics.csv"
  assert regenerate_plots.drawn_from("run", "curves.png", []) is None
  assert regenerate_plots.drawn_from(heatmaps, "eval_3.png",
                                     files) == "eval_3.npz"
  for name in ("cells_3.png", "bva_3.png", "eval_3.npz"):  # no npz / not drawn
    assert regenerate_plots.drawn_from(heatmaps, name, files) is None
  assert regenerate_plots.drawn_from("run", "eval_3.png", files) is None


def test_titles_follow_the_loops(tmp_path):
  arrays = {"eval_j0": np.ones((2, 2), np.int64),
            "eval_j7": np.ones((2, 2), np.int64),
            "train": np.ones((2, 2), np.int64)}
  titles = [t for t, _ in regenerate_plots._heatmap_counts(arrays).values()]
  assert titles == ["evaluation j = 0 (exploit)",
                    "evaluation j = 7 (most exploratory)",
                    "training lanes since the last evaluation"]
  only = {"eval_j0": np.ones((2, 2), np.int64)}
  assert [t for t, _ in regenerate_plots._heatmap_counts(only).values()] == [
      "evaluation j = 0 (the only mixture)"]
  npz_io.save_arrays(str(tmp_path / "eval_5.npz"), arrays)  # not in heatmaps/
  assert regenerate_plots.regenerate(str(tmp_path)) == []


def test_missing_only_keeps_existing_pngs(tmp_path):
  run = _run_folder(tmp_path)
  (run / "curves.png").write_bytes(b"kept")
  written = regenerate_plots.regenerate(str(tmp_path), missing_only=True)
  assert str(run / "curves.png") not in written
  assert (run / "curves.png").read_bytes() == b"kept"
  assert written == []            # the heatmap PNGs exist too


def test_refuses_a_missing_directory(tmp_path):
  with pytest.raises(FileNotFoundError):
    regenerate_plots.regenerate(str(tmp_path / "nowhere"))
