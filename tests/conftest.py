"""Session-wide test configuration: how `make test` splits the suite.

`make test` runs the suite on pytest-xdist workers (the `test` extra) with
`--dist loadfile` (Makefile): the tests of one file run on one worker, so a
module-scoped fixture (compiled functions, a trained run) is built once, not
once per worker. Here `--dist loadfile` also keeps every test file that uses
the session's local Ray cluster (the `ray_cluster` fixture below) on one
worker: one worker starts one cluster, and two clusters never compete for
the 2 CPUs each asks for. Those files are the ones whose path contains one of
RAY_FILES_CONTAIN (tests/loops/distributed/,
tests/experiments/test_distributed_benchmark.py and test_soak_benchmark.py);
a new Ray test belongs in such a file (`test_ray_files_share_one_worker`
checks that every file using `ray_cluster` is one).

Without xdist, or with another `--dist` mode, nothing is changed.

After each test file, JAX's caches of compiled programs are emptied: a
worker that runs hundreds of files would otherwise keep every program it
ever compiled (about 5 GB per worker by the end of `make test`), and two
workers beside the Ray cluster need more memory than a small machine has.

Tests marked `learning` assert that an agent learns (a claim about a
training run, minutes each): they belong with the experiments, so `make
test` skips them; `make test-learning` (`pytest --learning -m learning`) runs
them.

Programs compiled in one test file are compiled again in the next (the
caches above are emptied) and in every process a test starts (the Ray
program's nodes, `experiments.*` subprocesses). The session therefore
shares JAX's persistent compilation cache: the xdist controller (or the
only process) makes one temporary directory, `JAX_COMPILATION_CACHE_DIR`
points every worker and subprocess at it, and it is removed when the
session ends. A program compiled anywhere in the session (in at least
`JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`) is loaded, not compiled,
everywhere after. Each session starts empty, so `make test`'s time is that
of a fresh machine; set NGU_JAX_TEST_CACHE_DIR to keep a cache across
sessions (or to "" for none).

Ray starts its worker processes at niceness 15 by default; beside another
xdist worker running JAX at niceness 0 they would get a few percent of a
core, and the Ray tests (waits on actors that train) would crawl. The test
cluster's workers run at the test process's niceness instead.
"""

import gc
import os
import shutil
import sys
import tempfile

import pytest

# Read by the raylet that `ray.init` starts, so set before any test starts it.
os.environ.setdefault("RAY_worker_niceness", "0")
# Ray reads RAY_AUTH_MODE when it is imported: token authentication (Ray
# 2.60's default) is set explicitly, never disabled, before any test imports
# Ray.
os.environ.setdefault("RAY_AUTH_MODE", "token")

# The work unit of every test file whose path contains one of these.
RAY_FILES_CONTAIN = ("distributed", "soak_benchmark")
RAY_SCOPE = "ray_cluster"


# Set by the process that made the session's compilation cache directory.
_OWNED_CACHE_DIR = "_NGU_JAX_TEST_OWNED_CACHE_DIR"


def pytest_configure(config):
  """Points this session's processes at one compilation cache (docstring)."""
  del config
  if "PYTEST_XDIST_WORKER" in os.environ or (
      "JAX_COMPILATION_CACHE_DIR" in os.environ):
    return  # A worker (inherits it) or a cache chosen by the caller.
  path = os.environ.get("NGU_JAX_TEST_CACHE_DIR")
  if path is None:
    path = tempfile.mkdtemp(prefix="ngu_jax_test_xla_cache_")
    os.environ[_OWNED_CACHE_DIR] = path
  if path:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = path
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
    if "jax" in sys.modules:  # Imported already (a plugin): tell it too.
      sys.modules["jax"].config.update("jax_compilation_cache_dir", path)


def pytest_unconfigure(config):
  del config
  if "PYTEST_XDIST_WORKER" not in os.environ:
    path = os.environ.pop(_OWNED_CACHE_DIR, None)
    if path:
      shutil.rmtree(path, ignore_errors=True)


def ray_aware_scope(nodeid: str) -> str:
  """The xdist work unit of a test: its file, or RAY_SCOPE for Ray's files."""
  path = nodeid.split("::", 1)[0]
  return RAY_SCOPE if any(k in path for k in RAY_FILES_CONTAIN) else path


@pytest.fixture(scope="session")
def ray_cluster():
  """One local Ray cluster for the whole session (2 CPUs, loopback).

  `ray.init` costs seconds on 2 cores, so every Ray test shares it
  (docs/design.md#dependencies); a cluster some test started already is
  reused. Skipped where Ray is not installed (the Reverb environment). Shut
  down at the end of the session if started here.
  """
  ray = pytest.importorskip("ray")
  started = not ray.is_initialized()
  if started:
    ray.init(num_cpus=2, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False)
  yield ray
  if started:
    ray.shutdown()


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
