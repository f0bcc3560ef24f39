"""NGU's episodic memory and episodic intrinsic reward, batched over lanes.

Implements Algorithm 1 of Badia et al. (2020), App. A.1, with the kernel of
eq. (3) and the pseudo-count reward of eq. (2), for B independent lanes
(actors) at once. Each lane owns a ring-buffer memory of controllable states
f(x) of its current episode.

The semantics follow docs/design.md#episodic-reward:

* `step` first queries the memory, which holds the embeddings of this
  episode *before* the current one, then inserts the current embedding.
* Distances are squared Euclidean distances d^2(f(x_t), f_i).
* With fewer than k entries in memory only those entries count; with an
  empty memory the reward is 0 (and d_m^2 is not updated).
* d_m^2 is a running average of the k-NN squared distances the lane has
  produced, kept across episodes (`reset` does not clear it), and it is
  updated with the current distances before they are normalised (Alg. 1,
  line 6, "moving average"). With `distance_horizon` H > 0 it is the exact
  mean of the first H distances, then an exponential moving average in which
  the m new distances of a step have weight m / (H + m) (the count that
  weighs the past saturates at H); H = 0 keeps the mean of every distance
  the lane ever produced (it lags when f's distance scale grows during
  training).
* The memory is a ring buffer of `capacity` slots (App. A.2): once full, the
  oldest entry is overwritten.

Everything is a pure function of explicit state; the caller jits. The
memory is the largest array (B x (capacity+1) x D float32: 123 MB for B=32,
capacity 30000, D=32), so jit `step` and `reset` with the state donated,
`jax.jit(step, static_argnums=0, donate_argnums=1)`, or XLA must copy the
whole memory every step.

Example:
  config = EpisodicMemoryConfig()
  state = init(config, batch_size=B, embedding_dim=32)
  step_fn = jax.jit(step, static_argnums=0, donate_argnums=1)
  rewards, state = step_fn(config, state, embeddings)   # [B], state
  state = reset(state, is_first_step_of_next_episode)    # [B] bool
"""

import dataclasses
from typing import NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks

# The k-NN distance count is int32; it saturates here so that it can never
# overflow. Beyond it the mean becomes a running average with weight
# m / 2**30 on new distances, i.e. indistinguishable from the exact mean.
_MAX_DISTANCE_COUNT = 2**30


@dataclasses.dataclass(frozen=True)
class EpisodicMemoryConfig:
  """Hyperparameters of the episodic memory (NGU Table 6 defaults).

  Attributes:
    capacity: slots per lane (Table 6: 30000; Table 7, Disco Maze: 5000).
      The memory is a ring buffer: the oldest entry is overwritten.
    num_neighbors: k, the number of nearest neighbours (Table 6: 10).
    kernel_epsilon: epsilon of the inverse kernel, eq. (3) and Alg. 1 line 9
      (Table 6: 1e-4; Table 7: 1e-2).
    cluster_distance: xi; normalised distances below it count as 0 (Alg. 1,
      line 8; Table 6: 0.008).
    pseudo_count_constant: c, added to the square root of the summed
      similarities (eq. 2, Alg. 1 line 10; Table 6: 1e-3).
    max_similarity: s_m; if the similarity s exceeds it the reward is 0
      (Alg. 1, line 11; Table 6: 8).
    distance_horizon: H, the horizon (in k-NN distances) of the moving
      average d_m^2 (Alg. 1, line 6; module docstring); 0: the mean of every
      distance ever produced. Not in the paper (it says "moving average").
    rescale_short_memory: with n < k entries in the memory (the first k
      steps of every episode), scale the kernel sum of the n neighbours by
      k / n -- as if the missing k - n neighbours were as similar as the
      present ones on average -- so that the reward does not fall with the
      time step merely because the memory fills up. Identical to the paper
      where it operates (n >= k); off (False): the paper's Alg. 1, whose
      sum runs over min(k, n) neighbours. Not in the paper
      (docs/design.md#episodic-reward).
  """
  capacity: int = 30000
  num_neighbors: int = 10
  kernel_epsilon: float = 1e-4
  cluster_distance: float = 0.008
  pseudo_count_constant: float = 1e-3
  max_similarity: float = 8.0
  distance_horizon: int = 0
  rescale_short_memory: bool = False

  def __post_init__(self):
    value = self.distance_horizon
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
        or value < 0:
      raise ValueError("EpisodicMemoryConfig: `distance_horizon` must be an "
                       f"integer >= 0, got {value!r}.")
    if not isinstance(self.rescale_short_memory, (bool, np.bool_)):
      raise ValueError("EpisodicMemoryConfig: `rescale_short_memory` must be "
                       f"a bool, got {self.rescale_short_memory!r}.")
    for name in ("capacity", "num_neighbors"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
          or value < 1:
        raise ValueError(f"EpisodicMemoryConfig: `{name}` must be a positive "
                         f"integer, got {value!r}.")
    if not self.kernel_epsilon > 0:
      raise ValueError("EpisodicMemoryConfig: `kernel_epsilon` must be > 0, "
                       f"got {self.kernel_epsilon!r}.")
    for name in ("cluster_distance", "pseudo_count_constant",
                 "max_similarity"):
      value = getattr(self, name)
      if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"EpisodicMemoryConfig: `{name}` must be finite and "
                         f">= 0, got {value!r}.")


