"""Input validation at the library's boundaries.

Shapes, ranks and dtypes are static under `jax.jit`, so they are checked in
Python while tracing and raise `ValueError` straight away. Values (NaN/inf,
actions out of range) are only known at run time:

* on concrete arrays (un-jitted calls) they are checked with numpy and raise
  `ValueError` straight away;
* inside a jitted function they are checked by a `jax.debug.callback` that
  raises `ValueError` on the host; JAX re-raises it as a runtime error whose
  message contains ours, when the result is used or blocked on.

The run-time checks cost one host callback per check (~0.15 ms on a 2-core
CPU, and each one is a point where XLA must wait for the host). A function
that checks many arrays gathers them with `one_callback()`: the checks
traced inside run as ONE callback, which raises the first failing check's
error, unchanged. `runtime_checks_disabled()` leaves out the traced checks
of a block whose inputs were already checked (the learner checks its batch
once, then calls the networks on it). Performance-critical users may
switch them off everywhere with `set_runtime_checks(False)`. The switches
are read at trace time, so functions that are already compiled keep the
setting they were traced with.
"""

import contextlib
from typing import Iterator, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

_RUNTIME_CHECKS = True
# While `one_callback` is open: the traced checks, to run as one callback.
_PENDING: Optional[List[Tuple[jax.Array, str, str, str]]] = None


def set_runtime_checks(enabled: bool) -> None:
  """Enables or disables the run-time value checks (NaN/inf, ranges)."""
  global _RUNTIME_CHECKS
  _RUNTIME_CHECKS = bool(enabled)


def runtime_checks_enabled() -> bool:
  """Whether run-time value checks are traced into library functions."""
  return _RUNTIME_CHECKS


@contextlib.contextmanager
def runtime_checks_disabled() -> Iterator[None]:
  """Within the block, traced value checks are left out (trace time only).

  For code whose inputs were checked already, e.g. the learner's networks
  on a batch the learner checked once (`agents.ngu.learning.sgd_step`).
  Eager checks (concrete arrays) still run.
  """
  global _RUNTIME_CHECKS
  saved, _RUNTIME_CHECKS = _RUNTIME_CHECKS, False
  try:
    yield
  finally:
    _RUNTIME_CHECKS = saved


@contextlib.contextmanager
def one_callback() -> Iterator[None]:
  """Traced value checks within the block run as ONE host callback.

  The checks are traced as usual; on leaving the block, one
  `jax.debug.callback` receives every check's per-lane flags and raises the
  error of the first failing one (the same message as on its own). Only for
  checks traced at the block's own level, not inside a `lax.scan` /
  `while_loop` body or a nested transformation opened within it (their
  tracers cannot leave it). Nested blocks join the outermost one.
  """
  global _PENDING
  if _PENDING is not None:
    yield
    return
  _PENDING = []
  try:
    yield
    pending = _PENDING
  finally:
    _PENDING = None
  if not pending:
    return
  labels = [(what, name, where) for _, what, name, where in pending]

  def raise_first(*flags):
    for bad, (what, name, where) in zip(flags, labels):
      _raise_if_any(bad, what, name, where)

  jax.debug.callback(raise_first, *[bad for bad, _, _, _ in pending])


def is_traced(x) -> bool:
  """Whether `x` is a tracer (inside jit/vmap/grad) rather than a value."""
  return isinstance(x, jax.core.Tracer)


_is_traced = is_traced


def check_rank(x, rank: int, name: str, where: str) -> None:
  """Raises ValueError unless `x` has the given rank."""
  if np.ndim(x) != rank:
    raise ValueError(
        f"{where}: `{name}` must have rank {rank}, got shape {np.shape(x)}.")


def check_shape(x, shape: Sequence[Optional[int]], name: str,
                where: str) -> None:
  """Raises ValueError unless `x` matches `shape` (None matches any size)."""
  actual = np.shape(x)
  if len(actual) != len(shape) or any(
      s is not None and s != a for s, a in zip(shape, actual)):
    expected = "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"
    raise ValueError(
        f"{where}: `{name}` must have shape {expected}, got {tuple(actual)}.")


def check_floating(x, name: str, where: str) -> None:
  """Raises ValueError unless `x` has a floating-point dtype."""
  dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
  if not jnp.issubdtype(dtype, jnp.floating):
    raise ValueError(f"{where}: `{name}` must be floating point, got dtype "
                     f"{dtype}.")


def _lanes_message(bad: np.ndarray, what: str, name: str, where: str) -> str:
  lanes = np.flatnonzero(bad)
  shown = lanes[:16].tolist()
  more = "" if lanes.size <= 16 else f" (and {lanes.size - 16} more)"
  return f"{where}: `{name}` {what} in lane(s) {shown}{more}."


def _raise_if_any(bad, what: str, name: str, where: str) -> None:
  """Raises ValueError naming the lanes (leading axis) where `bad` is set."""
  bad = np.asarray(bad)
  if bad.ndim == 0:
    bad = bad[None]
  bad = bad.reshape(bad.shape[0], -1).any(axis=-1)
  if bad.any():
    raise ValueError(_lanes_message(bad, what, name, where))


def check_values(bad, what: str, name: str, where: str) -> None:
  """Raises (eagerly or from a jitted function) if any entry of `bad` is set.

  Args:
    bad: boolean array whose leading axis is the batch (lane) axis.
    what: description of the problem, e.g. "contains NaN or inf".
    name: argument name.
    where: the public function, e.g. "episodic.step".
  """
  if not _is_traced(bad):
    _raise_if_any(bad, what, name, where)
  elif _RUNTIME_CHECKS:
    if _PENDING is not None:
      # One flag per lane, so that the single callback moves little data.
      lanes = bad[None] if bad.ndim == 0 else bad
      _PENDING.append((jnp.any(lanes.reshape(lanes.shape[0], -1), axis=1),
                       what, name, where))
    else:
      jax.debug.callback(lambda b: _raise_if_any(b, what, name, where), bad)


def check_finite(x, name: str, where: str) -> None:
  """Rejects NaN/inf in `x` (leading axis = lanes), naming the lanes."""
  if not _is_traced(x):
    _raise_if_any(~np.isfinite(np.asarray(x)), "contains NaN or inf", name,
                  where)
  elif _RUNTIME_CHECKS:
    check_values(~jnp.isfinite(x), "contains NaN or inf", name, where)


def check_in_range(x, low: int, high: int, name: str, where: str) -> None:
  """Rejects entries of integer `x` outside [low, high), naming the lanes."""
  what = f"has values outside [{low}, {high})"
  if not _is_traced(x):
    x = np.asarray(x)
    _raise_if_any((x < low) | (x >= high), what, name, where)
  elif _RUNTIME_CHECKS:
    check_values((x < low) | (x >= high), what, name, where)


def check_closed_range(x, low: float, high: float, name: str,
                       where: str) -> None:
  """Rejects entries of `x` (leading axis = lanes) outside [low, high]."""
  if is_traced(x) and not _RUNTIME_CHECKS:
    return
  check_values((x < low) | (x > high), f"has values outside [{low}, {high}]",
               name, where)


def check_binary(x, name: str, where: str) -> None:
  """Rejects entries of a mask (leading axis = lanes) other than 0 and 1."""
  if is_traced(x) and not _RUNTIME_CHECKS:
    return
  check_values((x != 0) & (x != 1), "has values other than 0 and 1", name,
               where)
