"""Tests for ngu_jax.replay.adder (R2D2 / NGU App. A sequences).

Hand-built episodes whose observations encode (lane, episode, step), so
every emitted item can be traced back to its episode and start index; the
expected windows are written out by hand for lengths around L = 80, P = 40 and
recomputed by an independent reference (every multiple of the period inside
the episode, at least burn_in + 2 real steps) for multi-lane streams.
"""

import collections

import jax
import numpy as np
import pytest

from ngu_jax.networks import LSTMState
from ngu_jax.replay import adder as adder_lib
from ngu_jax.replay.adder import AdderStep, SequenceAdder

A = 5        # actions
STATE = 3    # recurrent state width


class Collector:
  """A writer that records every item it gets (and each call's batch)."""

  def __init__(self):
    self.items = []
    self.calls = 0

  def __call__(self, items):
    assert isinstance(items, list) and items
    self.calls += 1
    self.items.extend(items)


def _values(lane, episode, t):
  """The step values of step t of an episode of a lane (t from 0)."""
  action = (7 * t + 3 * lane + episode) % A
  r_ext = 0. if t == 0 else 0.5 * t + lane
  r_int = 0. if t == 0 else 0.01 * t
  return action, r_ext, r_int


class Driver:
  """Feeds B lanes, each with its own list of episode lengths, in lockstep.

  A lane whose episodes are used up keeps going with a last, open episode;
  `run` ends with `adder.flush()`, which truncates those.
  """

  def __init__(self, adder, lengths, num_steps, mixture=None, epsilon=None):
    self.adder = adder
    self.lengths = lengths
    self.num_steps = num_steps
    self.b = len(lengths)
    self.mixture = mixture or [lane % 4 for lane in range(self.b)]
    self.epsilon = epsilon or [0.1 * (lane + 1) for lane in range(self.b)]
    # Per lane: (episode, t) of the next step.
    self.pos = [[0, 0] for _ in range(self.b)]
    self.prev_action = [0] * self.b
    self.episodes = collections.defaultdict(int)  # (lane, ep) -> length

  def step_of(self, lane):
    ep, t = self.pos[lane]
    action, r_ext, r_int = _values(lane, ep, t)
    first = t == 0
    length = (self.lengths[lane][ep] if ep < len(self.lengths[lane])
              else None)
    last = length is not None and t == length - 1
    return dict(
        observation=np.array([lane, ep, t], np.float32),
        action=action, extrinsic_reward=r_ext, intrinsic_reward=r_int,
        discount=0. if last else 1., step_is_first=first,
        behaviour_prob=0.5 + 0.01 * (t % 10),
        prev_action=-1 if first else self.prev_action[lane],
        prev_extrinsic_reward=0. if first else r_ext,
        prev_intrinsic_reward=0. if first else r_int,
        mixture_index=self.mixture[lane], epsilon=self.epsilon[lane],
        state=np.array([lane, ep, t], np.float32))

  def run(self, flush=True):
    for _ in range(self.num_steps):
      steps = [self.step_of(lane) for lane in range(self.b)]
      self.adder.add(make_step(steps))
      for lane, s in enumerate(steps):
        ep, t = self.pos[lane]
        self.prev_action[lane] = s["action"]
        self.episodes[(lane, ep)] = t + 1
        length = (self.lengths[lane][ep] if ep < len(self.lengths[lane])
                  else None)
        self.pos[lane] = [ep + 1, 0] if t + 1 == length else [ep, t + 1]
    if flush:
      self.adder.flush()


