"""Tests for experiments.export_results: what is copied, what is not."""

import gzip
import os
import zipfile

import numpy as np
import pytest

from experiments import export_results
from ngu_jax import npz_io


def _touch(path, text="x"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    f.write(text)


def _arrays(step):
  return {"sums": np.full((6, 7), step, np.float32),
          "preferred_action": np.zeros((6, 7), np.int64)}


def test_copies_tables_metrics_configs_and_the_last_maps_only(tmp_path):
  """metrics.csv goes gzip-compressed; the PNGs regenerate_plots draws from
  the copied data (a run's curves.png, heatmaps/ PNGs with their .npz) are
  not copied; the .npz copies are deflated."""
  src, dst = tmp_path / "src", tmp_path / "dst"
  run = src / "tv" / "ngu" / "seeds"
  for name in ("results.md", "coverage.png"):
    _touch(str(src / "tv" / name))
  for name in ("config.json", "done.json", "log.txt"):
    _touch(str(run / name))
  _touch(str(run / "checkpoint" / "train_state.npz"))
  _touch(str(run / "checkpoint" / "config.json"))
  for name in ("metrics.csv", "curves.png"):
    _touch(str(run / "seed_0" / name))
  for step in (100, 2000, 300):
    for directory, stem in (("heatmaps", "cells"), ("bva", "bva")):
      _touch(str(run / "seed_0" / directory / f"{stem}_{step}.png"))
      npz_io.save_arrays(str(run / "seed_0" / directory /
                             f"{stem}_{step}.npz"), _arrays(step))
  _touch(str(run / "seed_0" / "heatmaps" / "other_2000.png"))  # not drawn
  _touch(str(run / "seed_0" / "bva" / "values.png"))
  copied = export_results.main([str(src), str(dst)])
  got = sorted(os.path.relpath(p, dst) for p in copied)
  assert got == sorted([
      "tv/results.md", "tv/coverage.png", "tv/ngu/seeds/config.json",
      "tv/ngu/seeds/done.json", "tv/ngu/seeds/seed_0/metrics.csv.gz",
      "tv/ngu/seeds/seed_0/heatmaps/cells_2000.npz",
      "tv/ngu/seeds/seed_0/heatmaps/other_2000.png",
      "tv/ngu/seeds/seed_0/bva/bva_2000.png",
      "tv/ngu/seeds/seed_0/bva/bva_2000.npz",
      "tv/ngu/seeds/seed_0/bva/values.png"])
  assert all(os.path.isfile(os.path.join(dst, p)) for p in got)
  for name in ("heatmaps/cells_2000.npz", "bva/bva_2000.npz"):
    path = str(dst / "tv/ngu/seeds/seed_0" / name)
    loaded = npz_io.load_arrays(path)
    assert sorted(loaded) == sorted(_arrays(2000))
    for key, value in _arrays(2000).items():
      np.testing.assert_array_equal(loaded[key], value)
      assert loaded[key].dtype == value.dtype
    with zipfile.ZipFile(path) as z:
      assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
  with pytest.raises(FileNotFoundError, match="no directory"):
    export_results.export(str(tmp_path / "missing"), str(dst))


def test_metrics_are_written_as_reproducible_gzip(tmp_path):
  """metrics.csv.gz holds metrics.csv's bytes, with no name or time stamp
  in its header (gzip -9 -n), so exporting again gives the same bytes; a
  metrics.csv of an earlier export there is removed."""
  src, dst = tmp_path / "src", tmp_path / "dst"
  text = "env_steps,score\r\n" + "".join(
      f"{i},{i / 7}\r\n" for i in range(200))
  _touch(str(src / "seed0" / "metrics.csv"), text)
  _touch(str(dst / "seed0" / "metrics.csv"), "stale")
  export_results.main([str(src), str(dst)])
  gz = dst / "seed0" / "metrics.csv.gz"
  data = gz.read_bytes()
  assert gzip.decompress(data) == (src / "seed0" / "metrics.csv").read_bytes()
  assert data[3] == 0 and data[4:8] == b"\0\0\0\0"  # no FNAME, mtime 0
  assert len(data) < len(text) / 2
  assert not (dst / "seed0" / "metrics.csv").exists()
  export_results.main([str(src), str(dst)])
  assert gz.read_bytes() == data


def test_links_to_files_not_exported_are_pruned(tmp_path):
  """A copied results.md keeps its links to what was copied; a line of
  images that were not (earlier evaluations' maps) goes, another missing
  link keeps its text; a note says how many went."""
  src, dst = tmp_path / "src", tmp_path / "dst"
  run = src / "ngu" / "seeds" / "seed_0"
  for step in (10, 20):
    _touch(str(run / "heatmaps" / f"eval_{step}.png"))
  _touch(str(src / "curves.png"))
  _touch(str(src / "results.md"), "\n".join([
      "# T", "![curves](curves.png)",
      "![ngu eval_10](ngu/seeds/seed_0/heatmaps/eval_10.png)",
      "![ngu eval_20](ngu/seeds/seed_0/heatmaps/eval_20.png)",
      "see [the log](ngu/seeds/log.txt) and [web](https://x.y)", ""]))
  export_results.main([str(src), str(dst)])
  text = (dst / "results.md").read_text().split("\n")
  assert text[:4] == ["# T", "![curves](curves.png)",
                      "![ngu eval_20](ngu/seeds/seed_0/heatmaps/eval_20.png)",
                      "see the log and [web](https://x.y)"]
  assert text[5] == export_results.PRUNED_NOTE.format(n=2)
  assert export_results.prune_missing_links(str(dst / "results.md")) == 0


def test_links_to_redrawn_plots_become_their_paths(tmp_path):
  """A PNG that regenerate_plots draws from the copied data is named in
  backticks, with a note giving the command; the rest as before."""
  src, dst = tmp_path / "src", tmp_path / "dst"
  run = src / "ngu" / "seed0"
  _touch(str(run / "metrics.csv"), "env_steps\n1\n")
  _touch(str(run / "curves.png"))
  for step in (10, 20):
    _touch(str(run / "heatmaps" / f"eval_{step}.png"))
    npz_io.save_arrays(str(run / "heatmaps" / f"eval_{step}.npz"),
                       {"eval_j0": np.ones((2, 2), np.int64)})
  _touch(str(src / "results.md"), "\n".join([
      "# T", "![ngu eval_10](ngu/seed0/heatmaps/eval_10.png)",
      "![ngu eval_20](ngu/seed0/heatmaps/eval_20.png)",
      "  ![a](ngu/seed0/curves.png) ![b](ngu/seed0/heatmaps/eval_10.png)",
      "see [curves](ngu/seed0/curves.png).", ""]))
  export_results.main([str(src), str(dst)])
  text = (dst / "results.md").read_text().split("\n")
  assert text[:4] == ["# T", "`ngu/seed0/heatmaps/eval_20.png`",
                      "  `ngu/seed0/curves.png`",
                      "see `ngu/seed0/curves.png`."]
  assert text[5] == export_results.PRUNED_NOTE.format(n=2)
  assert text[7] == export_results.REDRAWN_NOTE.format(n=3, dir=str(dst))
  assert export_results.prune_missing_links(str(dst / "results.md")) == 0
