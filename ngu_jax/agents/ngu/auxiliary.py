"""The NGU auxiliary losses: action prediction and RND (App. A, learner).

Badia et al. (2020), "Never Give Up", App. A: the inverse-dynamics
(action-prediction) network f, h of the episodic embedding (Sec. 2) and the
RND predictor (Sec. 2, Burda et al., 2019) are trained on
`config.aux_loss_steps` (5) valid steps of each replayed sequence, each with
its own optimiser (`ngu_jax.agents.ngu.learning.sgd_step`; `learning`
re-exports these names).

Which steps (`config.aux_loss_step_selection`, `aux_steps`):

* "uniform" (default): K distinct valid steps drawn uniformly at random per
  sequence and learner step (`random_valid_indices`);
* "last": the last K valid steps (`last_valid_indices`), App. A's words
  ("use last 5 frames of the sampled sequences").

App. A's sequences are 80-step windows cut every 40 steps from Atari
episodes of thousands of steps, so their last 5 frames sit at a uniformly
spread position in the episode. Our sequences start at an episode's start
and are zero-padded at its end (docs/design.md#sequences): in a task whose
episodes fit in one sequence the last 5 valid steps are always the
episode's last 5, and states visited earlier in an episode never train f or
the RND predictor. Measured on DeepSea (README, "Deep exploration"): with
"last" the RND error of the first N - 5 rows never falls, so alpha cannot
rank them by how rarely they are visited. "uniform" keeps App. A's cost
(K steps per sequence) and its unbiased spread over the episode.
"""

from typing import Dict, NamedTuple, Optional, Tuple

import chex
import haiku as hk
import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu.config import AUX_STEP_SELECTIONS
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.losses import casm as casm_losses
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


def random_valid_indices(key: Array, mask: Array, num_steps: int
                         ) -> Tuple[Array, Array]:
  """K distinct entries with mask 1 drawn uniformly at random, per lane.

  Args:
    key: PRNG key.
    mask: 0/1 (or bool) shaped [S, B].
    num_steps: K >= 1.

  Returns:
    (indices int32 [B, K], weights float32 [B, K]) as `last_valid_indices`:
    min(K, count) distinct valid time indices of each lane, a uniformly random
    subset (in random order), weight 1 for them; index 0 and weight 0 in the
    remaining slots.
  """
  valid = jnp.asarray(mask) > 0  # [S, B]
  s = valid.shape[0]
  score = jnp.where(valid, jax.random.uniform(key, valid.shape), -1.).T
  k = min(num_steps, s)
  top, indices = jax.lax.top_k(score, k)  # [B, k]
  weights = (top >= 0).astype(jnp.float32)
  indices = jnp.where(top >= 0, indices, 0).astype(jnp.int32)
  if k < num_steps:
    pad = num_steps - k
    indices = jnp.pad(indices, ((0, 0), (0, pad)))
    weights = jnp.pad(weights, ((0, 0), (0, pad)))
  return indices, weights


class AuxSteps(NamedTuple):
  """The steps of each sequence the auxiliary losses use (`aux_steps`).

  Attributes:
    transition_indices, transition_weights: [B, K] transitions t
      (x_t, a_t, x_{t+1}), both steps real, for action prediction.
    observation_indices, observation_weights: [B, K] real observations x_s
      for the RND loss and the RND observation statistics.
  """
  transition_indices: Array
  transition_weights: Array
  observation_indices: Array
  observation_weights: Array


def aux_steps(config: NGUConfig, batch: SequenceBatch,
              key: Optional[Array] = None) -> AuxSteps:
  """The `config.aux_loss_steps` steps per sequence of the auxiliary losses.

  Args:
    config: `aux_loss_steps` K and `aux_loss_step_selection` ("uniform":
      `random_valid_indices`, one draw for transitions and one for
      observations; "last": `last_valid_indices`, App. A's literal reading).
    batch: a `SequenceBatch` ([T + 1, B] mask).
    key: PRNG key; required by "uniform".

  Returns:
    `AuxSteps`.

  Raises:
    ValueError: "uniform" without a key, or an unknown selection.
  """
  k = config.aux_loss_steps
  mask = jnp.asarray(batch.mask)
  transitions = retrace.valid_mask(mask)
  selection = config.aux_loss_step_selection
  if selection == "last":
    t_idx, t_w = last_valid_indices(transitions, k)
    s_idx, s_w = last_valid_indices(mask, k)
  elif selection == "uniform":
    if key is None:
      raise ValueError("auxiliary.aux_steps: aux_loss_step_selection "
                       "'uniform' needs a PRNG key.")
    t_key, s_key = jax.random.split(key)
    t_idx, t_w = random_valid_indices(t_key, transitions, k)
    s_idx, s_w = random_valid_indices(s_key, mask, k)
  else:
    raise ValueError(f"auxiliary.aux_steps: unknown aux_loss_step_selection "
                     f"{selection!r}; choose one of {AUX_STEP_SELECTIONS}.")
  return AuxSteps(t_idx, t_w, s_idx, s_w)


def gather_steps(x: Array, indices: Array) -> Array:
  """x [S, B, ...], indices [B, K] -> [B * K, ...] (lane-major).

  With `last_valid_indices`: the selected steps of every lane, flattened.
  """
  lanes = jnp.arange(x.shape[1])[:, None]
  g = x[indices, lanes]  # [B, K, ...]
  return g.reshape((-1,) + g.shape[2:])


