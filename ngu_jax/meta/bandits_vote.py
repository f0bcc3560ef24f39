"""DiCE's meta-controller: the Bandits Vote Algorithm (BVA) over temperature.

DiCE (Sec. 3.3, App. A, Algorithm 2) runs each episode with the behaviour
policy pi_tau = softmax(A / tau) and chooses tau per lane per episode with an
ensemble of M tile-coded bandits over x = log(1 + 1/tau) in [l, r] = [0, ln 51]
(1/tau in [0, 50], Table 5). Bandit m has a mode (argmax or random), a
learning rate lr_m and a tile coding width b_m, all drawn at initialisation,
and weights w_m and counts N_m over K tiles of equal size `tile_size`:

  tile(x) = floor((min(max(x, l), r) - l) / tile_size), clipped to [0, K-1]
  V_i     = mean of w_k over k = i - b .. i + b                         (eq. 9)
  w_j    += lr (g - V_i) for j = i - b .. i + b;  N_i += 1              (eq. 10)
  score_i = (V_i - mu(V)) / sigma(V) + c sqrt(log(1 + sum_j N_j) / (1 + N_i))
                                                                        (eq. 11)

Sampling: every bandit proposes d candidates, one uniform draw inside each of
d distinct tiles (its top-d scores in argmax mode; d tiles drawn without
replacement with the scores as logits, by Gumbel top-d, in random mode); x is
drawn uniformly from the pooled M x d candidates and tau = 1 / (exp(x) - 1).
Every bandit is updated with the episode's (x, g), g being its undiscounted
return. The ensemble's evaluation of a tile is the mean of the bandits' V_i
(Sec. 3.3; `pooled_values`).

Readings where the paper is silent (docs/design.md#beyond-ngu), the first
four fields of `BVAConfig`: tiles have equal size `tile_size` (0.1 in x) and
there are K = floor((r - l) / tile_size) of them (the paper's vector length),
the last one reaching up to r; at the edges eq. 9 averages over the tiles
that exist (`edges`; "zero" divides by 2b + 1 as eq. 9 is written, the
missing tiles counting as 0), and eq. 10 updates only those; w starts at
`initial_w` = 0; x is clipped to >= `x_min` before tau = 1 / (exp(x) - 1), so
x = 0 gives a large finite tau. Fixed readings: sigma(V) = 0 (e.g. a fresh
state) makes the normalised term 0, so the score is the bonus alone; sigma is
the population standard deviation over the K tiles.

The ensemble is a pure pytree, one per actor lane; the per-bandit mode, lr and
width are data in the state, so it jits and vmaps over lanes and seeds:

  config = BVAConfig()
  state = init(key, config)
  x = sample_x(state, key, config); tau = tau_from_x(x, config.x_min)
  ... play one episode with pi_tau, undiscounted return g ...
  state = update(state, x, g, config)

`episode_step` folds the two into what an acting loop does every step.
"""

import math
from typing import NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks

Array = jax.Array

# Values of `BVAState.mode`.
ARGMAX = 0
RANDOM = 1

# Values of `BVAConfig.edges`.
EDGES = ("existing", "zero")

# A bandit's V count as equal (zero spread) when sigma(V) <= this times
# max |V|: equal weights average to V that differ by float32 rounding only.
_FLAT_RTOL = 1e-5


