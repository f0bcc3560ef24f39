"""Tests specific to ngu_jax.replay.reverb_tables (the `[reverb]` extra).

The shared interface suite (test_interface.py, test_integration.py) runs on
Reverb too; here: the ImportError without Reverb, and what only Reverb does
(uint64 keys, the SampleToInsertRatio rate limiter through the table's
counters).
"""

import importlib
import importlib.util

import numpy as np
import pytest

from ngu_jax.replay import ReplayNotReadyError
from tests.replay.conftest import reverb_backend
from tests.replay.test_interface import assert_consistent, item


def test_import_error_says_how_to_install_the_extra():
  if importlib.util.find_spec("reverb") is not None:
    pytest.skip("Reverb is installed here.")
  with pytest.raises(ImportError, match=r"requirements/reverb\.txt") as e:
    importlib.import_module("ngu_jax.replay.reverb_tables")
  assert "[reverb]" in str(e.value) and "make test-reverb" in str(e.value)


@pytest.mark.reverb
def test_reverb_keys_and_table():
  reverb_tables = reverb_backend()
  with reverb_tables.ReverbReplay(capacity=8, min_size=2,
                                  table_name="t") as replay:
    assert replay.insert([item(0), item(1)], priorities=[1., 2.]) is None
    info = replay.client.server_info()["t"]
    assert info.max_size == 8 and info.current_size == 2
    keys, batch, weights = replay.sample(5)
    assert keys.dtype == np.uint64
    assert_consistent(batch, 5)
    assert weights.dtype == np.float32
    assert replay.server_address.startswith("localhost:")


@pytest.mark.reverb
def test_reverb_samples_per_insert_rate_limiter():
  """The same sequence as the embedded limiter's test (min_diff 0,
  max_diff 8), checked through the table's counters before calling
  Reverb, whose own SampleToInsertRatio limiter agrees."""
  reverb_tables = reverb_backend()
  with reverb_tables.ReverbReplay(capacity=100, min_size=2,
                                  samples_per_insert=2.,
                                  error_buffer=4.) as replay:
    info = replay.client.server_info()
    limiter = list(info.values())[0].rate_limiter_info
    assert (limiter.min_diff, limiter.max_diff) == (0., 8.)
    replay.insert([item(0), item(1)])
    replay.sample(4)
    with pytest.raises(ReplayNotReadyError, match="rate limiter"):
      replay.sample(1)
    replay.insert([item(2), item(3)])
    replay.insert([item(4), item(5)])
    with pytest.raises(ReplayNotReadyError, match="rate limiter"):
      replay.insert([item(6)], timeout=0.02)
    replay.sample(8)
    replay.insert([item(6)])
    with pytest.raises(ValueError, match="never be granted"):
      replay.sample(9)
    assert replay.max_insert_size == 4  # 2 m <= 2 error_buffer = 8.