def make_step(steps):
  """An AdderStep from a list (over lanes) of dicts of python values."""
  col = lambda k, dt: np.array([s[k] for s in steps], dt)
  state = np.stack([s["state"] for s in steps])
  return AdderStep(
      observation=np.stack([s["observation"] for s in steps]),
      action=col("action", np.int32),
      extrinsic_reward=col("extrinsic_reward", np.float32),
      intrinsic_reward=col("intrinsic_reward", np.float32),
      discount=col("discount", np.float32),
      step_is_first=col("step_is_first", bool),
      behaviour_prob=col("behaviour_prob", np.float32),
      prev_action=col("prev_action", np.int32),
      prev_extrinsic_reward=col("prev_extrinsic_reward", np.float32),
      prev_intrinsic_reward=col("prev_intrinsic_reward", np.float32),
      mixture_index=col("mixture_index", np.int32),
      epsilon=col("epsilon", np.float32),
      recurrent_state=LSTMState(hidden=state, cell=-state))


def reference_windows(n, length, period, burn_in):
  """(start, real steps) of every window of an n-step episode."""
  w = burn_in + length
  return [(s, min(w, n - s)) for s in range(0, n, period)
          if min(w, n - s) >= burn_in + 2]


def _key(item):
  lane, ep, t = item.observation[0]
  return int(lane), int(ep), int(t)


def check_item(item, driver, length, period, burn_in):
  """Checks one item's content against the episode that produced it."""
  w = burn_in + length
  lane, ep, start = _key(item)
  n = driver.episodes[(lane, ep)]
  real = min(w, n - start)
  assert item.observation.shape == (w, 3)
  np.testing.assert_array_equal(item.mask, (np.arange(w) < real))
  assert item.mask.dtype == np.float32
  ts = start + np.arange(real)
  np.testing.assert_array_equal(item.observation[:real, 2], ts)
  np.testing.assert_array_equal(item.observation[:real, :2],
                                np.broadcast_to([lane, ep], (real, 2)))
  values = [_values(lane, ep, t) for t in ts]
  actions = np.array([v[0] for v in values])
  np.testing.assert_array_equal(item.action[:real], actions)
  np.testing.assert_allclose(item.extrinsic_reward[:real],
                             [v[1] for v in values])
  np.testing.assert_allclose(item.intrinsic_reward[:real],
                             [v[2] for v in values])
  np.testing.assert_array_equal(item.step_is_first[:real], ts == 0)
  scheduled = driver.lengths[lane]
  np.testing.assert_array_equal(item.discount[:real], [
      0. if ep < len(scheduled) and t == scheduled[ep] - 1 else 1.
      for t in ts])
  # Network inputs: prev_action[s] = action[s - 1], -1 at the first step;
  # prev_action[0] of a later window is the action before the window.
  expected_prev = np.array([-1 if t == 0 else _values(lane, ep, t - 1)[0]
                            for t in ts])
  np.testing.assert_array_equal(item.prev_action[:real], expected_prev)
  np.testing.assert_allclose(item.prev_extrinsic_reward[:real],
                             [v[1] for v in values])
  np.testing.assert_allclose(item.prev_intrinsic_reward[:real],
                             [v[2] for v in values])
  # Padding is all zeros.
  for name in ("observation", "action", "extrinsic_reward", "discount",
               "step_is_first", "behaviour_prob", "prev_action",
               "prev_extrinsic_reward", "prev_intrinsic_reward"):
    assert not np.any(getattr(item, name)[real:]), name
  # Once-per-sequence fields: the state before the first step.
  np.testing.assert_array_equal(item.initial_state.hidden, [lane, ep, start])
  np.testing.assert_array_equal(item.initial_state.cell, [-lane, -ep, -start])
  assert item.mixture_index == driver.mixture[lane]
  assert item.mixture_index.dtype == np.int32
  np.testing.assert_allclose(item.epsilon, driver.epsilon[lane])
  return lane, ep, start, real


# ----------------------------------------------------------------------------


