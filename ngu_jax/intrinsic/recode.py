"""RECODE's clustering memory and its count-based intrinsic reward.

Implements Algorithm 1 of Saade et al. (2023), "Unlocking the Power of
Representations in Long-term Novelty-based Exploration" (RECODE, Sec. 3 and
App. D): a fixed number M of weighted atoms (cluster centres f_l with
discounted counts c_l), never reset and SHARED BY ALL LANES (actors), with the
readings of docs/design.md#beyond-ngu (RECODE bullet):

* Reward: the weighted soft visitation count of Sec. 3,
  N = sum_l (1 + c_l) K(f_l, e) over occupied slots, with the kernel
  K(f, e) = eps / (eps + d^2 / d_m^2) if d^2 < d_m^2 (strict) else 0,
  d^2 = ||e - f||^2; a distance of exactly 0 counts K = 1 (also when d_m^2 is
  0 or not set yet). r = 1 / (sqrt(N) + c), NOT normalised (the agent divides
  it by a running std, Sec. 3). The reward is computed before the memory
  update (RECODE's order).
* d_m^2 starts at the first k-NN mean (of min(k, #occupied) distances), then
  d_m^2 <- (1 - tau) d_m^2 + tau * mean; no occupied atom: no update.
* Every embedding discounts every count, c_l <- gamma c_l. Counts are kept in
  log space (float32 counts underflow after ~1e5 steps at gamma 0.999 and
  would lose the 1/c^2 order of the evictions). Each discount is one rounded
  float32 addition of log(gamma): after 2e5 of them log c (~ -200) has
  drifted by ~0.2% from the exact value, the same for atoms of similar
  log c, so their eviction order is kept.
* Insert e when the memory is empty, or when the nearest atom i has
  d^2 > kappa d_m^2 and u < eta, u ~ U[0, 1). Empty slots fill first, in
  index order; once full, the evicted slot j is drawn with probability
  proportional to 1 / c_j^2 (Gumbel-max on -2 log c_j, App. D), its count goes
  to the atom nearest f_j among the other atoms, then f_j <- e, c_j <- 1.
  Otherwise merge e into i: f_i <- (c_i f_i + e) / (c_i + 1), c_i <- c_i + 1.
  So the total count after each embedding is gamma * before + 1.
* B lanes per `step`: all B rewards come from the memory as it was at the
  start of the step (one [B, M] distance computation), then the B updates
  are applied in lane order (lane 0 first), each with its own discount.

Everything is a pure function of explicit state; the caller jits. The memory
takes M * (D * itemsize + 5) bytes (atoms, float32 log counts, bool occupied):
6.6 MB for M = 5e4 atoms of D = 32 float32 (RECODE's Atari size), 26 MB for
M = 2e5 (DM-HARD-8). Jit `step` with the state donated,
`jax.jit(step, static_argnums=0, donate_argnums=1)`, or XLA copies the memory
every step.

Cost: one batched O(B M D) pass gives the [B, M] squared distances to the
memory at the start of the step, for the rewards and the updates; the
updates are a `lax.scan` over lanes, B sequential O(k M + min(B, M) D)
passes (the distances of the at most B atoms earlier lanes changed are
recomputed, or all M when B >= M, then k argmin passes find the k nearest),
plus, for each eviction, M Gumbel draws and one O(M D) pass for the atom
nearest the evicted one. NGU's episodic memory (`episodic.step`) is B
parallel O(C D) passes over per-lane memories of C slots
(experiments/benchmarks/recode_memory.py compares them).

Example:
  config = RecodeConfig()
  state = init(config, embedding_dim=32, key=jax.random.PRNGKey(0))
  step_fn = jax.jit(step, static_argnums=0, donate_argnums=1)
  rewards, state = step_fn(config, state, embeddings)   # [B], state
"""

import dataclasses
import math
from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks


