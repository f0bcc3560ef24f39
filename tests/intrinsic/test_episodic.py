"""Tests for ngu_jax.intrinsic.episodic (NGU App. A.1, Alg. 1)."""

import collections
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ngu_jax
from ngu_jax.intrinsic import episodic


class ReferenceMemory:
  """Slow, plain-numpy Alg. 1 for one lane, written from the paper.

  Memory: a deque of this episode's embeddings (oldest dropped past
  `capacity`). d_m^2: mean of every k-NN squared distance ever produced, or
  with `config.distance_horizon` H > 0 the moving average that gives the m
  new distances of a step the weight m / (min(count, H) + m).
  """

  def __init__(self, config):
    self.config = config
    self.memory = collections.deque(maxlen=config.capacity)
    self.distance_sum = 0.0
    self.distance_count = 0
    self.d_m2 = 0.0

  def reset(self):
    self.memory.clear()

  def step(self, embedding):
    cfg = self.config
    embedding = np.asarray(embedding, np.float64)
    reward = 0.0
    if self.memory:
      # Line 1-5: squared Euclidean distances to the k nearest neighbours.
      dists = sorted(float(np.sum((embedding - m) ** 2)) for m in self.memory)
      d_k = np.array(dists[:cfg.num_neighbors])
      self.last_d_k = d_k
      # Line 6: update the running mean with the current distances.
      horizon = cfg.distance_horizon
      past = (min(self.distance_count, horizon) if horizon
              else self.distance_count)
      weight = d_k.size / (past + d_k.size)
      self.d_m2 = (1 - weight) * self.d_m2 + weight * d_k.mean()
      self.distance_sum += d_k.sum()
      self.distance_count += d_k.size
      d_m2 = self.d_m2
      if not horizon:  # The plain mean, written as such.
        np.testing.assert_allclose(
            d_m2, self.distance_sum / self.distance_count, rtol=1e-9)
      # Lines 7-8.
      d_n = d_k / d_m2 if d_m2 > 0 else np.zeros_like(d_k)
      d_n = np.maximum(d_n - cfg.cluster_distance, 0.0)
      # Lines 9-15.
      k_v = cfg.kernel_epsilon / (d_n + cfg.kernel_epsilon)
      kernel_sum = k_v.sum()
      k = min(cfg.num_neighbors, cfg.capacity)
      if cfg.rescale_short_memory and d_k.size < k:
        # Our option: n < k neighbours stand for k (their mean kernel).
        kernel_sum = k_v.mean() * k
      s = np.sqrt(kernel_sum) + cfg.pseudo_count_constant
      reward = 0.0 if s > cfg.max_similarity else 1.0 / s
    self.memory.append(embedding)
    return reward


def _step_fn(jit):
  if jit:
    return jax.jit(episodic.step, static_argnums=0)
  return episodic.step


def _reset_fn(jit):
  return jax.jit(episodic.reset) if jit else episodic.reset


@pytest.mark.parametrize("jit", [False, True])
def test_hand_computed_two_steps(jit):
  # One lane, D = 2, k = 2. Embeddings e0 = (0, 0), e1 = (3, 4), e2 = (0, 1).
  config = episodic.EpisodicMemoryConfig(
      capacity=10, num_neighbors=2, kernel_epsilon=0.1, cluster_distance=0.2,
      pseudo_count_constant=0.001, max_similarity=8.0)
  step = _step_fn(jit)
  state = episodic.init(config, batch_size=1, embedding_dim=2)
  r0, state = step(config, state, jnp.array([[0.0, 0.0]]))
  # Empty memory: reward 0.
  np.testing.assert_allclose(r0, [0.0])
  r1, state = step(config, state, jnp.array([[3.0, 4.0]]))
  # One neighbour e0: d^2 = 25, d_m^2 = 25, d_n = max(1 - 0.2, 0) = 0.8,
  # K = 0.1 / 0.9, s = sqrt(1/9) + 0.001 = 0.334333...
  np.testing.assert_allclose(r1, [1.0 / (1.0 / 3.0 + 0.001)], rtol=1e-6)
  r2, state = step(config, state, jnp.array([[0.0, 1.0]]))
  # Neighbours e0 (d^2 = 1) and e1 (d^2 = 9 + 9 = 18); d_m^2 = (25+1+18)/3.
  d_m2 = 44.0 / 3.0
  d_n = np.maximum(np.array([1.0, 18.0]) / d_m2 - 0.2, 0.0)
  s = np.sqrt(np.sum(0.1 / (d_n + 0.1))) + 0.001
  np.testing.assert_allclose(r2, [1.0 / s], rtol=1e-6)
  np.testing.assert_allclose(state.mean_sq_distance, [d_m2], rtol=1e-6)
  np.testing.assert_array_equal(state.distance_count, [3])
  np.testing.assert_array_equal(state.size, [3])


