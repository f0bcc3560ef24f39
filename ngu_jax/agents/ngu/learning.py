"""The NGU learner: the value loss and one pure sgd step.

`loss` is the value loss (below); `sgd_step(config, networks, state, batch)`
is the whole learner update of App. A on a `LearnerState`: the Q-network on
`loss`, the action-prediction and RND networks on the last 5 valid steps of
each sequence (`aux_losses`), the target-network copy, and a NaN guard.

The value loss: transformed Retrace on replayed sequences.

Badia et al. (2020), "Never Give Up", App. A (learner), App. E (eq. 13-15)
and App. F Table 6, following R2D2 (Kapturowski et al., 2019): both the
online and the target UVFA networks are unrolled from the stored recurrent
state over each replayed sequence (optionally after a burn-in); the online
Q-values are regressed, in the transformed space of h, towards transformed
Retrace targets of the augmented reward r^e + beta_j r^i with discount
gamma_j of the sequence's mixture j. The target policy pi is epsilon-greedy
(epsilon = 0.01) with respect to the online Q; the Q-values inside the target
come from the target network; mu is the stored behaviour probability.

The alignment of every Retrace argument follows the recipe in the docstring
of `ngu_jax.losses.retrace`; the batch layout is `ngu_jax.types.SequenceBatch`.

Loss (exactly): with td[t, b] the transformed Retrace TD error of transition
t (x_t -> x_{t+1}) of lane b after burn-in, valid[t, b] = `valid_mask(mask)`
and w_b the importance weight,

  loss = (1 / B) sum_b w_b * ( sum_t valid[t, b] 0.5 td[t, b]^2
                               / max(1, sum_t valid[t, b]) ),

i.e. the mean over lanes of the importance-weighted per-lane mean over valid
transitions of 0.5 td^2. The priorities are `retrace.priorities(td, valid)`
(R2D2: eta max|td| + (1 - eta) mean|td| over valid transitions).
"""

from typing import Any, Dict, NamedTuple, Tuple, Union

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax

from ngu_jax import _checks
from ngu_jax import mixtures
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.losses import inverse_dynamics as id_losses
from ngu_jax.losses import retrace
from ngu_jax.losses import rnd as rnd_losses
from ngu_jax.networks import rnd as rnd_lib
from ngu_jax.networks import uvfa
from ngu_jax.types import SequenceBatch

Array = chex.Array

VALUE_TRANSFORMS = ("signed_hyperbolic", "identity")

_STEP_FIELDS = ("action", "extrinsic_reward", "intrinsic_reward", "discount",
                "step_is_first", "behaviour_prob", "mask", "prev_action",
                "prev_extrinsic_reward", "prev_intrinsic_reward")
_FLOAT_STEP_FIELDS = ("extrinsic_reward", "intrinsic_reward", "discount",
                      "behaviour_prob")


class LossExtras(NamedTuple):
  """The auxiliary outputs of `loss` (the `has_aux` part).

  Attributes:
    priorities: new replay priorities, shaped [B] (no gradient).
    metrics: scalars: "loss" (the loss), "td_abs_mean" (mean |td| over valid
      transitions), "q_mean" (mean online Q(x_t, a_t) over valid
      transitions).
    td_errors: transformed Retrace TD errors after burn-in, shaped
      [T - burn_in, B] (no gradient; entries at invalid transitions are
      meaningless).
    valid: transition mask `valid_mask(batch.mask[burn_in:])`, float32,
      shaped [T - burn_in, B].
  """
  priorities: Array
  metrics: Dict[str, Array]
  td_errors: Array
  valid: Array


def _lanes_first(x: Array) -> Array:
  return jnp.swapaxes(x, 0, 1)


def _identity_retrace(q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t,
                      lambda_) -> Array:
  """`retrace.transformed_retrace` with h = identity (Table 7), [T, B].

  Its inputs are built by `loss` from a checked batch (pi is an
  epsilon-greedy row, lambda_ is [T, B]), so no further checks are needed.
  """
  def one_lane(*args):
    return rlax.transformed_retrace(*args, stop_target_gradients=True,
                                    tx_pair=rlax.IDENTITY_PAIR)
  return jax.vmap(one_lane, in_axes=1, out_axes=1)(
      q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_)


