"""Clients of the replay and learner nodes, for code that runs in other nodes.

`ReplayClient` gives a `ReplayNode` (a Ray actor hosting the embedded
`PrioritizedReplay`) the replay interface the builder's parts already use
(`insert`, `sample`, `update_priorities`, `size`), so `NGUBuilder`'s
`make_adder` and `make_dataset_iterator` work across processes unchanged.
Calls that the replay's rate limiter (samples per insert, Reverb's
SampleToInsertRatio semantics) refuses are retried in short waits inside
the node until they are granted, the client's `timeout` passes, or
`should_stop()` turns true (then `Stopped` is raised), so that pacing holds
across processes and a stopping program never hangs in a wait.

`VariableClient` is Acme's VariableClient: `get_variables()` returns the
learner's latest published parameters (a `ray.put` object, published once
per version, not once per actor), fetching the object only when its version
changed. Arrays arrive read-only (Ray's zero-copy numpy); the jitted actor
step only reads them. `staleness` is how many learner steps the parameters
an actor acted with were behind the version it pulled next.
"""

import time
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np

WAIT_S = 0.5
"""Seconds one replay call waits inside the node before the client checks
`should_stop` and calls again."""


class Stopped(Exception):
  """A blocked call gave up because its node is stopping."""


def _never() -> bool:
  return False


class ReplayClient:
  """The replay interface over a `ReplayNode` handle (module docstring).

  Args:
    handle: the Ray actor handle of a `ReplayNode`.
    should_stop: polled between waits; True makes blocked calls raise
      `Stopped`.
  """

  def __init__(self, handle: Any,
               should_stop: Callable[[], bool] = _never):
    self._handle = handle
    self._should_stop = should_stop
    self._pending_update = None  # At most one priority update in flight.
    self._max_insert = None  # The node's max_insert_size (0: no limit).

  def _blocking(self, method, args, timeout: Optional[float], what: str):
    import ray  # pylint: disable=g-import-not-at-top
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
      wait = WAIT_S if deadline is None else max(
          0., min(WAIT_S, deadline - time.monotonic()))
      result = ray.get(method.remote(*args, wait))
      if result is not None:
        return result
      if self._should_stop():
        raise Stopped(f"ReplayClient.{what}: stopped while waiting.")
      if deadline is not None and time.monotonic() >= deadline:
        from ngu_jax.replay import prioritized  # pylint: disable=g-import-not-at-top
        raise prioritized.ReplayNotReadyError(
            f"ReplayClient.{what}: not granted within {timeout} s (min_size "
            "or the samples-per-insert rate limit).")

  def insert(self, items: Sequence[Any],
             priorities: Optional[Sequence[float]] = None,
             timeout: Optional[float] = None) -> np.ndarray:
    """Inserts items; returns their keys once the replay acknowledged them.

    Waits while the rate limiter refuses (None: until granted or stopped).
    More items than the rate limiter can grant at once (an actor's lanes
    ending episodes together) go in several acknowledged calls, in order.
    """
    import ray  # pylint: disable=g-import-not-at-top
    items = list(items)
    if self._max_insert is None:
      self._max_insert = ray.get(self._handle.max_insert_size.remote()) or 0
    step = self._max_insert or max(len(items), 1)
    keys = []
    for start in range(0, len(items), step):
      chunk = None if priorities is None else list(
          priorities[start:start + step])
      keys.append(np.asarray(self._blocking(
          self._handle.insert, (items[start:start + step], chunk), timeout,
          "insert")))
    return np.concatenate(keys) if keys else np.zeros((0,), np.int64)

  def sample(self, batch_size: int, timeout: Optional[float] = None
             ) -> Tuple[np.ndarray, Any, np.ndarray]:
    """(keys, items, importance weights), as `PrioritizedReplay.sample`."""
    return self._blocking(self._handle.sample, (batch_size,), timeout,
                          "sample")

  def update_priorities(self, keys: Sequence[int],
                        priorities: Sequence[float]) -> None:
    """Sends new priorities; returns once the previous update landed.

    One update is in flight at a time, so the learner overlaps it with its
    next step and still sees every error of the replay.
    """
    self.wait_for_updates()
    self._pending_update = self._handle.update_priorities.remote(
        np.asarray(keys), np.asarray(priorities))

  def wait_for_updates(self) -> None:
    """Waits for the priority update in flight (raises its error)."""
    import ray  # pylint: disable=g-import-not-at-top
    if self._pending_update is not None:
      pending, self._pending_update = self._pending_update, None
      ray.get(pending)

  @property
  def size(self) -> int:
    import ray  # pylint: disable=g-import-not-at-top
    return int(ray.get(self._handle.info.remote())["size"])


class VariableClient:
  """The learner's latest parameters for an actor (module docstring).

  Args:
    learner: the Ray actor handle of a `LearnerNode`.
  """

  def __init__(self, learner: Any):
    self._learner = learner
    self._version = -1
    self._params = None
    self.staleness = 0
    self.pulls = 0

  @property
  def version(self) -> int:
    """The learner step of the parameters held (-1 before the first pull)."""
    return self._version

  def get_variables(self, names: Optional[Sequence[str]] = None) -> Any:
    """The latest published parameters (fetched only if newer)."""
    del names
    import ray  # pylint: disable=g-import-not-at-top
    version, (ref,) = ray.get(self._learner.get_params_ref.remote())
    self.pulls += 1
    if version != self._version:
      if self._version >= 0:
        self.staleness = version - self._version
      self._params = ray.get(ref)
      self._version = version
    else:
      self.staleness = 0
    return self._params
