"""The replay interface suite, run on every backend (embedded and Reverb).

insert / sample / update_priorities / size / save / restore (NGU App. A,
R2D2 Sec. 2.3): sampling frequencies against p^alpha (chi-square), the
importance weights (N P(i))^-beta / max, FIFO eviction, max-priority
insertion, refused bad priorities, min_size, save/restore, and an actor
thread inserting while a learner thread samples and updates.
"""

import threading
import time

import numpy as np
import pytest
from scipy import stats

from ngu_jax.replay import ReplayNotReadyError


def item(i):
  """A small nested item whose every leaf encodes its id i."""
  return {
      "observation": np.full((4, 3), i % 256, np.uint8),
      "id": np.int64(i),
      "extras": (np.full(2, i, np.float32), np.float32(-i)),
  }


def assert_consistent(batch, n):
  """Every sampled item is intact: all its leaves encode the same id."""
  ids = batch["id"]
  assert ids.shape == (n,) and ids.dtype == np.int64
  assert batch["observation"].shape == (n, 4, 3)
  assert batch["observation"].dtype == np.uint8
  np.testing.assert_array_equal(batch["observation"],
                                np.broadcast_to((ids % 256)[:, None, None],
                                                (n, 4, 3)))
  np.testing.assert_array_equal(batch["extras"][0], np.stack([ids, ids], 1))
  np.testing.assert_array_equal(batch["extras"][1], -ids)
  return ids