@pytest.mark.parametrize("jit", [False, True])
def test_max_similarity_gives_zero_reward(jit):
  # Identical embeddings: d = 0, K = 1 per neighbour, s = sqrt(k) + c.
  config = episodic.EpisodicMemoryConfig(capacity=20, num_neighbors=9,
                                         max_similarity=2.5)
  step = _step_fn(jit)
  state = episodic.init(config, 1, 3)
  x = jnp.ones((1, 3))
  rewards = []
  for _ in range(12):
    r, state = step(config, state, x)
    rewards.append(float(r[0]))
  # Step t has min(t, 9) identical neighbours: s = sqrt(min(t, 9)) + 1e-3.
  expected = [0.0]
  for t in range(1, 12):
    s = np.sqrt(min(t, 9)) + 1e-3
    expected.append(0.0 if s > 2.5 else 1.0 / s)
  np.testing.assert_allclose(rewards, expected, rtol=1e-6)
  # sqrt(7) > 2.5 > sqrt(6): the cut is exercised.
  assert expected[7] == 0.0 and expected[6] > 0.0


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("horizon, rescale", [(0, False), (12, False),
                                              (12, True)])
def test_matches_reference_with_wraparound_and_resets(jit, horizon, rescale):
  config = episodic.EpisodicMemoryConfig(capacity=7, num_neighbors=4,
                                         kernel_epsilon=1e-2,
                                         cluster_distance=0.05,
                                         distance_horizon=horizon,
                                         rescale_short_memory=rescale)
  b, d, steps = 4, 5, 40
  rng = np.random.default_rng(0)
  # Few distinct points so that revisits (small distances) happen.
  points = rng.normal(size=(6, d))
  embeddings = (points[rng.integers(0, 6, size=(steps, b))]
                + 0.05 * rng.normal(size=(steps, b, d))).astype(np.float32)
  # The embedding scale grows (as f's does while it trains).
  embeddings *= np.linspace(1., 5., steps, dtype=np.float32)[:, None, None]
  resets = rng.random(size=(steps, b)) < 0.1
  resets[:, 0] = False  # Lane 0 never resets: it wraps around many times.
  step, reset = _step_fn(jit), _reset_fn(jit)
  state = episodic.init(config, b, d)
  refs = [ReferenceMemory(config) for _ in range(b)]
  for t in range(steps):
    state = reset(state, jnp.asarray(resets[t]))
    for lane in range(b):
      if resets[t, lane]:
        refs[lane].reset()
    rewards, state = step(config, state, jnp.asarray(embeddings[t]))
    expected = [refs[lane].step(embeddings[t, lane]) for lane in range(b)]
    np.testing.assert_allclose(rewards, expected, rtol=2e-5, atol=1e-7,
                               err_msg=f"step {t}")
    np.testing.assert_allclose(state.mean_sq_distance,
                               [r.d_m2 for r in refs], rtol=2e-5)
    np.testing.assert_array_equal(state.size, [len(r.memory) for r in refs])
  assert resets[:, 1:].any()


@pytest.mark.parametrize("jit", [False, True])
def test_ring_buffer_drops_the_oldest_entry(jit):
  # capacity 3, k = 1, D = 1: after inserting 0, 10, 20, 30 the entry 0 is
  # gone, so a query at 0 finds 10 as its nearest neighbour.
  config = episodic.EpisodicMemoryConfig(capacity=3, num_neighbors=1,
                                         cluster_distance=0.0)
  step = _step_fn(jit)
  state = episodic.init(config, 1, 1)
  for v in (0.0, 10.0, 20.0):
    _, state = step(config, state, jnp.array([[v]]))
  # Memory full (0, 10, 20): the query at 30 finds 20 (d^2 = 100), then 30
  # overwrites the oldest entry, 0.
  _, state = step(config, state, jnp.array([[30.0]]))
  count_before = int(state.distance_count[0])
  mean_before = float(state.mean_sq_distance[0])
  _, state = step(config, state, jnp.array([[0.0]]))
  new_distance = (float(state.mean_sq_distance[0]) * (count_before + 1)
                  - mean_before * count_before)
  np.testing.assert_allclose(new_distance, 100.0, rtol=1e-5)  # 10, not 0.


