"""The Makefile names only tests that exist (a renamed test must not leave a
target that collects nothing: `make test-reverb` names single tests)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _node_ids():
  text = (ROOT / "Makefile").read_text()
  return re.findall(r"(tests/[\w/]+\.py)::(\w+)", text)


def test_every_test_node_the_makefile_names_exists():
  ids = _node_ids()
  assert ids, "the Makefile names no single test (the pattern is stale?)"
  missing = [f"{path}::{name}" for path, name in ids
             if not (ROOT / path).exists() or not re.search(
                 rf"^def {name}\(", (ROOT / path).read_text(), re.M)]
  assert not missing, f"the Makefile names tests that do not exist: {missing}"
