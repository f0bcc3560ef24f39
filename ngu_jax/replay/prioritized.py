"""Embedded prioritised sequence replay: float64 sum tree, FIFO, host memory.

NGU App. A and R2D2 (Kapturowski et al., 2019, Sec. 2.3; Schaul et al.,
2016): sequences are sampled with probability P(i) = p_i^alpha / sum_k p_k^alpha
(alpha = `priority_exponent`, 0.9) and corrected with importance-sampling
weights w_i = (N P(i))^-beta (beta = `importance_exponent`, 0.6) normalised by
their maximum over the sampled batch (docs/design.md#priorities).

Interface (shared with `ngu_jax.replay.reverb_tables.ReverbReplay`):

  keys = replay.insert(items, priorities=None)         # list of item pytrees
  keys, batch, weights = replay.sample(batch_size)     # stacked pytree [n, ...]
  replay.update_priorities(keys, priorities)
  replay.size; replay.save(path); replay.restore(path)

Numerics: the tree holds p^alpha in float64 and every internal node is
recomputed as the sum of its two children whenever a leaf below it changes
(never updated by adding deltas), so the total cannot drift however many
updates are applied, and a node's value depends only on the current leaves.

Keys are int64 ids, assigned consecutively from 0 in insertion order and never
reused; the item with id k lives in slot k mod capacity. FIFO eviction
overwrites the oldest slot; priority updates for keys already evicted are
ignored (the learner commonly reports priorities for a batch some of whose
items were overwritten by actors meanwhile).
"""

import json
import math
import os
import sys
import threading
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

_FORMAT_VERSION = 1


class ReplayNotReadyError(RuntimeError):
  """A sample or insert could not proceed within its timeout.

  Raised when sampling from a replay holding fewer than `min_size` items, or
  when the samples-per-insert rate limiter blocks a sample or an insert for
  longer than the call's `timeout`.
  """


# ----------------------------------------------------------------------------
# Pytrees of numpy arrays: dicts (sorted keys, like jax.tree_util), lists,
# tuples and NamedTuples; every other node is a leaf (converted to ndarray).


def _is_namedtuple(x) -> bool:
  return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree) -> Tuple[List[np.ndarray], Any]:
  """Flattens a pytree into (leaves, structure); see `unflatten`."""
  leaves = []
  return leaves, _flatten_into(tree, leaves)


def _flatten_into(node, leaves):
  # Module-level recursion (no self-referencing closure): a closure cycle
  # would keep every item's arrays alive until the cyclic GC runs.
  if node is None:  # An optional field left out (e.g. SequenceItem.tau).
    return ("none", None, None)
  if isinstance(node, dict):
    keys = sorted(node)
    return ("dict", keys, [_flatten_into(node[k], leaves) for k in keys])
  if _is_namedtuple(node):
    return ("namedtuple", type(node), [_flatten_into(v, leaves) for v in node])
  if isinstance(node, (list, tuple)):
    return (type(node).__name__, None,
            [_flatten_into(v, leaves) for v in node])
  leaves.append(np.asarray(node))
  return ("leaf", None, None)


def unflatten(structure, leaves: Sequence[Any]):
  """Inverse of `flatten`: rebuilds the pytree from its leaves in order."""
  return _build(structure, iter(leaves))


def _build(node, it):
  kind, aux, children = node
  if kind == "leaf":
    return next(it)
  if kind == "none":
    return None
  values = [_build(c, it) for c in children]
  if kind == "dict":
    return dict(zip(aux, values))
  if kind == "namedtuple":
    return aux(*values)
  return list(values) if kind == "list" else tuple(values)


def structure_to_json(structure) -> Any:
  """A JSON-able description of a `flatten` structure (no code, no pickle)."""
  kind, aux, children = structure
  if kind in ("leaf", "none"):
    return kind
  out = {"kind": kind, "children": [structure_to_json(c) for c in children]}
  if kind == "dict":
    if not all(isinstance(k, str) for k in aux):
      raise ValueError("replay.save: dict keys in items must be strings, got "
                       f"{aux!r}.")
    out["keys"] = list(aux)
  elif kind == "namedtuple":
    out["type"] = f"{aux.__module__}:{aux.__qualname__}"
    out["fields"] = list(aux._fields)
  return out


