r"""Copies what a comparison's tables and plots rest on into docs/results/.

A comparison's output root (`experiments.compare` and the scripts built on
it) holds, besides its tables and plots, every run's checkpoint (replay
included: gigabytes). The results pages keep, per the project's standards,
every run's metrics and config, so this copies, recursively under SRC:

* every `results.md` and every PNG that is not in a run's `heatmaps/`
  (tables, curves, per-run curves.png, tau histograms, arm choices,
  Bandits Vote value curves);
* every `metrics.csv`, `config.json` and `done.json`;
* of `heatmaps/` and `bva/`, the files of the last evaluation only (the
  highest env-step number), PNG and NPZ;

and skips `checkpoint/` directories and logs. The copy keeps SRC's layout,
so results.md's relative links keep working; links to what was not copied
(the maps of earlier evaluations) are pruned from the copied results.md
files (`prune_missing_links`), with a line saying how many and where they
are, so every link in docs/results/ resolves (tests/test_docs_links.py).

Usage:
  python -m experiments.export_results SRC DST
e.g. python -m experiments.export_results runs/noisy_tv_50k \
         docs/results/noisy_tv_50k
"""

import argparse
import os
import re
import shutil
import sys
from typing import List, Optional, Sequence

KEEP = ("results.md", "metrics.csv", "config.json", "done.json")
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
    for name in chosen:
      target = os.path.normpath(os.path.join(dst, rel, name))
      os.makedirs(os.path.dirname(target), exist_ok=True)
      shutil.copy2(os.path.join(directory, name), target)
      copied.append(target)
  return copied


# [text](target) or ![alt](target), as tests/test_docs_links.py reads them.
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(\s*<?([^)\s>]+)>?\s*\)")
_EXTERNAL = ("http://", "https://", "mailto:", "ftp://")
PRUNED_NOTE = ("({n} link(s) to files not exported (the maps of earlier "
               "evaluations) were removed from this copy; the comparison's "
               "run directories have them.)")


def prune_missing_links(path: str) -> int:
  """Removes from the markdown file `path` the links whose relative target
  does not exist: a line of images only is dropped, another link becomes
  its text. Appends `PRUNED_NOTE` when any went. Returns how many."""
  base = os.path.dirname(path)
  with open(path, encoding="utf-8") as f:
    lines = f.read().split("\n")
  removed = 0

  def missing(target: str) -> bool:
    if target.startswith(_EXTERNAL) or target.startswith("#"):
      return False
    return not os.path.exists(os.path.join(base, target.partition("#")[0]))

  out = []
  for line in lines:
    found = list(_LINK.finditer(line))
    gone = [m for m in found if missing(m.group(3))]
    if not gone:
      out.append(line)
      continue
    removed += len(gone)
    rest = _LINK.sub("", line).strip()
    if not rest and all(m.group(1) == "!" for m in found) and (
        len(gone) == len(found)):
      continue                                   # a line of lost images
    out.append(_LINK.sub(lambda m: m.group(0) if not missing(m.group(3))
                         else m.group(2), line))
  if removed:
    while out and not out[-1].strip():
      out.pop()
    out += ["", PRUNED_NOTE.format(n=removed), ""]
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n".join(out))
  return removed


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
