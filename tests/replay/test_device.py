"""Tests for ngu_jax.replay.device (pure adder and replay; NGU App. A, R2D2).

References are the numpy `SequenceAdder` and `PrioritizedReplay`: the same
random stream of steps (episodes of length 1, 2, W - 1, W, W + 1 and longer,
flushes in mid-episode) must give the same items in the same order, and the
same inserts the same slots, keys and priorities. Sampling is checked against
P(i) ∝ p_i^alpha written out, by a chi-square statistic compared with a
critical value written out.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.replay import device
from ngu_jax.replay.adder import AdderStep, SequenceAdder, SequenceItem
from ngu_jax.replay.adder import stack_items
from ngu_jax.replay.adder import to_sequence_batch as np_to_sequence_batch
from ngu_jax.replay.prioritized import PrioritizedReplay

JIT = [pytest.param(False, id="nojit"), pytest.param(True, id="jit")]
# Un-jitted runs dispatch op by op (seconds each on a shared CPU): the heavy
# ones are marked slow; every function still runs un-jitted in the fast set.
JIT_SLOW = [pytest.param(False, id="nojit", marks=pytest.mark.slow),
            pytest.param(True, id="jit")]


def _maybe_jit(fn, jit, **kwargs):
  return jax.jit(fn, **kwargs) if jit else fn


# ================================================================ adder


def make_stream(seed, num_lanes, num_steps, window, flush_at=(),
                with_tau=False):
  """Random `AdderStep`s (numpy) of valid, aligned episodes; None = flush.

  With `with_tau` each step carries its lane's episode temperature (DiCE's
  Boltzmann lanes), drawn anew at every episode start like the mixture."""
  rng = np.random.default_rng(seed)
  tau_rng = np.random.default_rng(seed + 1)
  tau = tau_rng.uniform(0.02, 5., num_lanes).astype(np.float32)
  pool = [1, 2, window - 1, window, window + 1, 2 * window + 3]
  b = num_lanes
  length = [int(rng.choice(pool)) for _ in range(b)]
  t = [0] * b
  mixture = rng.integers(0, 4, b)
  last_action = np.zeros(b, np.int32)
  stream = []
  for s in range(num_steps):
    if s in flush_at:
      stream.append(None)
    first = np.zeros(b, bool)
    for lane in range(b):
      if t[lane] == length[lane]:
        t[lane] = 0
        length[lane] = int(rng.choice(pool + [int(rng.integers(1, 3 * window))]))
        mixture[lane] = rng.integers(0, 4)
        tau[lane] = tau_rng.uniform(0.02, 5.)
      # Lane 0 starts without a step_is_first (a fresh adder treats it as one).
      first[lane] = t[lane] == 0 and not (s == 0 and lane == 0)
      t[lane] += 1
    action = rng.integers(0, 5, b).astype(np.int32)
    r_ext = rng.normal(size=b).astype(np.float32)
    r_int = rng.random(b).astype(np.float32)
    stream.append(AdderStep(
        observation=rng.normal(size=(b, 2, 3)).astype(np.float32),
        action=action, extrinsic_reward=r_ext, intrinsic_reward=r_int,
        discount=rng.integers(0, 2, b).astype(np.float32),
        step_is_first=first,
        behaviour_prob=rng.random(b).astype(np.float32),
        prev_action=np.where(first, -1, last_action).astype(np.int32),
        prev_extrinsic_reward=np.where(first, 0., r_ext).astype(np.float32),
        prev_intrinsic_reward=np.where(first, 0., r_int).astype(np.float32),
        mixture_index=mixture.astype(np.int32).copy(),
        epsilon=rng.random(b).astype(np.float32),
        recurrent_state={"h": rng.normal(size=(b, 3)).astype(np.float32),
                         "n": rng.integers(0, 100, (b, 2)).astype(np.int32)},
        tau=tau.copy() if with_tau else None))
    last_action = action
  return stream


def numpy_calls(stream, num_lanes, length, period, burn_in):
  """The item lists `SequenceAdder` writes, one list per add / flush call."""
  calls, current = [], []
  adder = SequenceAdder(current.extend, num_lanes, length, period, burn_in)
  for step in stream:
    current.clear()
    if step is None:
      adder.flush()
    else:
      adder.add(step)
    calls.append(list(current))
  current.clear()
  adder.flush()
  calls.append(list(current))
  return calls


def device_calls(stream, num_lanes, length, period, burn_in, jit):
  dev = device.make_sequence_adder(num_lanes, length, period, burn_in)
  add = _maybe_jit(dev.add, jit)
  flush = _maybe_jit(dev.flush, jit)
  state = dev.init(stream[0])
  calls = []

  def record(items, valid):
    valid = np.asarray(valid)
    n = int(valid.sum())
    assert valid[:n].all() and not valid[n:].any()  # valid items: a prefix.
    assert valid.shape == (dev.items_per_step,)
    calls.append([jax.tree_util.tree_map(lambda x, i=i: np.asarray(x[i]),
                                         items) for i in range(n)])
    # Invalid items are all zeros.
    for leaf in jax.tree_util.tree_leaves(items):
      assert not np.asarray(leaf)[n:].any()

  for step in stream:
    if step is None:
      state, items, valid = flush(state)
    else:
      state, items, valid = add(state, step)
    record(items, valid)
  state, items, valid = flush(state)
  record(items, valid)
  return calls


def assert_items_equal(got, want, where):
  assert isinstance(got, SequenceItem)
  for name in SequenceItem._fields:
    g_leaves = jax.tree_util.tree_leaves(getattr(got, name))
    w_leaves = jax.tree_util.tree_leaves(getattr(want, name))
    assert len(g_leaves) == len(w_leaves)
    for g, w in zip(g_leaves, w_leaves):
      w = np.asarray(w)
      assert g.dtype == w.dtype, (where, name, g.dtype, w.dtype)
      np.testing.assert_array_equal(g, w, err_msg=f"{where}: {name}")


# (L, P, K, jit): small windows; L = 2 and P = L as edge cases. Un-jitted
# (op by op, 20-50 s each) only the config with burn-in, which flushes in
# the middle of episodes; the un-jitted path also runs in the fast set
# (test_adder_matches_sequence_adder_unjitted).
CONFIGS = [(5, 2, 0, True), (6, 3, 1, True), (4, 4, 0, True),
           (2, 1, 0, True),
           pytest.param(5, 2, 2, True, marks=pytest.mark.slow),
           pytest.param(3, 3, 1, True, marks=pytest.mark.slow),
           pytest.param(5, 2, 2, False, marks=pytest.mark.slow)]


@pytest.mark.parametrize("length,period,burn_in,jit", CONFIGS)
def test_adder_matches_sequence_adder(length, period, burn_in, jit):
  b, w = 3, length + burn_in
  stream = make_stream(seed=length * 10 + period + burn_in, num_lanes=b,
                       num_steps=70, window=w, flush_at=(23, 24, 51))
  want = numpy_calls(stream, b, length, period, burn_in)
  got = device_calls(stream, b, length, period, burn_in, jit)
  assert len(got) == len(want)
  assert sum(map(len, want)) > 10
  _compare_calls(got, want)


def _compare_calls(got, want):
  for call, (g, w_) in enumerate(zip(got, want)):
    assert len(g) == len(w_), f"call {call}: {len(g)} vs {len(w_)} items"
    for i, (gi, wi) in enumerate(zip(g, w_)):
      assert_items_equal(gi, wi, f"call {call} item {i}")


@pytest.mark.parametrize("jit", [True])
def test_adders_carry_each_sequences_tau(jit):
  """DiCE's temperatures: both adders give each item the tau of its first
  step (constant within the episode), and the items agree."""
  b, length, period, burn_in = 3, 5, 2, 1
  stream = make_stream(seed=11, num_lanes=b, num_steps=40, window=6,
                       flush_at=(17,), with_tau=True)
  want = numpy_calls(stream, b, length, period, burn_in)
  got = device_calls(stream, b, length, period, burn_in, jit)
  _compare_calls(got, want)
  items = [item for call in want for item in call]
  assert len(items) > 5
  taus = {float(s.tau[lane]) for s in stream if s is not None
          for lane in range(b)}
  assert all(float(item.tau) in taus for item in items)
  batch = device.to_sequence_batch(stack_items(items), np.ones(len(items)))
  np.testing.assert_array_equal(batch.tau, [item.tau for item in items])
  # Without tau nothing changes: items carry None.
  plain = numpy_calls(make_stream(seed=11, num_lanes=b, num_steps=10,
                                  window=6), b, length, period, burn_in)
  assert all(item.tau is None for call in plain for item in call)


def test_host_adder_wants_tau_at_every_step_or_none():
  stream = [s for s in make_stream(seed=3, num_lanes=2, num_steps=4,
                                   window=4, with_tau=True) if s is not None]
  adder = SequenceAdder(lambda items: None, 2, 3, 1)
  adder.add(stream[0])
  with pytest.raises(ValueError, match="step.tau"):
    adder.add(stream[1]._replace(tau=None))
  with pytest.raises(ValueError, match="step.tau"):
    adder.add(stream[1]._replace(tau=np.array([1., 0.], np.float32)))
  adder.add(stream[1])
  state = adder.state_dict()
  assert state["tau_slots"].shape == (2, 3)
  again = SequenceAdder(lambda items: None, 2, 3, 1)
  again.load_state_dict(state, recurrent_state=stream[0].recurrent_state)
  np.testing.assert_array_equal(again.state_dict()["tau_slots"],
                                state["tau_slots"])


def test_adder_matches_sequence_adder_unjitted():
  """add and flush run op by op: a short stream, with a burn-in."""
  b, length, period, burn_in = 2, 4, 2, 1
  stream = make_stream(seed=5, num_lanes=b, num_steps=16, window=5,
                       flush_at=(9,))
  want = numpy_calls(stream, b, length, period, burn_in)
  got = device_calls(stream, b, length, period, burn_in, jit=False)
  assert len(got) == len(want) and sum(map(len, want)) > 3
  _compare_calls(got, want)


@pytest.mark.parametrize("length,period,m", [
    (5, 2, 2), (6, 3, 2), (4, 4, 1), (2, 1, 1), (3, 3, 1), (80, 40, 2),
    (80, 20, 4), (10, 1, 8)])
def test_items_per_lane(length, period, m):
  # M = max(1, ceil((L - 2) / P)), written out per case.
  assert device.items_per_lane(length, period) == m
  assert device.make_sequence_adder(3, length, period).items_per_step == 3 * m


@pytest.mark.parametrize("length,period,burn_in", [(5, 2, 0), (6, 3, 1),
                                                   (10, 1, 0)])
def test_episode_end_emits_m_items(length, period, burn_in):
  """A lane holding W - 1 steps emits exactly M items at an episode end."""
  w = length + burn_in
  stream = make_stream(0, 1, w, w)
  stream = [s._replace(step_is_first=np.array([i == 0]),
                       prev_action=np.array([-1]) if i == 0 else s.prev_action)
            for i, s in enumerate(stream)]
  # W - 1 steps of one episode, then a first step: M flushed windows.
  dev = device.make_sequence_adder(1, length, period, burn_in)
  add = jax.jit(dev.add)
  state = dev.init(stream[0])
  for step in stream[:w - 1]:
    state, _, valid = add(state, step)
    assert not np.asarray(valid).any()
  _, items, valid = add(state, stream[0])
  m = device.items_per_lane(length, period)
  assert np.asarray(valid).tolist() == [True] * m
  # Real steps W - 1, W - 1 - P, ... (>= K + 2).
  np.testing.assert_array_equal(
      np.asarray(items.mask).sum(axis=1), [w - 1 - j * period for j in range(m)])


def test_adder_hand_example():
  """L = 5, P = 2, K = 0, one lane: an episode of 7 steps, then a new one."""
  dev = device.make_sequence_adder(1, sequence_length=5, period=2)
  zeros = np.zeros(1, np.float32)

  def step(t, first):
    return AdderStep(
        observation=np.array([[10. + t]], np.float32),
        action=np.array([t], np.int32), extrinsic_reward=zeros,
        intrinsic_reward=zeros, discount=np.ones(1, np.float32),
        step_is_first=np.array([first]), behaviour_prob=zeros,
        prev_action=np.array([-1 if first else t - 1], np.int32),
        prev_extrinsic_reward=zeros, prev_intrinsic_reward=zeros,
        mixture_index=np.array([2], np.int32),
        epsilon=np.array([0.5 + t], np.float32),
        recurrent_state=np.array([[100. + t]], np.float32))

  add = jax.jit(dev.add)
  state = dev.init(step(0, True))
  emitted = []
  for t in range(7):
    state, items, valid = add(state, step(t, t == 0))
    emitted.append((t, np.asarray(valid).sum()))
    if t == 4:   # window [0, 5) full.
      np.testing.assert_array_equal(items.action[0], [0, 1, 2, 3, 4])
      assert items.initial_state[0, 0] == 100.
    if t == 6:   # window [2, 7) full.
      np.testing.assert_array_equal(items.action[0], [2, 3, 4, 5, 6])
      np.testing.assert_array_equal(items.observation[0, :, 0],
                                    [12., 13., 14., 15., 16.])
      assert items.initial_state[0, 0] == 102. and items.epsilon[0] == 2.5
  assert [n for _, n in emitted] == [0, 0, 0, 0, 1, 0, 1]
  # New episode: window [4, 7) has 3 real steps, [6, 7) one (dropped).
  state, items, valid = add(state, step(0, True))
  np.testing.assert_array_equal(valid, [True, False])
  np.testing.assert_array_equal(items.action[0], [4, 5, 6, 0, 0])
  np.testing.assert_array_equal(items.mask[0], [1, 1, 1, 0, 0])
  assert items.initial_state[0, 0] == 104. and items.epsilon[0] == 4.5
  assert items.mixture_index[0] == 2
  assert int(state.episode_step[0]) == 1


def test_adder_vmap_over_seeds():
  b, length, period = 2, 5, 2
  dev = device.make_sequence_adder(b, length, period)
  streams = [make_stream(s, b, 20, length) for s in (1, 2)]
  stack = lambda *xs: np.stack(xs)
  state = jax.vmap(dev.init)(jax.tree_util.tree_map(stack, streams[0][0],
                                                    streams[1][0]))
  add = jax.jit(jax.vmap(dev.add))
  got = [[], []]
  for s0, s1 in zip(*streams):
    state, items, valid = add(state, jax.tree_util.tree_map(stack, s0, s1))
    for seed in range(2):
      n = int(np.asarray(valid[seed]).sum())
      got[seed].extend(
          jax.tree_util.tree_map(lambda x, i=i: np.asarray(x[seed, i]), items)
          for i in range(n))
  for seed in range(2):
    want = [i for c in numpy_calls(streams[seed], b, length, period, 0)[:-1]
            for i in c]
    assert len(got[seed]) == len(want) > 0
    for g, w in zip(got[seed], want):
      assert_items_equal(g, w, f"seed {seed}")


@pytest.mark.parametrize("jit", JIT)
def test_to_sequence_batch_matches_numpy(jit):
  stream = make_stream(3, 2, 12, 5)
  items = [i for c in numpy_calls(stream, 2, 4, 2, 1) for i in c]
  stacked = stack_items(items)
  weights = np.linspace(0.1, 1., len(items)).astype(np.float32)
  got = _maybe_jit(device.to_sequence_batch, jit)(
      jax.tree_util.tree_map(jnp.asarray, stacked), jnp.asarray(weights))
  want = np_to_sequence_batch(stacked, weights)
  for g, w in zip(jax.tree_util.tree_leaves(got),
                  jax.tree_util.tree_leaves(want)):
    np.testing.assert_array_equal(np.asarray(g), w)
  assert got.observation.shape[:2] == (5, len(items))


# =============================================================== replay


def item(k):
  """A small item pytree whose leaves encode k."""
  return {"x": np.full((2, 3), k, np.float32), "k": np.int32(k),
          "flag": np.array([k % 2 == 0])}


def stacked(keys):
  return jax.tree_util.tree_map(lambda *x: np.stack(x),
                                *[item(k) for k in keys])


def assert_same_contents(state, ref: PrioritizedReplay, alpha):
  """Slots, keys, masses p^alpha, size and max priority equal numpy's."""
  # pylint: disable=protected-access
  np.testing.assert_array_equal(np.asarray(state.keys), ref._ids)
  assert int(state.size) == ref.size
  assert int(state.inserted) == ref._next_id
  np.testing.assert_allclose(float(state.max_priority), ref.max_priority,
                             rtol=1e-6)
  np.testing.assert_allclose(np.asarray(state.priorities) ** alpha,
                             ref._tree.leaves(), rtol=1e-5)
  filled = ref._ids >= 0
  if ref._storage is None:
    assert not filled.any()
    return
  for got, want in zip(jax.tree_util.tree_leaves(state.items), ref._storage):
    np.testing.assert_array_equal(np.asarray(got)[filled], want[filled])


