"""Prioritised sequence replay in a Reverb table (the `[reverb]` extra).

The same interface as `ngu_jax.replay.PrioritizedReplay` (NGU App. A, R2D2
Sec. 2.3; docs/design.md#priorities) over a Reverb server started by
this object and a client of it: one table with a Prioritized(alpha) sampler,
a Fifo remover, `max_size` = capacity, and a MinSize(min_size) rate limiter,
or SampleToInsertRatio(samples_per_insert, min_size, error_buffer) when
`samples_per_insert` is given. Items are written with a trajectory writer
(one appended step per item, whose columns are the item's leaves) and
priorities are mutated by key.

Reverb needs tensorflow-cpu 2.15, numpy < 2 and jax <= 0.4.30, so it lives in
its own environment: `pip install -e ".[reverb]"` in a fresh Python 3.11
virtual environment, or `make test-reverb` (requirements/reverb.txt).

Differences from the embedded backend, all due to Reverb:
* keys are Reverb's random uint64 item keys, and `insert` returns None;
* sampling uses Reverb's own RNG: `seed` is accepted for interface
  compatibility but not used, and samples are not reproducible;
* `save` writes a Reverb checkpoint (plus a JSON file of the layout and the
  maximum priority); `restore` restarts the server from it;
* the maximum priority given to new items is tracked by this wrapper and
  includes updates of keys that Reverb had already evicted;
* the Reverb server listens on all interfaces of the given (default: a free)
  port; Reverb 0.14 offers no bind address. The client connects through
  localhost (and, in the same process, Reverb bypasses gRPC entirely).
"""

import json
import os
import shutil
import tempfile
import threading
import time
from typing import Any, Optional, Sequence, Tuple

import numpy as np

try:
  import reverb  # pylint: disable=g-import-not-at-top
except ImportError as e:  # pragma: no cover - depends on the environment.
  raise ImportError(
      "ngu_jax.replay.reverb_tables needs dm-reverb, which only installs "
      "beside tensorflow-cpu 2.15, numpy < 2 and jax <= 0.4.30. Create a "
      "separate Python 3.11 virtual environment and run "
      "`pip install -r requirements/reverb.txt && pip install --no-deps -e .` "
      "(or `pip install -e \".[reverb]\"`; `make test-reverb` does it all). "
      "Without Reverb, use ngu_jax.replay.PrioritizedReplay.") from e

from ngu_jax.replay import prioritized
from ngu_jax.replay.prioritized import ReplayNotReadyError

_POLL_S = 0.002


