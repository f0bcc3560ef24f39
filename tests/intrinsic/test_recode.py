"""Tests for ngu_jax.intrinsic.recode (RECODE Sec. 3, Alg. 1, App. D)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from ngu_jax.intrinsic import recode

# Chi-square tests reject when p < this (fixed seeds: a pass is deterministic).
_P_VALUE = 1e-3


class ReferenceRecode:
  """Plain float64 numpy RECODE memory, written from Alg. 1 and Sec. 3.

  Counts are linear (float64 does not underflow in these tests). The caller
  gives every random draw: u (insertion) and the Gumbel noise g [M] whose
  argmax of log(1 / c_j^2) + g_j picks the evicted slot.
  """

  def __init__(self, config, dim):
    self.config = config
    self.atoms = np.zeros((config.capacity, dim))
    self.counts = np.zeros(config.capacity)
    self.occupied = np.zeros(config.capacity, bool)
    self.d_m2 = None  # Not set.

  def reward(self, e):
    cfg = self.config
    n = 0.0
    for l in np.flatnonzero(self.occupied):
      d2 = np.sum((np.asarray(e, np.float64) - self.atoms[l]) ** 2)
      if d2 == 0:
        kernel = 1.0
      elif self.d_m2 is not None and d2 < self.d_m2:
        kernel = cfg.kernel_epsilon / (cfg.kernel_epsilon + d2 / self.d_m2)
      else:
        kernel = 0.0
      n += (1.0 + self.counts[l]) * kernel
    return 1.0 / (np.sqrt(n) + cfg.pseudo_count_constant)

  def update(self, e, u, gumbel):
    """Returns what happened: "merge", "fill" or "evict"."""
    cfg = self.config
    e = np.asarray(e, np.float64)
    occ = np.flatnonzero(self.occupied)
    d2 = np.sum((self.atoms - e) ** 2, axis=-1)
    if occ.size:
      knn = np.sort(d2[occ])[:cfg.num_neighbors].mean()
      if self.d_m2 is None:
        self.d_m2 = knn
      else:
        self.d_m2 = (1 - cfg.distance_decay) * self.d_m2 \
            + cfg.distance_decay * knn
    self.counts[occ] *= cfg.discount
    if occ.size:
      i = occ[np.argmin(d2[occ])]
    if not occ.size or (d2[i] > cfg.insert_threshold * self.d_m2
                        and u < cfg.insert_probability):
      if occ.size < cfg.capacity:
        j, what = np.flatnonzero(~self.occupied)[0], "fill"
      else:
        j = np.argmax(np.log(1.0 / self.counts ** 2) + gumbel)
        others = [l for l in occ if l != j]
        to_j = [np.sum((self.atoms[l] - self.atoms[j]) ** 2) for l in others]
        self.counts[others[int(np.argmin(to_j))]] += self.counts[j]
        what = "evict"
      self.atoms[j], self.counts[j], self.occupied[j] = e, 1.0, True
      return what
    c = self.counts[i]
    self.atoms[i] = (c * self.atoms[i] + e) / (c + 1)
    self.counts[i] = c + 1
    return "merge"

  def step(self, embeddings, u, gumbel, mask=None):
    b = len(embeddings)
    mask = np.ones(b, bool) if mask is None else np.asarray(mask)
    rewards = [self.reward(e) if on else 0.0
               for e, on in zip(embeddings, mask)]  # Snapshot.
    events = [self.update(embeddings[l], u[l], gumbel[l]) if mask[l] else None
              for l in range(b)]
    return np.array(rewards), events


def _step_fn(jit):
  if jit:
    return jax.jit(recode.step, static_argnums=0)
  return recode.step


def _steps(jit, n):
  """n steps jitted; fewer un-jitted (each eager call compiles its scan)."""
  return n if jit else min(n, 8)


def _assert_matches(state, ref, rtol=1e-5, atol=1e-5):
  np.testing.assert_array_equal(state.occupied, ref.occupied)
  np.testing.assert_allclose(recode.counts(state), ref.counts, rtol=rtol,
                             atol=atol)
  np.testing.assert_allclose(state.atoms, ref.atoms, rtol=rtol, atol=atol)
  if ref.d_m2 is None:
    assert not bool(state.has_distance)
  else:
    assert bool(state.has_distance)
    np.testing.assert_allclose(state.mean_sq_distance, ref.d_m2, rtol=rtol)


@pytest.mark.parametrize("jit", [False, True])
def test_one_hot_states_give_exact_counts(jit):
  # gamma = 1, one-hot states: distinct states are at d^2 = 2 >= d_m^2 (a mean
  # of 0s and 2s), so only the state's own atom counts, with K = 1: a state
  # seen n >= 1 times has N = 1 + n; an unseen one has N = 0, reward 1 / c.
  dim, c = 6, 1e-3
  config = recode.RecodeConfig(capacity=8, discount=1.0, num_neighbors=3,
                               distance_decay=0.1)
  step = _step_fn(jit)
  state = recode.init(config, dim, jax.random.PRNGKey(0))
  eye = np.eye(dim, dtype=np.float32)
  rng = np.random.default_rng(1)
  visits = np.zeros(dim, int)
  # Every state but dim - 1 (never visited) is seen in the first 8 steps.
  sequence = np.concatenate([[0, 1, 0, 2, 3, 1, 4, 0],
                             rng.integers(0, dim - 1, size=32)])
  for s in sequence[:_steps(jit, 40)]:
    r, state = step(config, state, jnp.asarray(eye[s][None]))
    n = visits[s]
    expected = 1.0 / c if n == 0 else 1.0 / (np.sqrt(1.0 + n) + c)
    np.testing.assert_allclose(r, [expected], rtol=1e-6)
    visits[s] += 1
  assert visits[:-1].min() >= 1 and visits.max() >= 3 and visits[-1] == 0
  r, state = step(config, state, jnp.asarray(eye[dim - 1][None]))
  np.testing.assert_allclose(r, [1.0 / c], rtol=1e-6)
  # Each visited state is one atom whose count is its visits.
  np.testing.assert_allclose(np.sort(recode.counts(state))[-dim:],
                             np.sort(visits + np.eye(dim)[dim - 1]))


@pytest.mark.parametrize("jit", [False, True])
def test_total_count_is_discounted_plus_one_per_embedding(jit):
  # Small memory, spread-out embeddings: evictions happen, and every one of
  # them moves the evicted count, so the mass stays gamma * before + 1.
  config = recode.RecodeConfig(capacity=4, discount=0.9, num_neighbors=2,
                               insert_threshold=0.1, distance_decay=0.5)
  step = _step_fn(jit)
  state = recode.init(config, 3, jax.random.PRNGKey(3))
  rng = np.random.default_rng(0)
  mass, inserts = 0.0, 0
  for _ in range(_steps(jit, 30)):
    before = np.asarray(state.atoms).copy()
    mask = rng.random(3) < 0.8
    _, state = step(config, state,
                    jnp.asarray(5 * rng.normal(size=(3, 3)), jnp.float32),
                    jnp.asarray(mask))
    for _ in range(mask.sum()):
      mass = 0.9 * mass + 1.0
    np.testing.assert_allclose(np.sum(recode.counts(state)), mass, rtol=1e-5)
    inserts += np.sum(np.any(np.asarray(state.atoms) != before, axis=-1))
  assert bool(state.occupied.all())
  assert inserts > (10 if jit else 5)  # More than 4 fills: evictions.


@pytest.mark.parametrize("jit", [False, True])
def test_merge_arithmetic_by_hand(jit):
  # gamma 0.5, kappa 100 (always merge), k 1, tau 1 (d_m^2 = latest k-NN).
  eps, c = 0.01, 1e-3
  config = recode.RecodeConfig(capacity=4, discount=0.5, num_neighbors=1,
                               insert_threshold=100.0, distance_decay=1.0,
                               kernel_epsilon=eps, pseudo_count_constant=c)
  step = _step_fn(jit)
  state = recode.init(config, 2, jax.random.PRNGKey(0))
  r, state = step(config, state, jnp.array([[0.0, 0.0]]))  # Insert, c = 1.
  np.testing.assert_allclose(r, [1 / c], rtol=1e-6)
  assert not bool(state.has_distance)  # The memory was empty.
  # e1 = (1, 2): d^2 = 5, d_m^2 unset -> N = 0. Then d_m^2 = 5, c -> 0.5,
  # merge: f = (0.5 (0, 0) + (1, 2)) / 1.5 = (2/3, 4/3), c = 1.5.
  r, state = step(config, state, jnp.array([[1.0, 2.0]]))
  np.testing.assert_allclose(r, [1 / c], rtol=1e-6)
  np.testing.assert_allclose(state.mean_sq_distance, 5.0, rtol=1e-6)
  np.testing.assert_allclose(state.atoms[0], [2 / 3, 4 / 3], rtol=1e-6)
  np.testing.assert_allclose(recode.counts(state), [1.5, 0, 0, 0], rtol=1e-6)
  # e2 = (0, 0): d^2 = 20/9 < d_m^2 = 5: K = eps / (eps + 4/9), N = 2.5 K.
  # Then d_m^2 = 20/9, c -> 0.75, f = 0.75 (2/3, 4/3) / 1.75 = (2/7, 4/7).
  r, state = step(config, state, jnp.array([[0.0, 0.0]]))
  n = 2.5 * eps / (eps + 4 / 9)
  np.testing.assert_allclose(r, [1 / (np.sqrt(n) + c)], rtol=1e-6)
  np.testing.assert_allclose(state.mean_sq_distance, 20 / 9, rtol=1e-6)
  np.testing.assert_allclose(state.atoms[0], [2 / 7, 4 / 7], rtol=1e-6)
  np.testing.assert_allclose(recode.counts(state), [1.75, 0, 0, 0],
                             rtol=1e-6)
  assert state.occupied.tolist() == [True, False, False, False]


@pytest.mark.parametrize("jit", [False, True])
def test_identical_embeddings_in_one_step(jit):
  # gamma 1: B copies of a new e all get 1 / c (rewards from the snapshot);
  # lane 0 inserts it, lanes 1.. merge into it (d^2 = 0): one atom, count B.
  config = recode.RecodeConfig(capacity=4, discount=1.0)
  step = _step_fn(jit)
  c = config.pseudo_count_constant
  state = recode.init(config, 3, jax.random.PRNGKey(0))
  _, state = step(config, state, jnp.array([[9.0, 0.0, 0.0]]))  # Far atom.
  e = jnp.array([1.0, -2.0, 0.5])
  r, state = step(config, state, jnp.tile(e, (5, 1)))
  np.testing.assert_allclose(r, np.full(5, 1 / c), rtol=1e-6)
  np.testing.assert_array_equal(state.occupied, [True, True, False, False])
  np.testing.assert_array_equal(state.atoms[1], e)  # Exactly.
  np.testing.assert_allclose(recode.counts(state), [1, 5, 0, 0], rtol=1e-6)
  # Exactly 0 distance counts K = 1: N = 1 + 5.
  r, state = step(config, state, e[None])
  np.testing.assert_allclose(r, [1 / (np.sqrt(6.0) + c)], rtol=1e-6)
  # From an empty memory, where d_m^2 is not set at the snapshot either.
  state = recode.init(config, 3, jax.random.PRNGKey(0))
  r, state = step(config, state, jnp.tile(e, (3, 1)))
  np.testing.assert_allclose(r, np.full(3, 1 / c), rtol=1e-6)
  r, state = step(config, state, e[None])
  np.testing.assert_allclose(r, [1 / (np.sqrt(4.0) + c)], rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_empty_slots_fill_first_in_index_order(jit):
  config = recode.RecodeConfig(capacity=4, num_neighbors=2)
  step = _step_fn(jit)
  state = recode.init(config, 2, jax.random.PRNGKey(0))
  points = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], np.float32)
  for t, p in enumerate(points):
    _, state = step(config, state, jnp.asarray(p[None]))
    np.testing.assert_array_equal(state.occupied, np.arange(4) <= t)
    np.testing.assert_array_equal(state.atoms[:t + 1], points[:t + 1])


def _evicted_slots(config, state, e, keys):
  """For each key: the slot a far `e` was written to (vmapped step)."""

  def one(key):
    _, new = recode.step(config, state._replace(key=key), e[None])
    return jnp.argmax(jnp.all(new.atoms == e, axis=-1)), new

  return jax.jit(jax.vmap(one))(keys)


def test_evictions_follow_inverse_square_counts():
  # A full memory with counts 1, 2, 3, 4 (gamma 1: no discount): a far
  # embedding evicts slot j with probability (1 / c_j^2) / sum_l 1 / c_l^2.
  config = recode.RecodeConfig(capacity=4, discount=1.0, num_neighbors=2)
  cs = np.array([1.0, 2.0, 3.0, 4.0])
  atoms = np.array([[10, 0, 0], [0, 11, 0], [0, 0, 12], [-13, 0, 0]],
                   np.float32)  # No ties in the distances between atoms.
  state = recode.init(config, 3, jax.random.PRNGKey(0))._replace(
      atoms=jnp.asarray(atoms),
      log_counts=jnp.asarray(np.log(cs), jnp.float32),
      occupied=jnp.ones(4, bool),
      mean_sq_distance=jnp.float32(1.0),
      has_distance=jnp.bool_(True))
  e = jnp.array([0.0, 0.0, 50.0])
  n = 20000
  keys = jax.random.split(jax.random.PRNGKey(42), n)
  slots, new = _evicted_slots(config, state, e, keys)
  slots = np.asarray(slots)
  p = (1 / cs ** 2) / np.sum(1 / cs ** 2)
  observed = np.bincount(slots, minlength=4)
  assert stats.chisquare(observed, n * p).pvalue > _P_VALUE, observed
  # Draw for draw against the reference, with the draws `step` made.
  for t in range(50):
    _, u, g = recode._draws(keys[t], 1, 4)
    ref = ReferenceRecode(config, 3)
    ref.atoms, ref.counts = atoms.astype(np.float64), cs.copy()
    ref.occupied[:], ref.d_m2 = True, 1.0
    ref.update(np.asarray(e), float(u[0]), np.asarray(g[0], np.float64))
    _assert_matches(jax.tree_util.tree_map(lambda x, t=t: x[t], new), ref)


def _float32_discounts(n, discount):
  """log c after n float32 additions of log(discount) to log 1 = 0."""
  log_c, step = np.float32(0.0), np.float32(np.log(discount))
  for _ in range(n):
    log_c = np.float32(log_c + step)
  return float(log_c)


def test_stalest_atom_is_still_evicted_after_long_discounting():
  # Three atoms inserted 1001 embeddings apart, then 2e5 more embeddings all
  # merged into a "hot" atom: their counts are exp(-200..-202), 0 in float32
  # (linear counts would make every eviction a tie); in log space the
  # stalest is still evicted most, in proportion exp(-2 log c).
  config = recode.RecodeConfig(capacity=4, discount=0.999, num_neighbors=4)
  step = jax.jit(recode.step, static_argnums=0, donate_argnums=1)
  state = recode.init(config, 2, jax.random.PRNGKey(0))
  hot = jnp.zeros((1, 2))
  stale = [[10.0, 0.0], [0.0, 10.0], [-10.0, 0.0]]
  for s in stale:
    _, state = step(config, state, jnp.array([s]))
    _, state = step(config, state, jnp.tile(hot, (1000, 1)))
  _, state = step(config, state, jnp.tile(hot, (199000, 1)))
  discounts = [202002, 201001, 200000]  # Embeddings since each insert.
  exact = np.array(discounts) * np.log(0.999)
  assert np.all(np.float32(np.exp(exact)) == 0)
  # log c is discounted by float32 additions of log(gamma), each rounded:
  # the result is those very additions, which drift from the exact value by
  # ~0.2% of log c after 2e5 of them (atoms in the same binade get the
  # same increments, so their differences stay close to exact).
  expected = np.array([_float32_discounts(n, 0.999) for n in discounts])
  log_counts = np.asarray(state.log_counts)[[0, 2, 3]]
  np.testing.assert_allclose(log_counts, expected, rtol=1e-6)
  np.testing.assert_allclose(log_counts, exact, rtol=3e-3)
  np.testing.assert_allclose(np.diff(log_counts), np.diff(exact), rtol=1e-2)
  np.testing.assert_array_equal(state.atoms[1], hot[0])
  np.testing.assert_allclose(recode.counts(state)[1], 1000.0, rtol=1e-3)

  n = 4000
  keys = jax.random.split(jax.random.PRNGKey(7), n)
  slots, _ = _evicted_slots(config, state, jnp.array([0.0, -10.0]), keys)
  observed = np.bincount(np.asarray(slots), minlength=4)
  assert observed[1] == 0 and np.argmax(observed) == 0, observed
  weights = np.exp(-2 * (log_counts - log_counts.max()).astype(np.float64))
  p = weights / weights.sum()
  assert stats.chisquare(observed[[0, 2, 3]], n * p).pvalue > _P_VALUE, \
      observed


def _random_stream_test(config, jit, steps, batch, dim, seed):
  step = _step_fn(jit)
  state = recode.init(config, dim, jax.random.PRNGKey(seed))
  ref = ReferenceRecode(config, dim)
  rng = np.random.default_rng(seed)
  events = []
  for _ in range(_steps(jit, steps)):
    e = rng.normal(size=(batch, dim)).astype(np.float32)
    mask = rng.random(batch) < 0.9
    next_key, u, g = recode._draws(state.key, batch, config.capacity)
    r, state = step(config, state, jnp.asarray(e), jnp.asarray(mask))
    np.testing.assert_array_equal(state.key, next_key)
    r_ref, ev = ref.step(e, np.asarray(u), np.asarray(g, np.float64), mask)
    events += ev
    np.testing.assert_allclose(r, r_ref, rtol=1e-4)
    _assert_matches(state, ref)
  return events


@pytest.mark.parametrize("jit", [False, True])
def test_random_stream_matches_reference_without_evictions(jit):
  config = recode.RecodeConfig(capacity=256, discount=0.99, num_neighbors=5,
                               insert_threshold=0.5, distance_decay=0.05)
  events = _random_stream_test(config, jit, steps=50, batch=4, dim=3,
                               seed=0)
  least = 20 if jit else 3
  assert events.count("fill") > least and events.count("merge") > least
  assert "evict" not in events


@pytest.mark.parametrize("jit", [False, True])
def test_random_stream_matches_reference_with_more_lanes_than_atoms(jit):
  # B >= M: `step` recomputes every distance lane by lane.
  config = recode.RecodeConfig(capacity=3, discount=0.9, num_neighbors=2,
                               insert_threshold=0.5, distance_decay=0.1)
  events = _random_stream_test(config, jit, steps=20, batch=5, dim=2,
                               seed=2)
  least = 10 if jit else 1
  assert events.count("evict") > least and events.count("merge") > least


@pytest.mark.parametrize("jit", [False, True])
def test_random_stream_matches_reference_with_evictions(jit):
  # capacity > B: `step` patches its snapshot distances lane by lane.
  config = recode.RecodeConfig(capacity=5, discount=0.95, num_neighbors=3,
                               insert_threshold=0.2, distance_decay=0.05,
                               insert_probability=0.6)
  events = _random_stream_test(config, jit, steps=50, batch=4, dim=3,
                               seed=1)
  least = 20 if jit else 1
  assert events.count("evict") > least and events.count("merge") > least


@pytest.mark.parametrize("jit", [False, True])
def test_masked_lanes_get_zero_and_change_nothing(jit):
  config = recode.RecodeConfig(capacity=6, discount=0.9, num_neighbors=2)
  step = _step_fn(jit)
  rng = np.random.default_rng(2)
  state = recode.init(config, 2, jax.random.PRNGKey(1))
  _, state = step(config, state, jnp.asarray(rng.normal(size=(4, 2)),
                                             jnp.float32))
  e = rng.normal(size=(3, 2)).astype(np.float32)
  # All lanes masked: the memory is bit-for-bit unchanged.
  r, same = step(config, state, jnp.asarray(e), jnp.zeros(3, bool))
  np.testing.assert_array_equal(r, np.zeros(3))
  for name in ("atoms", "log_counts", "occupied", "mean_sq_distance",
               "has_distance"):
    np.testing.assert_array_equal(getattr(same, name), getattr(state, name))
  # Lane 1 masked: the same as lanes 0 and 2 alone (with their draws).
  r, masked = step(config, state, jnp.asarray(e),
                   jnp.array([True, False, True]))
  _, u, g = recode._draws(state.key, 3, config.capacity)
  # eta = 1 and at most 6 atoms: no draw is used, so lanes 0 and 2 alone
  # (whose draws differ) must give the same memory.
  r_alone, alone = step(config, state, jnp.asarray(e[[0, 2]]))
  assert r[1] == 0.0
  np.testing.assert_allclose(np.asarray(r)[[0, 2]], r_alone, rtol=1e-6)
  ref = ReferenceRecode(config, 2)
  ref.atoms = np.asarray(state.atoms, np.float64)
  ref.counts = np.asarray(recode.counts(state), np.float64)
  ref.occupied = np.asarray(state.occupied).copy()
  ref.d_m2 = float(state.mean_sq_distance)
  ref.step(e, np.asarray(u), np.asarray(g, np.float64), [True, False, True])
  _assert_matches(masked, ref)
  _assert_matches(alone, ref)


def test_jit_without_retracing_with_donation_matches_plain_call():
  config = recode.RecodeConfig(capacity=16, discount=0.95, num_neighbors=3)
  traces = []

  def traced_step(config, state, embeddings, mask):
    traces.append(1)
    return recode.step(config, state, embeddings, mask)

  donated = jax.jit(traced_step, static_argnums=0, donate_argnums=1)
  rng = np.random.default_rng(5)
  s1 = recode.init(config, 3, jax.random.PRNGKey(0))
  s2 = recode.init(config, 3, jax.random.PRNGKey(0))
  for _ in range(6):  # Each un-jitted call compiles its scan (~1 s).
    e = jnp.asarray(rng.normal(size=(2, 3)), jnp.float32)
    mask = jnp.asarray(rng.random(2) < 0.8)
    old = s1
    r1, s1 = donated(config, s1, e, mask)
    r2, s2 = recode.step(config, s2, e, mask)
    assert old.atoms.is_deleted()  # The memory was donated.
    np.testing.assert_allclose(r1, r2, rtol=1e-6)
    np.testing.assert_allclose(s1.atoms, s2.atoms, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s1.log_counts, s2.log_counts, rtol=1e-6,
                               atol=1e-6)
  assert len(traces) == 1


def test_memory_bytes_and_dtype():
  config = recode.RecodeConfig(capacity=50000)
  state = recode.init(config, 32, jax.random.PRNGKey(0))
  nbytes = sum(x.nbytes for x in (state.atoms, state.log_counts,
                                  state.occupied))
  assert nbytes == 50000 * (32 * 4 + 5)  # As the module docstring states.
  state = recode.init(recode.RecodeConfig(capacity=4), 2,
                      jax.random.PRNGKey(0), dtype=jnp.bfloat16)
  r, state = recode.step(recode.RecodeConfig(capacity=4), state,
                         jnp.ones((1, 2)))
  assert state.atoms.dtype == jnp.bfloat16 and r.dtype == jnp.float32


def test_config_validation():
  for field, bad in (("capacity", 1), ("capacity", 2.0), ("capacity", True),
                     ("num_neighbors", 0), ("discount", 0.0),
                     ("discount", 1.5), ("discount", float("nan")),
                     ("insert_threshold", -0.1),
                     ("insert_threshold", float("inf")),
                     ("distance_decay", 0.0), ("distance_decay", 2.0),
                     ("insert_probability", -0.5),
                     ("insert_probability", 1.01), ("kernel_epsilon", 0.0),
                     ("pseudo_count_constant", 0.0),
                     ("pseudo_count_constant", "1")):
    with pytest.raises(ValueError, match=f"RecodeConfig: `{field}`"):
      recode.RecodeConfig(**{field: bad})
  assert dataclasses.asdict(recode.RecodeConfig()) == dict(
      capacity=4096, discount=0.999, num_neighbors=10, insert_threshold=0.25,
      distance_decay=1e-3, insert_probability=1.0, kernel_epsilon=1e-2,
      pseudo_count_constant=1e-3)
  recode.RecodeConfig(capacity=2, discount=1.0, insert_threshold=0.0,
                      distance_decay=1.0, insert_probability=0.0)  # Edges.
  with pytest.raises(ValueError, match="embedding_dim"):
    recode.init(recode.RecodeConfig(), 0, jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="dtype"):
    recode.init(recode.RecodeConfig(), 2, jax.random.PRNGKey(0), jnp.int32)


@pytest.mark.parametrize("jit", [False, True])
def test_bad_inputs_rejected(jit):
  config = recode.RecodeConfig(capacity=8, num_neighbors=2)
  step = _step_fn(jit)
  state = recode.init(config, 4, jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match=r"embeddings.*shape \[\?, 4\]"):
    step(config, state, jnp.ones((4,)))
  with pytest.raises(ValueError, match=r"embeddings.*shape \[\?, 4\]"):
    step(config, state, jnp.ones((3, 5)))
  with pytest.raises(ValueError, match="at least one lane"):
    step(config, state, jnp.ones((0, 4)))
  with pytest.raises(ValueError, match="floating"):
    step(config, state, jnp.ones((3, 4), jnp.int32))
  with pytest.raises(ValueError, match="capacity"):
    step(recode.RecodeConfig(capacity=9), state, jnp.ones((3, 4)))
  with pytest.raises(ValueError, match="mask"):
    step(config, state, jnp.ones((3, 4)), jnp.ones((2,), bool))
  with pytest.raises(ValueError, match="bool"):
    step(config, state, jnp.ones((3, 4)), jnp.ones((3,), jnp.int32))
  with pytest.raises(ValueError, match="RecodeState"):
    step(config, tuple(state), jnp.ones((3, 4)))
  bad = jnp.ones((3, 4)).at[2, 1].set(jnp.inf)
  with pytest.raises(Exception,
                     match=r"embeddings.*NaN or inf.*lane\(s\) \[2\]"):
    r, _ = step(config, state, bad)
    r.block_until_ready()