@pytest.mark.parametrize("n, expected", [
    (1, []),
    (39, [(0, 39)]),
    (40, [(0, 40)]),
    (80, [(0, 80), (40, 40)]),
    (81, [(0, 80), (40, 41)]),
    (200, [(0, 80), (40, 80), (80, 80), (120, 80), (160, 40)]),
])
def test_single_episode_windows(n, expected):
  """Hand-computed windows (start, real steps) of L = 80, P = 40."""
  assert reference_windows(n, 80, 40, 0) == expected
  out = Collector()
  adder = SequenceAdder(out, num_lanes=1)
  # The episode, then the first step of the next one, which ends it.
  driver = Driver(adder, [[n, 5]], num_steps=n + 1)
  driver.run(flush=False)
  got = [check_item(i, driver, 80, 40, 0)[2:] for i in out.items]
  assert got == expected
  # The new episode's single step cannot make an item.
  adder.flush()
  assert len(out.items) == len(expected)


def test_full_windows_emitted_on_their_last_step():
  out = Collector()
  adder = SequenceAdder(out, num_lanes=1, sequence_length=80, period=40)
  driver = Driver(adder, [[1000]], num_steps=0)
  emitted_at = []
  for t in range(200):
    adder.add(make_step([driver.step_of(0)]))
    driver.prev_action[0] = driver.step_of(0)["action"]
    driver.pos[0][1] += 1
    if len(out.items) > len(emitted_at):
      emitted_at.append(t)
  assert emitted_at == [79, 119, 159, 199]
  assert [_key(i)[2] for i in out.items] == [0, 40, 80, 120]
  assert all(i.mask.all() for i in out.items)


def test_lanes_ending_at_different_steps_and_mid_sequence_resets():
  """Four lanes, episodes of many lengths, resets anywhere in a window."""
  lengths = [[1, 39, 40, 80, 3], [81, 200], [200, 2, 57], [45, 45, 45, 45]]
  out = Collector()
  adder = SequenceAdder(out, num_lanes=4)
  driver = Driver(adder, lengths, num_steps=290)
  driver.run()
  got = collections.Counter()
  for item in out.items:
    lane, ep, start, real = check_item(item, driver, 80, 40, 0)
    got[(lane, ep, start, real)] += 1
  expected = collections.Counter()
  for (lane, ep), n in driver.episodes.items():
    for start, real in reference_windows(n, 80, 40, 0):
      expected[(lane, ep, start, real)] += 1
  assert got == expected
  assert max(got.values()) == 1
  # Sanity of the scenario: truncated open episodes were flushed too.
  assert driver.episodes[(1, 2)] == 290 - 281
  assert (1, 2, 0, 9) in got


@pytest.mark.parametrize("length, period, burn_in",
                         [(6, 3, 0), (5, 5, 0), (4, 2, 2), (6, 1, 3)])
def test_other_lengths_periods_and_burn_in(length, period, burn_in):
  """Items hold burn_in + length steps; windows start every `period`."""
  lengths = [[1, 2, 3, 4, 5, 6, 7, 9, 13], [20, 11], [4, 4, 4, 4, 4, 4, 4]]
  out = Collector()
  adder = SequenceAdder(out, num_lanes=3, sequence_length=length,
                        period=period, burn_in=burn_in)
  assert adder.item_length == burn_in + length
  driver = Driver(adder, lengths, num_steps=60)
  driver.run()
  got = collections.Counter(
      check_item(i, driver, length, period, burn_in) for i in out.items)
  expected = collections.Counter(
      (lane, ep, s, r) for (lane, ep), n in driver.episodes.items()
      for s, r in reference_windows(n, length, period, burn_in))
  assert got == expected


def test_one_writer_call_per_add_with_all_completed_items():
  out = Collector()
  adder = SequenceAdder(out, num_lanes=3, sequence_length=4, period=2)
  driver = Driver(adder, [[4], [4], [4]], num_steps=4)
  for _ in range(4):
    adder.add(make_step([driver.step_of(l) for l in range(3)]))
    for l in range(3):
      driver.prev_action[l] = driver.step_of(l)["action"]
      driver.pos[l][1] += 1
  assert out.calls == 1 and len(out.items) == 3


# ----------------------------------------------------------------------------
# Validation at the boundary.