def structure_from_json(desc) -> Any:
  """Inverse of `structure_to_json`.

  NamedTuple types are looked up among the modules already imported (nothing
  is imported on behalf of the file), and must have the saved fields.
  """
  if desc in ("leaf", "none"):
    return (desc, None, None)
  kind = desc["kind"]
  children = [structure_from_json(c) for c in desc["children"]]
  if kind == "dict":
    return ("dict", list(desc["keys"]), children)
  if kind == "namedtuple":
    module, qualname = desc["type"].split(":")
    obj = sys.modules.get(module)
    for part in qualname.split("."):
      obj = getattr(obj, part, None)
    # A file written before trailing fields with defaults were added (e.g.
    # SequenceItem.tau) restores with those defaults.
    saved = list(desc["fields"])
    if obj is None or not _is_namedtuple_type(obj) or list(
        obj._fields[:len(saved)]) != saved or any(
            f not in obj._field_defaults for f in obj._fields[len(saved):]):
      raise ValueError(
          f"replay.restore: item type {desc['type']} with fields "
          f"{desc['fields']} is not an imported NamedTuple; import its module "
          "before restoring.")
    return ("namedtuple", obj, children)
  if kind not in ("list", "tuple"):
    raise ValueError(f"replay.restore: unknown node kind {kind!r}.")
  return (kind, None, children)


def _is_namedtuple_type(t) -> bool:
  return isinstance(t, type) and issubclass(t, tuple) and hasattr(t, "_fields")


def leaf_specs(leaves) -> List[Tuple[Tuple[int, ...], np.dtype]]:
  return [(tuple(x.shape), x.dtype) for x in leaves]


def check_item(leaves, structure, expected_structure, expected_specs,
               index: int, where: str) -> None:
  """Raises ValueError unless an item matches the replay's item layout."""
  if structure != expected_structure:
    raise ValueError(
        f"{where}: item {index} has a different pytree structure from the "
        "items already in the replay.")
  for n, (x, (shape, dtype)) in enumerate(zip(leaves, expected_specs)):
    if x.shape != shape or x.dtype != dtype:
      raise ValueError(
          f"{where}: item {index}, leaf {n}: expected shape {shape} and dtype "
          f"{dtype}, got shape {x.shape} and dtype {x.dtype}.")
    if x.dtype == object:
      raise ValueError(f"{where}: item {index}, leaf {n} is not numeric.")


def check_priorities(priorities, n: int, where: str) -> np.ndarray:
  """Validates priorities: shape [n], finite, > 0. Returns float64 [n]."""
  p = np.asarray(priorities)
  if p.shape != (n,):
    raise ValueError(f"{where}: `priorities` must have shape [{n}], got "
                     f"{p.shape}.")
  if p.dtype == bool or not np.issubdtype(p.dtype, np.number):
    raise ValueError(f"{where}: `priorities` must be numeric, got dtype "
                     f"{p.dtype}.")
  p = p.astype(np.float64)
  bad = ~(np.isfinite(p) & (p > 0))
  if bad.any():
    idx = np.flatnonzero(bad)
    raise ValueError(
        f"{where}: priorities must be finite and > 0; got {p[idx[:8]].tolist()}"
        f" at position(s) {idx[:8].tolist()}"
        f"{' (and more)' if idx.size > 8 else ''}.")
  return p


def check_update(keys, priorities,
                 where: str) -> Tuple[np.ndarray, np.ndarray]:
  """Validates the arguments of `update_priorities` (both backends).

  Args:
    keys: item keys, a 1-D integer array shaped [n] (any integer dtype).
    priorities: new priorities shaped [n] (`check_priorities`).
    where: the public method, for error messages.

  Returns:
    (keys as given, as a numpy array [n]; priorities as float64 [n]).
  """
  keys = np.asarray(keys)
  if keys.ndim != 1 or not (keys.size == 0 or np.issubdtype(
      keys.dtype, np.integer)):
    raise ValueError(f"{where}: `keys` must be a 1-D integer array, got "
                     f"shape {keys.shape} and dtype {keys.dtype}.")
  return keys, check_priorities(priorities, keys.size, where)


def check_items_list(items, where: str) -> list:
  if not isinstance(items, (list, tuple)) or _is_namedtuple(items):
    raise ValueError(
        f"{where}: `items` must be a list of item pytrees (one per sequence), "
        f"got {type(items).__name__}.")
  return list(items)


def importance_weights(probabilities: np.ndarray, size: int,
                       exponent: float) -> np.ndarray:
  """w_i = (N P(i))^-beta / max_j w_j over the batch, float32 [n]."""
  w = np.power(size * np.asarray(probabilities, np.float64), -exponent)
  return (w / w.max()).astype(np.float32)


def default_error_buffer(min_size: int, samples_per_insert: float,
                         sample_size: int = 0) -> float:
  """The rate limiter's tolerance when none is given.

  Acme's default, a 10% tolerance around the target ratio at min_size (at
  least 2 max(1, samples_per_insert)), raised where needed so that a sampler
  waiting for `sample_size` items and a one-item insert can never both wait:
  sample_size + samples_per_insert <= 2 error_buffer (the deadlock bound of
  `RateLimiter.max_insert_size`). With a batch of 4, min_size 4 and
  samples_per_insert 1, Acme's 2 alone let the distributed program's
  learner and actors wait on each other for ever.
  """
  return max(0.1 * min_size * samples_per_insert,
             2. * max(1., samples_per_insert),
             (sample_size + samples_per_insert) / 2.)