class BVAConfig(NamedTuple):
  """The ensemble's static hyperparameters (DiCE App. A, Table 5).

  Attributes:
    num_bandits: M, bandits in the ensemble (Table 5: 7).
    num_candidates: d, candidates (distinct tiles) per bandit (Table 5: 7);
      at most the number of tiles K.
    learning_rates: each bandit's lr is drawn uniformly from these at init
      (Table 5: {0.05, 0.1, 0.2}).
    widths: each bandit's tile coding width b is drawn uniformly from these
      at init (Table 5: {1, 2, 3}); integers >= 0.
    c: the UCB bonus scale of eq. 11 (Table 5: 1.0).
    x_low: l, the left end of the range of x = log(1 + 1/tau); >= 0.
    x_high: r, its right end (Table 5: 1/tau <= 50, so ln 51).
    tile_size: the paper's `acc`, the size of a tile in x (our reading: 0.1,
      giving K = 39 tiles over [0, ln 51]).
    normalise: whether eq. 11 normalises V (Table 5: yes); False uses the raw
      V_i in the score.
    x_min: `tau_from_x` clips x to >= x_min, so that x = 0 (tau = infinity)
      gives a finite tau (1e-6: tau ~ 1e6).
    initial_w: every tile weight at init (our reading: 0).
    edges: how eq. 9 averages near the ends of the range: "existing" (our
      reading) over the neighbours that exist, "zero" over 2b + 1 tiles with
      the missing ones counting as w = 0 (eq. 9 as written).
  """
  num_bandits: int = 7
  num_candidates: int = 7
  learning_rates: Tuple[float, ...] = (0.05, 0.1, 0.2)
  widths: Tuple[int, ...] = (1, 2, 3)
  c: float = 1.0
  x_low: float = 0.0
  x_high: float = math.log(51.)
  tile_size: float = 0.1
  normalise: bool = True
  x_min: float = 1e-6
  initial_w: float = 0.0
  edges: str = "existing"


class BVAState(NamedTuple):
  """One lane's ensemble of M bandits over K tiles.

  Attributes:
    w: the tile weights, float32 shaped [M, K] (`initial_w` at init).
    counts: N, how many updates landed in each tile, int32 shaped [M, K].
    mode: each bandit's sampling mode, ARGMAX or RANDOM, int32 shaped [M].
    lr: each bandit's learning rate, float32 shaped [M].
    width: each bandit's tile coding width b, int32 shaped [M].
  """
  w: Array
  counts: Array
  mode: Array
  lr: Array
  width: Array


def _is_int(n) -> bool:
  return not isinstance(n, bool) and isinstance(n, (int, np.integer))


def _is_number(v) -> bool:
  return (not isinstance(v, bool) and isinstance(v, (int, float, np.integer,
                                                     np.floating))
          and math.isfinite(float(v)))


def num_tiles(config: BVAConfig) -> int:
  """K = floor((x_high - x_low) / tile_size), the paper's length of w and N.

  Args:
    config: a `BVAConfig`.

  Returns:
    K, a Python int (>= 1 for a valid config).
  """
  ratio = (float(config.x_high) - float(config.x_low)) / float(
      config.tile_size)
  # The tolerance keeps e.g. 0.3 / 0.1 = 2.9999999999999996 at 3 tiles.
  return int(math.floor(ratio + 1e-9))


def _check_config(config: BVAConfig, where: str) -> int:
  """Validates `config` and returns K."""
  if not isinstance(config, BVAConfig):
    raise ValueError(f"{where}: `config` must be a BVAConfig, got "
                     f"{type(config).__name__}.")
  for name in ("num_bandits", "num_candidates"):
    value = getattr(config, name)
    if not _is_int(value) or value < 1:
      raise ValueError(f"{where}: `config.{name}` must be a positive integer, "
                       f"got {value!r}.")
  lrs = config.learning_rates
  if (not isinstance(lrs, tuple) or not lrs
      or not all(_is_number(v) and v > 0 for v in lrs)):
    raise ValueError(f"{where}: `config.learning_rates` must be a non-empty "
                     f"tuple of positive finite numbers, got {lrs!r}.")
  widths = config.widths
  if (not isinstance(widths, tuple) or not widths
      or not all(_is_int(v) and v >= 0 for v in widths)):
    raise ValueError(f"{where}: `config.widths` must be a non-empty tuple of "
                     f"integers >= 0, got {widths!r}.")
  if not _is_number(config.c) or config.c < 0:
    raise ValueError(f"{where}: `config.c` must be a finite number >= 0, got "
                     f"{config.c!r}.")
  if (not _is_number(config.x_low) or not _is_number(config.x_high)
      or not 0 <= config.x_low < config.x_high):
    raise ValueError(f"{where}: `config.x_low` and `config.x_high` must be "
                     f"finite with 0 <= x_low < x_high, got "
                     f"{config.x_low!r}, {config.x_high!r}.")
  if not _is_number(config.tile_size) or config.tile_size <= 0:
    raise ValueError(f"{where}: `config.tile_size` must be a positive finite "
                     f"number, got {config.tile_size!r}.")
  k = num_tiles(config)
  if k < 1:
    raise ValueError(f"{where}: `config.tile_size` ({config.tile_size}) must "
                     f"be at most x_high - x_low "
                     f"({config.x_high - config.x_low}).")
  if config.num_candidates > k:
    raise ValueError(f"{where}: `config.num_candidates` "
                     f"({config.num_candidates}) must be at most the number "
                     f"of tiles K = {k}.")
  if not isinstance(config.normalise, (bool, np.bool_)):
    raise ValueError(f"{where}: `config.normalise` must be a bool, got "
                     f"{config.normalise!r}.")
  if not _is_number(config.x_min) or config.x_min <= 0:
    raise ValueError(f"{where}: `config.x_min` must be a positive finite "
                     f"number, got {config.x_min!r}.")
  if not _is_number(config.initial_w):
    raise ValueError(f"{where}: `config.initial_w` must be a finite number, "
                     f"got {config.initial_w!r}.")
  if config.edges not in EDGES:
    raise ValueError(f"{where}: `config.edges` must be one of {EDGES}, got "
                     f"{config.edges!r}.")
  return k


