"""Device-resident sequence adder and prioritised replay, as pure functions.

NGU App. A and R2D2 (Kapturowski et al., 2019, Sec. 2.3), for the compiled
loop (one jitted, `lax.scan`-ned program, vmapped over seeds): the same
windows as `ngu_jax.replay.adder.SequenceAdder` and the same sampling,
importance weights, FIFO eviction and priority rules as
`ngu_jax.replay.prioritized.PrioritizedReplay`, written as optax-style pairs
of pure functions over NamedTuple states of fixed-shape arrays:

  adder = make_sequence_adder(B, sequence_length=80, period=40)
  replay = make_prioritized_replay(capacity)
  adder_state = adder.init(step_template)          # AdderStep of [B, ...]
  replay_state = replay.init(item_template)        # SequenceItem, no batch axis
  adder_state, items, valid = adder.add(adder_state, step)   # items [B M, ...]
  replay_state = replay.add(replay_state, items, valid)
  keys, items, weights = replay.sample(replay_state, key, batch_size)
  replay_state = replay.update_priorities(replay_state, keys, priorities)
  batch = to_sequence_batch(items, weights)        # the learner's SequenceBatch

flashbax (0.1.3) is not used: its prioritised trajectory buffer samples
windows from per-lane timelines (they cross episode boundaries, with no
padding mask or stored initial state per window), draws stratified rather
than i.i.d. samples, and neither masks partially valid inserts nor ignores
priority updates for evicted items, so it cannot reproduce these semantics.

Adder. L = `sequence_length`, P = `period`, K = `burn_in`, W = K + L steps
per item. Within an add() call a lane emits either the windows of its ended
episode (a step with `step_is_first`; at most M_flush = ceil((L - 2) / P) of
them, from the W - 1 pending steps the lane can hold) or at most one full
window (W >= 2, so never both), hence M = max(1, ceil((L - 2) / P)) items per
lane and a fixed output of B M items. Items are compacted to the front, in
`SequenceAdder`'s order: first the windows flushed by episode ends (lanes in
ascending order, each lane's windows by start), then the full windows (lanes
in ascending order); `valid` marks them (a prefix), the remaining items are
all zeros. Each lane keeps a ring of its last W steps (episode step s at
s mod W) and the recurrent state, mixture index and epsilon of its last
S = ceil(W / P) window starts (window k at k mod S), so a step costs O(B) to
store and O(B M W) to read out; the numpy adder shifts buffers instead.

Replay. Items live in slots [capacity]; the item with key k (keys are
assigned 0, 1, 2, ... in insertion order) lives in slot k mod capacity.
Sampling draws i.i.d. slots (with replacement) with P(i) = p_i^alpha /
sum_k p_k^alpha by inverse CDF over two levels of float32 prefix sums (blocks
of ~sqrt(capacity) slots), O(capacity) per call; weights are
w_i = (N P(i))^-beta / max over the batch, N = the current size.

NOTE: differences from the numpy versions, forced by jit: nothing is
validated (no ValueError). `update_priorities` ignores entries whose priority
is <= 0, NaN or inf, or whose key was never issued (`PrioritizedReplay`
raises ValueError for both); like it, it ignores keys of evicted items and the
last occurrence of a repeated key wins (among the entries not ignored).
Priorities and masses are float32, not float64. Keys and episode step
counters are int32 (2^31 items / steps per episode).
"""

import math
from typing import Any, Callable, Dict, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.replay import adder as adder_lib
from ngu_jax.replay.adder import AdderStep, SequenceItem
from ngu_jax.types import SequenceBatch

# The per-step fields of an item, with their stored dtypes (None: the
# observation keeps its own); shared with `SequenceAdder`.
_STEP_DTYPES = adder_lib._STEP_DTYPES  # pylint: disable=protected-access
_STEP_FIELDS = tuple(name for name, _ in _STEP_DTYPES)