def _good_steps(b=2):
  driver = Driver(SequenceAdder(Collector(), b), [[10]] * b, 0)
  return driver, [driver.step_of(l) for l in range(b)]


@pytest.mark.parametrize("field, value, match", [
    ("prev_action", 2, r"prev_\*.*lane\(s\) \[1\]"),
    ("prev_extrinsic_reward", 1., r"prev_\*"),
    ("extrinsic_reward", np.nan, "NaN"),
    ("discount", 1.5, "discount"),
    ("behaviour_prob", -0.1, "behaviour_prob"),
    ("epsilon", 2., "epsilon"),
    ("action", -1, "below 0"),
    ("prev_action", -2, "below -1"),
])
def test_rejects_bad_first_step(field, value, match):
  driver, steps = _good_steps()
  steps[1][field] = value
  adder = SequenceAdder(Collector(), 2)
  with pytest.raises(ValueError, match=match):
    adder.add(make_step(steps))


def test_rejects_misaligned_inputs_mid_episode_and_stays_consistent():
  out = Collector()
  adder = SequenceAdder(out, 2, sequence_length=4, period=2)
  driver = Driver(adder, [[10], [10]], 0)

  def advance():
    steps = [driver.step_of(l) for l in range(2)]
    adder.add(make_step(steps))
    for l in range(2):
      driver.prev_action[l] = steps[l]["action"]
      driver.pos[l][1] += 1
      driver.episodes[(l, 0)] = driver.pos[l][1]

  advance()
  for field, value, match in [
      ("prev_action", (driver.prev_action[0] + 1) % A, "previous action"),
      ("prev_intrinsic_reward", 9., "reward"),
      ("mixture_index", 3, "mixture_index"),
  ]:
    steps = [driver.step_of(l) for l in range(2)]
    steps[0][field] = value
    with pytest.raises(ValueError, match=match):
      adder.add(make_step(steps))
  for _ in range(5):
    advance()
  adder.flush()
  for item in out.items:  # Nothing of the refused steps leaked in.
    check_item(item, driver, 4, 2, 0)
  assert len(out.items) == 2 * len(reference_windows(6, 4, 2, 0))


def test_rejects_bad_shapes_and_config():
  _, steps = _good_steps()
  good = make_step(steps)
  adder = SequenceAdder(Collector(), 2)
  with pytest.raises(ValueError, match="action"):
    adder.add(good._replace(action=good.action[:1]))
  with pytest.raises(ValueError, match="observation"):
    adder.add(good._replace(observation=good.observation[:1]))
  with pytest.raises(ValueError, match="floating"):
    adder.add(good._replace(discount=np.ones(2, np.int32)))
  with pytest.raises(ValueError, match="recurrent_state"):
    adder.add(good._replace(recurrent_state=np.zeros((3, 2))))
  adder.add(good)
  with pytest.raises(ValueError, match="observation"):
    adder.add(good._replace(observation=good.observation.astype(np.float64)))
  with pytest.raises(ValueError, match="AdderStep"):
    adder.add(tuple(good))
  with pytest.raises(ValueError, match="period"):
    SequenceAdder(Collector(), 2, sequence_length=10, period=11)
  with pytest.raises(ValueError, match="sequence_length"):
    SequenceAdder(Collector(), 2, sequence_length=1, period=1)
  with pytest.raises(ValueError, match="burn_in"):
    SequenceAdder(Collector(), 2, burn_in=-1)
  with pytest.raises(ValueError, match="lane"):
    adder.flush([2])


def test_stack_and_to_sequence_batch_layout():
  out = Collector()
  adder = SequenceAdder(out, num_lanes=3, sequence_length=5, period=5)
  Driver(adder, [[5], [5], [5]], num_steps=5).run()
  items = out.items
  stacked = adder_lib.stack_items(items)
  assert stacked.observation.shape == (3, 5, 3)
  assert stacked.initial_state.hidden.shape == (3, STATE)
  batch = adder_lib.to_sequence_batch(stacked, np.ones(3, np.float32))
  assert batch.observation.shape == (5, 3, 3)
  for name in ("action", "mask", "prev_action", "step_is_first"):
    assert getattr(batch, name).shape == (5, 3)
    np.testing.assert_array_equal(getattr(batch, name)[:, 1],
                                  getattr(items[1], name))
  assert batch.mixture_index.shape == (3,)
  with pytest.raises(ValueError, match="importance_weights"):
    adder_lib.to_sequence_batch(stacked, np.ones(2))


