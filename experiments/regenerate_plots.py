r"""Draws the per-run plots of result folders again from their kept data.

docs/results/ keeps every run's metrics (`metrics.csv`, gzip-compressed as
`metrics.csv.gz`) and its heatmaps' `.npz`, not the per-run PNGs drawn from
them (they were most of its size). This walks each DIR and writes, with the
library's own plotting (the functions the loops call while training, so the
figures are the same):

* `curves.png` beside every `metrics.csv` or `metrics.csv.gz`
  (`metrics_log.plot_curves`);
* `heatmaps/eval_<steps>.png` beside every `heatmaps/eval_<steps>.npz`
  (visits per cell of the evaluations and the training lanes:
  `metrics_log.write_heatmaps`, the panel titles of
  `evaluation.heatmap_counts`);
* `heatmaps/cells_<steps>.png` beside every `heatmaps/cells_<steps>.npz`
  (per-cell maps: `metrics_log.write_cell_maps`).

The `.npz` files are read, never rewritten. DiCE's `bva/values.png` is not
redrawn: it shows every evaluation, and only the last one's `.npz` is kept.
`drawn_from` says which PNGs these are (`experiments.export_results` does
not copy them).

Usage:
  python -m experiments.regenerate_plots DIR [DIR ...] [--missing-only]
e.g. python -m experiments.regenerate_plots docs/results/noisy_tv_50k
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
from typing import Collection, List, Optional, Sequence

import numpy as np

from ngu_jax import npz_io
from ngu_jax import plotting
from ngu_jax.loops import evaluation
from ngu_jax.loops import metrics_log

_EVAL = re.compile(r"^eval_(\d+)\.npz$")
_CELLS = re.compile(r"^cells_(\d+)\.npz$")
_EVAL_KEY = re.compile(r"^eval_j(\d+)$")
# A run's metrics: as the loops write them, or gzip-compressed (docs/results).
METRICS_FILES = (metrics_log.METRICS_FILE,
                 metrics_log.METRICS_FILE + plotting.GZIP_SUFFIX)


def drawn_from(directory: str, name: str,
               files: Collection[str]) -> Optional[str]:
  """The file of `directory` that `regenerate` draws its file `name` from.

  Args:
    directory: a directory (only its last part is looked at).
    name: a file name in it.
    files: the names of the files in it.

  Returns:
    The metrics file for `curves.png` (module docstring), the `.npz` of the
    same name for a `heatmaps/eval_<steps>.png` or `cells_<steps>.png`;
    None when `regenerate` does not draw `name` there.
  """
  if name == metrics_log.CURVES_FILE:
    return next((m for m in METRICS_FILES if m in files), None)
  stem, ext = os.path.splitext(name)
  npz = stem + ".npz"
  if (os.path.basename(directory) == metrics_log.HEATMAP_DIR
      and ext == ".png" and npz in files
      and (_EVAL.match(npz) or _CELLS.match(npz))):
    return npz
  return None


def _heatmap_counts(arrays):
  """The (title, visits) panels of an eval_<steps>.npz, titled as the loops
  title them (`evaluation.heatmap_counts`; N - 1 is its largest j)."""
  mixtures = sorted(int(m.group(1)) for m in map(_EVAL_KEY.match, arrays)
                    if m)
  if not mixtures:
    raise ValueError(f"no eval_j<j> arrays among {sorted(arrays)}")
  results = {j: {"visits": np.asarray(arrays[f"eval_j{j}"], np.int64)}
             for j in mixtures}
  train = arrays.get("train")
  return evaluation.heatmap_counts(
      results, mixtures[-1] + 1,
      None if train is None else np.asarray(train, np.int64))


def _draw_beside(npz_path: str, draw) -> Optional[str]:
  """Calls draw(tmp_dir), which writes <stem>.npz and <stem>.png there (the
  library's writers do both), and moves only the PNG beside `npz_path`."""
  directory, name = os.path.split(npz_path)
  png = os.path.splitext(name)[0] + ".png"
  with tempfile.TemporaryDirectory() as tmp:
    draw(tmp)
    drawn = os.path.join(tmp, png)
    if not os.path.exists(drawn):
      return None
    target = os.path.join(directory, png)
    shutil.move(drawn, target)
  return target


def regenerate(root: str, missing_only: bool = False) -> List[str]:
  """Writes the plots of the module docstring under `root`; returns the
  PNGs written. Raises RuntimeError naming the ones that could not be."""
  if not os.path.isdir(root):
    raise FileNotFoundError(f"regenerate_plots: no directory {root!r}.")
  written, failed = [], []

  def wanted(png: str) -> bool:
    return not (missing_only and os.path.exists(png))

  for directory, subdirs, files in os.walk(root):
    subdirs.sort()
    metrics = drawn_from(directory, metrics_log.CURVES_FILE, files)
    if metrics is not None:
      png = os.path.join(directory, metrics_log.CURVES_FILE)
      if wanted(png):
        got = metrics_log.plot_curves(os.path.join(directory, metrics), png)
        (written if got else failed).append(png)
    if os.path.basename(directory) != metrics_log.HEATMAP_DIR:
      continue
    for name in sorted(files):
      path = os.path.join(directory, name)
      png = os.path.splitext(path)[0] + ".png"
      eval_match, cells_match = _EVAL.match(name), _CELLS.match(name)
      if not (eval_match or cells_match) or not wanted(png):
        continue
      arrays = npz_io.load_arrays(path)
      if eval_match:
        steps = int(eval_match.group(1))
        counts = _heatmap_counts(arrays)
        got = _draw_beside(path, lambda tmp, s=steps, c=counts:
                           metrics_log.write_heatmaps(tmp, s, c))
      else:
        steps = int(cells_match.group(1))
        got = _draw_beside(path, lambda tmp, s=steps, a=arrays:
                           metrics_log.write_cell_maps(
                               tmp, s, a["sums"], a.get("preferred_action")))
      (written if got else failed).append(png)
  if failed:
    raise RuntimeError(
        f"regenerate_plots: could not draw {len(failed)} plot(s) (is "
        f"matplotlib installed? see the warnings above): {failed[:5]}")
  return written


def main(argv: Optional[Sequence[str]] = None) -> List[str]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("dirs", nargs="+", metavar="DIR")
  parser.add_argument("--missing-only", action="store_true",
                      help="only draw the PNGs that do not exist yet")
  args = parser.parse_args(sys.argv[1:] if argv is None else argv)
  written = []
  for root in args.dirs:
    written += regenerate(root, args.missing_only)
  print(f"regenerate_plots: wrote {len(written)} PNG(s) under "
        f"{', '.join(args.dirs)}")
  return written


if __name__ == "__main__":
  main()