@dataclasses.dataclass(frozen=True)
class RecodeConfig:
  """Hyperparameters of the RECODE memory (Alg. 1; docs/design.md defaults).

  App. A gives no values for these on grid worlds; the defaults below are the
  project's (docs/design.md#beyond-ngu), to be swept.

  Attributes:
    capacity: M, the number of atoms (RECODE: 5e4 for Atari, 2e5 for
      DM-HARD-8; grid worlds: 4096). At least 2: an evicted atom's count
      moves to another atom.
    discount: gamma in (0, 1], applied to every count once per embedding.
    num_neighbors: k, the neighbours whose mean squared distance updates
      d_m^2.
    insert_threshold: kappa >= 0: e becomes a new atom when its nearest
      atom's squared distance exceeds kappa * d_m^2 (and u < eta).
    distance_decay: tau in (0, 1], the rate of the moving average d_m^2.
    insert_probability: eta in [0, 1], the probability that a far embedding
      is inserted rather than merged.
    kernel_epsilon: eps > 0 of the kernel K (Sec. 3).
    pseudo_count_constant: c > 0 in r = 1 / (sqrt(N) + c) (Sec. 2).
  """
  capacity: int = 4096
  discount: float = 0.999
  num_neighbors: int = 10
  insert_threshold: float = 0.25
  distance_decay: float = 1e-3
  insert_probability: float = 1.0
  kernel_epsilon: float = 1e-2
  pseudo_count_constant: float = 1e-3

  def __post_init__(self):
    for name, low in (("capacity", 2), ("num_neighbors", 1)):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
          or value < low:
        raise ValueError(f"RecodeConfig: `{name}` must be an integer >= {low}"
                         f", got {value!r}.")

    def check(name, ok, what):
      value = getattr(self, name)
      try:
        good = bool(np.isfinite(value)) and ok(value)
      except TypeError:
        good = False
      if isinstance(value, bool) or not good:
        raise ValueError(f"RecodeConfig: `{name}` must be {what}, got "
                         f"{value!r}.")

    check("discount", lambda v: 0 < v <= 1, "in (0, 1]")
    check("insert_threshold", lambda v: v >= 0, "finite and >= 0")
    check("distance_decay", lambda v: 0 < v <= 1, "in (0, 1]")
    check("insert_probability", lambda v: 0 <= v <= 1, "in [0, 1]")
    check("kernel_epsilon", lambda v: v > 0, "finite and > 0")
    check("pseudo_count_constant", lambda v: v > 0, "finite and > 0")


class RecodeState(NamedTuple):
  """The memory shared by all lanes (a pytree).

  Attributes:
    atoms: [M, D] cluster centres f_l.
    log_counts: [M] float32 log c_l (meaningless where not occupied).
    occupied: [M] bool: the slot holds an atom (empty slots are masked
      everywhere). Slots fill in index order and never empty again.
    mean_sq_distance: [] float32 d_m^2.
    has_distance: [] bool: d_m^2 has been set (by the first k-NN mean).
    key: PRNG key for the insertion draws u and the eviction Gumbel noise;
      it advances once per `step`.
  """
  atoms: jax.Array
  log_counts: jax.Array
  occupied: jax.Array
  mean_sq_distance: jax.Array
  has_distance: jax.Array
  key: jax.Array


def init(config: RecodeConfig, embedding_dim: int, key: jax.Array,
         dtype=jnp.float32) -> RecodeState:
  """An empty memory.

  Args:
    config: the memory's hyperparameters.
    embedding_dim: D, the size of the embeddings.
    key: PRNG key for the memory's random draws.
    dtype: the atoms' floating dtype (float32 by default).

  Returns:
    A RecodeState with no atom and d_m^2 not set.
  """
  if isinstance(embedding_dim, bool) or not isinstance(
      embedding_dim, (int, np.integer)) or embedding_dim < 1:
    raise ValueError("recode.init: `embedding_dim` must be a positive "
                     f"integer, got {embedding_dim!r}.")
  if not jnp.issubdtype(dtype, jnp.floating):
    raise ValueError(f"recode.init: `dtype` must be floating, got {dtype}.")
  m = config.capacity
  return RecodeState(
      atoms=jnp.zeros((m, embedding_dim), dtype),
      log_counts=jnp.zeros((m,), jnp.float32),
      occupied=jnp.zeros((m,), bool),
      mean_sq_distance=jnp.zeros((), jnp.float32),
      has_distance=jnp.zeros((), bool),
      key=jnp.asarray(key),
  )


