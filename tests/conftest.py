"""Session-wide test configuration: how `make test` splits the suite.

`make test` runs the suite on pytest-xdist workers (the `test` extra) with
`--dist loadfile` (Makefile): the tests of one file run on one worker, so a
module-scoped fixture (compiled functions, a trained run) is built once, not
once per worker. Here `--dist loadfile` also keeps every test file that uses
the session's local Ray cluster on one worker: one worker starts one cluster,
and two clusters never compete for the 2 CPUs each asks for. Those files are
the ones whose path contains "distributed" (tests/loops/distributed/ and
tests/experiments/test_distributed_benchmark.py); a new Ray test belongs in
such a file.

Without xdist, or with another `--dist` mode, nothing is changed.

After each test file, JAX's caches of compiled programs are emptied: a
worker that runs hundreds of files would otherwise keep every program it
ever compiled (about 5 GB per worker by the end of `make test`), and two
workers beside the Ray cluster need more memory than a small machine has.

Tests marked `learning` assert that an agent learns (a claim about a
training run, minutes each): they belong with the experiments, so `make
test` skips them; `make test-learning` (`pytest --learning -m learning`) runs
them.

Ray starts its worker processes at niceness 15 by default; beside another
xdist worker running JAX at niceness 0 they would get a few percent of a
core, and the Ray tests (waits on actors that train) would crawl. The test
cluster's workers run at the test process's niceness instead.
"""

import gc
import os
import sys

import pytest

# Read by the raylet that `ray.init` starts, so set before any test starts it.
os.environ.setdefault("RAY_worker_niceness", "0")

# The work unit of every test file whose path contains RAY_FILES_CONTAIN.
RAY_FILES_CONTAIN = "distributed"
RAY_SCOPE = "ray_cluster"


def ray_aware_scope(nodeid: str) -> str:
  """The xdist work unit of a test: its file, or RAY_SCOPE for Ray's files."""
  path = nodeid.split("::", 1)[0]
  return RAY_SCOPE if RAY_FILES_CONTAIN in path else path


def pytest_addoption(parser):
  parser.addoption("--learning", action="store_true", default=False,
                   help="also run the tests marked `learning` (learning "
                        "claims; skipped by default)")


def pytest_collection_modifyitems(config, items):
  if config.getoption("--learning"):
    return
  skip = pytest.mark.skip(reason="a learning claim: run it with `make "
                                 "test-learning` (pytest --learning)")
  for item in items:
    if item.get_closest_marker("learning") is not None:
      item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)  # The hook exists only with xdist.
def pytest_xdist_make_scheduler(config, log):
  if config.getvalue("dist") != "loadfile":
    return None  # xdist's own scheduler for that mode.
  from xdist.scheduler import LoadFileScheduling  # pylint: disable=g-import-not-at-top

  class RayAwareLoadFileScheduling(LoadFileScheduling):

    def _split_scope(self, nodeid):
      return ray_aware_scope(nodeid)

  return RayAwareLoadFileScheduling(config, log)


@pytest.fixture(autouse=True, scope="module")
def free_compiled_programs():
  """Empties JAX's compilation caches after each test file (module
  docstring); the first fixture set up, so the last torn down."""
  yield
  jax = sys.modules.get("jax")
  if jax is not None:
    jax.clear_caches()
    gc.collect()
