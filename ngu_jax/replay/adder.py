"""Sequence adder: cuts B actor lanes into overlapping, fixed-length sequences.

NGU App. A and R2D2 (Kapturowski et al., 2019, Sec. 2.3): the learner trains
on sequences of fixed length that carry the recurrent state they started from;
adjacent sequences of an episode overlap, and no sequence crosses an episode
boundary (docs/design.md#sequences).

Windows. Let L = `sequence_length` (80: the T + 1 stored steps of a
`ngu_jax.types.SequenceBatch`, i.e. T = 79 transitions), P = `period` (40)
and K = `burn_in` (0). An item holds W = K + L consecutive steps of one lane.
Number an episode's steps 0, 1, ..., n - 1 (step 0 has `step_is_first`).
Windows start at every multiple of P inside the episode, k P for k = 0, 1,
... with k P < n, and span steps [k P, k P + W) clipped to the episode:

* a window that fits (k P + W <= n) is emitted as soon as its last step
  arrives;
* the others contain the episode's last step; they are emitted when the
  episode ends, zero-padded to W steps with `mask` 0 on the padding, except
  that a window with fewer than K + 2 real steps is dropped: it has no
  transition after its burn-in to learn from (its steps are all in the
  previous window).

So consecutive items overlap by W - P steps, every step is in about W / P
items, and with K = 0 an episode of n >= 2 steps yields ceil((n - 1) / P)
items (n = 1: none; 39 or 40: one; 80 or 81: two; 200: five). With a burn-in
the first K steps of an item only warm up the recurrent state, and the
learner is called with `burn_in=K`; the first K steps of an episode are then
only ever burn-in (as in Acme's R2D2). Choose P <= L so that the trained
parts of consecutive windows leave no gap.

An episode ends when its lane receives a step with `step_is_first` (the
previous steps of that lane are then flushed before the new step is added),
or when `flush` is called (truncation, end of acting).

Network inputs. The actor passes the extra inputs it fed the Q-network
(prev_action, prev_extrinsic_reward, prev_intrinsic_reward) and they are
stored exactly as given, so the learner sees what the actor saw; the adder
checks them against the alignment of `SequenceBatch` and raises ValueError,
naming the lanes, on any mismatch:

  prev_action[s] = action[s - 1], prev_*_reward[s] = *_reward[s]; where
  step_is_first[s], prev_action is -1 (no previous action: an all-zero
  one-hot) and both rewards are 0.

Items are `SequenceItem`s of numpy arrays; stacking B items on a new axis
(`stack_items`) and calling `to_sequence_batch` gives exactly the learner's
`SequenceBatch` (time-major, plus importance weights).
"""

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

import jax
import numpy as np

from ngu_jax import _checks
from ngu_jax.types import SequenceBatch


class AdderStep(NamedTuple):
  """One actor step x_s of all B lanes (inputs of `SequenceAdder.add`).

  Attributes:
    observation: x_s, shaped [B, *observation_shape] (e.g. uint8 84x84x1).
    action: a_s taken at x_s, integer >= 0, shaped [B].
    extrinsic_reward: r^e_s arriving with x_s, float, shaped [B].
    intrinsic_reward: r^i_s, the intrinsic reward of x_s, float, [B].
    discount: environment discount arriving with x_s, in [0, 1], [B].
    step_is_first: True where x_s begins an episode, bool, shaped [B].
    behaviour_prob: mu(a_s | x_s) under the acting policy, in [0, 1], [B].
    prev_action: network input a_{s-1} as fed to the Q-network, int, [B].
    prev_extrinsic_reward: network input r^e_s as fed, float, [B].
    prev_intrinsic_reward: network input r^i_s as fed, float, [B].
    mixture_index: mixture j of each lane, integer >= 0, shaped [B]
      (constant within an episode).
    epsilon: the lane's exploration epsilon, in [0, 1], shaped [B].
    tau: with DiCE's Boltzmann lanes, the lane's temperature > 0, shaped
      [B] (constant within an episode); None otherwise (every step of an
      adder alike).
    recurrent_state: the recurrent state fed to the network together with
      x_s, i.e. before this step (e.g. `networks.LSTMState` of [B, 512]
      arrays): a pytree of arrays shaped [B, ...].
  """
  observation: Any
  action: Any
  extrinsic_reward: Any
  intrinsic_reward: Any
  discount: Any
  step_is_first: Any
  behaviour_prob: Any
  prev_action: Any
  prev_extrinsic_reward: Any
  prev_intrinsic_reward: Any
  mixture_index: Any
  epsilon: Any
  recurrent_state: Any
  tau: Any = None


