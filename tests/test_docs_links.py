"""Every relative link in README.md, docs/*.md and the exported results
pages (docs/results/**/results.md) resolves.

A link `[text](path)` or image `![alt](path)` must name a file or directory
that exists, relative to the page it is on; a link with an anchor
(`path.md#section`, `#section`) must name a heading of that page, slugged as
GitHub does (lower case, punctuation dropped, spaces to hyphens, `-1`, `-2`
for repeats). External links (http, https, mailto) are not checked. Links
inside fenced code blocks and inline code are not links.
"""

import collections
import os
import re
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")
# [text](target) or ![alt](target); the text may hold inline code, not "]".
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXTERNAL = ("http://", "https://", "mailto:", "ftp://")


def pages() -> List[str]:
  """README.md, the top-level pages of docs/ and every results.md under
  docs/results/ (`experiments.export_results`), as paths under ROOT."""
  found = ["README.md"]
  docs = os.path.join(ROOT, "docs")
  if os.path.isdir(docs):
    found += sorted(os.path.join("docs", name) for name in os.listdir(docs)
                    if name.endswith(".md"))
  for directory, subdirs, files in os.walk(os.path.join(docs, "results")):
    subdirs.sort()
    if "results.md" in files:
      found.append(os.path.relpath(os.path.join(directory, "results.md"),
                                   ROOT))
  return found


def _prose_lines(text: str) -> Iterator[Tuple[int, str]]:
  """(line number, line) outside fenced code blocks."""
  in_fence = False
  for number, line in enumerate(text.split("\n"), start=1):
    if _FENCE.match(line):
      in_fence = not in_fence
      continue
    if not in_fence:
      yield number, line


def slug(heading: str) -> str:
  """GitHub's anchor for a heading's text (without the leading #s)."""
  text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links -> text
  text = text.lower()
  text = re.sub(r"[^\w\- ]", "", text)
  return text.replace(" ", "-")


def anchors(path: str, root: str = ROOT) -> Set[str]:
  """The anchors of the headings of the page at `path` (under `root`)."""
  with open(os.path.join(root, path), encoding="utf-8") as f:
    text = f.read()
  seen: Dict[str, int] = collections.Counter()
  result = set()
  for _, line in _prose_lines(text):
    match = _HEADING.match(line)
    if not match:
      continue
    base = slug(match.group(2))
    name = base if seen[base] == 0 else f"{base}-{seen[base]}"
    seen[base] += 1
    result.add(name)
  return result


def links(path: str, root: str = ROOT) -> Iterator[Tuple[int, str]]:
  """(line number, target) of every link on the page at `path`."""
  with open(os.path.join(root, path), encoding="utf-8") as f:
    text = f.read()
  for number, line in _prose_lines(text):
    for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
      yield number, match.group(1)


def broken_links(path: str, root: str = ROOT) -> List[str]:
  """A message for every relative link on `path` that does not resolve."""
  problems = []
  page_dir = os.path.dirname(path)
  for number, target in links(path, root):
    if target.startswith(_EXTERNAL):
      continue
    file_part, _, anchor = target.partition("#")
    linked = (os.path.normpath(os.path.join(page_dir, file_part))
              if file_part else path)
    where = f"{path}:{number}: {target}"
    if not os.path.exists(os.path.join(root, linked)):
      problems.append(f"{where}: no such file {linked}")
      continue
    if anchor:
      if not linked.endswith(".md"):
        problems.append(f"{where}: anchor on a non-markdown file")
      elif anchor not in anchors(linked, root):
        problems.append(f"{where}: no heading #{anchor} in {linked}")
  return problems


def test_slug_follows_github():
  assert slug("Disco Maze: learned f vs RND vs beta = 0 (NGU Fig. 2)") == (
      "disco-maze-learned-f-vs-rnd-vs-beta--0-ngu-fig-2")
  assert slug("The distributed program (Ray)") == "the-distributed-program-ray"
  assert slug("Life-long modulator") == "life-long-modulator"
  assert slug("`ngu_jax.loops`") == "ngu_jaxloops"


def test_the_checker_finds_broken_links(tmp_path):
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "a.md").write_text("# A\n\n## Two words\n")
  (tmp_path / "README.md").write_text(
      "# R\n[ok](docs/a.md#two-words) [dir](docs/) [web](https://x.y)\n"
      "[gone](docs/b.md) [bad anchor](docs/a.md#three) [self](#r)\n"
      "`[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n")
  problems = broken_links("README.md", str(tmp_path))
  assert len(problems) == 2, problems
  assert "no such file docs/b.md" in problems[0]
  assert "no heading #three" in problems[1]


@pytest.mark.parametrize("page", pages())
def test_relative_links_resolve(page):
  assert broken_links(page) == []