def _check_state(state: BVAState, config: BVAConfig, where: str) -> None:
  k = _check_config(config, where)
  if not isinstance(state, BVAState):
    raise ValueError(f"{where}: `state` must be a BVAState, got "
                     f"{type(state).__name__}.")
  m = config.num_bandits
  _checks.check_shape(state.w, (m, k), "state.w", where)
  _checks.check_shape(state.counts, (m, k), "state.counts", where)
  for name in ("mode", "lr", "width"):
    _checks.check_shape(getattr(state, name), (m,), f"state.{name}", where)
  if not _checks.is_traced(state.width):
    width = np.asarray(state.width)
    if np.any((width < 0) | (width > max(config.widths))):
      raise ValueError(f"{where}: `state.width` must lie in [0, "
                       f"{max(config.widths)}] (config.widths), got "
                       f"{width.tolist()}.")


def _uniform_index(u: Array, n: int) -> Array:
  """floor(u n) in [0, n): a uniform index from u ~ U[0, 1).

  One `jax.random.uniform` feeds every draw of a call: separate `randint` and
  `gumbel` draws cost seconds of compile time each on CPU.
  """
  return jnp.minimum(jnp.floor(u * n), n - 1).astype(jnp.int32)


def _uniforms(key: Array, n: int) -> Array:
  """n draws from U[tiny, 1), float32 shaped [n] (tiny: Gumbels stay finite)."""
  return jax.random.uniform(key, (n,), jnp.float32,
                            minval=jnp.finfo(jnp.float32).tiny, maxval=1.)


def init(key: Array, config: BVAConfig = BVAConfig()) -> BVAState:
  """A fresh ensemble: per-bandit mode, lr and width drawn, w = 0, N = 0.

  Algorithm 2's initialisation: mode uniformly from {argmax, random}, lr
  uniformly from `config.learning_rates`, width uniformly from
  `config.widths`, independently per bandit.

  Args:
    key: a PRNG key (vmap over keys for lanes).
    config: a `BVAConfig`.

  Returns:
    A `BVAState` with w and counts shaped [M, K].
  """
  k = _check_config(config, "bandits_vote.init")
  m = config.num_bandits
  u = jax.random.uniform(key, (3, m), jnp.float32)
  lrs = jnp.asarray(config.learning_rates, jnp.float32)
  widths = jnp.asarray(config.widths, jnp.int32)
  return BVAState(
      w=jnp.full((m, k), config.initial_w, jnp.float32),
      counts=jnp.zeros((m, k), jnp.int32),
      mode=_uniform_index(u[0], 2),
      lr=lrs[_uniform_index(u[1], len(config.learning_rates))],
      width=widths[_uniform_index(u[2], len(config.widths))])