class _Tee:
  """Feeds every step to several adders (a Driver's `adder`)."""

  def __init__(self, *adders):
    self.adders = adders

  def add(self, step):
    for adder in self.adders:
      adder.add(step)

  def flush(self):
    for adder in self.adders:
      adder.flush()


def _assert_items_equal(got, expected):
  assert len(got) == len(expected)
  for g, e in zip(got, expected):
    for x, y in zip(jax.tree_util.tree_leaves(g),
                    jax.tree_util.tree_leaves(e)):
      assert x.dtype == y.dtype
      np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("split", [0, 1, 7, 23])
def test_state_dict_round_trip_continues_exactly(split):
  """An adder restored mid-stream emits exactly the items of the original."""
  lengths = [[1, 39, 9, 13], [20, 11, 2], [4, 4, 4, 4, 4, 4, 4]]
  kwargs = dict(num_lanes=3, sequence_length=6, period=3, burn_in=2)
  out = Collector()
  adder = SequenceAdder(out, **kwargs)
  driver = Driver(adder, lengths, num_steps=split)
  driver.run(flush=False)
  state = adder.state_dict()
  assert all(isinstance(v, np.ndarray) and v.dtype != object
             for v in state.values())
  assert ("buffer/observation" in state) == (split > 0)
  before = len(out.items)
  twin_out = Collector()
  twin = SequenceAdder(twin_out, **kwargs)
  example = LSTMState(hidden=np.zeros((3, STATE), np.float32),
                      cell=np.zeros((3, STATE), np.float32))
  twin.load_state_dict(state, recurrent_state=example)
  driver.adder = _Tee(adder, twin)
  driver.num_steps = 40
  driver.run(flush=True)
  _assert_items_equal(twin_out.items, out.items[before:])
  assert len(twin_out.items) > 5


def test_load_state_dict_rejects_bad_states():
  adder = SequenceAdder(Collector(), num_lanes=2, sequence_length=4,
                        period=2)
  Driver(adder, [[3], [5]], num_steps=3).run(flush=False)
  state = adder.state_dict()
  example = LSTMState(hidden=np.zeros((2, STATE), np.float32),
                      cell=np.zeros((2, STATE), np.float32))
  with pytest.raises(ValueError, match="pass `recurrent_state`"):
    SequenceAdder(Collector(), 2, 4, 2).load_state_dict(state)
  with pytest.raises(ValueError, match="entry 'count' has shape"):
    SequenceAdder(Collector(), 3, 4, 2).load_state_dict(state, example)
  with pytest.raises(ValueError, match="'buffer/action' has shape"):
    SequenceAdder(Collector(), 2, 4, 2).load_state_dict(
        {**state, "buffer/action": np.zeros((2, 5), np.int32)}, example)
  with pytest.raises(ValueError, match="missing entry 'has_prev'"):
    SequenceAdder(Collector(), 2, 4, 2).load_state_dict(
        {k: v for k, v in state.items() if k != "has_prev"}, example)
  with pytest.raises(ValueError, match="unexpected entries"):
    SequenceAdder(Collector(), 2, 4, 2).load_state_dict(
        {**state, "junk": np.zeros(1)}, example)
  wide = LSTMState(hidden=np.zeros((2, STATE + 1), np.float32),
                   cell=np.zeros((2, STATE + 1), np.float32))
  with pytest.raises(ValueError, match="state_slot/0"):
    SequenceAdder(Collector(), 2, 4, 2).load_state_dict(state, wide)
