"""The NGU learner: its state, one pure sgd step, and the `Learner`.

`sgd_step(config, networks, state, batch)` is the whole learner update of
Badia et al. (2020), "Never Give Up", App. A on a `LearnerState`: the
Q-network on the transformed-Retrace value loss
(`ngu_jax.agents.ngu.value_loss`),
the action-prediction and RND networks on 5 valid steps of each sequence
(`ngu_jax.agents.ngu.auxiliary`), the target-network copy, and a NaN guard.
The loss-side names (`loss`, `loss_and_grad`, `check_batch`, `LossExtras`,
`aux_losses`, `aux_steps`, `AuxSteps`, `last_valid_indices`,
`random_valid_indices`, `VALUE_TRANSFORMS`) are re-exported here.

`Learner` is the stateful wrapper host loops use (Acme's learner): it jits
`sgd_step`, draws batches from a dataset iterator, writes the priorities
back to the replay and publishes the parameters to actors.
"""

import functools
import logging
from typing import (Any, Callable, Dict, Iterator, NamedTuple, Optional,
                    Sequence, Tuple)

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ngu_jax import _checks
from ngu_jax import mixtures
from ngu_jax.agents.ngu import auxiliary
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu import value_loss
from ngu_jax.agents.ngu import variants
from ngu_jax.agents.ngu.auxiliary import AuxSteps
from ngu_jax.agents.ngu.auxiliary import aux_losses
from ngu_jax.agents.ngu.auxiliary import aux_steps
from ngu_jax.agents.ngu.auxiliary import last_valid_indices
from ngu_jax.agents.ngu.auxiliary import random_valid_indices
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.agents.ngu.value_loss import VALUE_TRANSFORMS
from ngu_jax.agents.ngu.value_loss import LossExtras
from ngu_jax.agents.ngu.value_loss import check_batch
from ngu_jax.agents.ngu.value_loss import loss
from ngu_jax.agents.ngu.value_loss import loss_and_grad
from ngu_jax.networks import rnd as rnd_lib
from ngu_jax.networks import separate_exploit
from ngu_jax.networks import split_uvfa
from ngu_jax.types import SequenceBatch

__all__ = (
    "MIN_PRIORITY",
    "VALUE_TRANSFORMS",
    "AuxSteps",
    "Learner",
    "LearnerState",
    "LossExtras",
    "Optimisers",
    "aux_losses",
    "aux_steps",
    "check_batch",
    "init_learner",
    "last_valid_indices",
    "learner_state_from_params",
    "loss",
    "loss_and_grad",
    "make_optimisers",
    "random_valid_indices",
    "sgd_step",
)

Array = chex.Array

MIN_PRIORITY = 1e-6
"""Floor of the priorities written back to the replay.

`PrioritizedReplay.update_priorities` rejects p <= 0, but `sgd_step` returns
0 for sequences with non-finite data (and a sequence whose TD errors are all
exactly 0 also has priority 0). Such items get `MIN_PRIORITY` instead: they
stay in the replay but are (almost) never sampled again until evicted.
"""


class LearnerState(NamedTuple):
  """Everything the NGU learner carries between steps (a pytree).

  Attributes:
    params: `networks.NGUParams` (online Q, embedding f and h, RND predictor and
      fixed target, RND observation statistics): what actors receive.
    target_q_params: target-network parameters theta^-.
    q_opt_state: Adam state of the Q-network (`make_optimisers`).
    embedding_opt_state: Adam state of f and h (action prediction).
    rnd_opt_state: Adam state of the RND predictor.
    steps: int32 [], sgd steps applied (skipped steps do not count); the
      target network is copied whenever it reaches a multiple of
      `config.target_update_period`.
    skipped_steps: int32 [], steps skipped for a non-finite batch, loss or
      gradient.
    key: PRNG key of the auxiliary losses' step selection
      (`auxiliary.aux_steps`); advances at every step.
  """
  params: networks_lib.NGUParams
  target_q_params: hk.Params
  q_opt_state: Any
  embedding_opt_state: Any
  rnd_opt_state: Any
  steps: Array
  skipped_steps: Array
  key: Array


class Optimisers(NamedTuple):
  """The three optimisers of the learner (Table 6: Adam for all losses)."""
  q: optax.GradientTransformation
  embedding: optax.GradientTransformation
  rnd: optax.GradientTransformation


