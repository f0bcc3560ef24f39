"""Tests for ngu_jax.meta.bandits_vote (DiCE App. A, Algorithm 2, eq. 9-11).

Oracles: a written-out example whose values and scores are computed by hand,
a float64 numpy ensemble written from eq. 9-11 over random histories,
softmax frequencies (chi-square) for the random mode, the closed forms of
tau <-> x, and a moving-optimum bandit problem the vote must track.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from ngu_jax import _checks
from ngu_jax.meta import bandits_vote as bva

JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])

# The written-out example: 5 tiles of size 1 over [0, 5], width 1, lr 0.1,
# c 1, one bandit.
SMALL = bva.BVAConfig(num_bandits=1, num_candidates=3, learning_rates=(0.1,),
                      widths=(1,), c=1.0, x_low=0.0, x_high=5.0,
                      tile_size=1.0)


@functools.lru_cache(maxsize=None)
def _jit(fn, config):
  """`fn` with `config` bound, jitted once per (fn, config) for all tests."""
  return jax.jit(functools.partial(fn, config=config))


def _maybe_jit(fn, jit, config):
  return _jit(fn, config) if jit else functools.partial(fn, config=config)


def _state(config, w, counts, mode, lr, width):
  """A BVAState with the given arrays (the draws of `init` replaced)."""
  state = bva.init(jax.random.PRNGKey(0), config)
  return state._replace(w=jnp.asarray(w, jnp.float32),
                        counts=jnp.asarray(counts, jnp.int32),
                        mode=jnp.asarray(mode, jnp.int32),
                        lr=jnp.asarray(lr, jnp.float32),
                        width=jnp.asarray(width, jnp.int32))


# ---------------------------------------------------------------------------
# A float64 numpy ensemble written from DiCE App. A.


def _ref_tile(x, config, k):
  x = min(max(x, config.x_low), config.x_high)
  return min(int(math.floor((x - config.x_low) / config.tile_size)), k - 1)


def _ref_values(w, width, edges="existing"):
  """Eq. 9: the edges average over the tiles that exist, or over 2b + 1."""
  m, k = w.shape
  v = np.zeros((m, k))
  for b in range(m):
    for i in range(k):
      lo, hi = max(0, i - width[b]), min(k - 1, i + width[b])
      if edges == "zero":
        v[b, i] = np.sum(w[b, lo:hi + 1]) / (2 * width[b] + 1)
      else:
        v[b, i] = np.mean(w[b, lo:hi + 1])
  return v


def _ref_scores(w, counts, width, config):
  """Eq. 11; a bandit whose V are all equal gets the bonus alone."""
  v = _ref_values(w, width, config.edges)
  out = np.zeros_like(v)
  for b in range(v.shape[0]):
    if not config.normalise:
      term = v[b]
    elif v[b].std() <= 1e-5 * np.abs(v[b]).max():
      term = np.zeros_like(v[b])
    else:
      term = (v[b] - v[b].mean()) / v[b].std()
    bonus = config.c * np.sqrt(np.log(1. + counts[b].sum()) /
                               (1. + counts[b]))
    out[b] = term + bonus
  return out


def _ref_update(w, counts, lr, width, x, g, config):
  """Eq. 10: V_i before the update; the existing neighbours of i move."""
  w, counts = w.copy(), counts.copy()
  k = w.shape[1]
  i = _ref_tile(x, config, k)
  v = _ref_values(w, width, config.edges)
  for b in range(w.shape[0]):
    lo, hi = max(0, i - width[b]), min(k - 1, i + width[b])
    w[b, lo:hi + 1] += lr[b] * (g - v[b, i])
    counts[b, i] += 1
  return w, counts


# ---------------------------------------------------------------------------


@JIT
def test_written_out_example(jit):
  # One update with (x = 2.5, g = 1) from w = 0: tile 2, V_2 = 0, so
  # w_1..w_3 += 0.1 (1 - 0): w = [0, .1, .1, .1, 0], N = e_2.
  update = _maybe_jit(bva.update, jit, config=SMALL)
  scores = _maybe_jit(bva.scores, jit, config=SMALL)
  state = _state(SMALL, np.zeros((1, 5)), np.zeros((1, 5)), [bva.ARGMAX],
                 [0.1], [1])
  state = update(state, jnp.float32(2.5), jnp.float32(1.))
  np.testing.assert_allclose(state.w, [[0., .1, .1, .1, 0.]], atol=1e-7)
  np.testing.assert_array_equal(state.counts, [[0, 0, 1, 0, 0]])
  # Eq. 9 (edges over existing tiles): V = [.1/2, .2/3, .3/3, .2/3, .1/2].
  v = np.array([.05, .2 / 3, .1, .2 / 3, .05])
  np.testing.assert_allclose(bva.values(state, SMALL)[0], v, rtol=1e-6)
  # Eq. 11: mu = 1/15; deviations (-1/60, 0, 1/30, 0, -1/60), so
  # sigma = sqrt((2/3600 + 1/900) / 5) = 1/sqrt(3000); bonus with sum N = 1:
  # sqrt(ln 2 / 2) at tile 2, sqrt(ln 2) elsewhere.
  sigma = 1. / math.sqrt(3000.)
  normed = np.array([-1 / 60, 0., 1 / 30, 0., -1 / 60]) / sigma
  bonus = np.sqrt(math.log(2.) / np.array([1., 1., 2., 1., 1.]))
  expected = normed + bonus  # [-0.080, 0.833, 2.414, 0.833, -0.080]
  np.testing.assert_allclose(scores(state)[0], expected, rtol=1e-5)
  # Argmax mode: top-3 tiles 2, then the tie 1/3 (lowest index first).
  cand = _maybe_jit(bva.candidates, jit, config=SMALL)
  tiles, xs = cand(state, jax.random.PRNGKey(3))
  assert set(np.asarray(tiles[0]).tolist()) == {2, 1, 3}
  assert int(tiles[0, 0]) == 2
  np.testing.assert_array_less(np.asarray(tiles[0], np.float32) - 1e-6, xs[0])
  np.testing.assert_array_less(xs[0], np.asarray(tiles[0], np.float32) + 1.)


def test_edges_average_over_existing_tiles():
  config = SMALL._replace(widths=(0, 2))
  w = np.array([[1., 2., 4., 8., 16.]])
  state = _state(config, w, np.zeros((1, 5)), [bva.ARGMAX], [0.5], [2])
  v = np.asarray(bva.values(state, config)[0])
  np.testing.assert_allclose(
      v, [7 / 3, 15 / 4, 31 / 5, 30 / 4, 28 / 3], rtol=1e-6)
  # An update in tile 0 (x below the range is clipped to it) moves only
  # w_0..w_2, each by 0.5 (g - V_0) = 0.5 (10 - 7/3).
  new = bva.update(state, jnp.float32(-3.), jnp.float32(10.), config)
  step = .5 * (10. - 7. / 3.)
  np.testing.assert_allclose(new.w[0], w[0] + [step, step, step, 0., 0.],
                             rtol=1e-6)
  np.testing.assert_array_equal(new.counts, [[1, 0, 0, 0, 0]])
  # x above the range goes to the last tile; at x = x_high, too.
  for x in (5., 7.):
    assert int(bva.tile_index(jnp.float32(x), config)) == 4
  # Width 0: each tile its own value.
  state = state._replace(width=jnp.array([0], jnp.int32))
  np.testing.assert_allclose(bva.values(state, config)[0], w[0])
  # Width 4 (all five tiles): every V is the mean.
  wide = config._replace(widths=(4,))
  state = state._replace(width=jnp.array([4], jnp.int32))
  np.testing.assert_allclose(bva.values(state, wide)[0], 31. / 5., rtol=1e-6)
  # Eq. 9 as written: the missing tiles count as 0 in a mean over 2b + 1.
  state = state._replace(width=jnp.array([2], jnp.int32))
  np.testing.assert_allclose(
      bva.values(state, config._replace(edges="zero"))[0],
      [7 / 5, 15 / 5, 31 / 5, 30 / 5, 28 / 5], rtol=1e-6)


@JIT
@pytest.mark.parametrize("normalise,edges", [(True, "existing"),
                                             (False, "existing"),
                                             (True, "zero")])
def test_matches_float64_reference(jit, normalise, edges):
  config = bva.BVAConfig(num_bandits=5, num_candidates=3,
                         learning_rates=(0.05, 0.1, 0.2, 0.5),
                         widths=(0, 1, 2, 3), c=0.7, x_low=0.0, x_high=2.0,
                         tile_size=0.25, normalise=normalise, edges=edges)
  k = bva.num_tiles(config)
  assert k == 8
  update = _maybe_jit(bva.update, jit, config=config)
  scores = _maybe_jit(bva.scores, jit, config=config)
  values = _maybe_jit(bva.values, jit, config=config)
  state = bva.init(jax.random.PRNGKey(7), config)
  lr = np.asarray(state.lr, np.float64)
  width = np.asarray(state.width)
  assert len(set(width.tolist())) > 1 and len(set(lr.tolist())) > 1
  w, counts = np.zeros((5, k)), np.zeros((5, k))
  rng = np.random.default_rng(int(normalise) + 2 * (edges == "zero"))
  for _ in range(40 if jit else 15):
    # x inside a tile, away from its edges (float32 vs float64 flooring),
    # sometimes outside the range (clipped).
    tile = rng.integers(k)
    x = (tile + rng.uniform(.1, .9)) * config.tile_size
    x = rng.choice([x, x, x, x, -.4, 2.6])
    g = float(np.round(rng.normal(1., 2.), 3))
    state = update(state, jnp.float32(x), jnp.float32(g))
    w, counts = _ref_update(w, counts, lr, width, x, g, config)
    np.testing.assert_allclose(state.w, w, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(state.counts, counts)
    np.testing.assert_allclose(values(state), _ref_values(w, width, edges),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(scores(state),
                               _ref_scores(w, counts, width, config),
                               rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(bva.pooled_values(state, config),
                             _ref_values(w, width, edges).mean(axis=0),
                             atol=1e-5)


@pytest.mark.parametrize("constant", [0., 0.1, -3.7])
def test_zero_spread_gives_the_bonus_alone(constant):
  config = bva.BVAConfig()
  fresh = bva.init(jax.random.PRNGKey(1), config)
  # Fresh: sum N = 0, so the bonus is 0 too.
  scores = _jit(bva.scores, config)
  np.testing.assert_array_equal(scores(fresh), 0.)
  # Equal (nonzero) weights; their float32 mean need not equal them.
  counts = np.zeros((7, 39), np.int32)
  counts[:, 5] = 3
  state = fresh._replace(w=jnp.full((7, 39), constant, jnp.float32),
                         counts=jnp.asarray(counts))
  s = np.asarray(scores(state))
  assert np.all(np.isfinite(s))
  bonus = np.sqrt(np.log(1. + 3.) / (1. + counts))
  np.testing.assert_allclose(s, bonus, rtol=1e-6)
  # Without normalisation the raw V is added.
  raw = config._replace(normalise=False)
  np.testing.assert_allclose(_jit(bva.scores, raw)(state), constant + bonus,
                             rtol=1e-6)
  # A real spread, small next to the weights, is normalised as usual.
  w = np.full((7, 39), constant + 1., np.float32)
  w[:, 20] += 1e-3
  spread = state._replace(w=jnp.asarray(w), counts=jnp.zeros_like(counts))
  ref = _ref_scores(w.astype(np.float64), np.zeros((7, 39)),
                    np.asarray(spread.width), config)
  assert np.all(ref.max(axis=1) > 1.)
  np.testing.assert_allclose(scores(spread), ref, atol=2e-2)


def _skewed_state(config, mode):
  w = np.array([[0., .3, -.2, .5, .1], [.2, -.1, 0., .4, .3]])[:config
                                                               .num_bandits]
  counts = np.array([[1, 0, 2, 0, 3], [0, 1, 1, 0, 0]])[:config.num_bandits]
  m = config.num_bandits
  return _state(config, w, counts, [mode] * m, [.1] * m, [0] * m)


def test_random_mode_draws_tiles_with_softmax_frequencies():
  config = SMALL._replace(num_candidates=1)
  state = _skewed_state(config, bva.RANDOM)
  score = np.asarray(bva.scores(state, config)[0], np.float64)
  np.testing.assert_allclose(
      score, _ref_scores(np.asarray(state.w, np.float64),
                         np.asarray(state.counts), [0], config)[0],
      rtol=1e-5)
  p = np.exp(score - score.max())
  p /= p.sum()
  assert p.max() > 2.5 * p.min()  # Far from uniform.
  n = 4000
  keys = jax.random.split(jax.random.PRNGKey(11), n)
  tiles, xs = jax.jit(jax.vmap(
      functools.partial(bva.candidates, config=config), (None, 0)))(state,
                                                                    keys)
  freq = np.bincount(np.asarray(tiles[:, 0, 0]), minlength=5)
  chi2 = np.sum((freq - n * p) ** 2 / (n * p))
  assert chi2 < stats.chi2.ppf(0.999, df=4), (freq / n, p)
  # The uniform draw of x inside each tile: a quarter of each tile's mass
  # in each quarter of it.
  frac = np.asarray(xs[:, 0, 0]) - np.asarray(tiles[:, 0, 0])
  quarters = np.bincount(np.floor(frac * 4).astype(int), minlength=4)
  assert stats.chisquare(quarters).pvalue > 1e-3


@pytest.mark.parametrize("d", [3, 5])
def test_tiles_are_distinct_and_argmax_takes_the_top_d(d):
  config = SMALL._replace(num_bandits=2, num_candidates=d)
  keys = jax.random.split(jax.random.PRNGKey(d), 300)
  cand = jax.jit(jax.vmap(functools.partial(bva.candidates, config=config),
                          (None, 0)))
  random_tiles, _ = cand(_skewed_state(config, bva.RANDOM), keys)
  random_tiles = np.asarray(random_tiles).reshape(-1, d)
  assert all(len(set(row)) == d for row in random_tiles.tolist())
  if d < 5:  # Random mode does not always take the same d.
    assert len({tuple(sorted(row)) for row in random_tiles.tolist()}) > 1
  state = _skewed_state(config, bva.ARGMAX)
  score = np.asarray(bva.scores(state, config))
  argmax_tiles, _ = cand(state, keys)
  for b in range(2):
    top = np.argsort(-score[b], kind="stable")[:d]
    np.testing.assert_array_equal(
        np.asarray(argmax_tiles[:, b]), np.broadcast_to(top, (300, d)))


def test_candidates_lie_inside_their_tiles_and_x_is_pooled_uniformly():
  config = bva.BVAConfig()
  state = bva.init(jax.random.PRNGKey(2), config)
  update = _jit(bva.update, config)
  for i, x in enumerate(np.linspace(0., math.log(51.), 9)):
    state = update(state, jnp.float32(x), jnp.float32(i % 3))
  tiles, xs = _jit(bva.candidates, config)(state, jax.random.PRNGKey(4))
  assert tiles.shape == xs.shape == (7, 7)
  low, high = bva.tile_bounds(config)
  assert float(high[-1]) == pytest.approx(math.log(51.))
  np.testing.assert_allclose(low[1:], high[:-1])
  tiles, xs = np.asarray(tiles), np.asarray(xs)
  assert np.all(xs >= np.asarray(low)[tiles] - 1e-6)
  assert np.all(xs <= np.asarray(high)[tiles] + 1e-6)
  np.testing.assert_array_equal(_jit(bva.tile_index, config)(xs), tiles)
  # Two argmax bandits with different top tiles (d = 1): x is one of the
  # two candidates, each half the time.
  config = SMALL._replace(num_bandits=2, num_candidates=1)
  state = _state(config, [[0., 0., 0., 0., 1.], [1., 0., 0., 0., 0.]],
                 np.zeros((2, 5)), [bva.ARGMAX] * 2, [.1] * 2, [0] * 2)
  keys = jax.random.split(jax.random.PRNGKey(5), 2000)
  x = np.asarray(jax.jit(jax.vmap(
      lambda k: bva.sample_x(state, k, config)))(keys))
  assert x.shape == (2000,)
  tile = np.asarray(_jit(bva.tile_index, config)(x))
  assert set(tile.tolist()) == {0, 4}
  assert abs(np.mean(tile == 4) - .5) < .04


def test_tau_and_x_are_inverse():
  x = jnp.linspace(1e-3, math.log(51.), 50)
  np.testing.assert_allclose(bva.x_from_tau(bva.tau_from_x(x)), x,
                             rtol=1e-5)
  assert float(1. / bva.tau_from_x(math.log(51.))) == pytest.approx(
      50., rel=1e-5)
  assert float(bva.x_from_tau(0.02)) == pytest.approx(math.log(51.),
                                                      rel=1e-6)
  # x = 0 is tau = infinity: clipped to x_min, a large finite tau.
  tau0 = float(bva.tau_from_x(0.))
  assert math.isfinite(tau0) and tau0 == pytest.approx(1e6, rel=1e-3)
  assert float(bva.tau_from_x(0., x_min=1e-3)) == pytest.approx(
      1. / math.expm1(1e-3), rel=1e-5)
  assert float(bva.x_from_tau(jnp.inf)) == 0.
  with pytest.raises(ValueError, match="tau"):
    bva.x_from_tau(jnp.array([1., 0.]))
  with pytest.raises(ValueError, match="x_min"):
    bva.tau_from_x(1., x_min=0.)


def test_init_draws_per_bandit_hyperparameters():
  config = bva.BVAConfig(num_bandits=4000)
  state = jax.jit(functools.partial(bva.init, config=config))(
      jax.random.PRNGKey(0))
  assert state.w.shape == state.counts.shape == (4000, 39)
  assert state.w.dtype == jnp.float32 and state.counts.dtype == jnp.int32
  np.testing.assert_array_equal(state.w, 0.)
  np.testing.assert_array_equal(state.counts, 0)
  optimistic = bva.init(jax.random.PRNGKey(0), config._replace(initial_w=2.))
  np.testing.assert_array_equal(optimistic.w, 2.)
  for field, options in (("mode", (bva.ARGMAX, bva.RANDOM)),
                         ("lr", np.float32(config.learning_rates)),
                         ("width", config.widths)):
    values = np.asarray(getattr(state, field))
    freq = np.array([np.mean(values == o) for o in options])
    np.testing.assert_allclose(freq.sum(), 1.)
    np.testing.assert_allclose(freq, 1. / len(options), atol=.03)


@JIT
def test_episode_step_changes_x_only_at_episode_ends(jit):
  config = SMALL
  step = _maybe_jit(bva.episode_step, jit, config=config)
  state = bva.init(jax.random.PRNGKey(0), config)
  x = jnp.float32(2.5)
  key = jax.random.PRNGKey(1)
  for ret in (0., 1., 1.):
    new_state, new_x = step(state, key, jnp.bool_(False), jnp.float32(ret), x)
    assert float(new_x) == 2.5
    for new, old in zip(new_state, state):
      np.testing.assert_array_equal(new, old)
    state = new_state
  state, x = step(state, key, jnp.bool_(True), jnp.float32(1.), x)
  np.testing.assert_allclose(state.w, [[0., .1, .1, .1, 0.]], atol=1e-7)
  np.testing.assert_array_equal(state.counts, [[0, 0, 1, 0, 0]])
  assert float(x) == float(_maybe_jit(bva.sample_x, jit, config)(state, key))


def test_vmaps_over_lanes_without_retracing():
  config = bva.BVAConfig()
  lanes = 4
  traces = []

  def counted(*args):
    traces.append(1)
    return bva.episode_step(*args, config=config)

  step = jax.jit(jax.vmap(counted))
  states = jax.vmap(lambda k: bva.init(k, config))(
      jax.random.split(jax.random.PRNGKey(0), lanes))
  # Lanes draw their own hyperparameters.
  assert len({tuple(m) for m in np.asarray(states.mode).tolist()}) > 1
  xs = jnp.full((lanes,), 1., jnp.float32)
  done = jnp.array([True, False, True, False])
  for t in range(3):
    keys = jax.random.split(jax.random.PRNGKey(t + 1), lanes)
    states, xs = step(states, keys, done,
                      jnp.full((lanes,), 2., jnp.float32), xs)
  assert len(traces) == 1
  np.testing.assert_array_equal(states.counts.sum(axis=(1, 2)),
                                [7 * 3, 0, 7 * 3, 0])
  np.testing.assert_array_equal(np.asarray(xs)[[1, 3]], 1.)
  # Each lane matches the un-vmapped step.
  keys = jax.random.split(jax.random.PRNGKey(9), lanes)
  states2, xs2 = step(states, keys, jnp.ones((lanes,), bool),
                      jnp.arange(lanes, dtype=jnp.float32), xs)
  single = _jit(bva.episode_step, config)
  for lane in range(lanes):
    one = jax.tree_util.tree_map(lambda a: a[lane], states)
    s, x = single(one, keys[lane], jnp.bool_(True), jnp.float32(lane),
                  xs[lane])
    np.testing.assert_allclose(states2.w[lane], s.w, atol=1e-6)
    assert float(xs2[lane]) == pytest.approx(float(x), abs=1e-6)


@pytest.mark.parametrize("change,match", [
    (dict(num_bandits=0), "num_bandits"),
    (dict(num_candidates=2.), "num_candidates"),
    (dict(num_candidates=40), "num_candidates"),
    (dict(learning_rates=()), "learning_rates"),
    (dict(learning_rates=(0.1, -0.1)), "learning_rates"),
    (dict(learning_rates=[0.1]), "learning_rates"),
    (dict(widths=(1, -1)), "widths"),
    (dict(widths=(1.5,)), "widths"),
    (dict(c=-1.), "config.c"),
    (dict(c=float("nan")), "config.c"),
    (dict(x_low=-0.5), "x_low"),
    (dict(x_high=0.), "x_high"),
    (dict(tile_size=0.), "tile_size"),
    (dict(tile_size=5.), "tile_size"),
    (dict(normalise=1), "normalise"),
    (dict(x_min=0.), "x_min"),
    (dict(initial_w=float("inf")), "initial_w"),
    (dict(edges="wrap"), "edges"),
])
def test_rejects_bad_config(change, match):
  with pytest.raises(ValueError, match=match):
    bva.init(jax.random.PRNGKey(0), bva.BVAConfig()._replace(**change))


@pytest.mark.parametrize("call,match", [
    (lambda s: bva.update(s, jnp.float32([1.]), jnp.float32(0.)), "rank"),
    (lambda s: bva.update(s, jnp.float32(1.), jnp.float32(np.nan)), "NaN"),
    (lambda s: bva.update(s, jnp.float32(np.inf), jnp.float32(0.)), "inf"),
    (lambda s: bva.values(s, SMALL), "shape"),
    (lambda s: bva.values(s._replace(width=s.width + 3)), "state.width"),
    (lambda s: bva.scores(tuple(s)), "BVAState"),
    (lambda s: bva.sample_x(s, jax.random.PRNGKey(0), "config"), "BVAConfig"),
])
def test_rejects_bad_input(call, match):
  state = bva.init(jax.random.PRNGKey(0), bva.BVAConfig())
  with pytest.raises(ValueError, match=match):
    call(state)


def test_rejects_nan_return_under_jit():
  update = jax.jit(functools.partial(bva.update, config=SMALL))
  state = bva.init(jax.random.PRNGKey(0), SMALL)
  with pytest.raises(Exception, match="g"):
    jax.block_until_ready(update(state, jnp.float32(1.),
                                 jnp.float32(np.nan)))


def test_vote_tracks_a_moving_optimum():
  # g(x) = 1 - |x - x*| + N(0, 0.05^2); x* moves from 1 to 3 after 400
  # episodes. Table 5's ensemble (M = d = 7) over [0, ln 51], 4 lanes.
  config = bva.BVAConfig()
  before, after, lanes = 400, 600, 4

  def one_lane(key):
    init_key, key = jax.random.split(key)

    def body(state, inputs):
      k, x_star = inputs
      sample_key, noise_key = jax.random.split(k)
      x = bva.sample_x(state, sample_key, config)
      g = 1. - jnp.abs(x - x_star) + .05 * jax.random.normal(noise_key)
      return bva.update(state, x, g, config), x

    x_star = jnp.concatenate([jnp.full((before,), 1.),
                              jnp.full((after,), 3.)])
    keys = jax.random.split(key, before + after)
    return jax.lax.scan(body, bva.init(init_key, config), (keys, x_star))[1]

  with _checks.runtime_checks_disabled():
    xs = jax.jit(jax.vmap(one_lane))(
        jax.random.split(jax.random.PRNGKey(0), lanes))
  xs = np.asarray(xs)  # [lanes, episodes]
  assert np.all((xs >= 0.) & (xs <= math.log(51.) + 1e-6))
  last_before = xs[:, before - 100:before]
  last_after = xs[:, -100:]
  # Per lane and pooled over lanes: the draws centre on the optimum (the
  # optima are 2 apart; exploration of the wider right-hand side pulls the
  # median up by about a tile).
  np.testing.assert_allclose(np.median(last_before, axis=1), 1., atol=.3)
  np.testing.assert_allclose(np.median(last_after, axis=1), 3., atol=.3)
  assert abs(np.median(last_before) - 1.) < .15
  assert abs(np.median(last_after) - 3.) < .15
  # Most draws lie within 0.5 of the optimum of the time.
  assert np.mean(np.abs(last_before - 1.) < .5) > .5
  assert np.mean(np.abs(last_after - 3.) < .5) > .5