@pytest.mark.parametrize("jit", [False, True])
def test_full_memory_query_still_sees_oldest_entry(jit):
  # Query-then-insert: with a full memory the oldest entry is still a
  # neighbour of the query that overwrites it.
  config = episodic.EpisodicMemoryConfig(capacity=2, num_neighbors=1,
                                         cluster_distance=0.0)
  step = _step_fn(jit)
  state = episodic.init(config, 1, 1)
  for v in (0.0, 10.0):
    _, state = step(config, state, jnp.array([[v]]))
  # Memory (0, 10) is full. Query 1: nearest is 0 (d^2 = 1), the oldest.
  _, state = step(config, state, jnp.array([[1.0]]))
  # Distances so far: step1 -> 100, step2 -> 1: mean 50.5.
  np.testing.assert_allclose(state.mean_sq_distance, [50.5], rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_fewer_entries_than_neighbors(jit):
  config = episodic.EpisodicMemoryConfig(capacity=100, num_neighbors=10,
                                         cluster_distance=0.0,
                                         kernel_epsilon=1.0)
  step = _step_fn(jit)
  state = episodic.init(config, 2, 1)
  ref = [ReferenceMemory(config) for _ in range(2)]
  values = np.array([[0.0, 5.0], [1.0, 5.0], [3.0, 5.0]], np.float32)
  for t in range(3):
    r, state = step(config, state, jnp.asarray(values[t][:, None]))
    np.testing.assert_allclose(
        r, [ref[i].step(values[t, i:i + 1]) for i in range(2)], rtol=1e-6)
  # Only the 0 + 1 + 2 = 3 valid distances were averaged, per lane.
  np.testing.assert_array_equal(state.distance_count, [3, 3])
  np.testing.assert_allclose(state.mean_sq_distance, [(1 + 9 + 4) / 3, 0.0],
                             rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_rescale_short_memory_by_hand(jit):
  """`rescale_short_memory`: with n < k entries the kernel sum is scaled by
  k / n; from n = k on the reward is the paper's. 1-D embeddings, k = 3,
  kernel epsilon 1, no cluster distance, c = 0 (s = sqrt(sum K))."""
  base = dict(capacity=10, num_neighbors=3, cluster_distance=0.0,
              kernel_epsilon=1.0, pseudo_count_constant=0.0)
  paper = episodic.EpisodicMemoryConfig(**base)
  ours = episodic.EpisodicMemoryConfig(**base, rescale_short_memory=True)
  step = _step_fn(jit)
  values = [0.0, 1.0, 3.0, 2.0, 5.0]
  got = {}
  for name, config in (("paper", paper), ("ours", ours)):
    state = episodic.init(config, 1, 1)
    got[name] = []
    for v in values:
      r, state = step(config, state, jnp.full((1, 1), v, jnp.float32))
      got[name].append(float(r[0]))
  # Step 1: one neighbour (0) at d^2 = 1, d_m^2 = 1, K = 1 / (1 + 1) = 1/2:
  # paper 1 / sqrt(1/2), ours 1 / sqrt(1/2 * 3 / 1).
  assert got["paper"][1] == pytest.approx(1 / np.sqrt(0.5), rel=1e-6)
  assert got["ours"][1] == pytest.approx(1 / np.sqrt(1.5), rel=1e-6)
  # Step 2: neighbours 1, 0 at d^2 = 4, 9; d_m^2 = (1 + 4 + 9) / 3 = 14/3;
  # K = 1 / (d^2 / d_m^2 + 1); ours scales the sum by 3 / 2.
  kernel = 1 / (np.array([4., 9.]) / (14 / 3) + 1)
  assert got["paper"][2] == pytest.approx(1 / np.sqrt(kernel.sum()),
                                          rel=1e-6)
  assert got["ours"][2] == pytest.approx(1 / np.sqrt(kernel.sum() * 1.5),
                                         rel=1e-6)
  # From 3 entries on (n >= k) the two agree exactly.
  assert got["ours"][3:] == got["paper"][3:]
  assert got["ours"][0] == got["paper"][0] == 0.  # Empty memory.


@pytest.mark.parametrize("jit", [False, True])
def test_num_neighbors_larger_than_capacity(jit):
  config = episodic.EpisodicMemoryConfig(capacity=3, num_neighbors=10)
  step = _step_fn(jit)
  state = episodic.init(config, 1, 2)
  ref = ReferenceMemory(config)
  rng = np.random.default_rng(1)
  for _ in range(8):
    e = rng.normal(size=(1, 2)).astype(np.float32)
    r, state = step(config, state, jnp.asarray(e))
    np.testing.assert_allclose(r, [ref.step(e[0])], rtol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_reset_empties_masked_lanes_and_keeps_statistics(jit):
  config = episodic.EpisodicMemoryConfig(capacity=10, num_neighbors=2)
  step, reset = _step_fn(jit), _reset_fn(jit)
  state = episodic.init(config, 3, 2)
  rng = np.random.default_rng(2)
  for _ in range(4):
    _, state = step(config, state,
                    jnp.asarray(rng.normal(size=(3, 2)), jnp.float32))
  before = state
  state = reset(state, jnp.array([True, False, True]))
  np.testing.assert_array_equal(state.size, [0, 4, 0])
  np.testing.assert_array_equal(state.mean_sq_distance,
                                before.mean_sq_distance)
  np.testing.assert_array_equal(state.distance_count, before.distance_count)
  r, state = step(config, state, jnp.ones((3, 2)))
  assert r[0] == 0.0 and r[2] == 0.0 and r[1] > 0.0
  # The emptied lanes' d_m^2 statistics did not move (no neighbours).
  np.testing.assert_array_equal(np.asarray(state.distance_count)[[0, 2]],
                                np.asarray(before.distance_count)[[0, 2]])


@pytest.mark.parametrize("jit", [False, True])
def test_revisits_drive_the_reward_down(jit):
  config = episodic.EpisodicMemoryConfig(capacity=200, num_neighbors=10)
  step = _step_fn(jit)
  state = episodic.init(config, 1, 4)
  rng = np.random.default_rng(3)
  # Populate with a spread of states so that d_m^2 is meaningful.
  for _ in range(20):
    _, state = step(config, state,
                    jnp.asarray(rng.normal(size=(1, 4)), jnp.float32))
  x = jnp.asarray(rng.normal(size=(1, 4)), jnp.float32)
  rewards = []
  for _ in range(10):
    r, state = step(config, state, x)
    rewards.append(float(r[0]))
  assert all(a > b for a, b in zip(rewards[:-1], rewards[1:])
             if b > 0), rewards
  assert rewards[-1] < 0.5 * rewards[0]


def test_lanes_are_independent():
  config = episodic.EpisodicMemoryConfig(capacity=16, num_neighbors=3)
  rng = np.random.default_rng(4)
  e = rng.normal(size=(10, 2, 3)).astype(np.float32)
  both = episodic.init(config, 2, 3)
  single = episodic.init(config, 1, 3)
  for t in range(10):
    r2, both = episodic.step(config, both, jnp.asarray(e[t]))
    r1, single = episodic.step(config, single, jnp.asarray(e[t, 1:]))
    np.testing.assert_allclose(r2[1:], r1, rtol=1e-6)


def test_config_and_init_validation():
  with pytest.raises(ValueError, match="capacity"):
    episodic.EpisodicMemoryConfig(capacity=0)
  with pytest.raises(ValueError, match="num_neighbors"):
    episodic.EpisodicMemoryConfig(num_neighbors=2.5)
  with pytest.raises(ValueError, match="kernel_epsilon"):
    episodic.EpisodicMemoryConfig(kernel_epsilon=0.0)
  with pytest.raises(ValueError, match="batch_size"):
    episodic.init(episodic.EpisodicMemoryConfig(), 0, 4)
  config = episodic.EpisodicMemoryConfig()
  assert dataclasses.asdict(config) == dict(
      capacity=30000, num_neighbors=10, kernel_epsilon=1e-4,
      cluster_distance=0.008, pseudo_count_constant=1e-3, max_similarity=8.0,
      distance_horizon=0, rescale_short_memory=False)
  with pytest.raises(ValueError, match="rescale_short_memory"):
    episodic.EpisodicMemoryConfig(rescale_short_memory=1)


@pytest.mark.parametrize("jit", [False, True])
def test_bad_inputs_rejected(jit):
  config = episodic.EpisodicMemoryConfig(capacity=8, num_neighbors=2)
  step, reset = _step_fn(jit), _reset_fn(jit)
  state = episodic.init(config, 3, 4)
  with pytest.raises(ValueError, match=r"embeddings.*shape \[3, 4\]"):
    step(config, state, jnp.ones((3,)))  # Wrong rank.
  with pytest.raises(ValueError, match=r"embeddings.*shape \[3, 4\]"):
    step(config, state, jnp.ones((2, 4)))  # Mismatched batch.
  with pytest.raises(ValueError, match=r"embeddings.*shape \[3, 4\]"):
    step(config, state, jnp.ones((3, 5)))  # Mismatched embedding size.
  with pytest.raises(ValueError, match="floating"):
    step(config, state, jnp.ones((3, 4), jnp.int32))
  other = episodic.EpisodicMemoryConfig(capacity=9, num_neighbors=2)
  with pytest.raises(ValueError, match="capacity"):
    step(other, state, jnp.ones((3, 4)))
  with pytest.raises(ValueError, match="mask"):
    reset(state, jnp.ones((2,), bool))
  with pytest.raises(ValueError, match="bool"):
    reset(state, jnp.ones((3,), jnp.int32))
  bad = jnp.ones((3, 4)).at[1, 2].set(jnp.nan)
  with pytest.raises(Exception, match=r"embeddings.*NaN or inf.*lane\(s\) \[1\]"):
    r, _ = step(config, state, bad)
    r.block_until_ready()


def test_nan_check_can_be_switched_off_under_jit():
  config = episodic.EpisodicMemoryConfig(capacity=8, num_neighbors=2)
  state = episodic.init(config, 1, 2)
  ngu_jax.set_runtime_checks(False)
  try:
    step = jax.jit(episodic.step, static_argnums=0)
    r, _ = step(config, state, jnp.full((1, 2), jnp.inf))
    r.block_until_ready()  # No error raised: the check was not traced.
  finally:
    ngu_jax.set_runtime_checks(True)
  assert ngu_jax.runtime_checks_enabled()


def test_jit_with_donation_matches_plain_call():
  config = episodic.EpisodicMemoryConfig(capacity=5, num_neighbors=3)
  rng = np.random.default_rng(5)
  e = rng.normal(size=(12, 2, 3)).astype(np.float32)
  donated = jax.jit(episodic.step, static_argnums=0, donate_argnums=1)
  s1 = episodic.init(config, 2, 3)
  s2 = episodic.init(config, 2, 3)
  for t in range(12):
    r1, s1 = donated(config, s1, jnp.asarray(e[t]))
    r2, s2 = episodic.step(config, s2, jnp.asarray(e[t]))
    np.testing.assert_allclose(r1, r2, rtol=1e-6)


def test_moving_average_tracks_a_growing_distance_scale():
  # f's distance scale grows 20x while it trains: the lifetime
  # mean lags the current scale, the moving average (horizon 200 distances,
  # 40 steps) follows it.
  d, steps = 4, 400
  rng = np.random.default_rng(0)
  scale = 1. + 19. * np.arange(steps) / (steps - 1)  # Distances grow 20x.
  embeddings = (scale[:, None, None]
                * rng.normal(size=(steps, 1, d))).astype(np.float32)
  step = jax.jit(episodic.step, static_argnums=0)
  finals = {}
  for horizon in (0, 200):
    config = episodic.EpisodicMemoryConfig(capacity=20, num_neighbors=5,
                                           distance_horizon=horizon)
    state = episodic.init(config, 1, d)
    ref = ReferenceMemory(config)
    recent = []
    for t in range(steps):
      if t % 20 == 0:
        state = episodic.reset(state, jnp.array([True]))
        ref.reset()
      _, state = step(config, state, jnp.asarray(embeddings[t]))
      ref.step(embeddings[t, 0])
      if t % 20 and t >= steps - 40:
        recent.extend(ref.last_d_k.tolist())
    finals[horizon] = float(state.mean_sq_distance[0])
  current = np.mean(recent)  # The k-NN distances of the last 40 steps.
  assert finals[0] < 0.5 * current, (finals, current)  # Lags > 2x.
  assert 0.75 * current < finals[200] < 1.1 * current, (finals, current)


def test_distance_horizon_validated():
  with pytest.raises(ValueError, match="distance_horizon"):
    episodic.EpisodicMemoryConfig(distance_horizon=-1)