def _check_scalar(value, low: float, high: float, name: str,
                  where: str) -> None:
  if _checks.is_traced(value):
    return
  if not low <= value <= high:  # False for NaN.
    raise ValueError(f"{where}: `{name}` must be in [{low}, {high}], got "
                     f"{value!r}.")


def check_batch(network: uvfa.UVFANetwork, batch: SequenceBatch,
                burn_in: int = 0,
                where: str = "agents.ngu.learning.loss") -> Tuple[int, int]:
  """Checks a `SequenceBatch` against the network and the burn-in.

  Shapes and dtypes are checked while tracing; values (actions and mixture
  indices in range, NaN/inf, probabilities and discounts in [0, 1],
  non-negative importance weights) eagerly or at run time under jit (see
  `ngu_jax._checks`). The observations, extra inputs and initial state are
  further checked by `network.unroll`, the Retrace inputs by
  `ngu_jax.losses.retrace`.

  Args:
    network: the UVFA network the batch is for.
    batch: the batch.
    burn_in: number of leading steps used only to warm the recurrent state.
    where: name of the calling public function, for error messages.

  Returns:
    (T + 1, B).

  Raises:
    ValueError: on any mismatch; messages name the batch field.
  """
  if not isinstance(batch, SequenceBatch):
    raise ValueError(f"{where}: `batch` must be a SequenceBatch, got "
                     f"{type(batch).__name__}.")
  obs_shape = network.observation_shape
  _checks.check_shape(batch.observation, (None, None) + obs_shape,
                      "batch.observation", where)
  t1, b = np.shape(batch.observation)[:2]
  for name in _STEP_FIELDS:
    _checks.check_shape(getattr(batch, name), (t1, b), f"batch.{name}", where)
  for name in ("mixture_index", "importance_weights"):
    _checks.check_shape(getattr(batch, name), (b,), f"batch.{name}", where)
  if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)):
    raise ValueError(f"{where}: `burn_in` must be a Python int, got "
                     f"{burn_in!r}.")
  if not 0 <= burn_in <= t1 - 2:
    raise ValueError(
        f"{where}: `burn_in` must be in [0, T - 1] = [0, {t1 - 2}] so that at "
        f"least one transition remains for the loss (T + 1 = {t1} steps), got "
        f"{burn_in}.")
  action = jnp.asarray(batch.action)
  if not jnp.issubdtype(action.dtype, jnp.integer):
    raise ValueError(f"{where}: `batch.action` must be an integer array, got "
                     f"dtype {action.dtype}.")
  _checks.check_in_range(_lanes_first(action), 0, network.num_actions,
                         "batch.action", where)
  for name in _FLOAT_STEP_FIELDS:
    x = jnp.asarray(getattr(batch, name))
    _checks.check_floating(x, f"batch.{name}", where)
    _checks.check_finite(_lanes_first(x), f"batch.{name}", where)
  for name in ("discount", "behaviour_prob"):
    _checks.check_closed_range(_lanes_first(jnp.asarray(getattr(batch, name))),
                               0., 1., f"batch.{name}", where)
  _checks.check_binary(_lanes_first(jnp.asarray(batch.mask)), "batch.mask",
                       where)
  mixture_index = jnp.asarray(batch.mixture_index)
  if not jnp.issubdtype(mixture_index.dtype, jnp.integer):
    raise ValueError(f"{where}: `batch.mixture_index` must be an integer "
                     f"array, got dtype {mixture_index.dtype}.")
  _checks.check_in_range(mixture_index, 0, network.num_mixtures,
                         "batch.mixture_index", where)
  weights = jnp.asarray(batch.importance_weights)
  _checks.check_floating(weights, "batch.importance_weights", where)
  _checks.check_finite(weights, "batch.importance_weights", where)
  _checks.check_closed_range(weights, 0., np.inf, "batch.importance_weights",
                             where)
  return t1, b


