r"""Copies what a comparison's tables and plots rest on into docs/results/.

A comparison's output root (`experiments.compare` and the scripts built on
it) holds, besides its tables and plots, every run's checkpoint (replay
included: gigabytes). The results pages keep, per the project's standards,
every run's metrics and config, so this copies, recursively under SRC:

* every `results.md` and every PNG that is not in a run's `heatmaps/`
  (tables, curves, tau histograms, arm choices, Bandits Vote value curves);
* every `metrics.csv`, written gzip-compressed as `metrics.csv.gz` (level
  9, no name or time stamp in the header, so the same rows give the same
  bytes; `experiments.compare.read_metrics`, `ngu_jax.plotting` and `zcat`
  read it), and every `config.json` and `done.json`;
* of `heatmaps/` and `bva/`, the files of the last evaluation only (the
  highest env-step number), PNG and NPZ, the NPZ deflated (`np.load` reads
  it as before; the loops write them uncompressed);

less the per-run PNGs that `python -m experiments.regenerate_plots DST`
draws again from the copied data (`regenerate_plots.drawn_from`: a run's
`curves.png`, and the `heatmaps/` PNGs with their `.npz`), and skips
`checkpoint/` directories and logs. The copy keeps SRC's layout, so
results.md's relative links keep working. In the copied results.md files
(`prune_missing_links`), a link to a PNG that regenerate_plots draws
becomes its path in backticks, with a line naming the command; other links
to what was not copied (the maps of earlier evaluations) are removed, with
a line saying how many and where they are; so every link in docs/results/
resolves (tests/test_docs_links.py).

Usage:
  python -m experiments.export_results SRC DST
e.g. python -m experiments.export_results runs/noisy_tv_50k \
         docs/results/noisy_tv_50k
"""

import argparse
import gzip
import io
import os
import re
import shutil
import sys
import zipfile
from typing import List, Optional, Sequence

import numpy as np

from experiments import regenerate_plots
from ngu_jax import npz_io

METRICS = "metrics.csv"
GZIP_SUFFIX = ".gz"
KEEP = ("results.md", METRICS, METRICS + GZIP_SUFFIX, "config.json",
        "done.json")
LAST_ONLY = ("heatmaps", "bva")
_STEP = re.compile(r"_(\d+)\.(png|npz)$")


def _last_step_files(names: Sequence[str]) -> List[str]:
  """The files of the highest `_<steps>.png/.npz` number, and the files
  without a number (e.g. bva/values.png)."""
  steps = [int(m.group(1)) for m in map(_STEP.search, names) if m]
  last = max(steps) if steps else None
  chosen = []
  for name in names:
    match = _STEP.search(name)
    if match is None:
      if name.endswith((".png", ".npz")):
        chosen.append(name)
    elif int(match.group(1)) == last:
      chosen.append(name)
  return chosen


def gzip_copy(src: str, dst: str) -> None:
  """Writes `src` gzip-compressed to `dst` (as `gzip -9 -n`: level 9, no
  file name, time stamp 0; replaced atomically)."""
  tmp = dst + ".tmp"
  with open(src, "rb") as f_in, open(tmp, "wb") as raw:
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw,
                       mtime=0) as f_out:
      shutil.copyfileobj(f_in, f_out)
  os.replace(tmp, dst)


def deflated_npz_copy(src: str, dst: str) -> None:
  """Writes the arrays of the .npz `src` to `dst` deflated (level 9), with
  fixed time stamps so the same arrays give the same bytes; `np.load`
  reads it as it reads `src` (no pickle either way). Replaced atomically.

  Raises:
    ValueError: `src` is not an .npz of plain arrays (`npz_io.load_arrays`).
  """
  arrays = npz_io.load_arrays(src)
  tmp = dst + ".tmp"
  with zipfile.ZipFile(tmp, "w") as z:
    for name, array in arrays.items():
      buffer = io.BytesIO()
      np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=False)
      info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
      info.external_attr = 0o644 << 16
      z.writestr(info, buffer.getvalue(), compress_type=zipfile.ZIP_DEFLATED,
                 compresslevel=9)
  os.replace(tmp, dst)