def make_optimisers(config: NGUConfig) -> Optimisers:
  """Adam with clipping by global norm, one per loss (Table 6, Table 7).

  With `config.loss.split_values` the Q optimiser is two such optimisers, one
  for each of Agent57's networks theta^e and theta^i; with
  `config.separate_exploit_network` one for theta^0 and one for theta^x.

  Each optimiser clips its own gradients to `config.max_gradient_norm`
  (Table 6 "Adam clip norm 40", listed for "AdamOptimizer (for all
  losses)"), then applies Adam(b1, b2, eps = `config.adam_eps`) with its
  learning rate: `learning_rate` (Q), `action_prediction_learning_rate`
  (f and h), `rnd_learning_rate` (RND predictor).
  """
  def adam(learning_rate):
    return optax.chain(
        optax.clip_by_global_norm(config.max_gradient_norm),
        optax.adam(learning_rate, b1=config.adam_b1, b2=config.adam_b2,
                   eps=config.adam_eps))

  q_optimiser = adam(config.learning_rate)
  streams = (split_uvfa.STREAMS if config.loss.split_values
             else separate_exploit.STREAMS if config.separate_exploit_network
             else None)
  if streams:
    # Agent57 Sec. 3.1: theta^e and theta^i each have their own optimiser
    # (own clipping and Adam moments): one per top-level key of params.q.
    # The same for `separate_exploit_network`'s theta^0 and theta^x, so that
    # the explorers' gradient norm does not clip j = 0's step.
    q_optimiser = optax.multi_transform(
        {stream: adam(config.learning_rate) for stream in streams},
        lambda params: {k: jax.tree_util.tree_map(lambda _, k=k: k, v)
                        for k, v in params.items()})
  return Optimisers(q=q_optimiser,
                    embedding=adam(config.action_prediction_learning_rate),
                    rnd=adam(config.rnd_learning_rate))


def learner_state_from_params(config: NGUConfig, params: networks_lib.NGUParams,
                              key: Array) -> LearnerState:
  """A learner state starting from given parameters (target = online)."""
  optimisers = make_optimisers(config)
  return LearnerState(
      params=params,
      target_q_params=jax.tree_util.tree_map(jnp.array, params.q),
      q_opt_state=optimisers.q.init(params.q),
      embedding_opt_state=optimisers.embedding.init(params.embedding),
      rnd_opt_state=optimisers.rnd.init(params.rnd_predictor),
      steps=jnp.zeros((), jnp.int32),
      skipped_steps=jnp.zeros((), jnp.int32),
      key=key)


def init_learner(config: NGUConfig, networks: networks_lib.NGUNetworks,
                 key: Array) -> LearnerState:
  """A fresh learner: new parameters (`networks.init_params`), target = online.

  Args:
    config: the agent's config.
    networks: from `networks.make_networks(config, ...)`.
    key: PRNG key.

  Returns:
    A `LearnerState` with steps = skipped_steps = 0.
  """
  params_key, key = jax.random.split(key)
  return learner_state_from_params(
      config, networks_lib.init_params(networks, params_key), key)


def _update_observation_stats(stats: rnd_lib.ObservationNormStats,
                              observation: Array, weights: Array
                              ) -> rnd_lib.ObservationNormStats:
  """Weighted parallel merge (Chan et al.) of a batch into the statistics.

  As `networks.rnd.observation_normalizer_update`, with 0/1 weights [N]
  so that unselected rows do not count.
  """
  x = observation.astype(jnp.float32)
  w = weights.reshape((-1,) + (1,) * (x.ndim - 1))
  n_b = jnp.sum(weights)
  safe_n_b = jnp.maximum(n_b, 1.)
  mean_b = jnp.sum(w * x, axis=0) / safe_n_b
  var_b = jnp.sum(w * jnp.square(x - mean_b), axis=0) / safe_n_b
  total = stats.count + n_b
  safe_total = jnp.maximum(total, 1.)
  delta = mean_b - stats.mean
  mean = stats.mean + delta * (n_b / safe_total)
  m2 = (stats.var * stats.count + var_b * n_b
        + jnp.square(delta) * (stats.count * n_b / safe_total))
  keep = total <= 0
  return rnd_lib.ObservationNormStats(
      mean=jnp.where(keep, stats.mean, mean),
      var=jnp.where(keep, stats.var, m2 / safe_total),
      count=total)