# Chunks of candidate items with valid masks: partially valid, wrapping the
# ring (capacity 5), empty, and one with more valid items than the capacity.
CHUNKS = [
    [True, False, True],
    [False, False],
    [True, True, True, False],
    [True, False, True, True],
    [True] * 7 + [False, True],
]


@pytest.mark.parametrize("jit", JIT_SLOW)
def test_replay_fifo_matches_prioritized_replay(jit):
  capacity, alpha = 5, 0.9
  replay = device.make_prioritized_replay(capacity, alpha, 0.6)
  add = _maybe_jit(replay.add, jit)
  update = _maybe_jit(replay.update_priorities, jit)
  ref = PrioritizedReplay(capacity, alpha, 0.6, min_size=1)
  state = replay.init(item(0))
  assert_same_contents(state, ref, alpha)
  label = 100
  for n, valid in enumerate(CHUNKS):
    labels = list(range(label, label + len(valid)))
    label += len(valid)
    state = add(state, stacked(labels), np.array(valid))
    kept = [item(k) for k, v in zip(labels, valid) if v]
    if kept:
      ref.insert(kept)
    assert_same_contents(state, ref, alpha)
    # Priorities, incl. repeated keys and keys of evicted items.
    keys = np.array([n, 2 * n + 1, n, 4 * n, n + 5], np.int64)
    keys = keys[keys < ref._next_id]
    prios = np.linspace(0.5, 3. + n, keys.size)
    if keys.size:
      ref.update_priorities(keys, prios)
      state = update(state, keys.astype(np.int32), prios.astype(np.float32))
    assert_same_contents(state, ref, alpha)
  # Oldest evicted first: the last `capacity` keys remain.
  live = np.sort(np.asarray(state.keys))
  np.testing.assert_array_equal(live, np.arange(ref._next_id - capacity,
                                                ref._next_id))


