"""The intrinsic rewards: NGU, RND only, RECODE and none (`config.intrinsic`).

* "ngu": NGU eq. 1, r^i_t = r^episodic_t * min(max(alpha_t, 1), L), the
  episodic k-NN reward of f(x_t) (Alg. 1) modulated by RND's life-long
  novelty alpha_t (Sec. 2; alpha = 1 without `config.use_rnd`).
* "rnd": the RND-only baseline of Sec. 4.1 / Fig. 2, r^i_t = err(x_t) /
  sigma_e (`lifelong.rnd_reward`).
* "recode": RECODE (003 Sec. 3, Alg. 1): the count-based reward of f(x_t)
  from one never-reset clustering memory shared by the actor's lanes,
  divided by the running std of its rewards.
* "none": r^i = 0; no memory, no embedding, no RND (R2D2; DiCE Table 5).

Each is an `IntrinsicReward` part (`variants.parts`): `init` makes its
`ActorState` slots, `step` computes r^i of one step of B lanes.
"""

from typing import Any, Tuple

import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.agents.ngu.variants import parts
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.intrinsic import recode as recode_lib
from ngu_jax.losses import rnd as rnd_losses
from ngu_jax.networks import rnd as rnd_lib


def episodic_memory_config(config: NGUConfig) -> episodic.EpisodicMemoryConfig:
  """The episodic-memory hyperparameters of the config (Table 6)."""
  return episodic.EpisodicMemoryConfig(
      capacity=config.memory_capacity,
      num_neighbors=config.num_neighbors,
      kernel_epsilon=config.kernel_epsilon,
      cluster_distance=config.cluster_distance,
      pseudo_count_constant=config.pseudo_count_constant,
      max_similarity=config.max_similarity,
      distance_horizon=config.episodic_distance_horizon,
      rescale_short_memory=config.episodic_rescale_short_memory)


def recode_config(config: NGUConfig) -> recode_lib.RecodeConfig:
  """The RECODE memory's hyperparameters of the config (003 Alg. 1)."""
  r = config.recode
  return recode_lib.RecodeConfig(
      capacity=r.capacity, discount=r.discount,
      num_neighbors=r.num_neighbors, insert_threshold=r.insert_threshold,
      distance_decay=r.distance_decay,
      insert_probability=r.insert_probability,
      kernel_epsilon=r.kernel_epsilon,
      pseudo_count_constant=r.pseudo_count_constant)


def _zeros(b: int) -> jax.Array:
  return jnp.zeros((b,), jnp.float32)


def _ones(b: int) -> jax.Array:
  return jnp.ones((b,), jnp.float32)


def _episodic_slots(config: NGUConfig, networks: Any, b: int) -> parts.Slots:
  """B empty episodic memories and, with `embedding_params_per_lane`, the
  lanes' embedding parameters (zeros until each lane's first FIRST)."""
  slots = {"memory": episodic.init(episodic_memory_config(config), b,
                                   networks.embedding.embedding_dim)}
  if config.embedding_params_per_lane:
    shapes = jax.eval_shape(networks.embedding.init, jax.random.PRNGKey(0))
    slots["embedding_params"] = jax.tree_util.tree_map(
        lambda s: jnp.zeros((b,) + s.shape, s.dtype), shapes)
  return slots


def _rnd_statistic(config: NGUConfig, networks: Any, params: Any, state: Any,
                   observation: jax.Array, statistic) -> Tuple[Any, Any, Any]:
  """(statistic of the RND error, RND error, error stats) of x_t (Sec. 2).

  Errors on inputs the observation normaliser has not seen statistics for
  (before the learner's first update reaches the actor) are on another scale
  (raw inputs clipped to [-5, 5]: measured 280 against 5-8 after): they
  never enter the statistics and get `statistic`'s neutral value (alpha 1,
  RND-only reward 0).
  """
  rnd_input = observation
  valid = jnp.asarray(True)
  if config.rnd_observation_normalization:
    rnd_input = rnd_lib.normalize_observation(params.rnd_observation_stats,
                                              observation)
    valid = params.rnd_observation_stats.count > 0
  rnd_error = rnd_losses.rnd_error(
      networks.rnd.predictor(params.rnd_predictor, rnd_input),
      networks.rnd.target(params.rnd_target, rnd_input))
  value, error_stats = statistic(state.error_stats, rnd_error,
                                 horizon=config.rnd_error_horizon,
                                 valid=valid)
  return value, rnd_error, error_stats


# --------------------------------------------------------------------- NGU


def _ngu_init(config, networks, num_lanes, key):
  return _episodic_slots(config, networks, num_lanes), key