def _spec(x) -> Tuple[Tuple[int, ...], np.dtype]:
  """(shape, canonical dtype) of an array, tracer or ShapeDtypeStruct."""
  if not (hasattr(x, "shape") and hasattr(x, "dtype")):
    x = np.asarray(x)
  return tuple(x.shape), jax.dtypes.canonicalize_dtype(x.dtype)


def _static_int(value, name: str, where: str, minimum: int) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{where}: `{name}` must be an int, got {value!r}.")
  if value < minimum:
    raise ValueError(f"{where}: `{name}` must be >= {minimum}, got {value}.")
  return int(value)


def _select(mask, x):
  """x where `mask` (shaped like x's leading axes) else 0."""
  mask = jnp.reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim))
  return jnp.where(mask, x, jnp.zeros((), x.dtype))


# ============================================================== sequence adder


class AdderState(NamedTuple):
  """Per-lane windows in progress (B lanes, W steps, S window starts).

  Attributes:
    episode_step: int32 [B], steps of the lane's current episode stored so
      far (since its `step_is_first` step, the last `flush` or `init`).
    steps: dict field name -> [B, W, ...], the ten per-step fields of
      `SequenceItem` (observation ... prev_intrinsic_reward, in the stored
      dtypes); episode step s of a lane is at [lane, s mod W].
    start_state: the recurrent state given with each window's first step,
      leaves [B, S, ...]; window k (starting at step k P) at [lane, k mod S].
    start_mixture_index: int32 [B, S], the mixture index of those steps.
    start_epsilon: float32 [B, S], the epsilon of those steps.
    start_tau: float32 [B, S], the temperature of those steps (DiCE's
      Boltzmann lanes), or None when the steps carry none.
  """
  episode_step: jax.Array
  steps: Dict[str, jax.Array]
  start_state: Any
  start_mixture_index: jax.Array
  start_epsilon: jax.Array
  start_tau: Any = None


class DeviceSequenceAdder(NamedTuple):
  """Pure functions of the device sequence adder (`make_sequence_adder`).

  Attributes:
    init: `init(step_template) -> AdderState`.
    add: `add(state, step) -> (state, items, valid)`.
    flush: `flush(state) -> (state, items, valid)`.
    items_per_step: M_total = B M, the leading size of `items`.
  """
  init: Callable[[AdderStep], AdderState]
  add: Callable[[AdderState, AdderStep],
                Tuple[AdderState, SequenceItem, jax.Array]]
  flush: Callable[[AdderState], Tuple[AdderState, SequenceItem, jax.Array]]
  items_per_step: int