def _absorb_observations(config: NGUConfig,
                         stats: rnd_lib.ObservationNormStats,
                         batch: SequenceBatch, steps: auxiliary.AuxSteps
                         ) -> rnd_lib.ObservationNormStats:
  """The RND observation statistics after this batch (RND paper, Sec. 2.4).

  Normally the observations of the RND loss (`steps`: `aux_loss_steps`
  valid steps of each sequence) are merged in. The very first time (count 0) the
  statistics are initialised from every valid observation of the batch
  instead: the RND paper initialises its normaliser from a warm-up of
  random-agent steps before training, and these are the first sequences the
  actors produced (before any learning). Until then actors must not use the
  RND errors (`actor.select_action`).
  """
  obs = jnp.asarray(batch.observation)
  s_idx, s_w = steps.observation_indices, steps.observation_weights

  def merge_last_steps(stats):
    return _update_observation_stats(stats, auxiliary.gather_steps(obs, s_idx),
                                     s_w.reshape(-1))

  def initialise(stats):
    return _update_observation_stats(
        stats, obs.reshape((-1,) + obs.shape[2:]),
        jnp.asarray(batch.mask, jnp.float32).reshape(-1))

  return jax.lax.cond(stats.count > 0, merge_last_steps, initialise, stats)


def _finite_lanes(batch: SequenceBatch) -> Array:
  """bool [B]: the lane's floating fields are all finite."""
  ok = jnp.ones(np.shape(batch.mixture_index), bool)
  for name in value_loss.FLOAT_STEP_FIELDS + ("prev_extrinsic_reward",
                                    "prev_intrinsic_reward", "observation"):
    x = jnp.asarray(getattr(batch, name))
    if jnp.issubdtype(x.dtype, jnp.floating):
      ok &= jnp.all(jnp.isfinite(x).reshape(x.shape[0], x.shape[1], -1),
                    axis=(0, 2))
  for x in jax.tree_util.tree_leaves(batch.initial_state):
    x = jnp.asarray(x)
    ok &= jnp.all(jnp.isfinite(x).reshape(x.shape[0], -1), axis=1)
  return ok & jnp.isfinite(jnp.asarray(batch.importance_weights))


def _zero_nonfinite(batch: SequenceBatch) -> SequenceBatch:
  def clean(x):
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.floating):
      return jnp.where(jnp.isfinite(x), x, jnp.zeros_like(x))
    return x
  return jax.tree_util.tree_map(clean, batch)


def _global_norm(tree) -> Array:
  return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32)))
                      for x in jax.tree_util.tree_leaves(tree)))


def _all_finite(tree) -> Array:
  leaves = jax.tree_util.tree_leaves(tree)
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


class _AuxUpdate(NamedTuple):
  """One auxiliary network's loss, metrics, gradients and update."""
  loss: Array
  metrics: Dict[str, Array]
  grads: Any
  params: Any
  opt_state: Any


def _q_update(config: NGUConfig, networks: networks_lib.NGUNetworks,
              optimisers: Optimisers, state: LearnerState,
              batch: SequenceBatch
              ) -> Tuple[LossExtras, _AuxUpdate]:
  """Step 1 of `sgd_step`: `loss_and_grad` and the Q-network's Adam."""
  params = state.params
  (q_loss, extras), q_grads = loss_and_grad(
      networks.uvfa, params.q, state.target_q_params, batch,
      num_microbatches=config.learner_microbatches,
      betas=config.mixture_betas(), gammas=config.mixture_gammas(),
      retrace_lambda=config.retrace_lambda,
      traces=config.retrace_traces,
      advantage_learning=config.advantage_learning,
      target_epsilon=config.target_epsilon,
      retrace_eps=config.value_transform_eps, burn_in=config.burn_in,
      priority_eta=config.priority_eta,
      value_transform=config.value_transform,
      **variants.compose(config).loss.loss_arguments(config))
  q_updates, q_opt_state = optimisers.q.update(q_grads, state.q_opt_state,
                                               params.q)
  new_q = optax.apply_updates(params.q, q_updates)
  return extras, _AuxUpdate(loss=q_loss, metrics=extras.metrics,
                            grads=q_grads, params=new_q,
                            opt_state=q_opt_state)


