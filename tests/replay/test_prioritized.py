"""Tests specific to the embedded ngu_jax.replay.PrioritizedReplay.

The float64 sum tree against a brute-force cumulative sum; no drift over many
updates; keys across FIFO eviction; reproducible sampling, also across
save/restore; the samples-per-insert rate limiter; and concurrency checked
against the replay's storage.
"""

import json
import os
import threading
from typing import Any, NamedTuple

import numpy as np
import pytest

from ngu_jax.networks import LSTMState
from ngu_jax.replay import PrioritizedReplay, ReplayNotReadyError, SumTree
from ngu_jax.replay.prioritized import (RateLimiter, ReplayTable,
                                        check_update)
from tests.replay.test_interface import assert_consistent, item


@pytest.mark.parametrize("capacity", [1, 2, 5, 8, 1000])
def test_sum_tree_matches_brute_force(capacity):
  rng = np.random.default_rng(capacity)
  tree = SumTree(capacity)
  masses = np.zeros(capacity)
  for _ in range(30):
    idx = np.unique(rng.integers(0, capacity, size=rng.integers(1, 10)))
    vals = rng.uniform(0, 5, size=idx.size) * (rng.uniform(size=idx.size) > .2)
    tree.set(idx, vals)
    masses[idx] = vals
    np.testing.assert_array_equal(tree.leaves(), masses)
    if masses.sum() == 0:
      continue
    np.testing.assert_allclose(tree.total, masses.sum(), rtol=1e-12)
    u = rng.uniform(0, tree.total, size=256)
    expected = np.searchsorted(np.cumsum(masses), u, side="right")
    got = tree.sample(u)
    # Away from interval boundaries the two must agree exactly.
    cum = np.cumsum(masses)
    near = np.min(np.abs(u[:, None] - cum[None]), axis=1) < 1e-9
    np.testing.assert_array_equal(got[~near], expected[~near])
    assert np.all(masses[got] > 0)


def test_sum_tree_never_returns_empty_leaves_at_the_upper_end():
  tree = SumTree(8)
  tree.set(np.array([0, 1, 2]), np.array([0.1, 0.2, 0.3]))
  top = np.nextafter(tree.total, 0)
  assert set(tree.sample(np.array([top, tree.total, 2 * tree.total]))) == {2}


def test_sum_tree_total_does_not_drift():
  """After 10^5 updates the root equals a from-scratch rebuild, bit for bit."""
  rng = np.random.default_rng(0)
  tree = SumTree(1000)
  for _ in range(2000):
    idx = np.unique(rng.integers(0, 1000, size=50))
    tree.set(idx, rng.uniform(0, 1e3, size=idx.size)**3)
  incremental = tree.total
  tree.rebuild()
  assert tree.total == incremental
  np.testing.assert_allclose(incremental, np.sum(tree.leaves()), rtol=1e-12)


def test_keys_are_unique_across_eviction_and_unknown_keys_raise():
  replay = PrioritizedReplay(capacity=3, min_size=1)
  keys = [replay.insert([item(i)]) for i in range(7)]
  np.testing.assert_array_equal(np.concatenate(keys), np.arange(7))
  assert keys[0].dtype == np.int64
  sampled, batch, _ = replay.sample(50)
  np.testing.assert_array_equal(sampled, batch["id"])  # key == id here.
  assert set(sampled.tolist()) == {4, 5, 6}
  replay.update_priorities(np.array([0, 1]), [5., 5.])  # evicted: ignored
  assert replay.max_priority == 1.
  with pytest.raises(ValueError, match="never issued"):
    replay.update_priorities(np.array([7]), [1.])
  with pytest.raises(ValueError, match="never issued"):
    replay.update_priorities(np.array([-1]), [1.])
  with pytest.raises(ValueError, match="integer"):
    replay.update_priorities(np.array([1.5]), [1.])


def test_insert_more_than_capacity_at_once():
  replay = PrioritizedReplay(capacity=4, min_size=1)
  keys = replay.insert([item(i) for i in range(10)], priorities=np.ones(10))
  np.testing.assert_array_equal(keys, np.arange(10))
  assert replay.size == 4
  _, batch, _ = replay.sample(100)
  assert set(batch["id"].tolist()) == {6, 7, 8, 9}


def test_same_seed_same_samples():
  def run(seed):
    replay = PrioritizedReplay(capacity=20, min_size=1, seed=seed)
    replay.insert([item(i) for i in range(20)],
                  priorities=np.arange(1., 21.))
    return [replay.sample(8)[0] for _ in range(5)]
  a, b, c = run(3), run(3), run(4)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)