def loss(
    network: uvfa.UVFANetwork,
    params: hk.Params,
    target_params: hk.Params,
    batch: SequenceBatch,
    *,
    betas: Array,
    gammas: Array,
    retrace_lambda: float = 0.95,
    target_epsilon: float = 0.01,
    retrace_eps: float = 1e-3,
    burn_in: int = 0,
    priority_eta: float = 0.9,
    value_transform: str = "signed_hyperbolic",
) -> Tuple[Array, LossExtras]:
  """NGU / R2D2 transformed-Retrace loss of a batch of sequences.

  NGU App. A (learner) and App. E, eq. (13)-(15); see the module docstring
  for the exact loss. Use as
  `jax.value_and_grad(loss, argnums=1, has_aux=True)(network, params, ...)`.
  Gradients flow only through the online network: `target_params`, the
  Retrace targets, pi and the burn-in states are under stop_gradient.

  Args:
    network: the UVFA network (`ngu_jax.networks.make_uvfa_network`).
    params: online parameters theta.
    target_params: target-network parameters theta^-.
    batch: `SequenceBatch` of B sequences of T + 1 steps (T >= 1 + burn_in).
    betas: intrinsic-reward scales beta_j, shaped [N]
      (`ngu_jax.mixtures.betas`).
    gammas: discounts gamma_j, shaped [N] (`ngu_jax.mixtures.gammas`).
    retrace_lambda: Retrace lambda in [0, 1] (Table 6: 0.95). Traces are cut
      at padding as in `retrace.valid_mask`.
    target_epsilon: epsilon of the epsilon-greedy target policy pi (0.01).
    retrace_eps: epsilon of the value transform h (Table 6: 1e-3).
    burn_in: the first `burn_in` steps only warm the recurrent states of both
      networks (R2D2; no gradient) and are excluded from the loss and the
      priorities (DESIGN.md default 0; R2D2 uses up to 40).
    priority_eta: eta of the R2D2 priorities (0.9).
    value_transform: "signed_hyperbolic" (Table 6: h of eq. 16 with
      `retrace_eps`) or "identity" (Table 7, Disco Maze: "Retrace loss
      transformation: identity", i.e. plain Retrace, eq. 10-13, with the
      squared error taken on untransformed values; `retrace_eps` is unused).

  Returns:
    (loss, extras): the scalar loss and a `LossExtras` (priorities [B],
    metrics, td_errors and valid [T - burn_in, B]).

  Raises:
    ValueError: on a malformed batch (mismatched T or B between fields,
      actions outside [0, A), mixture indices outside [0, N), NaN/inf, ...),
      see `check_batch`, or on out-of-range hyperparameters.

  NOTE: `network` and `burn_in` are static: under jax.jit close over them
  (functools.partial) or mark them static. Value checks inside a jitted call
  raise when the result is used (see `ngu_jax._checks`).
  """
  where = "agents.ngu.learning.loss"
  t1, b = check_batch(network, batch, burn_in, where)
  _check_scalar(retrace_lambda, 0., 1., "retrace_lambda", where)
  _check_scalar(target_epsilon, 0., 1., "target_epsilon", where)
  _check_scalar(priority_eta, 0., 1., "priority_eta", where)
  if value_transform not in VALUE_TRANSFORMS:
    raise ValueError(f"{where}: `value_transform` must be one of "
                     f"{VALUE_TRANSFORMS}, got {value_transform!r}.")
  for x, name in ((betas, "betas"), (gammas, "gammas")):
    _checks.check_shape(x, (network.num_mixtures,), name, where)

  mixture_index = jnp.asarray(batch.mixture_index)
  inputs = uvfa.UVFAInputs(
      observation=batch.observation,
      prev_action=batch.prev_action,
      prev_extrinsic_reward=batch.prev_extrinsic_reward,
      prev_intrinsic_reward=batch.prev_intrinsic_reward,
      mixture_index=jnp.broadcast_to(mixture_index[None], (t1, b)))
  target_params = jax.lax.stop_gradient(target_params)
  online_state = target_state = batch.initial_state
  step_is_first = batch.step_is_first
  if burn_in:
    head = jax.tree_util.tree_map(lambda x: x[:burn_in], inputs)
    _, online_state = network.unroll(params, head, online_state,
                                     step_is_first[:burn_in])
    online_state = jax.lax.stop_gradient(online_state)
    _, target_state = network.unroll(target_params, head, target_state,
                                     step_is_first[:burn_in])
    inputs = jax.tree_util.tree_map(lambda x: x[burn_in:], inputs)
    step_is_first = step_is_first[burn_in:]
  online_q, _ = network.unroll(params, inputs, online_state, step_is_first)
  target_q, _ = network.unroll(target_params, inputs, target_state,
                               step_is_first)

  def steps(x):
    return jnp.asarray(x)[burn_in:]

  action = steps(batch.action)
  valid = retrace.valid_mask(steps(batch.mask)).astype(jnp.float32)  # [T', B]
  rewards = retrace.mixture_rewards(steps(batch.extrinsic_reward)[1:],
                                    steps(batch.intrinsic_reward)[1:],
                                    mixture_index, betas)
  discounts = (retrace.mixture_discounts(mixture_index, gammas)[None]
               * steps(batch.discount)[1:])
  pi = retrace.epsilon_greedy_probs(jax.lax.stop_gradient(online_q[1:]),
                                    target_epsilon)
  # Cut the trace at padding (recipe of `retrace.valid_mask`).
  lambda_ = retrace_lambda * jnp.concatenate([valid[1:], valid[-1:]], axis=0)
  retrace_args = (online_q[:-1], target_q[1:], action[:-1], action[1:],
                  rewards, discounts, pi, steps(batch.behaviour_prob)[1:],
                  lambda_)
  if value_transform == "identity":
    td = _identity_retrace(*retrace_args)
  else:
    td = retrace.transformed_retrace(*retrace_args, eps=retrace_eps)

  is_valid = valid > 0
  count = jnp.maximum(valid.sum(axis=0), 1.)  # [B]
  safe_td = jnp.where(is_valid, td, 0.)
  lane_loss = jnp.sum(0.5 * jnp.square(safe_td), axis=0) / count
  weights = jnp.asarray(batch.importance_weights, lane_loss.dtype)
  total = jnp.mean(weights * lane_loss)

  td = jax.lax.stop_gradient(td)
  priorities = retrace.priorities(td, valid, priority_eta)
  num_valid = jnp.maximum(valid.sum(), 1.)
  q_taken = jnp.take_along_axis(online_q[:-1], action[:-1, :, None],
                                axis=-1)[..., 0]
  metrics = jax.lax.stop_gradient({
      "loss": total,
      "td_abs_mean": jnp.sum(jnp.abs(jnp.where(is_valid, td, 0.))) / num_valid,
      "q_mean": jnp.sum(jnp.where(is_valid, q_taken, 0.)) / num_valid,
  })
  return total, LossExtras(priorities=priorities, metrics=metrics,
                           td_errors=td, valid=valid)