def _aux_updates(config: NGUConfig, networks: networks_lib.NGUNetworks,
                 optimisers: Optimisers, state: LearnerState,
                 batch: SequenceBatch, key: Array
                 ) -> Tuple[rnd_lib.ObservationNormStats, _AuxUpdate,
                            _AuxUpdate]:
  """Step 2 of `sgd_step`: (RND observation statistics, action prediction,
  RND predictor), each network with its own Adam, on the steps
  `auxiliary.aux_steps` picks with `key`."""
  params = state.params
  reward = variants.compose(config).intrinsic
  if not (reward.trains_embedding or reward.trains_rnd):
    # No intrinsic reward (kind "none"): no actor reads f, the predictor or
    # the RND statistics, so none is trained or evaluated (losses reported
    # as 0).
    def frozen(metric_names, net_params, opt_state):
      zero = jnp.zeros((), jnp.float32)
      return _AuxUpdate(zero, {m: zero for m in metric_names},
                        jax.tree_util.tree_map(jnp.zeros_like, net_params),
                        net_params, opt_state)
    return params.rnd_observation_stats, frozen(
        ("action_prediction_loss", "action_prediction_accuracy"),
        params.embedding, state.embedding_opt_state), frozen(
            ("rnd_loss",), params.rnd_predictor, state.rnd_opt_state)
  mask_key = None
  if config.embedding_loss == "casm":  # The 1-step loss keeps its keys.
    key, mask_key = jax.random.split(key)
  steps = auxiliary.aux_steps(config, batch, key)
  stats = params.rnd_observation_stats
  if config.rnd_observation_normalization:
    stats = _absorb_observations(config, stats, batch, steps)

  def id_loss_fn(embedding_params):
    (id_loss, id_metrics), _ = aux_losses(
        config, networks, embedding_params, params.rnd_predictor,
        params.rnd_target, stats, batch, steps, mask_key)
    return id_loss, id_metrics

  def rnd_loss_fn(predictor_params):
    _, (rnd_loss, rnd_metrics) = aux_losses(
        config, networks, params.embedding, predictor_params,
        params.rnd_target, stats, batch, steps, mask_key)
    return rnd_loss, rnd_metrics

  if config.learn_embedding and reward.trains_embedding:
    (id_loss, id_metrics), id_grads = jax.value_and_grad(
        id_loss_fn, has_aux=True)(params.embedding)
    id_updates, embedding_opt_state = optimisers.embedding.update(
        id_grads, state.embedding_opt_state, params.embedding)
    new_embedding = optax.apply_updates(params.embedding, id_updates)
  else:  # Fig. 2's fixed random projection (or a reward without f): f
    # stays at its init.
    id_loss, id_metrics = id_loss_fn(params.embedding)
    id_grads = jax.tree_util.tree_map(jnp.zeros_like, params.embedding)
    embedding_opt_state = state.embedding_opt_state
    new_embedding = params.embedding
  if not reward.trains_rnd:
    # E.g. RECODE, whose reward replaces episodic x RND (003 Sec. 3): no
    # actor reads the predictor, so it is not trained (its loss is reported
    # as 0).
    rnd_loss = jnp.zeros((), jnp.float32)
    rnd_metrics = {"rnd_loss": rnd_loss}
    rnd_grads = jax.tree_util.tree_map(jnp.zeros_like, params.rnd_predictor)
    rnd_opt_state = state.rnd_opt_state
    new_predictor = params.rnd_predictor
  else:
    (rnd_loss, rnd_metrics), rnd_grads = jax.value_and_grad(
        rnd_loss_fn, has_aux=True)(params.rnd_predictor)
    rnd_updates, rnd_opt_state = optimisers.rnd.update(
        rnd_grads, state.rnd_opt_state, params.rnd_predictor)
    new_predictor = optax.apply_updates(params.rnd_predictor, rnd_updates)
  return stats, _AuxUpdate(id_loss, id_metrics, id_grads, new_embedding,
                           embedding_opt_state), _AuxUpdate(
                               rnd_loss, rnd_metrics, rnd_grads,
                               new_predictor, rnd_opt_state)


def _guard_and_target(config: NGUConfig, state: LearnerState, ok: Array,
                      stats: rnd_lib.ObservationNormStats, q: _AuxUpdate,
                      ident: _AuxUpdate, rnd: _AuxUpdate
                      ) -> Tuple[LearnerState, Array]:
  """Step 3 of `sgd_step`: the NaN guard and the target-network copy.

  Returns:
    (the new state: the updated one if `ok`, else `state` with
    skipped_steps + 1; bool []: the target network was copied).
  """
  params = state.params
  steps = state.steps + ok.astype(jnp.int32)
  new_params = networks_lib.NGUParams(
      q=q.params, embedding=ident.params, rnd_predictor=rnd.params,
      rnd_target=params.rnd_target, rnd_observation_stats=stats)
  update_target = ok & (steps % config.target_update_period == 0)
  target = jax.tree_util.tree_map(
      lambda new, old: jnp.where(update_target, new, old), q.params,
      state.target_q_params)
  candidate = LearnerState(
      params=new_params, target_q_params=target, q_opt_state=q.opt_state,
      embedding_opt_state=ident.opt_state, rnd_opt_state=rnd.opt_state,
      steps=steps, skipped_steps=state.skipped_steps, key=state.key)
  new_state = jax.tree_util.tree_map(
      lambda new, old: jnp.where(ok, new, old), candidate, state)
  new_state = new_state._replace(
      skipped_steps=state.skipped_steps + (~ok).astype(jnp.int32))
  return new_state, update_target