class SequenceItem(NamedTuple):
  """One replayed sequence of W = burn_in + sequence_length steps.

  The fields up to `initial_state` are those of `ngu_jax.types.SequenceBatch`
  for one lane, without the batch axis (see its docstring for the
  alignment); padded steps (mask 0) are all zeros.

  Attributes:
    observation: shaped [W, *observation_shape].
    action: int32 [W].
    extrinsic_reward: float32 [W].
    intrinsic_reward: float32 [W].
    discount: float32 [W].
    step_is_first: bool [W].
    behaviour_prob: float32 [W].
    mask: float32 [W], 1 for real steps, 0 for padding.
    prev_action: int32 [W].
    prev_extrinsic_reward: float32 [W].
    prev_intrinsic_reward: float32 [W].
    mixture_index: int32 [], the sequence's mixture j.
    initial_state: the recurrent state before the first step (pytree of the
      actor's per-lane state arrays, e.g. `LSTMState` of [lstm_size]).
    epsilon: float32 [], the epsilon of the acting lane (not used by the
      learner; kept for analysis).
    tau: float32 [], the temperature of the acting lane (DiCE's Boltzmann
      lanes; the learner's pi_tau), or None.
  """
  observation: np.ndarray
  action: np.ndarray
  extrinsic_reward: np.ndarray
  intrinsic_reward: np.ndarray
  discount: np.ndarray
  step_is_first: np.ndarray
  behaviour_prob: np.ndarray
  mask: np.ndarray
  prev_action: np.ndarray
  prev_extrinsic_reward: np.ndarray
  prev_intrinsic_reward: np.ndarray
  mixture_index: np.ndarray
  initial_state: Any
  epsilon: np.ndarray
  tau: Any = None


# Per-step fields stored in the lane buffers, with their stored dtype
# (None: the observation keeps the actor's dtype).
_STEP_DTYPES = (
    ("observation", None),
    ("action", np.int32),
    ("extrinsic_reward", np.float32),
    ("intrinsic_reward", np.float32),
    ("discount", np.float32),
    ("step_is_first", np.bool_),
    ("behaviour_prob", np.float32),
    ("prev_action", np.int32),
    ("prev_extrinsic_reward", np.float32),
    ("prev_intrinsic_reward", np.float32),
)
_WHERE = "replay.SequenceAdder.add"


def stack_items(items: Sequence[SequenceItem]) -> SequenceItem:
  """Stacks items on a new leading axis: every leaf becomes [n, ...]."""
  if not items:
    raise ValueError("replay.stack_items: `items` is empty.")
  return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *items)


def to_sequence_batch(items: SequenceItem,
                      importance_weights: Any) -> SequenceBatch:
  """The learner's time-major `SequenceBatch` from B stacked items.

  Args:
    items: a `SequenceItem` whose leaves carry a leading batch axis [B, ...]
      (as returned by a replay's `sample`, or `stack_items`).
    importance_weights: float [B].

  Returns:
    A `SequenceBatch` with per-step fields [W, B, ...] (time-major),
    `mixture_index` [B], `initial_state` leaves [B, ...], `tau` [B] (or
    None); `epsilon` is dropped. Arrays are numpy (views where possible).
  """
  if not isinstance(items, SequenceItem):
    raise ValueError("replay.to_sequence_batch: `items` must be a stacked "
                     f"SequenceItem, got {type(items).__name__}.")
  b = np.shape(items.mixture_index)
  if len(b) != 1:
    raise ValueError("replay.to_sequence_batch: `items` must be stacked on a "
                     f"leading batch axis; mixture_index has shape {b}.")
  _checks.check_shape(importance_weights, b, "importance_weights",
                      "replay.to_sequence_batch")
  time_major = {name: np.swapaxes(np.asarray(getattr(items, name)), 0, 1)
                for name, _ in _STEP_DTYPES + (("mask", None),)}
  return SequenceBatch(
      mixture_index=np.asarray(items.mixture_index),
      initial_state=items.initial_state,
      importance_weights=np.asarray(importance_weights),
      tau=None if items.tau is None else np.asarray(items.tau),
      **time_major)