def frequencies(replay, ids, draws, batch=1000):
  counts = dict.fromkeys(ids, 0)
  for _ in range(draws // batch):
    _, b, _ = replay.sample(batch)
    for i, c in zip(*np.unique(b["id"], return_counts=True)):
      counts[int(i)] += int(c)
  return np.array([counts[i] for i in ids])


def test_insert_sample_shapes_and_content(make_replay):
  replay = make_replay(capacity=16, min_size=10)
  assert replay.size == 0
  replay.insert([item(i) for i in range(10)])
  assert replay.size == 10
  keys, batch, weights = replay.sample(32)
  assert keys.shape == (32,) and np.issubdtype(keys.dtype, np.integer)
  assert weights.shape == (32,) and weights.dtype == np.float32
  ids = assert_consistent(batch, 32)
  assert set(ids.tolist()) <= set(range(10))
  # Equal priorities: uniform sampling, all weights 1.
  np.testing.assert_allclose(weights, 1.)
  # Keys identify items: equal keys <=> equal ids.
  for k in np.unique(keys):
    assert len(set(ids[keys == k].tolist())) == 1
  assert len(np.unique(keys)) == len(np.unique(ids))


def test_inserted_and_sampled_counts(make_replay):
  """What the distributed replay node reports (`ReplayNode.info`)."""
  replay = make_replay(capacity=3, min_size=1)
  assert (replay.inserted, replay.sampled) == (0, 0)
  replay.insert([item(i) for i in range(5)])
  replay.sample(4)
  assert (replay.inserted, replay.sampled, replay.size) == (5, 4, 3)


def test_sampling_below_min_size_is_refused(make_replay):
  replay = make_replay(capacity=16, min_size=5)
  replay.insert([item(i) for i in range(4)])
  with pytest.raises(ReplayNotReadyError, match="min_size=5"):
    replay.sample(2)
  start = time.monotonic()
  with pytest.raises(ReplayNotReadyError):
    replay.sample(2, timeout=0.05)
  assert time.monotonic() - start >= 0.05
  replay.insert([item(4)])
  replay.sample(2)


def test_sampling_waits_for_another_threads_insert(make_replay):
  replay = make_replay(capacity=16, min_size=2)
  replay.insert([item(0)])
  timer = threading.Timer(0.05, lambda: replay.insert([item(1)]))
  timer.start()
  _, batch, _ = replay.sample(4, timeout=10.)
  timer.join()
  assert_consistent(batch, 4)


@pytest.mark.parametrize("bad", [0., -1., np.nan, np.inf])
def test_bad_priorities_are_rejected(make_replay, bad):
  replay = make_replay(capacity=8, min_size=1)
  with pytest.raises(ValueError, match="priorities must be finite and > 0"):
    replay.insert([item(0), item(1)], priorities=[1., bad])
  assert replay.size == 0
  replay.insert([item(0)], priorities=[2.])
  keys, _, _ = replay.sample(1)
  with pytest.raises(ValueError, match="priorities must be finite and > 0"):
    replay.update_priorities(keys, [bad])
  with pytest.raises(ValueError, match="shape"):
    replay.update_priorities(keys, [1., 2.])
  with pytest.raises(ValueError, match="shape"):
    replay.insert([item(1)], priorities=[1., 2.])


def test_items_of_another_layout_are_rejected(make_replay):
  replay = make_replay(capacity=8, min_size=1)
  replay.insert([item(0)])
  other = item(1)
  other["observation"] = other["observation"][:2]
  with pytest.raises(ValueError, match="shape"):
    replay.insert([other])
  with pytest.raises(ValueError, match="structure"):
    replay.insert([{"id": np.int64(1)}])
  with pytest.raises(ValueError, match="list of item"):
    replay.insert(item(1))


def test_sampling_frequencies_match_p_alpha(make_replay):
  """Chi-square test of the sample counts against p^alpha / sum p^alpha."""
  alpha = 0.9
  priorities = np.array([0.5, 1., 2., 3., 5., 8., 0.1, 13.])
  replay = make_replay(capacity=8, min_size=8, priority_exponent=alpha)
  replay.insert([item(i) for i in range(8)], priorities=priorities)
  draws = 100_000
  counts = frequencies(replay, list(range(8)), draws)
  expected = priorities**alpha / np.sum(priorities**alpha) * draws
  _, p_value = stats.chisquare(counts, expected)
  assert p_value > 1e-4, (counts, expected)


def test_importance_weights_formula(make_replay):
  """w_i = (N P(i))^-beta, normalised by the max over the batch."""
  beta = 0.5
  replay = make_replay(capacity=4, min_size=1, priority_exponent=1.,
                       importance_exponent=beta)
  replay.insert([item(0), item(1)], priorities=[1., 3.])
  probs = np.array([0.25, 0.75])
  seen_both = False
  for _ in range(20):
    _, batch, weights = replay.sample(8)
    raw = (2 * probs[batch["id"]])**-beta
    np.testing.assert_allclose(weights, raw / raw.max(), rtol=1e-6)
    seen_both |= len(np.unique(batch["id"])) == 2
  assert seen_both
  np.testing.assert_allclose(np.sqrt(0.5 / 1.5), (2 * .75)**-.5 / (
      2 * .25)**-.5)


def test_new_items_enter_with_the_max_priority(make_replay):
  replay = make_replay(capacity=8, min_size=3, priority_exponent=1.)
  replay.insert([item(0), item(1)], priorities=[1., 10.])
  replay.insert([item(2)])  # gets 10: P = (1, 10, 10) / 21.
  counts = frequencies(replay, [0, 1, 2], 20_000)
  _, p_value = stats.chisquare(counts, np.array([1, 10, 10]) / 21 * 20_000)
  assert p_value > 1e-4, counts


def test_update_priorities(make_replay):
  replay = make_replay(capacity=8, min_size=4, priority_exponent=1.)
  replay.insert([item(i) for i in range(4)])
  keys, batch, _ = replay.sample(200)
  key_of = dict(zip(batch["id"].tolist(), keys.tolist()))
  assert len(key_of) == 4
  # Item 2 becomes 1000 times likelier than the others.
  ids = [0, 1, 2, 3]
  replay.update_priorities(np.array([key_of[i] for i in ids], keys.dtype),
                           [1e-3, 1e-3, 1., 1e-3])
  counts = frequencies(replay, ids, 4000)
  assert counts[2] > 0.98 * 4000
  # Duplicates (batches are sampled with replacement): the last one wins.
  k = np.array([key_of[2], key_of[0], key_of[2]], keys.dtype)
  replay.update_priorities(k, [5., 1., 1e-3])
  counts = frequencies(replay, ids, 4000)
  assert counts[0] > 0.98 * 4000


def test_fifo_eviction_and_stale_keys(make_replay):
  replay = make_replay(capacity=4, min_size=1, priority_exponent=1.)
  replay.insert([item(0), item(1)])
  keys, batch, _ = replay.sample(100)
  stale = keys[batch["id"] == 0][:1]
  for i in range(2, 6):
    replay.insert([item(i)])
  assert replay.size == 4
  counts = frequencies(replay, [0, 1, 2, 3, 4, 5], 2000)
  assert counts[0] == counts[1] == 0 and counts[2:].min() > 0
  # A priority update of an evicted item is ignored.
  replay.update_priorities(stale, [100.])
  counts = frequencies(replay, [0, 1, 2, 3, 4, 5], 2000)
  assert counts[0] == 0 and counts[2:].max() < 0.4 * 2000


def test_save_restore_round_trip(make_replay, tmp_path):
  kwargs = dict(capacity=6, min_size=2, priority_exponent=1.)
  replay = make_replay(**kwargs)
  replay.insert([item(i) for i in range(8)],
                priorities=[1., 1., 1., 1., 1., 2., 3., 4.])
  replay.save(str(tmp_path / "ckpt"))
  before = frequencies(replay, list(range(8)), 4000)
  replay.insert([item(100)])  # changes after the save are not restored.
  fresh = make_replay(**kwargs)
  fresh.restore(str(tmp_path / "ckpt"))
  assert fresh.size == 6
  keys, batch, _ = fresh.sample(50)
  assert_consistent(batch, 50)
  after = frequencies(fresh, list(range(8)), 4000)
  assert before[:2].sum() == after[:2].sum() == 0
  # Priorities survive: P = (1, 1, 1, 2, 3, 4) / 12 for ids 2..7.
  expected = np.array([1, 1, 1, 2, 3, 4]) / 12 * 4000
  assert stats.chisquare(after[2:], expected)[1] > 1e-4
  # Keys survive too: updates by sampled keys work on the restored replay.
  fresh.update_priorities(keys[batch["id"] == batch["id"][0]][:1], [1000.])
  counts = frequencies(fresh, list(range(8)), 2000)
  assert counts[batch["id"][0]] > 0.9 * 2000
  with pytest.raises(ValueError, match="configuration"):
    make_replay(capacity=7, min_size=2, priority_exponent=1.).restore(
        str(tmp_path / "ckpt"))


def test_concurrent_actor_and_learner_threads(make_replay):
  """One thread inserts while another samples and updates priorities."""
  total, per_insert = 600, 3
  replay = make_replay(capacity=total, min_size=10)
  errors = []
  sampled = []

  def actor():
    try:
      for start in range(0, total, per_insert):
        replay.insert([item(i) for i in range(start, start + per_insert)],
                      priorities=np.full(per_insert, 1. + start % 7))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  def learner():
    try:
      rng = np.random.default_rng(0)
      while not done.is_set() or len(sampled) < 20:
        keys, batch, weights = replay.sample(16, timeout=10.)
        sampled.append(assert_consistent(batch, 16))
        assert np.all((weights > 0) & (weights <= 1))
        replay.update_priorities(keys, rng.uniform(0.1, 2., size=16))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  done = threading.Event()
  threads = [threading.Thread(target=actor), threading.Thread(target=learner)]
  threads[1].start()
  threads[0].start()
  threads[0].join(60)
  done.set()
  threads[1].join(60)
  assert not errors, errors
  assert replay.size == total  # nothing lost
  assert len(sampled) >= 20
  seen = np.concatenate(sampled)
  assert seen.min() >= 0 and seen.max() < total
