"""Backends of the shared replay interface suite.

`make_replay(**kwargs)` builds the backend under test: the embedded
`PrioritizedReplay`, or `ReverbReplay` (marked `reverb`; skipped with a
reason where Reverb cannot be imported, e.g. in the main environment).
With NGU_JAX_REQUIRE_REVERB=1 (set by `make test-reverb`) an unimportable
Reverb fails those tests instead, so CI cannot skip them silently.
"""

import os

import pytest

from ngu_jax.replay import PrioritizedReplay

BACKENDS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("reverb", id="reverb", marks=pytest.mark.reverb),
]


def reverb_backend():
  """The reverb_tables module, or a skip saying why it is unavailable."""
  try:
    from ngu_jax.replay import reverb_tables  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    cause = e.__cause__ or e
    if os.environ.get("NGU_JAX_REQUIRE_REVERB") == "1":
      pytest.fail(f"NGU_JAX_REQUIRE_REVERB=1 but Reverb is not importable: {e}")
    pytest.skip(f"Reverb backend not importable here ({cause!r:.80}); it is "
                "tested in its own environment by `make test-reverb`.")
  return reverb_tables


@pytest.fixture(params=BACKENDS)
def backend(request):
  return request.param


@pytest.fixture
def make_replay(backend):
  made = []

  def make(**kwargs):
    if backend == "embedded":
      replay = PrioritizedReplay(**kwargs)
    else:
      replay = reverb_backend().ReverbReplay(**kwargs)
    made.append(replay)
    return replay

  yield make
  for replay in made:
    if hasattr(replay, "close"):
      replay.close()