def check_config(capacity, priority_exponent, importance_exponent, min_size,
                 samples_per_insert, error_buffer, where):
  """Validates the shared constructor arguments; returns the error buffer."""
  if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
    raise ValueError(f"{where}: `capacity` must be an int, got {capacity!r}.")
  if capacity < 1:
    raise ValueError(f"{where}: `capacity` must be >= 1, got {capacity}.")
  if not 0 <= priority_exponent <= 1e3:
    raise ValueError(f"{where}: `priority_exponent` must be >= 0, got "
                     f"{priority_exponent!r}.")
  if not 0 <= importance_exponent <= 1e3:
    raise ValueError(f"{where}: `importance_exponent` must be >= 0, got "
                     f"{importance_exponent!r}.")
  if not 1 <= min_size <= capacity:
    raise ValueError(f"{where}: `min_size` must be in [1, capacity] = [1, "
                     f"{capacity}], got {min_size!r}.")
  if samples_per_insert is None:
    if error_buffer is not None:
      raise ValueError(f"{where}: `error_buffer` needs `samples_per_insert`.")
    return None
  if not samples_per_insert > 0:
    raise ValueError(f"{where}: `samples_per_insert` must be > 0 or None, got "
                     f"{samples_per_insert!r}.")
  if error_buffer is None:
    error_buffer = default_error_buffer(min_size, samples_per_insert)
  if not error_buffer >= max(1., samples_per_insert):
    raise ValueError(f"{where}: `error_buffer` must be >= max(1, "
                     f"samples_per_insert) = {max(1., samples_per_insert)}, "
                     f"got {error_buffer!r}.")
  return float(error_buffer)


class RateLimiter(NamedTuple):
  """Reverb's MinSize / SampleToInsertRatio rules over three counters.

  Shared by both replay backends. Without `samples_per_insert` only
  `min_size` applies. With it, diff = samples_per_insert * inserted -
  sampled must stay within samples_per_insert * min_size +- error_buffer
  once `min_size` items are stored (Reverb's SampleToInsertRatio; R2D2).

  `inserted` may count weighted inserts (`PrioritizedReplay.insert`'s
  `weights`: fresh env steps / replay_period, `ngu_jax.loops.pacing`); then
  `ready_at`, the weighted count when `min_size` items were first stored,
  replaces min_size in the offset, so that sampling is allowed
  samples_per_insert per unit inserted since the replay became ready: the
  single-process loops' pacing.
  """
  min_size: int
  samples_per_insert: Optional[float]
  error_buffer: Optional[float]  # None iff samples_per_insert is None.

  def _limits(self, ready_at: Optional[float] = None
              ) -> Tuple[float, float]:
    offset = self.samples_per_insert * (self.min_size if ready_at is None
                                        else ready_at)
    return offset - self.error_buffer, offset + self.error_buffer

  def can_sample(self, size: int, inserted: float, sampled: int,
                 n: int, ready_at: Optional[float] = None) -> bool:
    """Whether `n` more samples are allowed now."""
    if size < self.min_size:
      return False
    return self.samples_per_insert is None or (
        self.samples_per_insert * inserted - (sampled + n)
        >= self._limits(ready_at)[0])

  def can_insert(self, size: int, inserted: float, sampled: int,
                 m: float, ready_at: Optional[float] = None) -> bool:
    """Whether `m` more inserts (weighted: their weight) are allowed now."""
    if self.samples_per_insert is None or size < self.min_size:
      return True
    return (self.samples_per_insert * (inserted + m) - sampled
            <= self._limits(ready_at)[1])

  def check_sample_size(self, batch_size, where: str) -> int:
    """Validates a sample batch size; returns it as an int."""
    if isinstance(batch_size, bool) or not isinstance(
        batch_size, (int, np.integer)) or batch_size < 1:
      raise ValueError(f"{where}: `batch_size` must be an int >= 1, got "
                       f"{batch_size!r}.")
    n = int(batch_size)
    if self.samples_per_insert is not None and n > 2 * self.error_buffer:
      raise ValueError(
          f"{where}: a batch of {n} can never be granted by the rate limiter "
          f"(batch_size > 2 error_buffer = {2 * self.error_buffer}); raise "
          "error_buffer.")
    return n

  def max_insert_size(self, sample_size: int = 0) -> Optional[int]:
    """The most items one insert can ever be granted (None: no limit).

    samples_per_insert * m must fit in the 2 error_buffer window; at least
    2, since error_buffer >= max(1, samples_per_insert) (`check_config`).
    With `sample_size` n, the inserts that cannot deadlock against a
    sampler waiting for n: n + samples_per_insert * m <= 2 error_buffer
    (the class docstring of `PrioritizedReplay`); at least 1.
    """
    if self.samples_per_insert is None:
      return None
    spi = self.samples_per_insert
    window = 2 * self.error_buffer - sample_size
    m = int(math.floor(window / spi))
    while spi * (m + 1) <= window:  # The division's rounding, either way.
      m += 1
    while m > 1 and spi * m > window:
      m -= 1
    return max(m, 1)

  def check_insert_size(self, m: int, where: str) -> None:
    """Rejects inserting `m` items at once if it can never be granted."""
    limit = self.max_insert_size()
    if limit is not None and m > limit:
      raise ValueError(
          f"{where}: inserting {m} items at once can never be granted by the "
          f"rate limiter (samples_per_insert * m > 2 error_buffer = "
          f"{2 * self.error_buffer}); insert fewer at a time.")


