"""Tests for ngu_jax._checks: fused and scoped run-time value checks."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import _checks


def _two_checks(x, y):
  _checks.check_finite(x, "x", "f")
  _checks.check_in_range(y, 0, 3, "y", "f")
  return x.sum() + y.sum()


def _num_callbacks(fn, *args):
  return jax.jit(fn).lower(*args).as_text().count("callback")


def _fused(x, y):
  with _checks.one_callback():
    return _two_checks(x, y)


def _args(x_bad=False, y_bad=False):
  x = np.zeros((4, 2), np.float32)
  y = np.zeros((4,), np.int32)
  if x_bad:
    x[2, 1] = np.nan
  if y_bad:
    y[1] = 5
  return jnp.asarray(x), jnp.asarray(y)


def test_one_callback_traces_a_single_callback():
  assert _num_callbacks(_two_checks, *_args()) == 2
  assert _num_callbacks(_fused, *_args()) == 1


@pytest.mark.parametrize("x_bad, y_bad, message", [
    (True, False, "f: `x` contains NaN or inf in lane(s) [2]."),
    (False, True, "f: `y` has values outside [0, 3) in lane(s) [1]."),
    (True, True, "f: `x` contains NaN or inf in lane(s) [2]."),  # The first.
])
def test_one_callback_raises_the_first_failing_check(x_bad, y_bad, message):
  args = _args(x_bad, y_bad)
  with pytest.raises(Exception, match=re.escape(message)):
    jax.block_until_ready(jax.jit(_fused)(*args))
  with pytest.raises(ValueError):  # Eagerly: straight away.
    _fused(*args)


def test_one_callback_passes_good_values():
  np.testing.assert_allclose(jax.jit(_fused)(*_args()), 0.)


def test_nested_blocks_join_the_outer_one():
  def nested(x, y):
    with _checks.one_callback():
      _checks.check_finite(x, "x", "outer")
      with _checks.one_callback():
        _checks.check_in_range(y, 0, 3, "y", "inner")
    return x.sum()
  assert _num_callbacks(nested, *_args()) == 1
  with pytest.raises(Exception, match="inner: `y`"):
    jax.block_until_ready(jax.jit(nested)(*_args(y_bad=True)))


def test_runtime_checks_disabled_is_scoped_and_leaves_eager_checks():
  def unchecked(x, y):
    with _checks.runtime_checks_disabled():
      return _two_checks(x, y)
  assert _num_callbacks(unchecked, *_args()) == 0
  assert _checks.runtime_checks_enabled()  # Restored after the block.
  with pytest.raises(ValueError, match="`x` contains NaN"):
    unchecked(*_args(x_bad=True))  # Concrete values: checked eagerly.
  jax.block_until_ready(jax.jit(unchecked)(*_args(x_bad=True)))


def test_state_is_restored_after_an_error_in_the_block():
  with pytest.raises(RuntimeError):
    with _checks.one_callback():
      raise RuntimeError("boom")
  assert _checks._PENDING is None
  with pytest.raises(RuntimeError):
    with _checks.runtime_checks_disabled():
      raise RuntimeError("boom")
  assert _checks.runtime_checks_enabled()