def _positive_int(value, name, minimum=1):
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"replay.SequenceAdder: `{name}` must be an int, got "
                     f"{value!r}.")
  if value < minimum:
    raise ValueError(f"replay.SequenceAdder: `{name}` must be >= {minimum}, "
                     f"got {value}.")
  return int(value)


class SequenceAdder:
  """Writes B actor lanes as overlapping fixed-length sequences (R2D2 style).

  See the module docstring for exactly which windows are emitted. Per step
  the adder copies each lane's step into a per-lane buffer of W steps (one
  numpy assignment per field for all lanes); a full window is copied out as
  an item and the buffer shifted by P steps. Memory: B * W steps plus
  ceil(W / P) recurrent states per lane.

  Usage:
    adder = SequenceAdder(replay.insert, num_lanes=B)
    for each actor step:  adder.add(AdderStep(...))   # [B]-leading arrays
    adder.flush()          # at the end of acting: emit pending tails

  With a rate-limited replay (`samples_per_insert`), let the actor wait
  for the learner: `SequenceAdder(functools.partial(replay.insert,
  timeout=None), B)`; the default timeout 0 raises instead.

  NOTE: not thread-safe; use one adder per actor thread.
  """

  def __init__(self, writer: Callable[[List[SequenceItem]], Any],
               num_lanes: int, sequence_length: int = 80, period: int = 40,
               burn_in: int = 0):
    """Creates an adder.

    Args:
      writer: called with a non-empty list of the `SequenceItem`s completed
        by one `add` or `flush` call, e.g. a replay's `insert`.
      num_lanes: B, the number of actor lanes.
      sequence_length: L, stored steps per sequence after the burn-in (the
        T + 1 of `SequenceBatch`; docs/design.md#sequences: 80), >= 2.
      period: P, steps between the starts of consecutive windows (40),
        1 <= P <= L.
      burn_in: K, extra leading steps per item used only to warm the
        recurrent state (default 0; R2D2 up to 40). Items then hold K + L
        steps; train with `learning.loss(..., burn_in=K)`.
    """
    self._writer = writer
    self._lanes = _positive_int(num_lanes, "num_lanes")
    self._length = _positive_int(sequence_length, "sequence_length", 2)
    self._period = _positive_int(period, "period")
    self._burn_in = _positive_int(burn_in, "burn_in", 0)
    if self._period > self._length:
      raise ValueError(
          f"replay.SequenceAdder: `period` ({period}) must be <= "
          f"`sequence_length` ({sequence_length}), or steps would be skipped.")
    self._window = self._burn_in + self._length
    self._num_slots = -(-self._window // self._period)  # window starts/buffer
    b = self._lanes
    self._count = np.zeros(b, np.int64)      # steps in the lane buffer
    self._has_prev = np.zeros(b, bool)       # a previous step is known
    self._in_episode = np.zeros(b, bool)     # an episode is in progress
    self._last_action = np.zeros(b, np.int32)
    self._episode_mixture = np.zeros(b, np.int32)
    self._buffers = None                     # name -> [B, W, ...]
    self._obs_spec = None
    self._state_def = None
    self._state_specs = None
    self._state_slots = None                 # leaves [B, S, ...]
    self._mixture_slots = np.zeros((b, self._num_slots), np.int32)
    self._epsilon_slots = np.zeros((b, self._num_slots), np.float32)
    # DiCE's temperatures, once the first step brings them (None: none).
    self._tau_slots = None

  @property
  def item_length(self) -> int:
    """W = burn_in + sequence_length, the steps per item."""
    return self._window

  @property
  def num_lanes(self) -> int:
    return self._lanes

  # ---------------------------------------------------------- checkpoints

  def state_dict(self) -> Dict[str, np.ndarray]:
    """The adder's partially built sequences, as a flat dict of arrays.

    For checkpoints (`ngu_jax.loops.python.state`): copies of the lane
    bookkeeping ("count" int64 [B], "has_prev" / "in_episode" bool [B],
    "last_action" / "episode_mixture" int32 [B], "mixture_slots" int32
    [B, S], "epsilon_slots" float32 [B, S], S = ceil(W / P) window starts)
    and, once the first step has been added, the lane buffers
    "buffer/<field>" [B, W, ...] and the recurrent states at the window
    starts "state_slot/<i>" [B, S, ...], one per leaf of
    `AdderStep.recurrent_state` in `jax.tree_util` order.
    """
    out = {"count": self._count, "has_prev": self._has_prev,
           "in_episode": self._in_episode, "last_action": self._last_action,
           "episode_mixture": self._episode_mixture,
           "mixture_slots": self._mixture_slots,
           "epsilon_slots": self._epsilon_slots}
    if self._tau_slots is not None:
      out["tau_slots"] = self._tau_slots
    if self._buffers is not None:
      for name, buf in self._buffers.items():
        out[f"buffer/{name}"] = buf
      for i, slots in enumerate(self._state_slots):
        out[f"state_slot/{i}"] = slots
    return {name: np.array(x) for name, x in out.items()}

  def load_state_dict(self, state: Dict[str, Any],
                      recurrent_state: Any = None) -> None:
    """Restores a `state_dict` (of an adder with the same B, L, P and K).

    The writer is not called: pending windows stay pending and are emitted
    by the following `add` / `flush` calls exactly as they would have been.

    Args:
      state: the dict returned by `state_dict` (arrays may be array-likes).
      recurrent_state: needed when `state` holds buffers: an example of the
        `AdderStep.recurrent_state` the adder receives (e.g. the actor's
        `LSTMState` of [B, lstm_size] arrays); only its pytree structure,
        shapes and dtypes are used.

    Raises:
      ValueError: missing or extra entries, or arrays whose shape or dtype
        does not fit this adder (the message names the entry).
    """
    where = "replay.SequenceAdder.load_state_dict"
    b, w, slots = self._lanes, self._window, self._num_slots
    state = dict(state)

    def take(name, shape, dtype):
      if name not in state:
        raise ValueError(f"{where}: missing entry {name!r}.")
      x = np.array(state.pop(name))
      if x.shape != shape or (dtype is not None and x.dtype != dtype):
        raise ValueError(
            f"{where}: entry {name!r} has shape {x.shape} and dtype "
            f"{x.dtype}; expected shape {shape} and dtype "
            f"{'any' if dtype is None else np.dtype(dtype)}.")
      return x

    lanes = dict(count=take("count", (b,), np.int64),
                 has_prev=take("has_prev", (b,), np.bool_),
                 in_episode=take("in_episode", (b,), np.bool_),
                 last_action=take("last_action", (b,), np.int32),
                 episode_mixture=take("episode_mixture", (b,), np.int32),
                 mixture_slots=take("mixture_slots", (b, slots), np.int32),
                 epsilon_slots=take("epsilon_slots", (b, slots), np.float32))
    tau_slots = (take("tau_slots", (b, slots), np.float32)
                 if "tau_slots" in state else None)
    if ((lanes["count"] < 0) | (lanes["count"] >= w)).any():
      raise ValueError(f"{where}: entry 'count' must lie in [0, {w}), got "
                       f"{lanes['count'].tolist()}.")
    buffers = state_def = state_specs = state_slots = obs_spec = None
    if "buffer/observation" in state:
      obs = np.asarray(state["buffer/observation"])
      if obs.ndim < 2:
        raise ValueError(f"{where}: entry 'buffer/observation' must be "
                         f"[B, W, ...], got shape {obs.shape}.")
      obs_spec = (obs.shape[2:], obs.dtype)
      buffers = {name: take(f"buffer/{name}", (b, w) + (
          obs.shape[2:] if dtype is None else ()), dtype)
                 for name, dtype in _STEP_DTYPES}
      if recurrent_state is None:
        raise ValueError(f"{where}: the state holds sequences in progress; "
                         "pass `recurrent_state` (an example of the "
                         "recurrent states added) to restore them.")
      leaves, state_def = jax.tree_util.tree_flatten(recurrent_state)
      state_specs = [(tuple(np.shape(x)[1:]), np.dtype(x.dtype))
                     for x in leaves]
      state_slots = [take(f"state_slot/{i}", (b, slots) + shape, dtype)
                     for i, (shape, dtype) in enumerate(state_specs)]
    if state:
      raise ValueError(f"{where}: unexpected entries {sorted(state)}.")
    self._count = lanes["count"]
    self._has_prev = lanes["has_prev"]
    self._in_episode = lanes["in_episode"]
    self._last_action = lanes["last_action"]
    self._episode_mixture = lanes["episode_mixture"]
    self._mixture_slots = lanes["mixture_slots"]
    self._tau_slots = tau_slots
    self._epsilon_slots = lanes["epsilon_slots"]
    self._buffers, self._obs_spec = buffers, obs_spec
    self._state_def, self._state_specs = state_def, state_specs
    self._state_slots = state_slots

  # ----------------------------------------------------------- validation

  def _lane_array(self, x, name, dtype_kind):
    x = np.asarray(x)
    _checks.check_shape(x, (self._lanes,), f"step.{name}", _WHERE)
    if dtype_kind == "int":
      if not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"{_WHERE}: `step.{name}` must be integer, got dtype "
                         f"{x.dtype}.")
      low = -1 if name == "prev_action" else 0  # -1: no previous action.
      _checks.check_values(x < low, f"has values below {low}",
                           f"step.{name}", _WHERE)
    elif dtype_kind == "bool":
      if x.dtype != np.bool_:
        if not np.issubdtype(x.dtype, np.integer):
          raise ValueError(f"{_WHERE}: `step.{name}` must be bool, got dtype "
                           f"{x.dtype}.")
        _checks.check_binary(x, f"step.{name}", _WHERE)
        x = x.astype(bool)
    else:
      if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"{_WHERE}: `step.{name}` must be floating point, "
                         f"got dtype {x.dtype}.")
      _checks.check_finite(x, f"step.{name}", _WHERE)
    return x

  def _validate(self, step: AdderStep):
    if not isinstance(step, AdderStep):
      raise ValueError(f"{_WHERE}: `step` must be an AdderStep, got "
                       f"{type(step).__name__}.")
    obs = np.asarray(step.observation)
    if obs.ndim < 1 or obs.shape[0] != self._lanes:
      raise ValueError(f"{_WHERE}: `step.observation` must be shaped [B = "
                       f"{self._lanes}, ...], got {obs.shape}.")
    if self._obs_spec is not None and (obs.shape[1:], obs.dtype) != (
        self._obs_spec):
      raise ValueError(
          f"{_WHERE}: `step.observation` must keep shape [B, "
          f"*{self._obs_spec[0]}] and dtype {self._obs_spec[1]}, got "
          f"{obs.shape} and {obs.dtype}.")
    v = {"observation": obs}
    for name in ("action", "prev_action", "mixture_index"):
      v[name] = self._lane_array(getattr(step, name), name, "int")
    v["step_is_first"] = self._lane_array(step.step_is_first, "step_is_first",
                                          "bool")
    for name in ("extrinsic_reward", "intrinsic_reward", "discount",
                 "behaviour_prob", "prev_extrinsic_reward",
                 "prev_intrinsic_reward", "epsilon"):
      v[name] = self._lane_array(getattr(step, name), name, "float")
    for name in ("discount", "behaviour_prob", "epsilon"):
      _checks.check_closed_range(v[name], 0., 1., f"step.{name}", _WHERE)
    v["tau"] = None
    if step.tau is not None:
      v["tau"] = self._lane_array(step.tau, "tau", "float")
      _checks.check_values(~(v["tau"] > 0), "must be > 0", "step.tau",
                           _WHERE)
    if self._buffers is not None and ((v["tau"] is None)
                                      != (self._tau_slots is None)):
      raise ValueError(f"{_WHERE}: `step.tau` must be given at every step or "
                       "at none (DiCE's Boltzmann lanes give it).")

    leaves, treedef = jax.tree_util.tree_flatten(step.recurrent_state)
    leaves = [np.asarray(x) for x in leaves]
    if not leaves:
      raise ValueError(f"{_WHERE}: `step.recurrent_state` has no arrays.")
    for x in leaves:
      if x.ndim < 1 or x.shape[0] != self._lanes:
        raise ValueError(f"{_WHERE}: every leaf of `step.recurrent_state` "
                         f"must be shaped [B = {self._lanes}, ...], got "
                         f"{x.shape}.")
    specs = [(x.shape[1:], x.dtype) for x in leaves]
    if self._state_def is not None and (treedef != self._state_def
                                        or specs != self._state_specs):
      raise ValueError(f"{_WHERE}: `step.recurrent_state` changed structure, "
                       "shape or dtype since the first step.")
    v["recurrent_state"] = (leaves, treedef, specs)

    # Alignment of the network inputs (ngu_jax.types.SequenceBatch).
    first = v["step_is_first"]
    f32 = np.float32
    zero_at_first = first & ((v["prev_action"] != -1)
                             | (v["prev_extrinsic_reward"] != 0)
                             | (v["prev_intrinsic_reward"] != 0))
    _checks.check_values(
        zero_at_first, "is not the episode-start input where step_is_first "
        "(prev_action must be -1, prev_extrinsic_reward and "
        "prev_intrinsic_reward 0)", "step.prev_*", _WHERE)
    rewards_differ = ~first & (
        (v["prev_extrinsic_reward"].astype(f32)
         != v["extrinsic_reward"].astype(f32))
        | (v["prev_intrinsic_reward"].astype(f32)
           != v["intrinsic_reward"].astype(f32)))
    _checks.check_values(
        rewards_differ, "differs from the step's reward (the network input "
        "at x_s is r_s, the reward arriving with x_s)",
        "step.prev_extrinsic_reward / prev_intrinsic_reward", _WHERE)
    action_differs = (~first & self._has_prev
                      & (v["prev_action"] != self._last_action))
    _checks.check_values(action_differs,
                         "differs from the lane's previous action",
                         "step.prev_action", _WHERE)
    mixture_changed = (~first & self._in_episode
                       & (v["mixture_index"] != self._episode_mixture))
    _checks.check_values(mixture_changed,
                         "changed within an episode (only allowed where "
                         "step_is_first)", "step.mixture_index", _WHERE)
    return v

  # -------------------------------------------------------------- buffers

  def _allocate(self, v):
    b, w = self._lanes, self._window
    obs = v["observation"]
    self._obs_spec = (obs.shape[1:], obs.dtype)
    self._buffers = {}
    for name, dtype in _STEP_DTYPES:
      if name == "observation":
        self._buffers[name] = np.zeros((b, w) + obs.shape[1:], obs.dtype)
      else:
        self._buffers[name] = np.zeros((b, w), dtype)
    leaves, treedef, specs = v["recurrent_state"]
    self._state_def, self._state_specs = treedef, specs
    self._state_slots = [np.zeros((b, self._num_slots) + s, d)
                         for s, d in specs]
    if v["tau"] is not None:
      self._tau_slots = np.zeros((b, self._num_slots), np.float32)

  def _make_item(self, lane: int, count: int) -> SequenceItem:
    """Copies the first `count` steps of a lane's buffer, zero-padded."""
    w = self._window
    fields = {}
    for name, _ in _STEP_DTYPES:
      src = self._buffers[name][lane]
      if count == w:
        fields[name] = src.copy()
      else:
        dst = np.zeros_like(src)
        dst[:count] = src[:count]
        fields[name] = dst
    mask = np.zeros(w, np.float32)
    mask[:count] = 1.
    state = jax.tree_util.tree_unflatten(
        self._state_def, [s[lane, 0].copy() for s in self._state_slots])
    return SequenceItem(
        mask=mask,
        mixture_index=np.int32(self._mixture_slots[lane, 0]),
        initial_state=state,
        epsilon=np.float32(self._epsilon_slots[lane, 0]),
        tau=(None if self._tau_slots is None
             else np.float32(self._tau_slots[lane, 0])),
        **fields)

  def _shift(self, lane: int, count: int) -> int:
    """Drops the first P steps (and window start) of a lane's buffer."""
    p = self._period
    keep = max(count - p, 0)
    if keep:
      for buf in self._buffers.values():
        buf[lane, :keep] = buf[lane, p:p + keep]
    tau = [] if self._tau_slots is None else [self._tau_slots]
    for slots in self._state_slots + [self._mixture_slots,
                                      self._epsilon_slots] + tau:
      slots[lane, :-1] = slots[lane, 1:]
    self._count[lane] = keep
    return keep

  def _flush_lane(self, lane: int, items: List[SequenceItem]) -> None:
    count = int(self._count[lane])
    while count >= self._burn_in + 2:
      items.append(self._make_item(lane, count))
      count = self._shift(lane, count)
    self._count[lane] = 0
    self._in_episode[lane] = False

  # ---------------------------------------------------------------- public

  def add(self, step: AdderStep) -> None:
    """Adds step x_s of every lane; emits the sequences it completes.

    Lanes whose `step_is_first` is set first end their previous episode
    (its pending windows are emitted, padded). All inputs are validated
    before anything is changed, so a ValueError leaves the adder as it was.

    Args:
      step: an `AdderStep` of [B]-leading arrays.

    Raises:
      ValueError: on shapes, dtypes or values that do not fit (NaN, discount
        or probabilities outside [0, 1], misaligned network inputs, a mixture
        index changing mid-episode), naming the field and the lanes.
    """
    v = self._validate(step)
    if self._buffers is None:
      self._allocate(v)
    items: List[SequenceItem] = []
    first = v["step_is_first"]
    for lane in np.flatnonzero(first & (self._count > 0)):
      self._flush_lane(int(lane), items)

    lanes = np.arange(self._lanes)
    count = self._count
    for name, _ in _STEP_DTYPES:
      self._buffers[name][lanes, count] = v[name]
    starts = np.flatnonzero(count % self._period == 0)
    if starts.size:
      slot = count[starts] // self._period
      for store, leaf in zip(self._state_slots, v["recurrent_state"][0]):
        store[starts, slot] = leaf[starts]
      self._mixture_slots[starts, slot] = v["mixture_index"][starts]
      self._epsilon_slots[starts, slot] = v["epsilon"][starts]
      if self._tau_slots is not None:
        self._tau_slots[starts, slot] = v["tau"][starts]
    self._count += 1
    new_episode = first | ~self._in_episode
    self._episode_mixture = np.where(new_episode, v["mixture_index"],
                                     self._episode_mixture).astype(np.int32)
    self._in_episode[:] = True
    self._last_action[:] = v["action"]
    self._has_prev[:] = True

    for lane in np.flatnonzero(self._count == self._window):
      items.append(self._make_item(int(lane), self._window))
      self._shift(int(lane), self._window)
    if items:
      self._writer(items)

  def flush(self, lanes: Optional[Sequence[int]] = None) -> None:
    """Ends the current episode of `lanes` (default: all) now.

    Emits their pending windows, zero-padded (as at an episode end). Use it
    when an episode is truncated without a following `step_is_first`, and at
    the end of acting. The next step of such a lane starts new windows (it
    should normally be a `step_is_first` step).
    """
    if lanes is None:
      lanes = range(self._lanes)
    items: List[SequenceItem] = []
    for lane in lanes:
      lane = int(lane)
      if not 0 <= lane < self._lanes:
        raise ValueError(f"replay.SequenceAdder.flush: lane {lane} outside "
                         f"[0, {self._lanes}).")
      if self._buffers is not None:
        self._flush_lane(lane, items)
    if items:
      self._writer(items)