def _ngu_step(config, networks, params, state, observation, first, wipe):
  """Alg. 1's episodic reward of f(x_t) times eq. 1's modulator."""
  del first
  b = observation.shape[0]
  memory = episodic.reset(state.memory, wipe)
  if config.embedding_params_per_lane:
    # T6 "Embeddings target update period: once/episode": a lane adopts the
    # latest f when its memory is wiped (or before its first episode).
    adopt = wipe | (state.episode_count == 0)
    latest = jax.tree_util.tree_map(
        lambda x: jnp.broadcast_to(x, (b,) + jnp.shape(x)), params.embedding)
    embedding_params = parts.where_lanes(adopt, latest, state.embedding_params)
    embeddings = jax.vmap(
        lambda p, x: networks.embedding.embed(p, x[None])[0])(
            embedding_params, observation)
  else:
    embedding_params = None
    embeddings = networks.embedding.embed(params.embedding, observation)
  episodic_reward, memory = episodic.step(episodic_memory_config(config),
                                          memory, embeddings)
  slots = {"memory": memory, "embedding_params": embedding_params}
  alpha, rnd_error = _ones(b), _zeros(b)
  if config.use_rnd:
    alpha, rnd_error, slots["error_stats"] = _rnd_statistic(
        config, networks, params, state, observation, lifelong.modulator)
  intrinsic = lifelong.ngu_intrinsic_reward(episodic_reward, alpha,
                                            config.rnd_clip)
  return parts.RewardStep(intrinsic, episodic_reward, alpha, rnd_error), slots


NGU = parts.IntrinsicReward(
    init=_ngu_init, step=_ngu_step, episodic=True, modulated=True,
    reads_rnd=True, reads_embedding=True, trains_embedding=True,
    trains_rnd=True)


# ---------------------------------------------------------------- RND only


def _rnd_step(config, networks, params, state, observation, first, wipe):
  """r^i_t = err(x_t) / sigma_e (`lifelong.rnd_reward`; Sec. 4.1)."""
  del first
  b = observation.shape[0]
  # The memory slot is kept (and wiped) as NGU's, which this baseline
  # ablates; nothing is written to it.
  memory = episodic.reset(state.memory, wipe)
  intrinsic, rnd_error, error_stats = _rnd_statistic(
      config, networks, params, state, observation, lifelong.rnd_reward)
  reward_step = parts.RewardStep(intrinsic, episodic_reward=_zeros(b),
                                 alpha=_ones(b), rnd_error=rnd_error)
  return reward_step, {"memory": memory, "error_stats": error_stats}


RND = parts.IntrinsicReward(
    init=_ngu_init, step=_rnd_step, episodic=False, modulated=False,
    reads_rnd=True, reads_embedding=False, trains_embedding=True,
    trains_rnd=True)


# ------------------------------------------------------------------ RECODE


def _recode_init(config, networks, num_lanes, key):
  del num_lanes
  key, recode_key = jax.random.split(key)
  return {"recode": recode_lib.init(recode_config(config),
                                    networks.embedding.embedding_dim,
                                    recode_key),
          "recode_reward_stats": lifelong.init()}, key


def _recode_step(config, networks, params, state, observation, first, wipe):
  """003 Alg. 1 with the latest f (one f for the memory of all lanes)."""
  del first, wipe
  b = observation.shape[0]
  embeddings = networks.embedding.embed(params.embedding, observation)
  reward, recode_state = recode_lib.step(recode_config(config), state.recode,
                                         embeddings)
  intrinsic, reward_stats = lifelong.divide_by_running_std(
      state.recode_reward_stats, reward, horizon=config.recode.reward_horizon)
  slots = {"recode": recode_state, "recode_reward_stats": reward_stats}
  return parts.RewardStep(intrinsic, reward, _ones(b), _zeros(b)), slots


RECODE = parts.IntrinsicReward(
    init=_recode_init, step=_recode_step, episodic=True, modulated=False,
    reads_rnd=False, reads_embedding=True, trains_embedding=True,
    trains_rnd=False)


# -------------------------------------------------------------------- none


def _none_init(config, networks, num_lanes, key):
  del config, networks, num_lanes
  return {}, key


def _none_step(config, networks, params, state, observation, first, wipe):
  del config, networks, params, state, first, wipe
  b = observation.shape[0]
  return parts.RewardStep(_zeros(b), _zeros(b), _ones(b),
                          _zeros(b)), {}


NONE = parts.IntrinsicReward(
    init=_none_init, step=_none_step, episodic=False, modulated=False,
    reads_rnd=False, reads_embedding=False, trains_embedding=False,
    trains_rnd=False)


parts.register("intrinsic", "ngu", NGU)
parts.register("intrinsic", "rnd", RND)
parts.register("intrinsic", "recode", RECODE)
parts.register("intrinsic", "none", NONE)