def test_save_restore_returns_identical_samples(tmp_path):
  """A restored replay draws exactly what the saved one would have drawn."""
  state = lambda i: LSTMState(hidden=np.full(3, i, np.float32),
                              cell=np.full(3, -i, np.float32))
  items = [dict(item(i), state=state(i)) for i in range(30)]
  replay = PrioritizedReplay(capacity=25, min_size=5, seed=1)
  replay.insert(items[:20])
  keys, _, _ = replay.sample(10)
  replay.update_priorities(keys, np.linspace(0.1, 9., 10))
  replay.insert(items[20:], priorities=np.full(10, 2.))
  replay.sample(3)
  path = str(tmp_path / "replay")
  replay.save(path)
  assert sorted(os.listdir(path)) == ["replay.json", "replay.npz"]
  with np.load(os.path.join(path, "replay.npz"), allow_pickle=False) as f:
    assert all(f[k].dtype != object for k in f.files)
  with open(os.path.join(path, "replay.json")) as f:
    assert json.load(f)["size"] == 25
  expected = [replay.sample(7) for _ in range(5)]

  restored = PrioritizedReplay(capacity=25, min_size=5, seed=99)
  restored.restore(path)
  assert restored.size == 25
  assert restored.max_priority == replay.max_priority
  for (k1, b1, w1), (k2, b2, w2) in zip(
      expected, [restored.sample(7) for _ in range(5)]):
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_array_equal(w1, w2)
    assert isinstance(b2["state"], LSTMState)
    for name in ("id", "observation"):
      np.testing.assert_array_equal(b1[name], b2[name])
    np.testing.assert_array_equal(b1["state"].hidden, b2["state"].hidden)
  # Keys keep counting where they were.
  np.testing.assert_array_equal(restored.insert([items[0]]), [30])


def test_skip_keys_keeps_slots_and_fifo_order_and_ignores_skipped_keys(
    tmp_path):
  """A replay restored after a crash skips the keys the lost process may
  have issued: those never name a new item, their priority updates are
  ignored, and eviction stays oldest-first across the jump (and a save and
  restore)."""
  replay = PrioritizedReplay(capacity=4, min_size=1)
  replay.insert([item(i) for i in range(6)])  # keys 0..5; holds 2..5.
  path = str(tmp_path / "replay")
  replay.save(path)
  lost = replay.insert([item(6), item(7)])  # keys 6, 7: lost in a crash.
  restored = PrioritizedReplay(capacity=4, min_size=1)
  restored.restore(path)
  assert restored.skip_keys(5) == 6 + 8  # Two laps of 4 cover 5 keys.
  assert restored.skip_keys(0) == 14
  new = restored.insert([item(60)])
  np.testing.assert_array_equal(new, [14])
  # Slot 14 % 4 == 6 % 4: the oldest item (key 2) was evicted, as it would
  # have been without the jump.
  _, batch, _ = restored.sample(200)
  assert set(batch["id"].tolist()) == {3, 4, 5, 60}
  restored.update_priorities(lost, [9., 9.])  # Never stored here: ignored.
  assert restored.max_priority == 1.
  restored.update_priorities(np.array([3]), [4.])  # A restored item: kept.
  assert restored.max_priority == 4.
  with pytest.raises(ValueError, match="never issued"):
    restored.update_priorities(np.array([15]), [1.])
  restored.save(path)
  again = PrioritizedReplay(capacity=4, min_size=1)
  again.restore(path)
  np.testing.assert_array_equal(again.insert([item(61)]), [15])
  _, batch, _ = again.sample(200)
  assert set(batch["id"].tolist()) == {4, 5, 60, 61}
  for bad in (-1, 1.5, True):
    with pytest.raises(ValueError, match="skip_keys"):
      again.skip_keys(bad)


def test_restore_rejects_other_configurations_and_formats(tmp_path):
  replay = PrioritizedReplay(capacity=4, min_size=1)
  replay.insert([item(0)])
  replay.save(str(tmp_path))
  for kwargs in (dict(capacity=5), dict(priority_exponent=0.5),
                 dict(min_size=2), dict(samples_per_insert=1.)):
    config = dict(capacity=4, min_size=1)
    config.update(kwargs)
    with pytest.raises(ValueError, match="configuration"):
      PrioritizedReplay(**config).restore(str(tmp_path))
  with open(tmp_path / "replay.json", "w") as f:
    json.dump({"format": "pickle"}, f)
  with pytest.raises(ValueError, match="does not hold"):
    PrioritizedReplay(capacity=4, min_size=1).restore(str(tmp_path))