# ----------------------------------------------------------------------------


class SumTree:
  """A float64 sum tree over `capacity` leaves, with vectorised operations.

  Leaves hold non-negative masses (here p^alpha); `sample` draws leaves with
  probability mass / total. Internal nodes are recomputed from their children
  (no incremental deltas), so `total` never drifts.
  """

  def __init__(self, capacity: int):
    self.capacity = int(capacity)
    self._base = 1 << max(0, (self.capacity - 1).bit_length())  # power of 2
    self._depth = self._base.bit_length() - 1
    self._nodes = np.zeros(2 * self._base, np.float64)  # root at index 1

  @property
  def total(self) -> float:
    return float(self._nodes[1])

  def get(self, indices: np.ndarray) -> np.ndarray:
    """Masses of leaves `indices` (int [n]), float64 [n]."""
    return self._nodes[self._base + np.asarray(indices)]

  def leaves(self) -> np.ndarray:
    return self._nodes[self._base:self._base + self.capacity]

  def set(self, indices: np.ndarray, values: np.ndarray) -> None:
    """Sets leaves `indices` (unique int [n]) to `values` (float [n], >= 0)."""
    indices = np.asarray(indices, np.int64)
    if indices.size == 0:
      return
    nodes = self._base + indices
    self._nodes[nodes] = values
    if self._base == 1:
      return
    nodes = np.unique(nodes >> 1)
    while True:
      self._nodes[nodes] = self._nodes[2 * nodes] + self._nodes[2 * nodes + 1]
      if nodes[0] == 1:
        break
      nodes = np.unique(nodes >> 1)

  def rebuild(self) -> None:
    """Recomputes every internal node from the leaves."""
    for level in range(self._depth - 1, -1, -1):
      lo, hi = 1 << level, 2 << level
      self._nodes[lo:hi] = (self._nodes[2 * lo:2 * hi:2]
                            + self._nodes[2 * lo + 1:2 * hi:2])

  def sample(self, u: np.ndarray) -> np.ndarray:
    """Leaves whose cumulative-mass interval contains each u in [0, total).

    Descends into a child only if its subtree has positive mass, so even
    with rounding at the upper end a leaf of positive mass is returned.

    Args:
      u: float64 [n], values in [0, total).

    Returns:
      Leaf indices, int64 [n].
    """
    u = np.array(u, np.float64)
    idx = np.ones(u.shape, np.int64)
    for _ in range(self._depth):
      left = 2 * idx
      left_mass = self._nodes[left]
      go_left = (u < left_mass) | (self._nodes[left + 1] <= 0.)
      u = np.where(go_left, u, u - left_mass)
      idx = np.where(go_left, left, left + 1)
    return idx - self._base


class ReplayTable:
  """What both prioritised-replay backends keep of their configuration.

  The base of `PrioritizedReplay` and `reverb_tables.ReverbReplay`: the
  checked hyperparameters (NGU Table 6, R2D2 Sec. 2.3), the rate limiter
  built from them, `_config()` (what `save` records and `restore` compares)
  and the read-only `capacity` / `min_size`.
  """

  def _configure(self, capacity: int, priority_exponent: float,
                 importance_exponent: float, min_size: int, seed: int,
                 samples_per_insert: Optional[float],
                 error_buffer: Optional[float], where: str) -> None:
    """Checks (`check_config`) and stores the constructor's arguments."""
    self._error_buffer = check_config(capacity, priority_exponent,
                                      importance_exponent, min_size,
                                      samples_per_insert, error_buffer, where)
    self._capacity = int(capacity)
    self._alpha = float(priority_exponent)
    self._beta = float(importance_exponent)
    self._min_size = int(min_size)
    self._spi = None if samples_per_insert is None else float(
        samples_per_insert)
    self._limiter = RateLimiter(int(min_size), self._spi, self._error_buffer)
    self._seed = seed

  def _config(self) -> Dict[str, Any]:
    return dict(capacity=self._capacity, priority_exponent=self._alpha,
                importance_exponent=self._beta, min_size=self._min_size,
                samples_per_insert=self._spi, error_buffer=self._error_buffer)

  @property
  def capacity(self) -> int:
    """The most items the table holds (FIFO eviction beyond)."""
    return self._capacity

  @property
  def min_size(self) -> int:
    """Items needed before sampling."""
    return self._min_size