def tile_bounds(config: BVAConfig = BVAConfig()) -> Tuple[Array, Array]:
  """The x interval [low_i, high_i] of each tile.

  Tile i covers [l + i tile_size, l + (i + 1) tile_size); the last one
  reaches up to r (it also holds the remainder of floor((r - l)/tile_size)).

  Args:
    config: a `BVAConfig`.

  Returns:
    (low, high), float32 each shaped [K].
  """
  k = _check_config(config, "bandits_vote.tile_bounds")
  i = jnp.arange(k, dtype=jnp.float32)
  low = config.x_low + i * config.tile_size
  high = jnp.where(jnp.arange(k) == k - 1, jnp.float32(config.x_high),
                   config.x_low + (i + 1.) * config.tile_size)
  return low, high


def tile_index(x: Array, config: BVAConfig = BVAConfig()) -> Array:
  """The tile of x: floor((clip(x, l, r) - l) / tile_size) in [0, K-1].

  Eq. 10's first line, clipped to the last tile at x = r.

  Args:
    x: any shape, float.
    config: a `BVAConfig`.

  Returns:
    int32 tile indices, shaped like x.
  """
  k = _check_config(config, "bandits_vote.tile_index")
  x = jnp.clip(jnp.asarray(x, jnp.float32), config.x_low, config.x_high)
  i = jnp.floor((x - config.x_low) / config.tile_size).astype(jnp.int32)
  return jnp.clip(i, 0, k - 1)


def _neighbourhood_mean(w: Array, width: Array, max_width: int,
                        edges: str) -> Array:
  """Mean of w [M, K] over the existing tiles within width [M] of each tile.

  A gather over the 2 max_width + 1 static offsets, O(M K max_width) (an
  [M, K, K] mask would grow with K^2 for fine tiles). With `edges` "zero"
  the sum is divided by 2 width + 1 instead of the existing tiles' count.
  """
  k = w.shape[1]
  offsets = np.arange(-max_width, max_width + 1)
  neighbour = np.arange(k)[:, None] + offsets[None, :]  # [K, 2B + 1]
  exists = (neighbour >= 0) & (neighbour < k)
  inside = np.abs(offsets)[None, None, :] <= width[:, None, None]
  mask = (inside & exists[None]).astype(w.dtype)  # [M, K, 2B + 1]
  gathered = w[:, np.clip(neighbour, 0, k - 1)]  # [M, K, 2B + 1]
  if edges == "zero":
    count = (2 * width + 1).astype(w.dtype)[:, None]
  else:
    count = mask.sum(axis=-1)
  return (gathered * mask).sum(axis=-1) / count


def values(state: BVAState, config: BVAConfig = BVAConfig()) -> Array:
  """Each bandit's tile values V (DiCE App. A eq. 9).

  V_i is the mean of w over the tiles max(0, i - b)..min(K - 1, i + b) that
  exist (docs/design.md#beyond-ngu: the edges average over fewer tiles); with
  `config.edges` "zero", their sum over 2b + 1.

  NOTE: the widths b in `state` must be among `config.widths` (as `init`
  draws them); `_check_state` rejects others in concrete states.

  Args:
    state: a `BVAState` (one lane; vmap for lanes).
    config: a `BVAConfig`.

  Returns:
    float32 values shaped [M, K].
  """
  where = "bandits_vote.values"
  _check_state(state, config, where)
  return _neighbourhood_mean(state.w, state.width, max(config.widths),
                             config.edges)


def pooled_values(state: BVAState, config: BVAConfig = BVAConfig()) -> Array:
  """The ensemble's evaluation of each tile: the mean over bandits of V.

  DiCE Sec. 3.3: "the final evaluation of each tau is the average evaluation
  of all bandits" (eq. 9 per bandit). For diagnostics (the pooled value
  curve over x; `tile_bounds` gives the x axis).

  Args:
    state: a `BVAState`.
    config: a `BVAConfig`.

  Returns:
    float32 shaped [K].
  """
  return values(state, config).mean(axis=0)