def test_samples_per_insert_rate_limiter():
  """Reverb's SampleToInsertRatio: diff = r inserts - samples within
  [r min_size - e, r min_size + e], granted per call."""
  replay = PrioritizedReplay(capacity=100, min_size=2, samples_per_insert=2.,
                             error_buffer=4.)
  # min_diff = 0, max_diff = 8.
  replay.insert([item(0), item(1)])          # below min_size: always allowed
  replay.sample(4)                           # diff 4 - 4 = 0 >= 0
  with pytest.raises(ReplayNotReadyError, match="rate limiter"):
    replay.sample(1)                         # diff -1 < 0
  replay.insert([item(2), item(3)])          # diff 4 <= 8
  replay.insert([item(4), item(5)])          # diff 8 <= 8
  with pytest.raises(ReplayNotReadyError, match="rate limiter"):
    replay.insert([item(6)])                 # diff 10 > 8
  replay.sample(8)                           # diff 0
  replay.insert([item(6)], timeout=0.)       # diff 2
  with pytest.raises(ValueError, match="never be granted"):
    replay.sample(9)
  # A blocked sampler is released by another thread's insert.
  replay.sample(2)
  t = threading.Timer(0.05, lambda: replay.insert([item(7)]))
  t.start()
  replay.sample(2, timeout=10.)
  t.join()
  with pytest.raises(ValueError, match="error_buffer"):
    PrioritizedReplay(capacity=10, min_size=1, samples_per_insert=4.,
                      error_buffer=2.)


def test_concurrent_threads_lose_and_corrupt_nothing():
  """Actor thread inserts 2000 items while the learner samples; afterwards
  the storage holds exactly the items inserted, each in its key's slot."""
  total = 2000
  replay = PrioritizedReplay(capacity=total, min_size=50)
  errors, done = [], threading.Event()

  def actor():
    for start in range(0, total, 4):
      replay.insert([item(i) for i in range(start, start + 4)])

  def learner():
    try:
      while not done.is_set():
        keys, batch, _ = replay.sample(32, timeout=10.)
        assert_consistent(batch, 32)
        np.testing.assert_array_equal(keys, batch["id"])
        replay.update_priorities(keys, np.full(32, 0.5))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=learner), threading.Thread(target=actor)]
  for t in threads:
    t.start()
  threads[1].join(60)
  done.set()
  threads[0].join(60)
  assert not errors, errors
  assert replay.size == total
  np.testing.assert_array_equal(np.sort(replay._ids), np.arange(total))
  # Leaves in flatten order (sorted dict keys): extras[0], extras[1], id, ...
  np.testing.assert_array_equal(replay._storage[2], np.arange(total))


@pytest.mark.parametrize("kwargs, match", [
    (dict(capacity=0), "capacity"),
    (dict(capacity=10, min_size=11), "min_size"),
    (dict(capacity=10, min_size=0), "min_size"),
    (dict(capacity=10, min_size=1, samples_per_insert=0.), "samples_per"),
    (dict(capacity=10, min_size=1, error_buffer=3.), "error_buffer"),
    (dict(capacity=10, min_size=1, priority_exponent=-1.), "priority_exp"),
])
def test_bad_configuration(kwargs, match):
  with pytest.raises(ValueError, match=match):
    PrioritizedReplay(**kwargs)


def test_replay_table_configures_both_backends():
  """`ReplayTable` (the base of both backends) keeps the checked config."""
  table = ReplayTable()
  table._configure(capacity=np.int64(12), priority_exponent=1,
                   importance_exponent=0.5, min_size=3, seed=7,
                   samples_per_insert=2, error_buffer=None, where="T")
  assert table._config() == dict(
      capacity=12, priority_exponent=1., importance_exponent=0.5, min_size=3,
      samples_per_insert=2., error_buffer=4.)  # max(0.1 * 3 * 2, 2 * 2).
  assert type(table.capacity) is int and table.capacity == 12
  assert table.min_size == 3 and table._seed == 7
  assert table._limiter == RateLimiter(3, 2., 4.)
  with pytest.raises(ValueError, match=r"^T: `min_size` must be in"):
    table._configure(4, 0.9, 0.6, 5, 0, None, None, "T")
  replay = PrioritizedReplay(capacity=10, min_size=2, seed=3)
  assert isinstance(replay, ReplayTable)
  assert (replay.capacity, replay.min_size) == (10, 2)
  assert replay._config()["samples_per_insert"] is None
  with pytest.raises(AttributeError):
    replay.capacity = 5  # Read-only.


