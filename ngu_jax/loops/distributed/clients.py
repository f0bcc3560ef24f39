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

A node that dies is restarted by Ray and reloads its last checkpoint
(`ngu_jax.loops.distributed.launcher`, "Faults"). The clients ride it out:
a call that fails because its node died or is restarting
(`ray.exceptions.RayActorError`) is sent again, every `RETRY_S`, until the
node answers, `should_stop()` turns true, or `RECOVERY_TIMEOUT_S` passes
(then the error is raised). An insert that failed with its node is sent
again: the lost process took it, or never stored it. A priority update in
flight when the replay died is dropped (the restored replay ignores its
keys, `PrioritizedReplay.skip_keys`); a parameter pull that fails keeps the
parameters held (actors act on while the learner restarts).

`VariableClient` is Acme's VariableClient: `get_variables()` returns the
learner's latest published parameters (a `ray.put` object, published once
per version, not once per actor), fetching the object only when its version
changed. Arrays arrive read-only (Ray's zero-copy numpy); the jitted actor
step only reads them. `staleness` is how many learner steps the parameters
an actor acted with were behind the version it pulled next.
"""

import logging
import time
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np

WAIT_S = 0.5
"""Seconds one replay call waits inside the node before the client checks
`should_stop` and calls again."""

RETRY_S = 0.5
"""Seconds between calls to a node that died or is restarting."""

PULL_BACKOFF_S = 5.
"""After a parameter pull failed (the learner down), seconds during which
`VariableClient` returns the parameters held without asking (a call to a
restarting node takes seconds to fail)."""

RECOVERY_TIMEOUT_S = 600.
"""How long a client waits for a dead node to come back before it raises
(Ray gives up on a node after its `max_restarts`; the driver then stops the
program, so this bound only matters when nobody does)."""


class Stopped(Exception):
  """A blocked call gave up because its node is stopping."""


def _never() -> bool:
  return False


def _node_lost_errors(ray) -> Tuple[type, ...]:
  """The errors of a call whose node died, is restarting, or whose object's
  owner died (a learner's published parameters)."""
  return (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError)


def call(method, *args, should_stop: Callable[[], bool] = _never,
         what: str = "call", timeout: float = RECOVERY_TIMEOUT_S) -> Any:
  """`ray.get(method.remote(*args))`, sent again while its node is down.

  Raises:
    Stopped: `should_stop()` turned true while the node was down.
    ray.exceptions.RayActorError: the node did not come back within
      `timeout` seconds (dead for good).
  """
  import ray  # pylint: disable=g-import-not-at-top
  lost = _node_lost_errors(ray)
  since = None
  while True:
    try:
      return ray.get(method.remote(*args))
    except lost as e:
      now = time.monotonic()
      if since is None:
        since = now
        logging.warning("%s: its node is down (%s); calling again every "
                        "%.1f s.", what, type(e).__name__, RETRY_S)
      if should_stop():
        raise Stopped(f"{what}: stopped while its node was down.") from e
      if now - since >= timeout:
        raise
      time.sleep(RETRY_S)


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
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
      wait = WAIT_S if deadline is None else max(
          0., min(WAIT_S, deadline - time.monotonic()))
      result = call(method, *args, wait, should_stop=self._should_stop,
                    what=f"ReplayClient.{what}")
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
    items = list(items)
    if self._max_insert is None:
      self._max_insert = call(
          self._handle.max_insert_size, should_stop=self._should_stop,
          what="ReplayClient.insert") or 0
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
    next step and still sees every error of the replay (but for its node's
    death: that update is dropped, module docstring).
    """
    self.wait_for_updates()
    self._pending_update = self._handle.update_priorities.remote(
        np.asarray(keys), np.asarray(priorities))

  def wait_for_updates(self) -> None:
    """Waits for the priority update in flight (raises its error)."""
    import ray  # pylint: disable=g-import-not-at-top
    if self._pending_update is not None:
      pending, self._pending_update = self._pending_update, None
      try:
        ray.get(pending)
      except ray.exceptions.RayActorError as e:
        logging.warning("ReplayClient.update_priorities: dropped an update "
                        "the replay node did not acknowledge (%s).",
                        type(e).__name__)

  @property
  def size(self) -> int:
    return int(call(self._handle.info, should_stop=self._should_stop,
                    what="ReplayClient.size")["size"])


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
    self.failed_pulls = 0  # Pulls answered with the parameters held.
    self._waited = 0.
    self._retry_at = 0.

  @property
  def version(self) -> int:
    """The learner step of the parameters held (-1 before the first pull)."""
    return self._version

  def get_variables(self, names: Optional[Sequence[str]] = None) -> Any:
    """The latest published parameters (fetched only if newer).

    While the learner is down (died, restarting) the parameters held are
    returned, without asking again for `PULL_BACKOFF_S` after a failed
    pull; before the first pull, the call waits for the learner (up to
    `RECOVERY_TIMEOUT_S`). A restarted learner publishes the older version
    of its checkpoint: it is taken (staleness 0).
    """
    del names
    import ray  # pylint: disable=g-import-not-at-top
    lost = _node_lost_errors(ray)
    if self._params is not None and time.monotonic() < self._retry_at:
      self.failed_pulls += 1
      return self._params
    while True:
      try:
        version, (ref,) = ray.get(self._learner.get_params_ref.remote())
        self.pulls += 1
        if version == self._version:
          self.staleness = 0
          return self._params
        params = ray.get(ref)
        self._waited = 0.
        break
      except lost as e:
        if self._params is not None:
          self.failed_pulls += 1
          self._retry_at = time.monotonic() + PULL_BACKOFF_S
          if self.failed_pulls == 1:
            logging.warning("VariableClient: the learner is down (%s); "
                            "acting on with version %d.", type(e).__name__,
                            self._version)
          return self._params
        time.sleep(RETRY_S)
        self._waited += RETRY_S
        if self._waited >= RECOVERY_TIMEOUT_S:
          raise
    if self._version >= 0:
      self.staleness = max(0, version - self._version)
    self._params, self._version = params, version
    return self._params