def test_replay_add_invalid_touches_nothing():
  replay = device.make_prioritized_replay(4)
  state = replay.init(item(0))
  state = replay.add(state, stacked([7, 8]), np.array([True, False]))
  after = replay.add(state, stacked([9, 10, 11]), np.zeros(3, bool))
  for a, b in zip(jax.tree_util.tree_leaves(state),
                  jax.tree_util.tree_leaves(after)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert int(after.size) == 1
  np.testing.assert_array_equal(after.keys, [0, -1, -1, -1])
  np.testing.assert_array_equal(after.items["k"], [7, 0, 0, 0])


@pytest.mark.parametrize("jit", JIT)
def test_update_priorities_rules(jit):
  """Written out: evicted keys, repeats, <= 0 / NaN / inf and new maxima."""
  replay = device.make_prioritized_replay(3)
  update = _maybe_jit(replay.update_priorities, jit)
  state = replay.init(item(0))
  state = replay.add(state, stacked([0, 1, 2, 3]), np.ones(4, bool))
  # Keys 1, 2, 3 live in slots 1, 2, 0; key 0 was evicted.
  np.testing.assert_array_equal(state.keys, [3, 1, 2])
  state = update(state, np.array([1, 1, 0, 2, 3, 3, 7], np.int32),
                 np.array([5., 2., 9., 0., np.nan, 4., 8.], np.float32))
  # key 1: last of (5, 2) -> 2; key 0 evicted, key 7 never issued: ignored;
  # key 2: priority 0 ignored (keeps 1); key 3: NaN ignored, 4 wins.
  np.testing.assert_allclose(state.priorities, [4., 2., 1.])
  assert float(state.max_priority) == 4.  # max of written (5 was overwritten)
  state = update(state, np.array([2, 1], np.int32),
                 np.array([-1., np.inf], np.float32))
  np.testing.assert_allclose(state.priorities, [4., 2., 1.])
  # New items enter at the max priority.
  state = replay.add(state, stacked([4]), np.ones(1, bool))
  np.testing.assert_allclose(state.priorities, [4., 4., 1.])
  np.testing.assert_array_equal(state.keys, [3, 4, 2])
  # The numpy replay agrees on the valid entries and raises on the others.
  ref = PrioritizedReplay(3, min_size=1)
  ref.insert([item(k) for k in range(4)])
  ref.update_priorities([1, 1, 0, 3], [5., 2., 9., 4.])
  np.testing.assert_allclose(ref._tree.leaves(),  # pylint: disable=protected-access
                             np.array([4., 2., 1.]) ** 0.9)
  assert ref.max_priority == 4.
  with pytest.raises(ValueError):
    ref.update_priorities([2], [0.])
  with pytest.raises(ValueError):
    ref.update_priorities([3], [np.nan])


def _chi_square(counts, probabilities):
  expected = probabilities * counts.sum()
  assert expected.min() >= 5
  return float(((counts - expected) ** 2 / expected).sum())


def _chi_square_critical(df):
  """Upper 0.1% point of chi-square(df), Wilson-Hilferty (z = 3.0902).

  Within 0.1% of the tabulated value for df >= 100 (df = 736: 860).
  """
  z = 3.0902
  return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize("jit", JIT)
def test_sampling_frequencies_and_weights(jit):
  alpha, beta = 0.9, 0.6
  replay = device.make_prioritized_replay(8, alpha, beta)
  sample = _maybe_jit(replay.sample, jit, static_argnums=2)
  state = replay.init(item(0))
  state = replay.add(state, stacked(range(6)), np.ones(6, bool))  # 2 empty
  p = np.array([1., 2., 3., 0.5, 5., 0.25])
  state = replay.update_priorities(state, np.arange(6, dtype=np.int32),
                                   p.astype(np.float32))
  probabilities = p ** alpha / (p ** alpha).sum()
  counts = np.zeros(6)
  for i in range(10 if jit else 1):
    keys, items, weights = sample(state, jax.random.PRNGKey(i),
                                  2000 if jit else 20_000)
    keys = np.asarray(keys)
    assert keys.shape == (2000 if jit else 20_000,)
    assert keys.dtype == np.int32
    assert keys.min() >= 0 and keys.max() <= 5  # never an empty slot
    np.testing.assert_array_equal(items["k"], keys)  # items of those keys
    np.testing.assert_array_equal(items["x"][:, 1, 2], keys)
    # w_i = (N P(i))^-beta / max over the batch, N = 6.
    w = (6 * probabilities[keys]) ** -beta
    np.testing.assert_allclose(weights, w / w.max(), rtol=1e-5)
    assert weights.dtype == np.float32
    counts += np.bincount(keys, minlength=6)
  # chi-square(5), upper 0.1% point 20.515 (tables; Wilson-Hilferty: 20.75).
  assert abs(_chi_square_critical(5) - 20.515) < 0.5
  assert _chi_square(counts, probabilities) < 20.515


def test_sampling_two_level_large_capacity():
  """Blocks of ~sqrt(capacity); a partly filled last block; ring wrapped."""
  alpha, capacity = 0.9, 1000
  replay = device.make_prioritized_replay(capacity, alpha)
  state = replay.init({"k": np.int32(0)})
  rng = np.random.default_rng(0)
  n = 737
  state = replay.add(state, {"k": np.arange(n, dtype=np.int32)},
                     np.ones(n, bool))
  p = rng.uniform(0.5, 2., n)
  state = replay.update_priorities(state, np.arange(n, dtype=np.int32),
                                   p.astype(np.float32))
  sample = jax.jit(replay.sample, static_argnums=2)
  counts = np.zeros(n)
  for i in range(4):
    keys, items, _ = sample(state, jax.random.PRNGKey(i), 50_000)
    np.testing.assert_array_equal(items["k"], keys)
    counts += np.bincount(np.asarray(keys), minlength=n)
  assert counts.size == n  # nothing beyond the stored items
  probabilities = p ** alpha / (p ** alpha).sum()
  assert _chi_square(counts, probabilities) < _chi_square_critical(n - 1)


def test_replay_vmap_over_seeds():
  replay = device.make_prioritized_replay(4)
  single = replay.init(item(0))
  states = jax.tree_util.tree_map(lambda x: jnp.stack([x] * 3), single)
  items = jax.tree_util.tree_map(lambda x: np.stack([x] * 3), stacked(range(5)))
  valid = np.array([[True] * 5, [True, False, True, False, False],
                    [False] * 5])
  states = jax.jit(jax.vmap(replay.add))(states, items, valid)
  np.testing.assert_array_equal(states.size, [4, 2, 0])
  np.testing.assert_array_equal(states.keys, [[4, 1, 2, 3], [0, 1, -1, -1],
                                              [-1, -1, -1, -1]])
  np.testing.assert_array_equal(states.items["k"][1], [0, 2, 0, 0])
  # Sample the two non-empty seeds.
  two = jax.tree_util.tree_map(lambda x: x[:2], states)
  sample = jax.jit(jax.vmap(functools.partial(replay.sample, batch_size=64)))
  keys, got, weights = sample(two, jax.random.split(jax.random.PRNGKey(0), 2))
  assert keys.shape == (2, 64) and weights.shape == (2, 64)
  assert set(np.asarray(keys[1]).tolist()) <= {0, 1}
  np.testing.assert_array_equal(got["k"][1], np.asarray(keys[1]) * 2)
  np.testing.assert_allclose(weights, 1.)  # equal priorities
  states = jax.jit(jax.vmap(replay.update_priorities))(
      two, keys, jnp.full((2, 64), 3., jnp.float32))
  np.testing.assert_allclose(states.max_priority, [3., 3.])


def test_end_to_end_adder_into_replay_jit():
  """Adder items go into the replay under one jit; sampled batch is valid."""
  b, length, period = 2, 5, 2
  adder = device.make_sequence_adder(b, length, period)
  replay = device.make_prioritized_replay(16)
  stream = make_stream(4, b, 30, length)
  a_state = adder.init(stream[0])
  template = jax.eval_shape(
      lambda s, st: jax.tree_util.tree_map(lambda x: x[0], adder.add(s, st)[1]),
      a_state, stream[0])
  r_state = replay.init(template)

  @jax.jit
  def step(a_state, r_state, s):
    a_state, items, valid = adder.add(a_state, s)
    return a_state, replay.add(r_state, items, valid)

  for s in stream:
    a_state, r_state = step(a_state, r_state, s)
  want = [i for c in numpy_calls(stream, b, length, period, 0)[:-1] for i in c]
  assert int(r_state.inserted) == len(want) > 0
  for k, w in enumerate(want[-16:], start=len(want) - min(16, len(want))):
    got = jax.tree_util.tree_map(lambda x, k=k: np.asarray(x[k % 16]),
                                 r_state.items)
    assert_items_equal(got, w, f"key {k}")
  _, items, weights = jax.jit(replay.sample, static_argnums=2)(
      r_state, jax.random.PRNGKey(0), 4)
  batch = jax.jit(device.to_sequence_batch)(items, weights)
  assert batch.mask.shape == (length, 4)