def sgd_step(config: NGUConfig, networks: networks_lib.NGUNetworks,
             state: LearnerState, batch: SequenceBatch
             ) -> Tuple[LearnerState, Array, Dict[str, Array]]:
  """One NGU learner step on a batch of sequences (App. A, learner).

  1. Q-network: `loss` (transformed Retrace on r^e + beta_j r^i with
     gamma_j, online and target nets unrolled from the stored state after
     `config.burn_in` steps, importance weights) and its gradient; Adam
     (lr `learning_rate`, eps 1e-4) after clipping to global norm 40.
     With `config.loss.split_values` (Agent57 Sec. 3.1) the loss trains theta^e
     on r^e and theta^i on r^i, and each has its own Adam and clipping.
  2. Action prediction (f, h) and RND predictor: `aux_losses` on
     `aux_loss_steps` valid steps per sequence (drawn uniformly with the
     state's key, or the last ones: `config.aux_loss_step_selection`,
     `auxiliary.aux_steps`), each with its own Adam (lr 5e-4, eps
     1e-4, Table 6). With `config.learn_embedding` False (Fig. 2's random
     projection) f and h keep their initial parameters (loss still logged).
     The RND observation statistics first absorb the observations the RND
     loss uses (at the first step: every valid observation of the batch,
     `_absorb_observations`). With `config.embedding_loss` "casm" the
     action-prediction loss is RECODE's CASM on every step of the sequences
     (`auxiliary.casm_action_prediction`, masks drawn from the state's key),
     same optimiser and metric names.
     With `config.cross_mixture_ratio` > 0 (NGU's CMR, Sec. 4.2 and
     App. C) that share of the batch's sequences train a mixture other than
     the one that collected them (`mixtures.cross_mixture_indices`, drawn
     with the state's key; their priorities are those of that mixture's
     TD errors).
  3. Target network: copied from the updated online parameters whenever the
     number of applied steps reaches a multiple of `target_update_period`.

  NaN guard: if the batch holds NaN/inf in any floating field, or the loss
  or any gradient is non-finite, the step is skipped: the returned state
  equals `state` except `skipped_steps` + 1 (parameters, optimiser states,
  statistics and `steps` unchanged). The batch's NaN/inf are zeroed before
  the losses, so the library's value checks do not raise on them; other bad
  input (shapes, out-of-range actions, ...) still raises ValueError.
  `metrics["step_skipped"]` (0 or 1) and `metrics["nonfinite_lanes"]` tell
  the caller, who logs an error (e.g. `logging.error("sgd step %d skipped:
  non-finite ...", ...)`) and may drop the offending replay items: their
  priorities are returned as 0.

  Args:
    config: the agent's config (static under jit).
    networks: the agent's networks (static under jit).
    state: the learner state.
    batch: `SequenceBatch` of B sequences of T + 1 = burn_in + trace steps.

  Returns:
    (new_state, priorities [B] (new replay priorities, R2D2 eq.; 0 for lanes
    with non-finite data), metrics: dict of scalars).

  NOTE: jit with `config` and `networks` closed over (functools.partial);
  donating `state` avoids a copy of the parameters.
  """
  lane_finite = _finite_lanes(batch)
  batch_finite = jnp.all(lane_finite)
  batch = _zero_nonfinite(batch)
  # Every value check of the batch as one host callback under jit; the
  # networks and losses below then need not check the same values again.
  value_loss.check_batch(networks.uvfa, batch, config.burn_in)
  optimisers = make_optimisers(config)
  key, aux_key = jax.random.split(state.key)
  q_batch = batch
  if config.cross_mixture_ratio > 0:  # NGU's CMR (Sec. 4.2, App. C).
    key, cmr_key = jax.random.split(key)
    q_batch = batch._replace(mixture_index=mixtures.cross_mixture_indices(
        cmr_key, batch.mixture_index, config.num_mixtures,
        config.cross_mixture_ratio))
  with _checks.runtime_checks_disabled():
    extras, q = _q_update(config, networks, optimisers, state, q_batch)
    stats, ident, rnd = _aux_updates(config, networks, optimisers, state,
                                     batch, aux_key)
  ok = (batch_finite & jnp.isfinite(q.loss) & jnp.isfinite(ident.loss)
        & jnp.isfinite(rnd.loss)
        & _all_finite((q.grads, ident.grads, rnd.grads)))
  new_state, update_target = _guard_and_target(config, state, ok, stats, q,
                                               ident, rnd)
  new_state = new_state._replace(key=key)  # Advances on skipped steps too.

  priorities = jnp.where(lane_finite & jnp.isfinite(extras.priorities),
                         extras.priorities, 0.)
  metrics = dict(extras.metrics)
  metrics.update(ident.metrics)
  metrics.update(rnd.metrics)
  metrics.update({
      "q_grad_norm": _global_norm(q.grads),
      "action_prediction_grad_norm": _global_norm(ident.grads),
      "rnd_grad_norm": _global_norm(rnd.grads),
      "step_skipped": (~ok).astype(jnp.int32),
      "skipped_steps": new_state.skipped_steps,
      "nonfinite_lanes": jnp.sum(~lane_finite).astype(jnp.int32),
      "target_updated": update_target.astype(jnp.int32),
      "steps": new_state.steps,
  })
  return new_state, priorities, metrics


