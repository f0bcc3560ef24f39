"""Tests for experiments.export_results: what is copied, what is not."""

import os

import pytest

from experiments import export_results


def _touch(path, text="x"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    f.write(text)


def test_copies_tables_metrics_configs_and_the_last_maps_only(tmp_path):
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
    for ext in ("png", "npz"):
      _touch(str(run / "seed_0" / "heatmaps" / f"cells_{step}.{ext}"))
      _touch(str(run / "seed_0" / "bva" / f"bva_{step}.{ext}"))
  _touch(str(run / "seed_0" / "bva" / "values.png"))
  copied = export_results.main([str(src), str(dst)])
  got = sorted(os.path.relpath(p, dst) for p in copied)
  assert got == sorted([
      "tv/results.md", "tv/coverage.png", "tv/ngu/seeds/config.json",
      "tv/ngu/seeds/done.json", "tv/ngu/seeds/seed_0/metrics.csv",
      "tv/ngu/seeds/seed_0/curves.png",
      "tv/ngu/seeds/seed_0/heatmaps/cells_2000.png",
      "tv/ngu/seeds/seed_0/heatmaps/cells_2000.npz",
      "tv/ngu/seeds/seed_0/bva/bva_2000.png",
      "tv/ngu/seeds/seed_0/bva/bva_2000.npz",
      "tv/ngu/seeds/seed_0/bva/values.png"])
  assert all(os.path.isfile(os.path.join(dst, p)) for p in got)
  with pytest.raises(FileNotFoundError, match="no directory"):
    export_results.export(str(tmp_path / "missing"), str(dst))


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