def scores(state: BVAState, config: BVAConfig = BVAConfig()) -> Array:
  """Each bandit's tile scores (DiCE App. A eq. 11).

  score_i = (V_i - mu(V)) / sigma(V) + c sqrt(log(1 + sum_j N_j) / (1 + N_i)),
  with mu and sigma (population) over the bandit's K tiles. Where all of a
  bandit's V are equal (sigma = 0, e.g. a fresh state; in float32, sigma at
  most 1e-5 max |V|, what rounding leaves of equal weights) the normalised
  term is 0 and the score is the bonus alone (docs/design.md#beyond-ngu). With
  `config.normalise` False the raw V_i replaces the normalised term.

  Args:
    state: a `BVAState`.
    config: a `BVAConfig`.

  Returns:
    finite float32 scores shaped [M, K].
  """
  v = values(state, config)
  if config.normalise:
    mu = v.mean(axis=-1, keepdims=True)
    sigma = v.std(axis=-1, keepdims=True)
    # Equal weights give V equal up to rounding: zero spread too.
    scale = jnp.abs(v).max(axis=-1, keepdims=True)
    flat = sigma <= _FLAT_RTOL * scale
    term = jnp.where(flat, 0., (v - mu) / jnp.where(flat, 1., sigma))
  else:
    term = v
  counts = state.counts.astype(jnp.float32)
  total = counts.sum(axis=-1, keepdims=True)
  bonus = config.c * jnp.sqrt(jnp.log1p(total) / (1. + counts))
  return term + bonus


def candidates(state: BVAState, key: Array,
               config: BVAConfig = BVAConfig()) -> Tuple[Array, Array]:
  """Every bandit's d candidate tiles and one x inside each (App. A).

  Argmax mode: the top-d tiles by `scores` (ties to the lowest index). Random
  mode: d distinct tiles drawn without replacement with the scores as logits
  (Gumbel top-d). Then one uniform draw of x inside each chosen tile
  (`tile_bounds`).

  Args:
    state: a `BVAState`.
    key: a PRNG key.
    config: a `BVAConfig`.

  Returns:
    (tiles, xs): int32 tiles and float32 candidates, each shaped [M, d].
  """
  k = _check_config(config, "bandits_vote.candidates")
  m = config.num_bandits
  u = _uniforms(key, m * (k + config.num_candidates))
  return _candidates(state, u.reshape(m, -1), config)


def _candidates(state: BVAState, u: Array,
                config: BVAConfig) -> Tuple[Array, Array]:
  """`candidates` from uniforms u shaped [M, K + d]."""
  score = scores(state, config)
  k, d = score.shape[1], config.num_candidates
  gumbel = -jnp.log(-jnp.log(u[:, :k]))
  logits = jnp.where((state.mode == RANDOM)[:, None], score + gumbel, score)
  # lax.top_k keeps the lower index first among equal values.
  _, tiles = jax.lax.top_k(logits, d)
  tiles = tiles.astype(jnp.int32)
  low, high = tile_bounds(config)
  xs = low[tiles] + u[:, k:] * (high[tiles] - low[tiles])
  return tiles, xs


def sample_x(state: BVAState, key: Array,
             config: BVAConfig = BVAConfig()) -> Array:
  """The next episode's x: uniform over the pooled M x d candidates.

  Algorithm 2's "Sample x from {c_m,i}"; tau = `tau_from_x`(x).

  Args:
    state: a `BVAState`.
    key: a PRNG key.
    config: a `BVAConfig`.

  Returns:
    x, float32 shaped [].
  """
  k = _check_config(config, "bandits_vote.sample_x")
  m, d = config.num_bandits, config.num_candidates
  u = _uniforms(key, m * (k + d) + 1)
  _, xs = _candidates(state, u[1:].reshape(m, k + d), config)
  return xs.reshape(-1)[_uniform_index(u[0], m * d)]