def test_check_update_validates_keys_and_priorities():
  """The argument checks of both backends' `update_priorities`."""
  keys, p = check_update([3, 1], [0.5, 2], "W")
  assert keys.tolist() == [3, 1] and np.issubdtype(keys.dtype, np.integer)
  assert p.dtype == np.float64 and p.tolist() == [0.5, 2.]
  keys, _ = check_update(np.array([2**63 + 5], np.uint64), [1.], "W")
  assert keys.dtype == np.uint64  # Reverb's keys pass unchanged.
  keys, p = check_update([], [], "W")  # No keys: any dtype.
  assert keys.size == 0 and p.shape == (0,)
  for bad_keys in (np.zeros((2, 1), np.int64), np.array([1., 2.])):
    with pytest.raises(ValueError, match=r"^W: `keys` must be a 1-D integer "
                       r"array, got shape"):
      check_update(bad_keys, [1., 1.], "W")
  with pytest.raises(ValueError, match=r"^W: `priorities` must have shape "
                     r"\[2\], got \(3,\)"):
    check_update([0, 1], [1., 1., 1.], "W")
  with pytest.raises(ValueError, match=r"^W: priorities must be finite and "
                     r"> 0; got \[0.0\] at position\(s\) \[1\]"):
    check_update([0, 1], [1., 0.], "W")


def test_sample_rejects_bad_batch_size():
  replay = PrioritizedReplay(capacity=4, min_size=1)
  replay.insert([item(0)])
  for bad in (0, -1, 2.5, True):
    with pytest.raises(ValueError, match="batch_size"):
      replay.sample(bad)


def test_no_reference_cycles_keep_batches_alive():
  """Sampled batches and inserted items are freed as soon as dropped (a
  cycle would hold ~35 MB per Atari batch until the cyclic GC runs)."""
  import gc  # pylint: disable=g-import-not-at-top
  import weakref  # pylint: disable=g-import-not-at-top
  replay = PrioritizedReplay(capacity=4, min_size=1)
  gc.disable()
  try:
    it = item(0)
    ref_in = weakref.ref(it["observation"])
    replay.insert([it])
    del it
    assert ref_in() is None
    _, batch, _ = replay.sample(2)
    ref_out = weakref.ref(batch["observation"])
    del batch
    assert ref_out() is None
  finally:
    gc.enable()


def test_max_insert_size():
  replay = PrioritizedReplay(capacity=100, min_size=2, samples_per_insert=2.,
                             error_buffer=5.)
  assert replay.max_insert_size == 5  # 2 * 5 = 10 >= 2 m.
  replay.insert([item(i) for i in range(5)])
  with pytest.raises(ValueError, match="never be granted"):
    replay.insert([item(i) for i in range(6)])
  assert PrioritizedReplay(capacity=10, min_size=1).max_insert_size is None
  assert PrioritizedReplay(capacity=100, min_size=20, samples_per_insert=4.
                           ).max_insert_size == 4  # Default buffer: 8.


def test_max_insert_size_while_sampling_rules_out_deadlock():
  """Weighted inserts (fresh env steps / replay_period) move the limiter's
  count off multiples of samples_per_insert, so an insert of
  `max_insert_size` items (4 here) can wait while a sampler of 8 waits too;
  inserts of at most `max_insert_size_while_sampling(8)` items (2) cannot:
  at every reachable count one of the two is granted."""
  from ngu_jax.replay.prioritized import RateLimiter
  limiter = RateLimiter(min_size=20, samples_per_insert=4., error_buffer=8.)
  replay = PrioritizedReplay(capacity=100, min_size=20, samples_per_insert=4.)
  assert replay.max_insert_size == 4
  bound = replay.max_insert_size_while_sampling(8)
  assert bound == 2  # 8 + 4 m <= 16.

  def both_wait(units, sampled, weight):
    return (not limiter.can_sample(20, units, sampled, 8, ready_at=0.)
            and not limiter.can_insert(20, units, sampled, weight,
                                       ready_at=0.))
  units = np.arange(0., 40., 0.05)
  for sampled in range(0, 160, 8):
    # Three full windows at once (allowed by max_insert_size) can deadlock.
    assert any(both_wait(u, sampled, 3.) for u in units) or sampled == 0
    for m in range(1, bound + 1):
      for weight in np.linspace(0.05, 1., 20) * m:
        assert not any(both_wait(u, sampled, weight) for u in units)