def counts(state: RecodeState) -> jax.Array:
  """The counts c_l shaped [M] float32, 0 for empty slots."""
  return jnp.where(state.occupied, jnp.exp(state.log_counts), 0.0)


def _draws(key: jax.Array, batch_size: int, capacity: int
           ) -> Tuple[jax.Array, jax.Array, jax.Array]:
  """The random draws of one `step`, for tests: (next_key, u [B], g [B, M]).

  `step` draws u_b and the Gumbel noise g_b (only when lane b evicts) from
  the same lane keys, so these are the very numbers it uses.
  """
  next_key, lane_keys = _lane_keys(key, batch_size)
  u, gumbel = jax.vmap(lambda k: (_uniform(k), _gumbel(k, capacity)))(
      lane_keys)
  return next_key, u, gumbel


def _lane_keys(key, batch_size):
  next_key, step_key = jax.random.split(key)
  return next_key, jax.random.split(step_key, batch_size)


def _uniform(lane_key):
  return jax.random.uniform(jax.random.fold_in(lane_key, 0), (), jnp.float32)


def _gumbel(lane_key, capacity):
  return jax.random.gumbel(jax.random.fold_in(lane_key, 1), (capacity,),
                           jnp.float32)


def _sq_distances(atoms, e):
  """[M] float32 ||f_l - e||^2 from differences: exactly 0 when f_l == e."""
  diff = atoms.astype(jnp.float32) - e.astype(jnp.float32)[None, :]
  return jnp.sum(diff * diff, axis=-1)


def _rewards(config: RecodeConfig, state: RecodeState,
             sq_dist: jax.Array) -> jax.Array:
  """r = 1 / (sqrt(N) + c) from the [B, M] squared distances to the atoms."""
  d_m2 = state.mean_sq_distance
  safe_d_m2 = jnp.where(d_m2 > 0, d_m2, 1.0)
  eps = config.kernel_epsilon
  kernel = eps / (eps + sq_dist / safe_d_m2)
  inside = state.has_distance & (sq_dist < d_m2)
  kernel = jnp.where(sq_dist == 0, 1.0, jnp.where(inside, kernel, 0.0))
  weights = jnp.where(state.occupied, 1.0 + jnp.exp(state.log_counts), 0.0)
  n = jnp.sum(kernel * weights[None, :], axis=-1)  # [B]
  return 1.0 / (jnp.sqrt(n) + config.pseudo_count_constant)