def update(state: BVAState, x: Array, g: Array,
           config: BVAConfig = BVAConfig()) -> BVAState:
  """Every bandit learns from one episode's (x, g) (DiCE App. A eq. 10).

  With i = `tile_index`(x) and V_i from eq. 9 before the update, each bandit
  m adds lr_m (g - V_i) to w_j for the existing tiles j = i - b_m..i + b_m,
  and N_i += 1.

  Args:
    state: a `BVAState`.
    x: the episode's x = log(1 + 1/tau), finite float shaped [] (clipped to
      [x_low, x_high]).
    g: its undiscounted return, finite float shaped [].
    config: a `BVAConfig`.

  Returns:
    The new `BVAState`.
  """
  where = "bandits_vote.update"
  _check_state(state, config, where)
  _checks.check_rank(x, 0, "x", where)
  _checks.check_rank(g, 0, "g", where)
  x = jnp.asarray(x, jnp.float32)
  g = jnp.asarray(g, jnp.float32)
  with _checks.one_callback():
    _checks.check_finite(x, "x", where)
    _checks.check_finite(g, "g", where)
  k = state.w.shape[1]
  i = tile_index(x, config)
  v_i = values(state, config)[:, i]  # [M]
  near = jnp.abs(jnp.arange(k)[None, :] - i) <= state.width[:, None]  # [M, K]
  step = (state.lr * (g - v_i))[:, None]
  hit = (jnp.arange(k) == i).astype(state.counts.dtype)
  return state._replace(w=state.w + jnp.where(near, step, 0.),
                        counts=state.counts + hit[None, :])


def tau_from_x(x: Array, x_min: float = 1e-6) -> Array:
  """tau = 1 / (exp(x) - 1), with x clipped to >= x_min (App. A).

  Args:
    x: any shape, float.
    x_min: > 0; x = 0 would be tau = infinity, so x below x_min counts as
      x_min (1e-6: tau ~ 1e6).

  Returns:
    float32 tau, shaped like x, finite and positive for finite x.
  """
  if not _is_number(x_min) or x_min <= 0:
    raise ValueError(f"bandits_vote.tau_from_x: `x_min` must be a positive "
                     f"finite number, got {x_min!r}.")
  x = jnp.maximum(jnp.asarray(x, jnp.float32), x_min)
  return 1. / jnp.expm1(x)


def x_from_tau(tau: Array) -> Array:
  """x = log(1 + 1/tau) (App. A), the inverse of `tau_from_x`.

  Args:
    tau: any shape, positive float (tau = inf gives x = 0).

  Returns:
    float32 x, shaped like tau.
  """
  tau = jnp.asarray(tau, jnp.float32)
  _checks.check_values(~(tau > 0.), "must be positive (got values <= 0 or "
                       "NaN)", "tau", "bandits_vote.x_from_tau")
  return jnp.log1p(1. / tau)


def episode_step(state: BVAState, key: Array, done: Array,
                 episode_return: Array, current_x: Array,
                 config: BVAConfig = BVAConfig()) -> Tuple[BVAState, Array]:
  """One acting step of a lane's ensemble: update and re-draw at episode ends.

  Where `done`, the finished episode (`current_x`, `episode_return`) updates
  every bandit (eq. 10) and the next episode's x is drawn from the updated
  ensemble; elsewhere the state and `current_x` are kept, so a lane's tau
  changes only at episode starts.

  Args:
    state: a `BVAState` (vmap for lanes).
    key: a PRNG key.
    done: whether the episode ended at this step, bool shaped [].
    episode_return: that episode's undiscounted return so far, shaped [].
    current_x: the x of the episode that this step belongs to, shaped [].
    config: a `BVAConfig`.

  Returns:
    (state, x for the next step), x float32 shaped [].
  """
  where = "bandits_vote.episode_step"
  _checks.check_rank(done, 0, "done", where)
  done = jnp.asarray(done, jnp.bool_)
  current_x = jnp.asarray(current_x, jnp.float32)
  recorded = update(state, current_x, episode_return, config)
  new_state = jax.tree_util.tree_map(
      lambda new, old: jnp.where(done, new, old), recorded, state)
  next_x = sample_x(recorded, key, config)
  return new_state, jnp.where(done, next_x, current_x)
