"""The NGU auxiliary losses: action prediction and RND (App. A, learner).

Badia et al. (2020), "Never Give Up", App. A: the inverse-dynamics
(action-prediction) network f, h of the episodic embedding (Sec. 2) and the
RND predictor (Sec. 2, Burda et al., 2019) are trained on the last
`config.aux_loss_steps` (5) valid steps of each replayed sequence
(`last_valid_indices`), each with its own optimiser
(`ngu_jax.agents.ngu.learning.sgd_step`; `learning` re-exports these names).
"""

from typing import Dict, Tuple

import chex
import haiku as hk
import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.losses import inverse_dynamics as id_losses
from ngu_jax.losses import retrace
from ngu_jax.losses import rnd as rnd_losses
from ngu_jax.networks import rnd as rnd_lib
from ngu_jax.types import SequenceBatch

Array = chex.Array


def last_valid_indices(mask: Array, num_steps: int) -> Tuple[Array, Array]:
  """Indices of the last `num_steps` entries with mask 1, per lane.

  App. A (learner): the action-prediction and RND losses use only the last
  5 steps of each sequence; with padding, the last 5 *valid* ones.

  Args:
    mask: 0/1 (or bool) shaped [S, B].
    num_steps: K >= 1.

  Returns:
    (indices int32 [B, K], weights float32 [B, K]): the time indices of the
    last min(K, count) valid entries of each lane, latest first, and weight 1
    for them; lanes with fewer than K valid entries get index 0 and weight 0
    in the remaining slots.
  """
  valid = jnp.asarray(mask) > 0  # [S, B]
  s = valid.shape[0]
  time = jnp.arange(s, dtype=jnp.int32)[:, None]
  score = jnp.where(valid, time, -1).T  # [B, S]
  k = min(num_steps, s)
  top, _ = jax.lax.top_k(score, k)  # [B, k], latest first.
  weights = (top >= 0).astype(jnp.float32)
  indices = jnp.maximum(top, 0)
  if k < num_steps:
    pad = num_steps - k
    indices = jnp.pad(indices, ((0, 0), (0, pad)))
    weights = jnp.pad(weights, ((0, 0), (0, pad)))
  return indices, weights


def gather_steps(x: Array, indices: Array) -> Array:
  """x [S, B, ...], indices [B, K] -> [B * K, ...] (lane-major).

  With `last_valid_indices`: the selected steps of every lane, flattened.
  """
  lanes = jnp.arange(x.shape[1])[:, None]
  g = x[indices, lanes]  # [B, K, ...]
  return g.reshape((-1,) + g.shape[2:])


def _weighted_mean(values: Array, weights: Array) -> Array:
  return jnp.sum(weights * values) / jnp.maximum(jnp.sum(weights), 1.)



def aux_losses(config: NGUConfig, networks: actor_lib.NGUNetworks,
               embedding_params: hk.Params, rnd_predictor_params: hk.Params,
               rnd_target_params: hk.Params,
               observation_stats: rnd_lib.ObservationNormStats,
               batch: SequenceBatch
               ) -> Tuple[Tuple[Array, Dict[str, Array]],
                          Tuple[Array, Dict[str, Array]]]:
  """Inverse-dynamics and RND losses on the last K valid steps (App. A).

  With K = `config.aux_loss_steps` (5):

  * action prediction (Sec. 2, Table 6): the last K valid transitions
    (x_t, a_t, x_{t+1}) of each sequence (`retrace.valid_mask`: both steps
    real), loss = weighted mean over them of -log p(a_t | x_t, x_{t+1})
    + `action_prediction_l2` * sum(theta_f,h^2) (as
    `losses.inverse_dynamics_loss`, which it equals when every lane has K
    valid transitions);
  * RND (Sec. 2): the last K valid observations x_s (mask 1) of each
    sequence, loss = weighted mean of err(x_s) = ||g_hat(x_s) - g(x_s)||^2,
    on whitened inputs with `config.rnd_observation_normalization`
    (`observation_stats` must then already include this batch).

  Args:
    config, networks: the agent's.
    embedding_params: f and h.
    rnd_predictor_params, rnd_target_params: g_hat, g.
    observation_stats: RND input statistics.
    batch: a checked `SequenceBatch`.

  Returns:
    ((id_loss, id_metrics), (rnd_loss, rnd_metrics)).
  """
  k = config.aux_loss_steps
  mask = jnp.asarray(batch.mask)
  obs = jnp.asarray(batch.observation)
  # Action prediction on transitions.
  t_idx, t_w = last_valid_indices(retrace.valid_mask(mask), k)
  x_t, x_tp1 = gather_steps(obs[:-1], t_idx), gather_steps(obs[1:], t_idx)
  a_t = gather_steps(jnp.asarray(batch.action)[:-1], t_idx)
  w = t_w.reshape(-1)
  logits = networks.embedding.inverse_logits(embedding_params, x_t, x_tp1)
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  nll = _weighted_mean(-jnp.take_along_axis(log_probs, a_t[:, None],
                                            axis=-1)[:, 0], w)
  penalty = config.action_prediction_l2 * id_losses.l2_penalty(
      embedding_params)
  accuracy = _weighted_mean(
      (jnp.argmax(logits, axis=-1) == a_t).astype(jnp.float32), w)
  id_loss = nll + penalty
  id_metrics = {"action_prediction_loss": id_loss,
                "action_prediction_nll": nll,
                "action_prediction_accuracy": accuracy}
  # RND on observations.
  s_idx, s_w = last_valid_indices(mask, k)
  x = gather_steps(obs, s_idx)
  if config.rnd_observation_normalization:
    x = rnd_lib.normalize_observation(observation_stats, x)
  error = rnd_losses.rnd_error(
      networks.rnd.predictor(rnd_predictor_params, x),
      networks.rnd.target(rnd_target_params, x))
  rnd_loss = _weighted_mean(error, s_w.reshape(-1))
  return (id_loss, id_metrics), (rnd_loss, {"rnd_loss": rnd_loss})