def _update_one(config: RecodeConfig, state: RecodeState, e: jax.Array,
                u: jax.Array, active: jax.Array = True,
                lane_key: Optional[jax.Array] = None,
                gumbel: Optional[jax.Array] = None,
                sq_dist: Optional[jax.Array] = None
                ) -> Tuple[RecodeState, jax.Array]:
  """Alg. 1's memory update (d_m^2, discount, insert or merge) for one e.

  Every change is a select on a scalar or one row, so that inside `step`'s
  scan XLA updates the (donated) memory in place.

  Args:
    config: the memory's hyperparameters.
    state: the memory (its `key` is neither read nor changed).
    e: the embedding, shaped [D].
    u: the insertion draw, U[0, 1).
    active: bool []; False leaves the memory unchanged.
    lane_key: the lane's key, from which the eviction Gumbel noise is drawn
      only when a full memory inserts (`step` passes it); or
    gumbel: that noise, shaped [M] (tests pass it).
    sq_dist: ||f_l - e||^2 shaped [M] for the current atoms, if known
      (`step` patches its snapshot's); None computes them.

  Returns:
    (new_state, target): the updated state and the slot whose atom the
    update may have changed (int32 []); no other atom changed.
  """
  m = config.capacity
  atoms, log_counts, occupied = state.atoms, state.log_counts, state.occupied
  if sq_dist is None:
    sq_dist = _sq_distances(atoms, e)  # [M]
  num_occupied = jnp.sum(occupied, dtype=jnp.int32)
  any_occupied = num_occupied > 0

  # d_m^2: mean of the k smallest squared distances to occupied atoms,
  # found by k argmin passes (O(k M); `lax.top_k` sorts all M on CPU).
  k = min(config.num_neighbors, m)
  masked = jnp.where(occupied, sq_dist, jnp.inf)
  nearest = jnp.argmin(masked)

  def next_nearest(_, carry):
    remaining, total = carry
    i = jnp.argmin(remaining)
    total = total + jnp.where(jnp.isfinite(remaining[i]), remaining[i], 0.0)
    return remaining.at[i].set(jnp.inf), total

  _, knn_sum = jax.lax.fori_loop(0, k, next_nearest,
                                 (masked, jnp.float32(0.0)))
  knn_mean = knn_sum / jnp.maximum(jnp.minimum(num_occupied, k), 1)
  old = state.mean_sq_distance
  # Written as d + tau (mean - d): it equals (1 - tau) d + tau mean and never
  # leaves [min, max] of the two by rounding.
  ema = old + config.distance_decay * (knn_mean - old)
  d_m2 = jnp.where(active & any_occupied,
                   jnp.where(state.has_distance, ema, knn_mean), old)
  has_distance = state.has_distance | (active & any_occupied)

  # Discount every count (log space).
  log_counts = jnp.where(active & occupied,
                         log_counts + np.float32(math.log(config.discount)),
                         log_counts)

  far = sq_dist[nearest] > config.insert_threshold * d_m2
  insert = (~any_occupied) | (far & (u < config.insert_probability))
  evicting = active & insert & (num_occupied >= m)

  def evict():
    # Slot j ~ 1 / c_j^2 (Gumbel-max); its count goes to its nearest atom.
    g = gumbel if gumbel is not None else _gumbel(lane_key, m)
    j = jnp.argmax(-2.0 * log_counts + g).astype(jnp.int32)
    to_j = jnp.where(jnp.arange(m) == j, jnp.inf,
                     _sq_distances(atoms, atoms[j]))
    return j, jnp.argmin(to_j).astype(jnp.int32)

  def fill():  # The lowest-index empty slot; no count moves.
    first_empty = jnp.argmin(occupied).astype(jnp.int32)
    return first_empty, first_empty

  slot, receiver = jax.lax.cond(evicting, evict, fill)
  log_counts = log_counts.at[receiver].set(jnp.where(
      evicting, jnp.logaddexp(log_counts[receiver], log_counts[slot]),
      log_counts[receiver]))

  # Insert: f_j <- e, c_j <- 1. Merge: f_i <- (c_i f_i + e) / (c_i + 1),
  # written f_i + (e - f_i) / (c_i + 1), and c_i <- c_i + 1.
  target = jnp.where(insert, slot, nearest)
  merged_log_count = jnp.logaddexp(log_counts[nearest], 0.0)
  f = atoms[nearest].astype(jnp.float32)
  merged = f + (e.astype(jnp.float32) - f) * jnp.exp(-merged_log_count)
  row = jnp.where(insert, e.astype(jnp.float32), merged).astype(atoms.dtype)
  new_log_count = jnp.where(insert, 0.0, merged_log_count)
  atoms = atoms.at[target].set(jnp.where(active, row, atoms[target]))
  log_counts = log_counts.at[target].set(
      jnp.where(active, new_log_count, log_counts[target]))
  occupied = occupied.at[target].set(occupied[target] | active)
  return state._replace(atoms=atoms, log_counts=log_counts,
                        occupied=occupied, mean_sq_distance=d_m2,
                        has_distance=has_distance), target.astype(jnp.int32)