def export(src: str, dst: str) -> List[str]:
  """Copies the files described in the module docstring; returns them
  (destination paths)."""
  if not os.path.isdir(src):
    raise FileNotFoundError(f"export_results: no directory {src!r}.")
  copied = []
  for directory, subdirs, files in os.walk(src):
    subdirs[:] = sorted(d for d in subdirs if d != "checkpoint")
    rel = os.path.relpath(directory, src)
    if os.path.basename(directory) in LAST_ONLY:
      chosen = _last_step_files(sorted(files))
    else:
      chosen = [f for f in sorted(files) if f in KEEP or f.endswith(".png")]
    if METRICS in chosen and METRICS + GZIP_SUFFIX in chosen:
      chosen.remove(METRICS + GZIP_SUFFIX)     # written from metrics.csv
    chosen = [name for name in chosen if not (
        name.endswith(".png")
        and regenerate_plots.drawn_from(directory, name, chosen))]
    for name in chosen:
      source = os.path.join(directory, name)
      target = os.path.normpath(os.path.join(dst, rel, name))
      os.makedirs(os.path.dirname(target), exist_ok=True)
      if name == METRICS:
        gzip_copy(source, target + GZIP_SUFFIX)
        if os.path.exists(target):   # An earlier export's; readers prefer it.
          os.remove(target)
        target += GZIP_SUFFIX
      elif name.endswith(".npz"):
        deflated_npz_copy(source, target)
      else:
        shutil.copy2(source, target)
      copied.append(target)
  return copied


# [text](target) or ![alt](target), as tests/test_docs_links.py reads them.
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(\s*<?([^)\s>]+)>?\s*\)")
_EXTERNAL = ("http://", "https://", "mailto:", "ftp://")
PRUNED_NOTE = ("({n} link(s) to files not exported (the maps of earlier "
               "evaluations) were removed from this copy; the comparison's "
               "run directories have them.)")
REDRAWN_NOTE = ("({n} per-run plot(s) named in backticks are not kept in "
                "this copy: `python -m experiments.regenerate_plots {dir}` "
                "draws them from the data beside them.)")


def prune_missing_links(path: str) -> int:
  """Fixes the links of the markdown file `path` whose relative target
  does not exist.

  A link to a PNG that `experiments.regenerate_plots` draws from the files
  beside it (`regenerate_plots.drawn_from`) becomes its target in
  backticks; any other such link is removed: a line of images only loses
  them (and is dropped when nothing is left), another link becomes its
  text. Appends `PRUNED_NOTE` when any link was removed and `REDRAWN_NOTE`
  when any PNG was named. Returns how many links went, both kinds.
  """
  base = os.path.dirname(path)
  with open(path, encoding="utf-8") as f:
    lines = f.read().split("\n")
  removed, named = 0, 0

  def missing(target: str) -> bool:
    if target.startswith(_EXTERNAL) or target.startswith("#"):
      return False
    return not os.path.exists(os.path.join(base, target.partition("#")[0]))

  def redrawn(target: str) -> bool:
    full = os.path.join(base, target.partition("#")[0])
    directory = os.path.dirname(full)
    return os.path.isdir(directory) and regenerate_plots.drawn_from(
        directory, os.path.basename(full), os.listdir(directory)) is not None

  out = []
  for line in lines:
    found = list(_LINK.finditer(line))
    gone = [m for m in found if missing(m.group(3))]
    if not gone:
      out.append(line)
      continue
    kept = [m for m in gone if redrawn(m.group(3))]
    named += len(kept)
    removed += len(gone) - len(kept)
    images_only = (not _LINK.sub("", line).strip()
                   and all(m.group(1) == "!" for m in found))

    def fix(m):
      if not missing(m.group(3)):
        return m.group(0)
      if redrawn(m.group(3)):
        return f"`{m.group(3)}`"
      return "" if images_only else m.group(2)

    fixed = _LINK.sub(fix, line)
    if images_only:
      if not fixed.strip():
        continue                                 # a line of lost images
      indent = fixed[:len(fixed) - len(fixed.lstrip())]
      fixed = indent + " ".join(fixed.split())
    out.append(fixed)
  if removed or named:
    while out and not out[-1].strip():
      out.pop()
    if removed:
      out += ["", PRUNED_NOTE.format(n=removed)]
    if named:
      out += ["", REDRAWN_NOTE.format(n=named, dir=base or ".")]
    out.append("")
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n".join(out))
  return removed + named


def main(argv: Optional[Sequence[str]] = None) -> List[str]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("src")
  parser.add_argument("dst")
  args = parser.parse_args(sys.argv[1:] if argv is None else argv)
  copied = export(args.src, args.dst)
  for path in copied:
    if os.path.basename(path) == "results.md":
      prune_missing_links(path)
  size = sum(os.path.getsize(p) for p in copied)
  print(f"{len(copied)} files, {size / 2**20:.1f} MiB, in {args.dst}")
  return copied


if __name__ == "__main__":
  main()