class EpisodicMemoryState(NamedTuple):
  """Per-lane episodic memories and kernel statistics (a pytree).

  Attributes:
    memory: [B, capacity + 1, D] ring buffer of the embeddings f(x) of the
      current episode. The spare slot lets `step` write before it reads
      (see there); only the `size` slots written most recently are valid.
    sq_norms: [B, capacity + 1] float32 squared norms of `memory`'s rows,
      kept so that a query costs one GEMV per lane.
    size: [B] int32 entries in the lane's memory, min(items since the last
      reset, capacity).
    write_index: [B] int32 slot the next embedding is written to.
    mean_sq_distance: [B] float32 d_m^2, the running average of the k-NN
      squared distances the lane has produced (across episodes).
    distance_count: [B] int32 number of distances in that average (saturates
      at `distance_horizon`, or at 2**30 when it is 0).
  """
  memory: jax.Array
  sq_norms: jax.Array
  size: jax.Array
  write_index: jax.Array
  mean_sq_distance: jax.Array
  distance_count: jax.Array


def init(config: EpisodicMemoryConfig, batch_size: int, embedding_dim: int,
         dtype=jnp.float32) -> EpisodicMemoryState:
  """Empty memories for `batch_size` lanes.

  Args:
    config: the memory's hyperparameters.
    batch_size: B, the number of independent lanes.
    embedding_dim: D, the size of the controllable state f(x) (NGU: 32).
    dtype: the memory's floating dtype (float32 by default).

  Returns:
    An EpisodicMemoryState whose memories are empty and d_m^2 = 0.
  """
  for name, value in (("batch_size", batch_size),
                      ("embedding_dim", embedding_dim)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
        or value < 1:
      raise ValueError(f"episodic.init: `{name}` must be a positive integer, "
                       f"got {value!r}.")
  if not jnp.issubdtype(dtype, jnp.floating):
    raise ValueError(f"episodic.init: `dtype` must be floating, got {dtype}.")
  b, p = batch_size, config.capacity + 1
  return EpisodicMemoryState(
      memory=jnp.zeros((b, p, embedding_dim), dtype),
      sq_norms=jnp.zeros((b, p), jnp.float32),
      size=jnp.zeros((b,), jnp.int32),
      write_index=jnp.zeros((b,), jnp.int32),
      mean_sq_distance=jnp.zeros((b,), jnp.float32),
      distance_count=jnp.zeros((b,), jnp.int32),
  )


def _check_state(state: EpisodicMemoryState, config: EpisodicMemoryConfig,
                 where: str) -> Tuple[int, int, int]:
  if not isinstance(state, EpisodicMemoryState):
    raise ValueError(f"{where}: `state` must be an EpisodicMemoryState, got "
                     f"{type(state).__name__}.")
  _checks.check_rank(state.memory, 3, "state.memory", where)
  b, p, d = state.memory.shape
  if config is not None and p != config.capacity + 1:
    raise ValueError(f"{where}: the state holds {p - 1} entries per lane but "
                     f"config.capacity is {config.capacity}; build the state "
                     "with init(config, ...).")
  return b, p, d


def step(config: EpisodicMemoryConfig, state: EpisodicMemoryState,
         embeddings: jax.Array) -> Tuple[jax.Array, EpisodicMemoryState]:
  """Episodic intrinsic rewards for one step of B lanes, then inserts them.

  Algorithm 1 (NGU App. A.1) per lane b, with M_b the lane's memory:
    1. N_k = the k nearest neighbours of f(x_t) in M_b (k = min(k, |M_b|));
       d_k[i] = d^2(f(x_t), N_k[i]), squared Euclidean.
    2. d_m^2 <- running (moving) average including d_k (line 6).
    3. d_n = max(d_k / d_m^2 - xi, 0) (lines 7-8).
    4. K_v = eps / (d_n + eps); s = sqrt(sum K_v) + c (lines 9-10, eq. 3).
    5. r = 0 if s > s_m else 1 / s (lines 11-15, eq. 2).
  An empty memory gives r = 0. Then f(x_t) is written to M_b (ring buffer).

  The neighbours are selected with `jax.lax.top_k` over squared distances in
  GEMV form, ||m||^2 - 2 m.q + ||q||^2, with empty slots excluded; their
  distances are then recomputed exactly from the k gathered embeddings, so
  the rewards do not suffer the GEMV form's cancellation error. (The current
  embedding is written to a spare slot before the query and excluded from
  it, which is equivalent to querying first and inserting after.)

  NOTE: `config` is static: jit with `static_argnums=0` and, for speed,
  `donate_argnums=1` (see the module docstring).

  Args:
    config: the memory's hyperparameters.
    state: the memories of B lanes, from `init`.
    embeddings: f(x_t) shaped [B, D], finite.

  Returns:
    (rewards, new_state): r_t^episodic shaped [B] float32, and the state with
    the embeddings inserted.
  """
  where = "episodic.step"
  b, p, d = _check_state(state, config, where)
  _checks.check_shape(embeddings, (b, d), "embeddings", where)
  _checks.check_floating(embeddings, "embeddings", where)
  _checks.check_finite(embeddings, "embeddings", where)

  query = jnp.asarray(embeddings).astype(state.memory.dtype)
  query_f32 = query.astype(jnp.float32)
  q_sq_norm = jnp.sum(query_f32 * query_f32, axis=-1)  # [B]

  # Insert f(x_t) first, into one spare slot: the ring has capacity + 1 slots,
  # so writing the current embedding never overwrites an entry that the query
  # below must still see (the oldest of a full memory). Writing before reading
  # lets XLA update the donated memory in place; reading first makes it copy
  # the whole memory every step.
  lanes = jnp.arange(b)
  memory = state.memory.at[lanes, state.write_index].set(query)
  sq_norms = state.sq_norms.at[lanes, state.write_index].set(q_sq_norm)

  # The query set is the `size` slots written before the current one.
  age = (state.write_index[:, None] - jnp.arange(p, dtype=jnp.int32)[None, :]
         ) % p  # [B, P]; 0 = the slot just written, 1 = the previous, ...
  slot_valid = (age >= 1) & (age <= state.size[:, None])

  # Squared distances to every slot, GEMV form: one matrix-vector per lane.
  dots = jnp.einsum("bcd,bd->bc", memory, query,
                    preferred_element_type=jnp.float32)  # [B, P]
  approx_sq_dist = sq_norms - 2.0 * dots + q_sq_norm[:, None]
  scores = jnp.where(slot_valid, -approx_sq_dist, -jnp.inf)

  k = min(config.num_neighbors, config.capacity)
  _, neighbor_idx = jax.lax.top_k(scores, k)  # [B, k], nearest first
  # top_k ranks valid slots (finite scores) before invalid ones (-inf), so the
  # first min(size, k) neighbours are exactly the valid ones.
  neighbor_valid = (jnp.arange(k, dtype=jnp.int32)[None, :]
                    < state.size[:, None])  # [B, k]
  neighbors = jnp.take_along_axis(
      memory, neighbor_idx[:, :, None], axis=1).astype(jnp.float32)
  diff = neighbors - query_f32[:, None, :]
  sq_dist = jnp.where(neighbor_valid, jnp.sum(diff * diff, axis=-1), 0.0)

  # Alg. 1 line 6: running average of the k-NN squared distances; the count
  # weighing the past saturates at the horizon (a moving average after it).
  num_new = jnp.sum(neighbor_valid, axis=-1, dtype=jnp.int32)  # [B]
  cap = config.distance_horizon or _MAX_DISTANCE_COUNT
  old_count = jnp.minimum(state.distance_count, cap)
  new_count = old_count + num_new
  mean_sq = state.mean_sq_distance + (
      jnp.sum(sq_dist, axis=-1) - num_new * state.mean_sq_distance
  ) / jnp.maximum(new_count, 1).astype(jnp.float32)
  mean_sq = jnp.where(num_new > 0, mean_sq, state.mean_sq_distance)

  # Lines 7-8. d_m^2 = 0 implies every distance is 0 (they are in the mean),
  # so 0 / 0 is taken as 0.
  safe_mean = jnp.where(mean_sq > 0, mean_sq, 1.0)[:, None]
  normalized = jnp.where(mean_sq[:, None] > 0, sq_dist / safe_mean, 0.0)
  normalized = jnp.maximum(normalized - config.cluster_distance, 0.0)
  # Lines 9-15.
  kernel = config.kernel_epsilon / (normalized + config.kernel_epsilon)
  kernel = jnp.where(neighbor_valid, kernel, 0.0)
  kernel_sum = jnp.sum(kernel, axis=-1)
  if config.rescale_short_memory:  # k / n for n < k (the attribute's doc).
    kernel_sum = kernel_sum * (k / jnp.maximum(num_new, 1).astype(
        jnp.float32))
  similarity = jnp.sqrt(kernel_sum) + config.pseudo_count_constant
  rewards = jnp.where(similarity > config.max_similarity, 0.0,
                      1.0 / similarity)
  rewards = jnp.where(state.size > 0, rewards, 0.0).astype(jnp.float32)

  new_state = EpisodicMemoryState(
      memory=memory,
      sq_norms=sq_norms,
      size=jnp.minimum(state.size + 1, config.capacity),
      write_index=(state.write_index + 1) % p,
      mean_sq_distance=mean_sq,
      distance_count=new_count,
  )
  return rewards, new_state


def reset(state: EpisodicMemoryState, mask: jax.Array) -> EpisodicMemoryState:
  """Empties the memories of the lanes where `mask` is True.

  Call it with the lanes whose next step starts an episode (NGU Sec. 2: the
  memory starts empty every episode). To keep memories over n episodes
  (NGU Table 9, "# episodes w/o wiping"), pass a mask that is True only at
  every n-th episode start. The d_m^2 statistics are kept
  (docs/design.md#episodic-reward).

  Args:
    state: the memories of B lanes.
    mask: bool shaped [B]; True empties that lane's memory.

  Returns:
    The new state. Slot contents are not zeroed: emptied slots are simply no
    longer valid.
  """
  where = "episodic.reset"
  b, _, _ = _check_state(state, None, where)
  _checks.check_shape(mask, (b,), "mask", where)
  if jnp.asarray(mask).dtype != jnp.bool_:
    raise ValueError(f"{where}: `mask` must be bool, got dtype "
                     f"{jnp.asarray(mask).dtype}.")
  return state._replace(
      size=jnp.where(mask, 0, state.size),
      write_index=jnp.where(mask, 0, state.write_index),
  )