def _check_state(state: RecodeState, config: RecodeConfig, where: str) -> int:
  if not isinstance(state, RecodeState):
    raise ValueError(f"{where}: `state` must be a RecodeState, got "
                     f"{type(state).__name__}.")
  _checks.check_rank(state.atoms, 2, "state.atoms", where)
  m, d = state.atoms.shape
  if m != config.capacity:
    raise ValueError(f"{where}: the state holds {m} atoms but "
                     f"config.capacity is {config.capacity}; build the state "
                     "with init(config, ...).")
  return d


def step(config: RecodeConfig, state: RecodeState, embeddings: jax.Array,
         mask: Optional[jax.Array] = None
         ) -> Tuple[jax.Array, RecodeState]:
  """RECODE intrinsic rewards for B lanes, then Alg. 1's updates in lane order.

  1. Rewards (Sec. 3): for every lane, r_b = 1 / (sqrt(N_b) + c) with
     N_b = sum_l (1 + c_l) K(f_l, e_b), all from the memory as it was at the
     start of the step (one [B, M] distance computation).
  2. Updates (Alg. 1), lane 0 first, each on the memory the previous lane
     left: d_m^2 from the k-NN mean, discount every count by gamma, then
     insert e_b as a new atom or merge it into its nearest atom (see the
     module docstring).

  NOTE: `config` is static: jit with `static_argnums=0` and, for speed,
  `donate_argnums=1` (see the module docstring).

  Args:
    config: the memory's hyperparameters.
    state: the shared memory, from `init`.
    embeddings: e_b shaped [B, D], B >= 1, finite.
    mask: optional bool [B]; lanes where it is False get reward 0 and leave
      the memory unchanged (no discount, no d_m^2 update). None: all lanes.

  Returns:
    (rewards, new_state): rewards shaped [B] float32, not normalised, and
    the updated memory (its key advanced once).
  """
  where = "recode.step"
  d = _check_state(state, config, where)
  _checks.check_shape(embeddings, (None, d), "embeddings", where)
  if np.shape(embeddings)[0] < 1:
    raise ValueError(f"{where}: `embeddings` must hold at least one lane, "
                     f"got shape {tuple(np.shape(embeddings))}.")
  _checks.check_floating(embeddings, "embeddings", where)
  _checks.check_finite(embeddings, "embeddings", where)
  b = np.shape(embeddings)[0]
  if mask is not None:
    _checks.check_shape(mask, (b,), "mask", where)
    if jnp.asarray(mask).dtype != jnp.bool_:
      raise ValueError(f"{where}: `mask` must be bool, got dtype "
                       f"{jnp.asarray(mask).dtype}.")
    mask = jnp.asarray(mask)
  else:
    mask = jnp.ones((b,), bool)
  embeddings = jnp.asarray(embeddings)

  # [B, M] squared distances to the memory at the start of the step.
  diff = (embeddings.astype(jnp.float32)[:, None, :]
          - state.atoms.astype(jnp.float32)[None, :, :])
  snapshot = jnp.sum(diff * diff, axis=-1)
  rewards = jnp.where(mask, _rewards(config, state, snapshot), 0.0)
  next_key, lane_keys = _lane_keys(state.key, b)

  patch = b < config.capacity  # Else recomputing all M rows is cheaper.

  def lane(carry, inputs):
    # Lane l's distances are the snapshot's, except at the <= l slots the
    # earlier lanes changed: those are recomputed from the current atoms, so
    # each update costs O(M + B D) rather than O(M D).
    memory, changed = carry
    l, e, active, lane_key, sq_dist = inputs
    if patch:
      sq_dist = sq_dist.at[changed].set(
          _sq_distances(memory.atoms[changed], e))
    else:
      sq_dist = _sq_distances(memory.atoms, e)
    memory, target = _update_one(config, memory, e, _uniform(lane_key),
                                 active, lane_key=lane_key, sq_dist=sq_dist)
    return (memory, changed.at[l].set(target)), None

  # Slot 0 stands for "no change yet": recomputing it is harmless.
  (memory, _), _ = jax.lax.scan(
      lane, (state, jnp.zeros((b,), jnp.int32)),
      (jnp.arange(b), embeddings, mask, lane_keys, snapshot))
  return rewards.astype(jnp.float32), memory._replace(key=next_key)