class ReverbReplay(prioritized.ReplayTable):
  """Prioritised replay in a Reverb table; see the module docstring.

  Blocking follows `PrioritizedReplay`: `timeout` 0 (default) raises
  `ReplayNotReadyError` at once when a sample (below `min_size`, or refused
  by the rate limiter) or an insert (refused by the rate limiter) cannot
  proceed, t > 0 waits up to t seconds, None waits forever. The check uses
  the table's counters, then the call goes to Reverb, which may still block
  briefly if another client took the budget meanwhile.

  Thread safety: inserts share one trajectory writer under a lock; samples
  and priority updates go through the (thread-safe) Reverb client.
  """

  def __init__(self, capacity: int, priority_exponent: float = 0.9,
               importance_exponent: float = 0.6, min_size: int = 6250,
               seed: int = 0, samples_per_insert: Optional[float] = None,
               error_buffer: Optional[float] = None,
               table_name: str = "ngu_priority_table",
               port: Optional[int] = None):
    """Starts a Reverb server with one prioritised table, and a client.

    Args:
      capacity: max_size of the table, in items (sequences); FIFO removal.
      priority_exponent: alpha of the Prioritized sampler (Table 6: 0.9).
      importance_exponent: beta of the importance weights (Table 6: 0.6).
      min_size: items needed before sampling (MinSize rate limiter, or the
        min_size_to_sample of SampleToInsertRatio).
      seed: unused (Reverb seeds its own RNG); kept for the shared interface.
      samples_per_insert: None, or the SampleToInsertRatio target ratio.
      error_buffer: SampleToInsertRatio tolerance; default as
        `PrioritizedReplay`.
      table_name: name of the Reverb table.
      port: server port; default: a free port.
    """
    self._configure(capacity, priority_exponent, importance_exponent,
                    min_size, seed, samples_per_insert, error_buffer,
                    "ReverbReplay")
    self._table = table_name
    self._port = port
    self._max_priority = 1.0
    self._structure = None
    self._specs = None
    self._lock = threading.Lock()
    self._server = None
    self._writer = None
    self._start(fallback_checkpoint=None)

  def _start(self, fallback_checkpoint: Optional[str]) -> None:
    if self._spi is None:
      limiter = reverb.rate_limiters.MinSize(self._min_size)
    else:
      limiter = reverb.rate_limiters.SampleToInsertRatio(
          samples_per_insert=self._spi, min_size_to_sample=self._min_size,
          error_buffer=self._error_buffer)
    table = reverb.Table(
        name=self._table,
        sampler=reverb.selectors.Prioritized(self._alpha),
        remover=reverb.selectors.Fifo(),
        max_size=self._capacity,
        rate_limiter=limiter)
    self._checkpoint_root = tempfile.mkdtemp(prefix="ngu_jax_reverb_")
    checkpointer = reverb.checkpointers.DefaultCheckpointer(
        self._checkpoint_root, fallback_checkpoint_path=fallback_checkpoint)
    self._server = reverb.Server([table], port=self._port,
                                 checkpointer=checkpointer)
    self._client = reverb.Client(f"localhost:{self._server.port}")
    self._writer = self._client.trajectory_writer(num_keep_alive_refs=1)

  def close(self) -> None:
    """Stops the server (its contents are lost unless saved)."""
    with self._lock:
      self._stop()

  def _stop(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None
    if self._server is not None:
      self._server.stop()
      self._server = None
      shutil.rmtree(self._checkpoint_root, ignore_errors=True)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  @property
  def server_address(self) -> str:
    """The address clients in other processes connect to."""
    return f"localhost:{self._server.port}"

  @property
  def client(self) -> "reverb.Client":
    return self._client

  @property
  def size(self) -> int:
    """Number of items currently in the table."""
    return int(self._info().current_size)

  @property
  def max_priority(self) -> float:
    return self._max_priority

  @property
  def inserted(self) -> int:
    """Items inserted, as the table's rate limiter counts them."""
    return self._counts()[1]

  @property
  def sampled(self) -> int:
    """Items sampled, as the table's rate limiter counts them."""
    return self._counts()[2]

  def _info(self):
    return self._client.server_info()[self._table]

  # ---------------------------------------------------------- rate limiting

  def _counts(self) -> Tuple[int, int, int]:
    info = self._info()
    stats = info.rate_limiter_info
    return (int(info.current_size), int(stats.insert_stats.completed),
            int(stats.sample_stats.completed))

  def _can_sample(self, n: int) -> bool:
    return self._limiter.can_sample(*self._counts(), n)

  def _can_insert(self, m: int) -> bool:
    return self._limiter.can_insert(*self._counts(), m)

  def _wait(self, ready, timeout: Optional[float], message) -> None:
    deadline = None if timeout is None else time.monotonic() + timeout
    while not ready():
      if deadline is not None and time.monotonic() >= deadline:
        raise ReplayNotReadyError(message())
      time.sleep(_POLL_S)

  # ------------------------------------------------------------------ insert

  @property
  def max_insert_size(self) -> Optional[int]:
    """The most items one `insert` can be granted (None: no limit)."""
    return self._limiter.max_insert_size()

  def insert(self, items: Sequence[Any],
             priorities: Optional[Sequence[float]] = None,
             timeout: Optional[float] = 0.) -> None:
    """Inserts items (one Reverb item each); see `PrioritizedReplay.insert`.

    Returns when Reverb has confirmed every item. Returns None: Reverb's
    trajectory writer does not expose the keys it generates.
    """
    where = "ReverbReplay.insert"
    items = prioritized.check_items_list(items, where)
    m = len(items)
    if m == 0:
      return None
    if priorities is not None:
      priorities = prioritized.check_priorities(priorities, m, where)
    flat = [prioritized.flatten(item) for item in items]
    if self._structure is None:
      structure = flat[0][1]
      specs = prioritized.leaf_specs(flat[0][0])
    else:
      structure, specs = self._structure, self._specs
    for i, (leaves, s) in enumerate(flat):
      prioritized.check_item(leaves, s, structure, specs, i, where)
    self._limiter.check_insert_size(m, where)
    with self._lock:
      self._wait(lambda: self._can_insert(m), timeout,
                 lambda: f"{where}: the rate limiter refuses {m} more inserts"
                 "; sample more first.")
      self._structure, self._specs = structure, specs
      if priorities is None:
        priorities = np.full(m, self._max_priority)
      else:
        self._max_priority = max(self._max_priority, float(priorities.max()))
      for (leaves, _), priority in zip(flat, priorities):
        self._writer.append(leaves)
        self._writer.create_item(
            self._table, priority=float(priority),
            trajectory=[column[-1] for column in self._writer.history])
      self._writer.flush()
    return None

  # ------------------------------------------------------------------ sample

  def sample(self, batch_size: int, timeout: Optional[float] = 0.
            ) -> Tuple[np.ndarray, Any, np.ndarray]:
    """Samples `batch_size` items; see `PrioritizedReplay.sample`.

    Returns:
      (keys uint64 [n], items stacked [n, ...], importance weights float32
      [n], from Reverb's sampling probabilities and table size).
    """
    where = "ReverbReplay.sample"
    n = self._limiter.check_sample_size(batch_size, where)

    def message():
      size, inserted, sampled = self._counts()
      if size < self._min_size:
        return (f"{where}: the table holds {size} items, fewer than "
                f"min_size={self._min_size}; insert more first (or pass a "
                "timeout to wait for another thread's inserts).")
      return (f"{where}: the rate limiter (samples_per_insert={self._spi}, "
              f"error_buffer={self._error_buffer}) refuses {n} more samples "
              f"after {sampled} samples and {inserted} inserts.")

    self._wait(lambda: self._can_sample(n), timeout, message)
    keys = np.empty(n, np.uint64)
    probabilities = np.empty(n, np.float64)
    table_size = 0
    columns = None
    for i, sample in enumerate(self._client.sample(
        self._table, num_samples=n, emit_timesteps=False)):
      keys[i] = sample.info.key
      probabilities[i] = sample.info.probability
      table_size = max(table_size, int(sample.info.table_size))
      if columns is None:
        columns = [np.empty((n,) + np.shape(x), np.asarray(x).dtype)
                   for x in sample.data]
      for column, x in zip(columns, sample.data):
        column[i] = x
    weights = prioritized.importance_weights(probabilities, table_size,
                                             self._beta)
    return keys, prioritized.unflatten(self._structure, columns), weights

  # -------------------------------------------------------------- priorities

  def update_priorities(self, keys: Sequence[int],
                        priorities: Sequence[float]) -> None:
    """Mutates priorities by key; see `PrioritizedReplay.update_priorities`.

    Keys no longer in the table are ignored (by Reverb).
    """
    keys, priorities = prioritized.check_update(
        keys, priorities, "ReverbReplay.update_priorities")
    if keys.size == 0:
      return
    updates = {int(k): float(p) for k, p in zip(keys, priorities)}
    self._client.mutate_priorities(self._table, updates=updates)
    with self._lock:
      self._max_priority = max(self._max_priority, float(priorities.max()))

  # ------------------------------------------------------------ persistence

  def save(self, path: str) -> None:
    """Writes a Reverb checkpoint to `path/reverb_checkpoint` and the layout
    and maximum priority to `path/replay.json`."""
    os.makedirs(path, exist_ok=True)
    with self._lock:
      self._writer.flush()
      checkpoint = self._client.checkpoint()
      target = os.path.join(path, "reverb_checkpoint")
      shutil.rmtree(target, ignore_errors=True)
      shutil.copytree(checkpoint, target)
      meta = {
          "format": "ngu_jax.ReverbReplay",
          "version": 1,
          "config": self._config(),
          "table": self._table,
          "max_priority": self._max_priority,
          "structure": (None if self._structure is None else
                        prioritized.structure_to_json(self._structure)),
          "specs": (None if self._specs is None else
                    [[list(s), np.dtype(d).str] for s, d in self._specs]),
      }
      with open(os.path.join(path, "replay.json.tmp"), "w") as f:
        json.dump(meta, f)
      os.replace(os.path.join(path, "replay.json.tmp"),
                 os.path.join(path, "replay.json"))

  def restore(self, path: str) -> None:
    """Restarts the server from the checkpoint saved at `path`.

    Raises:
      ValueError: on a file of another format or a configuration mismatch.
    """
    where = "ReverbReplay.restore"
    with open(os.path.join(path, "replay.json")) as f:
      meta = json.load(f)
    if meta.get("format") != "ngu_jax.ReverbReplay":
      raise ValueError(f"{where}: {path} does not hold a ReverbReplay.")
    mismatched = {k: (v, meta["config"].get(k))
                  for k, v in self._config().items()
                  if meta["config"].get(k) != v}
    if mismatched or meta["table"] != self._table:
      raise ValueError(f"{where}: configuration differs from the saved one "
                       f"(current, saved): {mismatched}, table "
                       f"{self._table!r} vs {meta['table']!r}.")
    with self._lock:
      self._stop()
      self._start(fallback_checkpoint=os.path.join(path, "reverb_checkpoint"))
      self._max_priority = float(meta["max_priority"])
      self._structure = (None if meta["structure"] is None else
                         prioritized.structure_from_json(meta["structure"]))
      self._specs = (None if meta["specs"] is None else
                     [(tuple(s), np.dtype(d)) for s, d in meta["specs"]])
