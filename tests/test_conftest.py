"""Tests of tests/conftest.py's grouping of the Ray test files.

Every test file that asks for the session's `ray_cluster` must run on the
xdist worker that holds the cluster (`ray_aware_scope` maps it to
RAY_SCOPE); a Ray file outside the group would start a second cluster on
another worker, and two clusters would compete for the 2 CPUs.
"""

import ast
import os

from tests import conftest

TESTS = os.path.dirname(os.path.abspath(__file__))


def _files_using_ray_cluster():
  """Test files with a function that takes `ray_cluster` (found by AST)."""
  found = []
  for root, _, names in os.walk(TESTS):
    for name in names:
      if not (name.startswith("test_") and name.endswith(".py")):
        continue
      path = os.path.join(root, name)
      with open(path) as f:
        tree = ast.parse(f.read(), path)
      if any(isinstance(node, ast.FunctionDef)
             and any(a.arg == "ray_cluster" for a in node.args.args)
             for node in ast.walk(tree)):
        found.append(os.path.relpath(path, os.path.dirname(TESTS)))
  return sorted(found)


def test_ray_files_share_one_worker():
  files = _files_using_ray_cluster()
  assert "tests/experiments/test_soak_benchmark.py" in files
  assert "tests/loops/distributed/test_faults.py" in files
  outside = [f for f in files
             if conftest.ray_aware_scope(f + "::test") != conftest.RAY_SCOPE]
  assert not outside, (
      f"{outside} use ray_cluster but are not grouped with the Ray files: "
      "add their path to tests/conftest.py's RAY_FILES_CONTAIN.")


def test_other_files_keep_their_own_scope():
  nodeid = "tests/loops/test_host.py::test_x"
  assert conftest.ray_aware_scope(nodeid) == "tests/loops/test_host.py"