def items_per_lane(sequence_length: int, period: int) -> int:
  """M = max(1, ceil((L - 2) / P)): the most items one lane emits per call.

  A lane holds at most W - 1 pending steps; at an episode end its windows at
  starts 0, P, 2P, ... of those steps are emitted while they hold at least
  K + 2 real steps, i.e. ceil((L - 2) / P) of them; otherwise it emits at
  most one full window. Independent of the burn-in K.
  """
  return max(1, -(-(sequence_length - 2) // period))


def make_sequence_adder(num_lanes: int, sequence_length: int = 80,
                        period: int = 40,
                        burn_in: int = 0) -> DeviceSequenceAdder:
  """A pure `SequenceAdder` over B lanes (NGU App. A, R2D2 Sec. 2.3).

  Same windows, items and item order as `ngu_jax.replay.SequenceAdder` with
  the same arguments (module docstrings of both modules).

  Args:
    num_lanes: B, the number of actor lanes.
    sequence_length: L, steps per sequence after the burn-in, >= 2.
    period: P, steps between window starts, 1 <= P <= L.
    burn_in: K >= 0, extra leading steps per item; items hold W = K + L.

  Returns:
    A `DeviceSequenceAdder` (init, add, flush, items_per_step = B M):

    `init(step_template) -> AdderState`: `step_template` is an `AdderStep`
      of arrays or `jax.ShapeDtypeStruct`s shaped [B, ...]; only the
      observation's and recurrent state's shapes and dtypes are read.
    `add(state, step) -> (state, items, valid)`: `step` an `AdderStep` of
      [B]-leading arrays; `items` a `SequenceItem` whose leaves have a leading
      axis of B M (per-step fields [B M, W, ...]); `valid` bool [B M], True
      for the first n items, the ones `SequenceAdder.add` would write, in
      its order; the others are zeros.
    `flush(state) -> (state, items, valid)`: ends every lane's episode, as
      `SequenceAdder.flush()`; same output layout as `add`.

  NOTE: the inputs are not validated (the functions run under jit); check
  them with `SequenceAdder` on the host when in doubt.
  """
  where = "replay.device.make_sequence_adder"
  b = _static_int(num_lanes, "num_lanes", where, 1)
  length = _static_int(sequence_length, "sequence_length", where, 2)
  p = _static_int(period, "period", where, 1)
  k = _static_int(burn_in, "burn_in", where, 0)
  if p > length:
    raise ValueError(f"{where}: `period` ({p}) must be <= `sequence_length` "
                     f"({length}), or steps would be skipped.")
  w = k + length
  num_slots = -(-w // p)                      # S
  m = items_per_lane(length, p)  # >= the windows one lane can flush
  total = b * m
  lanes = np.arange(b, dtype=np.int32)  # numpy: no backend at construction

  def init(step_template: AdderStep) -> AdderState:
    obs_shape, obs_dtype = _spec(step_template.observation)
    steps = {}
    for name, dtype in _STEP_DTYPES:
      if name == "observation":
        steps[name] = jnp.zeros((b, w) + obs_shape[1:], obs_dtype)
      else:
        steps[name] = jnp.zeros((b, w), dtype)

    def slots(x):
      shape, dtype = _spec(x)
      return jnp.zeros((b, num_slots) + shape[1:], dtype)

    return AdderState(
        episode_step=jnp.zeros((b,), jnp.int32), steps=steps,
        start_state=jax.tree_util.tree_map(slots,
                                           step_template.recurrent_state),
        start_mixture_index=jnp.zeros((b, num_slots), jnp.int32),
        start_epsilon=jnp.zeros((b, num_slots), jnp.float32),
        start_tau=(None if step_template.tau is None
                   else jnp.zeros((b, num_slots), jnp.float32)))

  def flush_candidates(t):
    """Pending windows of every lane with t steps: [B, M] each."""
    k_min = jnp.maximum(0, jnp.floor_divide(t - w, p) + 1)      # [B]
    start = (k_min[:, None] + jnp.arange(m)) * p                # [B, M]
    count = t[:, None] - start
    return start, count, count >= k + 2

  def gather(state, lane, start, count, full, valid, step):
    """Items of windows (lane, start, count) of the state [n] + the step.

    Where `full`, the window's last step is `step` (not yet in the state).
    """
    pos = jnp.arange(w)
    ring = (start[:, None] + pos) % w                           # [n, W]
    real = valid[:, None] & (pos < count[:, None])
    last = (full & valid)[:, None] & (pos == w - 1)
    fields = {}
    for name, dtype in _STEP_DTYPES:
      x = _select(real, state.steps[name][lane[:, None], ring])
      if step is not None:
        new = jnp.asarray(getattr(step, name)).astype(x.dtype)[lane]
        x = jnp.where(
            jnp.reshape(last, last.shape + (1,) * (x.ndim - 2)),
            new[:, None], x)
      fields[name] = x
    slot = (start // p) % num_slots
    take = lambda x: _select(valid, x[lane, slot])
    return SequenceItem(
        mask=(real | last).astype(jnp.float32),
        mixture_index=take(state.start_mixture_index),
        initial_state=jax.tree_util.tree_map(take, state.start_state),
        epsilon=take(state.start_epsilon),
        tau=None if state.start_tau is None else take(state.start_tau),
        **fields)

  def compact(state, lane, start, count, full, valid, step):
    """Gathers the valid candidates (in order) into B M items."""
    order = jnp.cumsum(valid) - 1
    n = lane.shape[0]
    src = jnp.full((total,), n, jnp.int32).at[
        jnp.where(valid, order, total)].set(
            jnp.arange(n, dtype=jnp.int32), mode="drop")
    out_valid = src < n
    src = jnp.minimum(src, n - 1)
    items = gather(state, lane[src], start[src], count[src], full[src],
                   out_valid, step)
    return items, out_valid

  def add(state: AdderState, step: AdderStep):
    t = state.episode_step
    first = jnp.asarray(step.step_is_first).astype(bool)
    # Windows of episodes ended by `step_is_first`, then full windows.
    f_start, f_count, f_valid = flush_candidates(t)
    f_valid = f_valid & first[:, None]
    t = jnp.where(first, 0, t)
    full = (t + 1 >= w) & ((t + 1 - w) % p == 0)
    lane = jnp.concatenate([jnp.repeat(lanes, m), lanes])
    start = jnp.concatenate([f_start.reshape(-1), t + 1 - w])
    count = jnp.concatenate([f_count.reshape(-1), jnp.full((b,), w)])
    is_full = jnp.concatenate([jnp.zeros((total,), bool),
                               jnp.ones((b,), bool)])
    valid = jnp.concatenate([f_valid.reshape(-1), full])
    items, out_valid = compact(state, lane, start, count, is_full, valid,
                               step)
    # Store the step at t mod W; window starts at t mod P == 0.
    steps = {name: state.steps[name].at[lanes, t % w].set(
        jnp.asarray(getattr(step, name)).astype(state.steps[name].dtype))
             for name in _STEP_FIELDS}
    at_start = t % p == 0
    slot = jnp.where(at_start, (t // p) % num_slots, num_slots)

    def put(slots, x):
      return slots.at[lanes, slot].set(jnp.asarray(x).astype(slots.dtype),
                                       mode="drop")

    state = AdderState(
        episode_step=t + 1, steps=steps,
        start_state=jax.tree_util.tree_map(put, state.start_state,
                                           step.recurrent_state),
        start_mixture_index=put(state.start_mixture_index,
                                step.mixture_index),
        start_epsilon=put(state.start_epsilon, step.epsilon),
        start_tau=(None if state.start_tau is None
                   else put(state.start_tau, step.tau)))
    return state, items, out_valid

  def flush(state: AdderState):
    f_start, f_count, f_valid = flush_candidates(state.episode_step)
    items, out_valid = compact(
        state, jnp.repeat(lanes, m), f_start.reshape(-1),
        f_count.reshape(-1), jnp.zeros((total,), bool), f_valid.reshape(-1),
        None)
    state = state._replace(episode_step=jnp.zeros_like(state.episode_step))
    return state, items, out_valid

  return DeviceSequenceAdder(init=init, add=add, flush=flush,
                             items_per_step=total)


# ========================================================= prioritised replay


class ReplayState(NamedTuple):
  """Contents of a device replay of `capacity` slots.

  Attributes:
    items: the item pytree (e.g. `SequenceItem`), every leaf
      [capacity, ...]; the item with key k in slot k mod capacity.
    keys: int32 [capacity], the key of the item in each slot, -1 if empty.
    priorities: float32 [capacity], p_i of each slot (0 if empty).
    max_priority: float32 [], the largest priority inserted or set so far
      (initially 1); new items get it.
    size: int32 [], N, the number of stored items (min(inserted, capacity)).
    inserted: int32 [], items inserted so far = the next key; the next
      item goes to slot inserted mod capacity.
  """
  items: Any
  keys: jax.Array
  priorities: jax.Array
  max_priority: jax.Array
  size: jax.Array
  inserted: jax.Array


class DeviceReplay(NamedTuple):
  """Pure functions of the device replay (`make_prioritized_replay`).

  Attributes:
    init: `init(item_template) -> ReplayState`.
    add: `add(state, items, valid) -> state`.
    sample: `sample(state, key, batch_size) -> (keys, items, weights)`.
    update_priorities: `update_priorities(state, keys, priorities) -> state`.
  """
  init: Callable[[Any], ReplayState]
  add: Callable[[ReplayState, Any, jax.Array], ReplayState]
  sample: Callable[[ReplayState, jax.Array, int],
                   Tuple[jax.Array, Any, jax.Array]]
  update_priorities: Callable[[ReplayState, jax.Array, jax.Array],
                              ReplayState]


def replay_size(state: ReplayState) -> jax.Array:
  """N, the number of items stored, int32 []."""
  return state.size


def make_prioritized_replay(capacity: int, priority_exponent: float = 0.9,
                            importance_exponent: float = 0.6) -> DeviceReplay:
  """A pure `PrioritizedReplay` (FIFO, P(i) ∝ p_i^alpha; R2D2, NGU Table 6).

  Args:
    capacity: the number of slots; the oldest item is evicted first.
    priority_exponent: alpha of P(i) ∝ p_i^alpha (0.9).
    importance_exponent: beta of w_i = (N P(i))^-beta (0.6).

  Returns:
    A `DeviceReplay` (init, add, sample, update_priorities):

    `init(item_template) -> ReplayState`: `item_template` one item (arrays
      or `jax.ShapeDtypeStruct`s, no leading axis); storage is zeros.
    `add(state, items, valid) -> state`: `items` the item pytree with a
      leading axis [M], `valid` bool [M]; the valid items are inserted in
      order (keys inserted, inserted + 1, ...) at the current max priority,
      FIFO; invalid items touch nothing. If more than `capacity` are valid,
      the last `capacity` are kept (as `PrioritizedReplay.insert`).
    `sample(state, key, batch_size) -> (keys, items, importance_weights)`:
      `batch_size` static; i.i.d. draws with replacement; keys int32
      [batch_size], items with leaves [batch_size, ...], weights
      (N P(i))^-beta / max over the batch, float32 [batch_size].
    `update_priorities(state, keys, priorities) -> state`: keys int [n] (as
      returned by `sample`), priorities float [n]. Entries with keys of
      evicted (or never issued) items, or priorities <= 0, NaN or inf, are
      ignored; of repeated keys the last remaining entry wins; max_priority
      becomes the max of itself and the priorities written.

  NOTE: `sample` needs size >= 1 (the caller's guarantee; with an empty
  replay the weights are NaN and the items zeros).
  """
  where = "replay.device.make_prioritized_replay"
  capacity = _static_int(capacity, "capacity", where, 1)
  alpha = float(priority_exponent)
  beta = float(importance_exponent)
  if not (alpha >= 0 and beta >= 0):
    raise ValueError(f"{where}: exponents must be >= 0, got "
                     f"{priority_exponent!r}, {importance_exponent!r}.")
  block = max(1, math.isqrt(capacity - 1) + 1)     # ~sqrt(capacity) slots
  num_blocks = -(-capacity // block)

  def init(item_template: Any) -> ReplayState:

    def storage(x):
      shape, dtype = _spec(x)
      return jnp.zeros((capacity,) + shape, dtype)

    return ReplayState(
        items=jax.tree_util.tree_map(storage, item_template),
        keys=jnp.full((capacity,), -1, jnp.int32),
        priorities=jnp.zeros((capacity,), jnp.float32),
        max_priority=jnp.ones((), jnp.float32),
        size=jnp.zeros((), jnp.int32), inserted=jnp.zeros((), jnp.int32))

  def add(state: ReplayState, items: Any, valid: jax.Array) -> ReplayState:
    valid = jnp.asarray(valid).astype(bool)
    rank = jnp.cumsum(valid, dtype=jnp.int32) - 1
    n = jnp.sum(valid, dtype=jnp.int32)
    keys = state.inserted + rank
    # Items overwritten within this call are dropped: scatter indices unique.
    keep = valid & (rank >= n - capacity)
    slot = jnp.where(keep, keys % capacity, capacity)
    put = lambda store, x: store.at[slot].set(
        jnp.asarray(x).astype(store.dtype), mode="drop")
    return ReplayState(
        items=jax.tree_util.tree_map(put, state.items, items),
        keys=state.keys.at[slot].set(keys, mode="drop"),
        priorities=state.priorities.at[slot].set(state.max_priority,
                                                 mode="drop"),
        max_priority=state.max_priority,
        size=jnp.minimum(state.size + n, capacity),
        inserted=state.inserted + n)

  def sample(state: ReplayState, key: jax.Array, batch_size: int):
    p = state.priorities
    mass = jnp.where(p > 0, jnp.power(p, alpha), 0.)
    padded = jnp.pad(mass, (0, num_blocks * block - capacity))
    padded = padded.reshape(num_blocks, block)
    block_sums = padded.sum(axis=1)                        # [num_blocks]
    block_cdf = jnp.cumsum(block_sums)
    total = block_cdf[-1]
    u = jax.random.uniform(key, (batch_size,), jnp.float32) * total
    # Filled slots are a prefix [0, N): clamp rounding overshoots into it.
    last = state.size - 1
    blk = jnp.minimum(jnp.searchsorted(block_cdf, u, side="right"),
                      last // block)
    u_in = jnp.maximum(u - (block_cdf[blk] - block_sums[blk]), 0.)
    within = jnp.cumsum(padded[blk], axis=1)               # [n, block]
    j = jax.vmap(lambda c, v: jnp.searchsorted(c, v, side="right"))(
        within, u_in)
    slot = jnp.minimum(blk * block + jnp.minimum(j, block - 1), last)
    probability = mass[slot] / total
    weights = jnp.power(state.size.astype(jnp.float32) * probability, -beta)
    weights = weights / jnp.max(weights)
    items = jax.tree_util.tree_map(lambda x: x[slot], state.items)
    return state.keys[slot], items, weights

  def update_priorities(state: ReplayState, keys: jax.Array,
                        priorities: jax.Array) -> ReplayState:
    keys = jnp.asarray(keys).astype(jnp.int32)
    priorities = jnp.asarray(priorities).astype(jnp.float32)
    slot = keys % capacity
    ok = (jnp.isfinite(priorities) & (priorities > 0) & (keys >= 0)
          & (keys < state.inserted) & (state.keys[slot] == keys))
    # Last occurrence wins: drop entries repeated later among the ok ones.
    n = keys.shape[0]
    later = (jnp.arange(n)[None, :] > jnp.arange(n)[:, None])
    repeated = jnp.any(later & (keys[None, :] == keys[:, None]) & ok[None, :],
                       axis=1)
    write = ok & ~repeated
    new_max = jnp.max(jnp.where(write, priorities, 0.), initial=0.)
    return state._replace(
        priorities=state.priorities.at[jnp.where(write, slot, capacity)].set(
            priorities, mode="drop"),
        max_priority=jnp.maximum(state.max_priority, new_max))

  return DeviceReplay(init=init, add=add, sample=sample,
                      update_priorities=update_priorities)


def to_sequence_batch(items: SequenceItem,
                      importance_weights: jax.Array) -> SequenceBatch:
  """The learner's time-major `SequenceBatch` from sampled items, jittable.

  As `ngu_jax.replay.to_sequence_batch` (which converts to numpy and so
  cannot run under jit).

  Args:
    items: a `SequenceItem` whose leaves carry a leading batch axis [B, ...].
    importance_weights: float [B].

  Returns:
    A `SequenceBatch` with per-step fields [W, B, ...], `mixture_index` [B],
    `initial_state` leaves [B, ...], `tau` [B] (or None); `epsilon` is
    dropped.
  """
  time_major = {name: jnp.swapaxes(getattr(items, name), 0, 1)
                for name in _STEP_FIELDS + ("mask",)}
  return SequenceBatch(mixture_index=items.mixture_index,
                       initial_state=items.initial_state, tau=items.tau,
                       importance_weights=importance_weights, **time_major)