def test_default_error_buffer_lets_a_batch_sampler_and_one_item_inserts_pass():
  """With Acme's default tolerance alone (2 for min_size 4,
  samples_per_insert 1) a sampler of 4 and a one-item insert could both
  wait: the distributed program's learner and actor hung for ever on such a
  tiny config. `default_error_buffer` with the batch size rules it out at
  every reachable count, weighted inserts included."""
  from ngu_jax.replay.prioritized import default_error_buffer
  assert default_error_buffer(4, 1.) == 2.  # Acme's, unchanged without n.
  assert default_error_buffer(250, 4., 64) == 100.  # Unchanged if larger.
  for eb, deadlocks in ((2., True), (default_error_buffer(4, 1., 4), False)):
    limiter = RateLimiter(min_size=4, samples_per_insert=1., error_buffer=eb)
    both_wait = [
        (u, s) for u in np.arange(0., 30., 0.25) for s in range(0, 40)
        for weight in (0.5, 1.)
        if not limiter.can_sample(4, u, s, 4, ready_at=0.)
        and not limiter.can_insert(4, u, s, weight, ready_at=0.)]
    assert bool(both_wait) == deadlocks, (eb, both_wait[:3])


def test_builder_replay_serves_a_waiting_learner_and_an_inserting_actor():
  """The replay of the distributed program (`make_replay_tables` with its
  rate limit), driven by a learner thread sampling batches and an actor
  thread inserting one item at a time: both finish."""
  from ngu_jax.agents.ngu import builder as builder_lib
  from ngu_jax.agents.ngu import config as config_lib
  config = config_lib.disco_maze(batch_size=4, min_replay_size=4,
                                 samples_per_insert=1.0, replay_capacity=64)
  replay = builder_lib.NGUBuilder(config).make_replay_tables()
  errors = []

  def learner():
    try:
      for _ in range(9):  # 36 samples: 40 inserts allow them.
        replay.sample(4, timeout=20.)
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  def actor():
    try:
      for i in range(40):
        replay.insert([item(i)], timeout=20.)
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)
  threads = [threading.Thread(target=f) for f in (learner, actor)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(60.)
  assert not errors and not any(t.is_alive() for t in threads)
  assert (replay.sampled, replay.inserted) == (36, 40)


def test_inserted_and_sampled_counts():
  replay = PrioritizedReplay(capacity=3, min_size=1)
  assert replay.inserted == replay.sampled == 0
  replay.insert([item(i) for i in range(5)])
  replay.sample(4)
  assert (replay.inserted, replay.sampled, replay.size) == (5, 4, 3)


class _Item(NamedTuple):
  """An item type with an optional trailing field (as SequenceItem.tau)."""
  x: np.ndarray
  tau: Any = None


def test_optional_fields_save_and_older_files_restore(tmp_path):
  """None fields (DiCE's tau of epsilon-greedy sequences) are no leaves and
  round-trip; a file written before a trailing optional field existed
  restores with the field's default."""
  replay = PrioritizedReplay(capacity=4, min_size=1, seed=0)
  replay.insert([_Item(x=np.full(2, i, np.float32)) for i in range(3)])
  path = str(tmp_path / "none")
  replay.save(path)
  restored = PrioritizedReplay(capacity=4, min_size=1, seed=0)
  restored.restore(path)
  _, batch, _ = restored.sample(2)
  assert isinstance(batch, _Item) and batch.tau is None
  # The layout of a file from before `tau`: drop it from the saved fields.
  meta_path = os.path.join(path, "replay.json")
  with open(meta_path) as f:
    meta = json.load(f)
  assert meta["structure"]["fields"] == ["x", "tau"]
  meta["structure"]["fields"] = ["x"]
  meta["structure"]["children"] = meta["structure"]["children"][:1]
  with open(meta_path, "w") as f:
    json.dump(meta, f)
  older = PrioritizedReplay(capacity=4, min_size=1, seed=0)
  older.restore(path)
  _, batch, _ = older.sample(2)
  assert batch.tau is None and batch.x.shape == (2, 2)
  # With the field set it is a leaf like any other.
  with_tau = PrioritizedReplay(capacity=4, min_size=1, seed=0)
  with_tau.insert([_Item(x=np.zeros(2, np.float32), tau=np.float32(0.5))])
  path = str(tmp_path / "tau")
  with_tau.save(path)
  again = PrioritizedReplay(capacity=4, min_size=1, seed=0)
  again.restore(path)
  np.testing.assert_array_equal(again.sample(1)[1].tau, [0.5])