def loss_and_grad(network: uvfa.UVFANetwork, params: hk.Params,
                  target_params: hk.Params, batch: SequenceBatch,
                  num_microbatches: int = 1,
                  **kwargs: Union[Array, float, int]
                 ) -> Tuple[Tuple[Array, LossExtras], Any]:
  """`jax.value_and_grad` of `loss` w.r.t. the online `params`.

  With `num_microbatches` M > 1 the B lanes are split into M equal chunks,
  processed one after another by `jax.lax.scan`, and their gradients
  averaged. `loss` is a mean over lanes, so the loss, the gradients, the
  priorities and the TD errors equal the single-batch ones (up to float
  rounding; tests/agents/ngu/test_learning.py checks this): only the peak
  memory and the working set shrink, which on CPU makes a large batch faster
  (experiments/benchmarks/learner_step.py).

  Args:
    network, params, target_params, batch: as `loss`.
    num_microbatches: M, a divisor of B (static).
    **kwargs: keyword arguments of `loss` (betas, gammas, ...).

  Returns:
    ((loss, extras), grads), grads shaped like `params`.
  """
  grad_fn = jax.value_and_grad(loss, argnums=1, has_aux=True)
  if num_microbatches == 1:
    return grad_fn(network, params, target_params, batch, **kwargs)
  where = "agents.ngu.learning.loss_and_grad"
  m = num_microbatches
  b = int(np.shape(batch.mixture_index)[0])
  if not isinstance(m, (int, np.integer)) or m < 1 or b % m:
    raise ValueError(f"{where}: `num_microbatches` must be a positive "
                     f"divisor of the batch size {b}, got {m!r}.")

  def lanes_major(x):  # [B, ...] -> [M, B / M, ...]
    x = jnp.asarray(x)
    return x.reshape((m, b // m) + x.shape[1:])

  def time_major(x):  # [T + 1, B, ...] -> [M, T + 1, B / M, ...]
    x = jnp.asarray(x)
    return jnp.moveaxis(x.reshape((x.shape[0], m, b // m) + x.shape[2:]),
                        1, 0)

  chunks = SequenceBatch(**{
      name: (jax.tree_util.tree_map(lanes_major, value)
             if name in ("mixture_index", "importance_weights",
                         "initial_state") else time_major(value))
      for name, value in batch._asdict().items()})

  def body(grad_sum, chunk):
    (chunk_loss, extras), grads = grad_fn(network, params, target_params,
                                          chunk, **kwargs)
    return jax.tree_util.tree_map(jnp.add, grad_sum, grads), (chunk_loss,
                                                              extras)

  zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
  grad_sum, (losses, extras) = jax.lax.scan(body, zeros, chunks)
  grads = jax.tree_util.tree_map(lambda g: g / m, grad_sum)

  def unchunk(x):  # [M, T', B / M] -> [T', B]
    return jnp.moveaxis(x, 0, 1).reshape((x.shape[1], b))

  td, valid = unchunk(extras.td_errors), unchunk(extras.valid)
  chunk_valid = extras.valid.sum(axis=(1, 2))  # [M]
  num_valid = jnp.maximum(chunk_valid.sum(), 1.)
  total = jnp.mean(losses)
  metrics = {
      "loss": total,
      "td_abs_mean": jnp.sum(jnp.abs(td) * valid) / num_valid,
      "q_mean": jnp.sum(extras.metrics["q_mean"] * chunk_valid) / num_valid,
  }
  return (total, LossExtras(priorities=extras.priorities.reshape(b),
                            metrics=metrics, td_errors=td, valid=valid)
         ), grads


# ----------------------------------------------------------------------------
# The learner: state and one pure sgd step (NGU App. A, learner).


class LearnerState(NamedTuple):
  """Everything the NGU learner carries between steps (a pytree).

  Attributes:
    params: `actor.NGUParams` (online Q, embedding f and h, RND predictor and
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
    key: PRNG key (threaded for future stochastic parts; unused now).
  """
  params: actor_lib.NGUParams
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
  return Optimisers(q=adam(config.learning_rate),
                    embedding=adam(config.action_prediction_learning_rate),
                    rnd=adam(config.rnd_learning_rate))


def learner_state_from_params(config: NGUConfig, params: actor_lib.NGUParams,
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


def init_learner(config: NGUConfig, networks: actor_lib.NGUNetworks,
                 key: Array) -> LearnerState:
  """A fresh learner: new parameters (`actor.init_params`), target = online.

  Args:
    config: the agent's config.
    networks: from `actor.make_networks(config, ...)`.
    key: PRNG key.

  Returns:
    A `LearnerState` with steps = skipped_steps = 0.
  """
  params_key, key = jax.random.split(key)
  return learner_state_from_params(
      config, actor_lib.init_params(networks, params_key), key)


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


def _gather(x: Array, indices: Array) -> Array:
  """x [S, B, ...], indices [B, K] -> [B * K, ...] (lane-major)."""
  lanes = jnp.arange(x.shape[1])[:, None]
  g = x[indices, lanes]  # [B, K, ...]
  return g.reshape((-1,) + g.shape[2:])


def _weighted_mean(values: Array, weights: Array) -> Array:
  return jnp.sum(weights * values) / jnp.maximum(jnp.sum(weights), 1.)


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
                         batch: SequenceBatch
                         ) -> rnd_lib.ObservationNormStats:
  """The RND observation statistics after this batch (RND paper, Sec. 2.4).

  Normally the observations of the RND loss (the last `aux_loss_steps` valid
  steps of each sequence) are merged in. The very first time (count 0) the
  statistics are initialised from every valid observation of the batch
  instead: the RND paper initialises its normaliser from a warm-up of
  random-agent steps before training, and these are the first sequences the
  actors produced (before any learning). Until then actors must not use the
  RND errors (`actor.select_action`).
  """
  obs = jnp.asarray(batch.observation)
  s_idx, s_w = last_valid_indices(batch.mask, config.aux_loss_steps)

  def merge_last_steps(stats):
    return _update_observation_stats(stats, _gather(obs, s_idx),
                                     s_w.reshape(-1))

  def initialise(stats):
    return _update_observation_stats(
        stats, obs.reshape((-1,) + obs.shape[2:]),
        jnp.asarray(batch.mask, jnp.float32).reshape(-1))

  return jax.lax.cond(stats.count > 0, merge_last_steps, initialise, stats)


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
  x_t, x_tp1 = _gather(obs[:-1], t_idx), _gather(obs[1:], t_idx)
  a_t = _gather(jnp.asarray(batch.action)[:-1], t_idx)
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
  x = _gather(obs, s_idx)
  if config.rnd_observation_normalization:
    x = rnd_lib.normalize_observation(observation_stats, x)
  error = rnd_losses.rnd_error(
      networks.rnd.predictor(rnd_predictor_params, x),
      networks.rnd.target(rnd_target_params, x))
  rnd_loss = _weighted_mean(error, s_w.reshape(-1))
  return (id_loss, id_metrics), (rnd_loss, {"rnd_loss": rnd_loss})


def _finite_lanes(batch: SequenceBatch) -> Array:
  """bool [B]: the lane's floating fields are all finite."""
  ok = jnp.ones(np.shape(batch.mixture_index), bool)
  for name in _FLOAT_STEP_FIELDS + ("prev_extrinsic_reward",
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


def sgd_step(config: NGUConfig, networks: actor_lib.NGUNetworks,
             state: LearnerState, batch: SequenceBatch
             ) -> Tuple[LearnerState, Array, Dict[str, Array]]:
  """One NGU learner step on a batch of sequences (App. A, learner).

  1. Q-network: `loss` (transformed Retrace on r^e + beta_j r^i with
     gamma_j, online and target nets unrolled from the stored state after
     `config.burn_in` steps, importance weights) and its gradient; Adam
     (lr `learning_rate`, eps 1e-4) after clipping to global norm 40.
  2. Action prediction (f, h) and RND predictor: `aux_losses` on the last
     `aux_loss_steps` valid steps, each with its own Adam (lr 5e-4, eps
     1e-4, Table 6). With `config.learn_embedding` False (Fig. 2's random
     projection) f and h keep their initial parameters (loss still logged).
     The RND observation statistics first absorb the observations the RND
     loss uses (at the first step: every valid observation of the batch,
     `_absorb_observations`).
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
  params = state.params
  optimisers = make_optimisers(config)

  # 1. Q-network.
  (q_loss, extras), q_grads = loss_and_grad(
      networks.uvfa, params.q, state.target_q_params, batch,
      num_microbatches=config.learner_microbatches,
      betas=mixtures.betas(config.num_mixtures, config.beta),
      gammas=mixtures.gammas(config.num_mixtures, config.gamma_max,
                             config.gamma_min),
      retrace_lambda=config.retrace_lambda,
      target_epsilon=config.target_epsilon,
      retrace_eps=config.value_transform_eps, burn_in=config.burn_in,
      priority_eta=config.priority_eta,
      value_transform=config.value_transform)
  q_updates, q_opt_state = optimisers.q.update(q_grads, state.q_opt_state,
                                               params.q)
  new_q = optax.apply_updates(params.q, q_updates)

  # 2. Auxiliary losses.
  stats = params.rnd_observation_stats
  if config.rnd_observation_normalization:
    stats = _absorb_observations(config, stats, batch)

  def id_loss_fn(embedding_params):
    (id_loss, id_metrics), _ = aux_losses(
        config, networks, embedding_params, params.rnd_predictor,
        params.rnd_target, stats, batch)
    return id_loss, id_metrics

  def rnd_loss_fn(predictor_params):
    _, (rnd_loss, rnd_metrics) = aux_losses(
        config, networks, params.embedding, predictor_params,
        params.rnd_target, stats, batch)
    return rnd_loss, rnd_metrics

  if config.learn_embedding:
    (id_loss, id_metrics), id_grads = jax.value_and_grad(
        id_loss_fn, has_aux=True)(params.embedding)
    id_updates, embedding_opt_state = optimisers.embedding.update(
        id_grads, state.embedding_opt_state, params.embedding)
    new_embedding = optax.apply_updates(params.embedding, id_updates)
  else:  # Fig. 2's fixed random projection: f stays at its init.
    id_loss, id_metrics = id_loss_fn(params.embedding)
    id_grads = jax.tree_util.tree_map(jnp.zeros_like, params.embedding)
    embedding_opt_state = state.embedding_opt_state
    new_embedding = params.embedding
  (rnd_loss, rnd_metrics), rnd_grads = jax.value_and_grad(
      rnd_loss_fn, has_aux=True)(params.rnd_predictor)
  rnd_updates, rnd_opt_state = optimisers.rnd.update(
      rnd_grads, state.rnd_opt_state, params.rnd_predictor)
  new_predictor = optax.apply_updates(params.rnd_predictor, rnd_updates)

  # 3. NaN guard and target update.
  ok = (batch_finite & jnp.isfinite(q_loss) & jnp.isfinite(id_loss)
        & jnp.isfinite(rnd_loss) & _all_finite((q_grads, id_grads, rnd_grads)))
  steps = state.steps + ok.astype(jnp.int32)
  new_params = actor_lib.NGUParams(
      q=new_q, embedding=new_embedding, rnd_predictor=new_predictor,
      rnd_target=params.rnd_target, rnd_observation_stats=stats)
  update_target = ok & (steps % config.target_update_period == 0)
  target = jax.tree_util.tree_map(
      lambda new, old: jnp.where(update_target, new, old), new_q,
      state.target_q_params)
  candidate = LearnerState(
      params=new_params, target_q_params=target, q_opt_state=q_opt_state,
      embedding_opt_state=embedding_opt_state, rnd_opt_state=rnd_opt_state,
      steps=steps, skipped_steps=state.skipped_steps, key=state.key)
  new_state = jax.tree_util.tree_map(
      lambda new, old: jnp.where(ok, new, old), candidate, state)
  new_state = new_state._replace(
      skipped_steps=state.skipped_steps + (~ok).astype(jnp.int32))

  priorities = jnp.where(lane_finite & jnp.isfinite(extras.priorities),
                         extras.priorities, 0.)
  metrics = dict(extras.metrics)
  metrics.update(id_metrics)
  metrics.update(rnd_metrics)
  metrics.update({
      "q_grad_norm": _global_norm(q_grads),
      "action_prediction_grad_norm": _global_norm(id_grads),
      "rnd_grad_norm": _global_norm(rnd_grads),
      "step_skipped": (~ok).astype(jnp.int32),
      "skipped_steps": new_state.skipped_steps,
      "nonfinite_lanes": jnp.sum(~lane_finite).astype(jnp.int32),
      "target_updated": update_target.astype(jnp.int32),
      "steps": new_state.steps,
  })
  return new_state, priorities, metrics