@functools.lru_cache(maxsize=8)
def _jitted_sgd_step(config: NGUConfig, networks: networks_lib.NGUNetworks):
  """One jitted `sgd_step` per (config, networks): learners share compiles.

  No donation: actors may still hold the published parameters.
  """
  return jax.jit(functools.partial(sgd_step, config, networks))


class Learner:
  """Jitted `sgd_step` over batches from the replay (NGU App. A).

  Thin stateful wrapper: holds the `LearnerState`, draws (keys, batch) from
  the dataset, applies the pure `sgd_step`, writes the new priorities back
  to the replay (floored at `MIN_PRIORITY`) and logs skipped steps (the NaN
  guard of `sgd_step`). `get_variables()` publishes the parameters to
  actors (Acme's `VariableSource`).
  """

  def __init__(self, config: NGUConfig, networks: networks_lib.NGUNetworks,
               key: jax.Array,
               dataset: Iterator[Tuple[np.ndarray, SequenceBatch]],
               replay: Any = None,
               logger_fn: Optional[Callable[[Dict[str, float]], Any]] = None,
               counter: Any = None):
    self._config = config
    self._dataset = dataset
    self._replay = replay
    self._logger_fn = logger_fn
    self._counter = counter
    self._state = init_learner(config, networks, key)
    self._sgd_step = _jitted_sgd_step(config, networks)

  @property
  def state(self) -> LearnerState:
    return self._state

  def restore(self, state: LearnerState) -> None:
    """Replaces the learner's state, e.g. from a checkpoint.

    Args:
      state: a `LearnerState` (parameters, target parameters, the three
        optimiser states, RND observation statistics, steps, skipped steps,
        key) of numpy or jax arrays, copied to fresh device buffers.
    """
    self._state = jax.tree_util.tree_map(
        lambda x: jax.numpy.array(x, copy=True), state)

  def step(self) -> Dict[str, float]:
    """One sgd step on the next batch; returns the metrics as floats."""
    keys, batch = next(self._dataset)
    self._state, priorities, metrics = self._sgd_step(self._state, batch)
    metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
    if metrics["step_skipped"]:
      logging.error("NGU learner: sgd step skipped (non-finite batch, loss "
                    "or gradient; %d non-finite sequences); %d skipped so far.",
                    int(metrics["nonfinite_lanes"]),
                    int(metrics["skipped_steps"]))
    if self._replay is not None:
      priorities = np.maximum(np.asarray(priorities, np.float64),
                              MIN_PRIORITY)
      self._replay.update_priorities(keys, priorities)
    if self._counter is not None:
      self._counter.increment(learner_steps=1)
    if self._logger_fn is not None:
      self._logger_fn(metrics)
    return metrics

  def get_variables(self, names: Optional[Sequence[str]] = None
                    ) -> networks_lib.NGUParams:
    """The latest `NGUParams` (all of them; `names` is ignored)."""
    del names
    return self._state.params