class PrioritizedReplay(ReplayTable):
  """Embedded prioritised replay of fixed-layout items (sequences).

  NGU App. A / R2D2 Sec. 2.3 with the sampling and importance exponents of
  NGU Table 6 (docs/design.md#priorities). Items are numpy pytrees of
  identical structure, shapes and dtypes (e.g. `ngu_jax.replay.SequenceItem`);
  storage is one preallocated array per leaf, shaped [capacity, ...],
  allocated at the first insert, so a sampled batch is one fancy-index gather
  per leaf.

  Blocking: `sample` and `insert` take a `timeout` in seconds: 0 (default)
  never waits and raises `ReplayNotReadyError` at once if the call cannot
  proceed, t > 0 waits up to t seconds for other threads, None waits forever.
  A sample cannot proceed while fewer than `min_size` items are stored, or
  when the rate limiter refuses it; an insert only when the rate limiter
  refuses it.

  Rate limiter (optional, Reverb's SampleToInsertRatio): with
  `samples_per_insert` = r, error_buffer = e, and diff = r * inserts -
  sampled (both counted in items since construction),
  a sample of n items proceeds iff size >= min_size and
  diff - n >= r * min_size - e; an insert of m items proceeds iff the replay
  holds fewer than min_size items or diff + r m <= r * min_size + e. Calls are
  granted atomically, so a sampler of n and an inserter of m items that both
  wait cannot deadlock as long as n + r m <= 2 e; a single call that could
  never be granted (n > 2 e, or r m > 2 e) raises ValueError.

  Weighted inserts (`insert(..., weights=)`, the distributed program's
  pacing, `ngu_jax.loops.pacing`): inserts then count their weights w in
  (0, 1] (fresh env steps / replay_period), and r * min_size becomes r *
  (the weighted count when min_size items were first stored), so the
  learner samples r per unit of fresh experience since the replay became
  ready, as the single-process loops pace it.

  Thread safety: all methods take one lock; an actor thread inserting and a
  learner thread sampling / updating priorities may share an instance.
  Sampling holds the lock while gathering the batch, so a concurrent insert
  can never overwrite a slot being read.
  """

  def __init__(self, capacity: int, priority_exponent: float = 0.9,
               importance_exponent: float = 0.6, min_size: int = 6250,
               seed: int = 0, samples_per_insert: Optional[float] = None,
               error_buffer: Optional[float] = None):
    """Creates an empty replay.

    Args:
      capacity: maximum number of items (sequences); the oldest is evicted
        first (FIFO) when full.
      priority_exponent: alpha of P(i) ∝ p_i^alpha (NGU Table 6: 0.9).
      importance_exponent: beta of w_i = (N P(i))^-beta (Table 6: 0.6).
      min_size: sampling is refused (or waits, see `timeout`) while fewer
        items are stored (R2D2 / NGU: 6250 sequences), in [1, capacity].
      seed: seed of the sampling RNG (numpy PCG64).
      samples_per_insert: None (default: no rate limit) or the target number
        of sampled items per inserted item.
      error_buffer: tolerance of the rate limiter in sampled items (see the
        class docstring); default max(0.1 min_size r, 2 max(1, r)).
    """
    self._configure(capacity, priority_exponent, importance_exponent,
                    min_size, seed, samples_per_insert, error_buffer,
                    "PrioritizedReplay")
    self._rng = np.random.Generator(np.random.PCG64(seed))
    self._tree = SumTree(self._capacity)
    self._ids = np.full(self._capacity, -1, np.int64)
    self._next_id = 0
    self._size = 0
    self._max_priority = 1.0
    self._inserted = 0  # items
    # The rate limiter's insert count: items, or their weights once
    # `insert` got `weights` (then offset from the count at readiness).
    self._units = 0.
    self._units_at_ready: Optional[float] = None
    self._weighted = False
    self._sampled = 0
    self._storage: Optional[List[np.ndarray]] = None
    self._structure = None
    self._specs = None
    self._cond = threading.Condition(threading.Lock())

  # ---------------------------------------------------------------- queries

  @property
  def size(self) -> int:
    """Number of items currently stored."""
    with self._cond:
      return self._size

  @property
  def inserted(self) -> int:
    """Items inserted since construction (evicted ones included)."""
    with self._cond:
      return self._inserted

  @property
  def sampled(self) -> int:
    """Items sampled since construction (the rate limiter's count)."""
    with self._cond:
      return self._sampled

  @property
  def max_priority(self) -> float:
    """The largest priority inserted or set so far (initially 1)."""
    with self._cond:
      return self._max_priority

  # ---------------------------------------------------------- rate limiting

  def _ready_at(self) -> Optional[float]:
    return self._units_at_ready if self._weighted else None

  # Until the first weighted insert `_units` equals `_inserted` and
  # `_ready_at()` is None: the unweighted limiter.

  def _can_sample(self, n: int) -> bool:
    return self._limiter.can_sample(self._size, self._units, self._sampled,
                                    n, self._ready_at())

  def _can_insert(self, m: float) -> bool:
    return self._limiter.can_insert(self._size, self._units, self._sampled,
                                    m, self._ready_at())

  def _wait(self, ready, timeout: Optional[float], message) -> None:
    """Waits (lock held) until `ready()`; raises after `timeout` seconds."""
    if ready():
      return
    if timeout is not None and timeout <= 0:
      raise ReplayNotReadyError(message())
    deadline = None if timeout is None else time.monotonic() + timeout
    while not ready():
      remaining = None if deadline is None else deadline - time.monotonic()
      if remaining is not None and remaining <= 0:
        raise ReplayNotReadyError(message() + f" (waited {timeout} s)")
      self._cond.wait(remaining)

  def _not_ready_message(self, n: int) -> str:
    if self._size < self._min_size:
      return (f"PrioritizedReplay.sample: the replay holds {self._size} items, "
              f"fewer than min_size={self._min_size}; insert more first (or "
              "pass a timeout to wait for another thread's inserts).")
    return (f"PrioritizedReplay.sample: the rate limiter (samples_per_insert="
            f"{self._spi}, error_buffer={self._error_buffer}) refuses "
            f"{n} more samples after {self._sampled} samples and "
            f"{self._inserted} inserts; insert more first.")

  # ------------------------------------------------------------------ insert

  @property
  def max_insert_size(self) -> Optional[int]:
    """The most items one `insert` can be granted (None: no limit); insert
    more in several calls (`RateLimiter.max_insert_size`)."""
    return self._limiter.max_insert_size()

  def max_insert_size_while_sampling(self, sample_size: int
                                     ) -> Optional[int]:
    """The most items one `insert` may carry so that it cannot deadlock
    against a sampler waiting for `sample_size` items: sample_size +
    samples_per_insert * m <= 2 error_buffer (class docstring); with weighted
    inserts the count is no longer a multiple of samples_per_insert, so
    only this bound rules the deadlock out. None: no limit."""
    return self._limiter.max_insert_size(sample_size)

  def insert(self, items: Sequence[Any],
             priorities: Optional[Sequence[float]] = None,
             timeout: Optional[float] = 0.,
             weights: Optional[Sequence[float]] = None) -> np.ndarray:
    """Inserts items, evicting the oldest ones when full (FIFO).

    Args:
      items: list of m item pytrees (no batch axis), all of the layout of
        the first item ever inserted (same structure, shapes and dtypes).
      priorities: priorities p > 0, shaped [m]; default: every item gets the
        largest priority seen so far (initially 1).
      timeout: seconds to wait for the rate limiter (see class docstring);
        irrelevant without `samples_per_insert`.
      weights: what each item counts for the rate limiter, shaped [m], in
        (0, 1] (`ngu_jax.loops.pacing.insert_weights`: fresh env steps /
        replay_period); default 1 each. Once given, the limiter counts
        weights and offsets from the count when the replay became ready
        (`RateLimiter`).

    Returns:
      The items' keys, int64 [m] (consecutive ids, never reused).

    Raises:
      ValueError: on items of another layout, or priorities that are <= 0,
        NaN or inf, or of the wrong shape.
      ReplayNotReadyError: if the rate limiter refuses the insert past the
        timeout.
    """
    where = "PrioritizedReplay.insert"
    items = check_items_list(items, where)
    m = len(items)
    if m == 0:
      return np.zeros((0,), np.int64)
    if priorities is not None:
      priorities = check_priorities(priorities, m, where)
    flat = [flatten(item) for item in items]
    if self._structure is None:
      structure, specs = flat[0][1], leaf_specs(flat[0][0])
    else:
      structure, specs = self._structure, self._specs
    for i, (leaves, s) in enumerate(flat):
      check_item(leaves, s, structure, specs, i, where)
    self._limiter.check_insert_size(m, where)
    if weights is None:
      units = float(m)
    else:
      weights = np.asarray(weights, np.float64)
      if weights.shape != (m,) or not np.all((weights > 0) & (weights <= 1)):
        raise ValueError(f"{where}: `weights` must be shaped [{m}] with "
                         f"values in (0, 1], got {weights!r}.")
      units = float(weights.sum())

    with self._cond:
      if weights is not None:
        self._weighted = True
      self._wait(lambda: self._can_insert(units), timeout,
                 lambda: (f"{where}: the rate limiter refuses {m} more "
                          f"inserts after {self._inserted} inserts and "
                          f"{self._sampled} samples; sample more first."))
      if self._storage is None:
        self._structure, self._specs = structure, specs
        self._storage = [np.zeros((self._capacity,) + shape, dtype)
                         for shape, dtype in specs]
      keys = np.arange(self._next_id, self._next_id + m, dtype=np.int64)
      if priorities is None:
        priorities = np.full(m, self._max_priority)
      else:
        self._max_priority = max(self._max_priority, float(priorities.max()))
      keep = slice(max(0, m - self._capacity), m)  # later ones overwrite.
      kept_keys = keys[keep]
      slots = kept_keys % self._capacity
      for (leaves, _), slot in zip(flat[keep], slots):
        for store, leaf in zip(self._storage, leaves):
          store[slot] = leaf
      self._ids[slots] = kept_keys
      self._tree.set(slots, np.power(priorities[keep], self._alpha))
      self._next_id += m
      self._size = min(self._capacity, self._size + m)
      self._inserted += m
      self._units += units
      if self._units_at_ready is None and self._size >= self._min_size:
        self._units_at_ready = self._units
      self._cond.notify_all()
    return keys

  # ------------------------------------------------------------------ sample

  def sample(self, batch_size: int, timeout: Optional[float] = 0.
            ) -> Tuple[np.ndarray, Any, np.ndarray]:
    """Samples `batch_size` items i.i.d. (with replacement), P(i) ∝ p_i^alpha.

    Args:
      batch_size: number of items n >= 1.
      timeout: seconds to wait while the replay holds fewer than `min_size`
        items or the rate limiter refuses; 0 (default) raises at once, None
        waits forever.

    Returns:
      (keys, items, importance_weights): keys int64 [n]; items the item
      pytree with every leaf stacked on a new leading axis [n, ...] (fresh
      arrays); importance weights (N P(i))^-beta / max over the batch,
      float32 [n], with N the current size.

    Raises:
      ReplayNotReadyError: below `min_size` or rate-limited past the timeout.
      ValueError: on a bad batch size.
    """
    where = "PrioritizedReplay.sample"
    n = self._limiter.check_sample_size(batch_size, where)
    with self._cond:
      self._wait(lambda: self._can_sample(n), timeout,
                 lambda: self._not_ready_message(n))
      total = self._tree.total
      slots = self._tree.sample(self._rng.random(n) * total)
      probabilities = self._tree.get(slots) / total
      keys = self._ids[slots].copy()
      leaves = [store[slots] for store in self._storage]
      weights = importance_weights(probabilities, self._size, self._beta)
      self._sampled += n
      self._cond.notify_all()
    return keys, unflatten(self._structure, leaves), weights

  # -------------------------------------------------------------- priorities

  def update_priorities(self, keys: Sequence[int],
                        priorities: Sequence[float]) -> None:
    """Sets the priorities of stored items.

    Keys of items already evicted are ignored. If a key appears several
    times (batches are sampled with replacement), its last priority wins.

    Args:
      keys: int keys returned by `insert` / `sample`, shaped [n].
      priorities: new priorities p > 0, shaped [n].

    Raises:
      ValueError: on priorities <= 0, NaN or inf, on mismatched shapes, or on
        keys that were never issued.
    """
    where = "PrioritizedReplay.update_priorities"
    keys, priorities = check_update(keys, priorities, where)
    if keys.size == 0:
      return
    keys = keys.astype(np.int64)
    with self._cond:
      unknown = (keys < 0) | (keys >= self._next_id)
      if unknown.any():
        raise ValueError(f"{where}: keys {keys[unknown][:8].tolist()} were "
                         "never issued by this replay.")
      # Last occurrence of each key wins.
      rev_keys = keys[::-1]
      _, first_in_rev = np.unique(rev_keys, return_index=True)
      keys = rev_keys[first_in_rev]
      priorities = priorities[::-1][first_in_rev]
      slots = keys % self._capacity
      live = self._ids[slots] == keys
      if not live.any():
        return
      self._tree.set(slots[live], np.power(priorities[live], self._alpha))
      self._max_priority = max(self._max_priority,
                               float(priorities[live].max()))

  def skip_keys(self, count: int) -> int:
    """Never issues the next `count` keys: the next insert's key is the
    first multiple of `capacity` past them, offset as before, so items keep
    their slots and FIFO order (a slot is key % capacity).

    A replay restored after its process died (the distributed program's
    `ReplayNode`) calls this so that keys the lost process issued after the
    checkpoint, still held by a learner, can never name a new item: their
    priority updates are then ignored as those of evicted items.

    Args:
      count: keys to skip, >= 0.

    Returns:
      The next key to be issued.
    """
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) \
        or count < 0:
      raise ValueError(f"PrioritizedReplay.skip_keys: `count` must be an int "
                       f">= 0, got {count!r}.")
    with self._cond:
      laps = -(-int(count) // self._capacity)
      self._next_id += laps * self._capacity
      return self._next_id

  # ------------------------------------------------------------ persistence

  def save(self, path: str) -> None:
    """Saves contents, priorities, counters and RNG state to directory `path`.

    Writes `path/replay.npz` (numpy arrays, no pickled objects) and
    `path/replay.json` (configuration, counters, RNG state, item layout).
    Both are written to temporary names first and then renamed.
    """
    os.makedirs(path, exist_ok=True)
    with self._cond:
      order = (np.arange(self._next_id - self._size, self._next_id)
               % self._capacity)
      arrays = {"ids": self._ids[order], "masses": self._tree.get(order)}
      if self._storage is not None:
        for n, store in enumerate(self._storage):
          arrays[f"leaf_{n:03d}"] = store[order]
      meta = {
          "format": "ngu_jax.PrioritizedReplay",
          "version": _FORMAT_VERSION,
          "config": self._config(),
          "next_id": self._next_id,
          "size": self._size,
          "max_priority": self._max_priority,
          "inserted": self._inserted,
          "insert_units": self._units,
          "insert_units_at_ready": self._units_at_ready,
          "weighted_inserts": self._weighted,
          "sampled": self._sampled,
          "rng_state": self._rng.bit_generator.state,
          "structure": (None if self._structure is None else
                        structure_to_json(self._structure)),
          "specs": (None if self._specs is None else
                    [[list(s), np.dtype(d).str] for s, d in self._specs]),
      }
      _atomic_write(os.path.join(path, "replay.npz"),
                    lambda f: np.savez(f, **arrays))
      _atomic_write(os.path.join(path, "replay.json"),
                    lambda f: f.write(json.dumps(meta).encode()))

  def restore(self, path: str) -> None:
    """Replaces this replay's state with the one saved at `path`.

    The replay must have been constructed with the same configuration
    (capacity, exponents, min_size, rate limiter); the seed is irrelevant, as
    the RNG state is restored, so the restored replay draws exactly the
    samples the saved one would have drawn. NamedTuple item types must be
    importable (their modules already imported).

    Raises:
      ValueError: on a file of another format or a configuration mismatch.
    """
    where = "PrioritizedReplay.restore"
    with open(os.path.join(path, "replay.json")) as f:
      meta = json.load(f)
    if meta.get("format") != "ngu_jax.PrioritizedReplay" or meta.get(
        "version") != _FORMAT_VERSION:
      raise ValueError(f"{where}: {path} does not hold a PrioritizedReplay "
                       f"(format {meta.get('format')!r} version "
                       f"{meta.get('version')!r}).")
    mismatched = {k: (v, meta["config"].get(k))
                  for k, v in self._config().items()
                  if meta["config"].get(k) != v}
    if mismatched:
      raise ValueError(f"{where}: configuration differs from the saved one "
                       f"(current, saved): {mismatched}.")
    structure = (None if meta["structure"] is None else
                 structure_from_json(meta["structure"]))
    specs = (None if meta["specs"] is None else
             [(tuple(s), np.dtype(d)) for s, d in meta["specs"]])
    with np.load(os.path.join(path, "replay.npz"), allow_pickle=False) as data:
      arrays = {k: data[k] for k in data.files}
    size = int(meta["size"])
    ids = arrays["ids"]
    if ids.shape != (size,):
      raise ValueError(f"{where}: corrupt file: {ids.shape[0]} ids for size "
                       f"{size}.")
    with self._cond:
      self._tree = SumTree(self._capacity)
      self._ids = np.full(self._capacity, -1, np.int64)
      slots = ids % self._capacity
      self._ids[slots] = ids
      self._tree.set(slots, arrays["masses"])
      self._storage = None
      if specs is not None:
        self._storage = [np.zeros((self._capacity,) + s, d) for s, d in specs]
        for n, store in enumerate(self._storage):
          store[slots] = arrays[f"leaf_{n:03d}"]
      self._structure, self._specs = structure, specs
      self._next_id = int(meta["next_id"])
      self._size = size
      self._max_priority = float(meta["max_priority"])
      self._inserted = int(meta["inserted"])
      # Replays saved before weighted inserts: items count 1 each.
      self._units = float(meta.get("insert_units", self._inserted))
      self._units_at_ready = meta.get(
          "insert_units_at_ready",
          float(self._min_size) if size >= self._min_size else None)
      self._weighted = bool(meta.get("weighted_inserts", False))
      self._sampled = int(meta["sampled"])
      self._rng = np.random.Generator(np.random.PCG64())
      self._rng.bit_generator.state = meta["rng_state"]
      self._cond.notify_all()


def _atomic_write(filename: str, write) -> None:
  tmp = filename + ".tmp"
  with open(tmp, "wb") as f:
    write(f)
  os.replace(tmp, filename)