def _weighted_mean(values: Array, weights: Array) -> Array:
  return jnp.sum(weights * values) / jnp.maximum(jnp.sum(weights), 1.)



def casm_action_prediction(config: NGUConfig,
                           networks: networks_lib.NGUNetworks,
                           embedding_params: hk.Params, batch: SequenceBatch,
                           key: Array) -> Tuple[Array, Dict[str, Array]]:
  """CASM's loss on the whole replayed sequences (RECODE Sec. 4, Fig. 2).

  `config.casm_num_masks` masks per sequence (`losses.casm.
  sample_action_masks`, P(a_t shown) = `config.casm_action_shown_probability`),
  the logits of every a_t (`CASMNetwork.logits`; attention stops at episode
  starts), and `losses.casm.casm_loss` over the hidden actions of valid
  transitions (both steps real, o_{t+1} not an episode start) +
  `action_prediction_l2` * sum(theta^2) over every CASM parameter. Unlike
  the 1-step loss this uses every step of the window, not K of them: the
  context before t is the point of CASM.

  Args:
    config, networks: the agent's (`networks.embedding` a `CASMNetwork`).
    embedding_params: all CASM parameters (f included).
    batch: a checked `SequenceBatch` ([W, B] steps).
    key: PRNG key of the masks.

  Returns:
    (loss, metrics "action_prediction_loss", "action_prediction_nll",
    "action_prediction_accuracy": the same names as the 1-step loss).
  """
  obs = jnp.asarray(batch.observation)
  actions = jnp.asarray(batch.action).astype(jnp.int32)
  step_is_first = jnp.asarray(batch.step_is_first, bool)
  shown = casm_losses.sample_action_masks(
      key, config.casm_num_masks, actions.shape,
      config.casm_action_shown_probability)
  logits = networks.embedding.logits(embedding_params, obs, actions, shown,
                                     step_is_first)
  valid = casm_losses.valid_transitions(batch.mask, step_is_first)
  loss, metrics = casm_losses.casm_loss(
      logits, actions, shown, valid, embedding_params,
      config.action_prediction_l2)
  return loss, {"action_prediction_loss": loss,
                "action_prediction_nll": metrics["nll"],
                "action_prediction_accuracy": metrics["accuracy"]}


def aux_losses(config: NGUConfig, networks: networks_lib.NGUNetworks,
               embedding_params: hk.Params, rnd_predictor_params: hk.Params,
               rnd_target_params: hk.Params,
               observation_stats: rnd_lib.ObservationNormStats,
               batch: SequenceBatch, steps: Optional[AuxSteps] = None,
               mask_key: Optional[Array] = None
               ) -> Tuple[Tuple[Array, Dict[str, Array]],
                          Tuple[Array, Dict[str, Array]]]:
  """Inverse-dynamics and RND losses on K valid steps per sequence (App. A).

  With K = `config.aux_loss_steps` (5) and the steps of `steps`:

  * action prediction (Sec. 2, Table 6): K valid transitions
    (x_t, a_t, x_{t+1}) of each sequence (`retrace.valid_mask`: both steps
    real), loss = weighted mean over them of -log p(a_t | x_t, x_{t+1})
    + `action_prediction_l2` * sum(theta_f,h^2) (as
    `losses.inverse_dynamics_loss`, which it equals when every lane has K
    valid transitions); with `config.embedding_loss` "casm" instead
    `casm_action_prediction` on the whole sequences (RECODE Sec. 4);
  * RND (Sec. 2): K valid observations x_s (mask 1) of each sequence,
    loss = weighted mean of err(x_s) = ||g_hat(x_s) - g(x_s)||^2, on
    whitened inputs with `config.rnd_observation_normalization`
    (`observation_stats` must then already include these observations).

  Args:
    config, networks: the agent's.
    embedding_params: f and h.
    rnd_predictor_params, rnd_target_params: g_hat, g.
    observation_stats: RND input statistics.
    batch: a checked `SequenceBatch`.
    steps: the steps to use (`aux_steps`); None: `aux_steps(config, batch)`
      (only with the key-free selection "last").
    mask_key: PRNG key of CASM's masks; required (only) with
      `config.embedding_loss` "casm".

  Returns:
    ((id_loss, id_metrics), (rnd_loss, rnd_metrics)).
  """
  if steps is None:
    steps = aux_steps(config, batch)
  obs = jnp.asarray(batch.observation)
  if config.embedding_loss == "casm":
    if mask_key is None:
      raise ValueError("auxiliary.aux_losses: embedding_loss 'casm' needs "
                       "`mask_key`.")
    id_loss, id_metrics = casm_action_prediction(
        config, networks, embedding_params, batch, mask_key)
  else:
    # Action prediction on transitions.
    t_idx, t_w = steps.transition_indices, steps.transition_weights
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
  s_idx, s_w = steps.observation_indices, steps.observation_weights
  x = gather_steps(obs, s_idx)
  if config.rnd_observation_normalization:
    x = rnd_lib.normalize_observation(observation_stats, x)
  error = rnd_losses.rnd_error(
      networks.rnd.predictor(rnd_predictor_params, x),
      networks.rnd.target(rnd_target_params, x))
  rnd_loss = _weighted_mean(error, s_w.reshape(-1))
  return (id_loss, id_metrics), (rnd_loss, {"rnd_loss": rnd_loss})
