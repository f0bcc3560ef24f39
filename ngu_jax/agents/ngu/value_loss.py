"""The NGU value loss: transformed Retrace on replayed sequences.

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

`ngu_jax.agents.ngu.learning.sgd_step` applies it, with the auxiliary losses
of `ngu_jax.agents.ngu.auxiliary`; `learning` re-exports these names.
(The loss functions of the library's components are in `ngu_jax.losses`.)
"""

from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import rlax

from ngu_jax import _checks
from ngu_jax.losses import dice as dice_losses
from ngu_jax.losses import retrace
from ngu_jax.losses import split_values
from ngu_jax.networks import torsos
from ngu_jax.networks import uvfa
from ngu_jax.types import SequenceBatch

Array = chex.Array

VALUE_TRANSFORMS = ("signed_hyperbolic", "identity")
TRACES = ("retrace", "uncorrected")  # `loss`'s `traces`.

# The per-step fields of a `SequenceBatch` ([T + 1, B]), and the floating
# ones among them (which must be finite).
STEP_FIELDS = ("action", "extrinsic_reward", "intrinsic_reward", "discount",
               "step_is_first", "behaviour_prob", "mask", "prev_action",
               "prev_extrinsic_reward", "prev_intrinsic_reward")
FLOAT_STEP_FIELDS = ("extrinsic_reward", "intrinsic_reward", "discount",
                     "behaviour_prob")


class DiceSettings(NamedTuple):
  """DiCE's learner (004 Sec. 3, App. B Alg. 3, Table 5) in `loss`.

  Attributes:
    q_weight, v_weight, pi_weight: the weights of the Q (Retrace), V
      (V-trace) and policy-gradient losses (Table 5: 10, 1, 10).
    c_bar: the trace clip of Retrace and V-trace (1.05).
    rho_bar: V-trace's rho clip (1.05).
    lambda_: the trace lambda (1: eq. 2-4 have none).
    entropy_weight: an entropy regulariser's coefficient (0: DiCE, Table 5;
      1: the "entropy" ablation of Sec. 4.3 / Table 4).
  """
  q_weight: float = dice_losses.DEFAULT_Q_WEIGHT
  v_weight: float = dice_losses.DEFAULT_V_WEIGHT
  pi_weight: float = dice_losses.DEFAULT_PI_WEIGHT
  c_bar: float = dice_losses.DEFAULT_C_BAR
  rho_bar: float = dice_losses.DEFAULT_RHO_BAR
  lambda_: float = dice_losses.DEFAULT_LAMBDA
  entropy_weight: float = 0.


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

  Shapes and dtypes are checked while tracing; values eagerly, or at run
  time under jit as ONE host callback (`ngu_jax._checks.one_callback`):
  actions and mixture indices in range, NaN/inf, probabilities and
  discounts in [0, 1], non-negative importance weights, and what
  `network.unroll` checks of its inputs (observation values for the
  network's encoding, previous actions in [-1, A), finite previous rewards
  and initial state), so that `loss` can unroll the networks without
  checking again.

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
  with _checks.one_callback():
    return _check_batch(network, batch, burn_in, where)


def _check_batch(network: uvfa.UVFANetwork, batch: SequenceBatch,
                 burn_in: int, where: str) -> Tuple[int, int]:
  obs_shape = network.observation_shape
  _checks.check_shape(batch.observation, (None, None) + obs_shape,
                      "batch.observation", where)
  t1, b = np.shape(batch.observation)[:2]
  for name in STEP_FIELDS:
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
  for name in FLOAT_STEP_FIELDS:
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
  # What `network.unroll` checks of its inputs.
  torsos.check_observation_values(_lanes_first(jnp.asarray(batch.observation)),
                                  network.encoding, "batch.observation", where)
  _checks.check_in_range(_lanes_first(jnp.asarray(batch.prev_action)), -1,
                         network.num_actions, "batch.prev_action", where)
  for name in ("prev_extrinsic_reward", "prev_intrinsic_reward"):
    x = jnp.asarray(getattr(batch, name))
    _checks.check_floating(x, f"batch.{name}", where)
    _checks.check_finite(_lanes_first(x), f"batch.{name}", where)
  for name in ("hidden", "cell"):
    x = getattr(batch.initial_state, name, None)
    if x is None:
      raise ValueError(f"{where}: `batch.initial_state` must be an "
                       f"LSTMState(hidden, cell), got "
                       f"{type(batch.initial_state).__name__}.")
    _checks.check_shape(x, (b, network.lstm_size),
                        f"batch.initial_state.{name}", where)
    _checks.check_floating(x, f"batch.initial_state.{name}", where)
    _checks.check_finite(jnp.asarray(x), f"batch.initial_state.{name}",
                         where)
  return t1, b


def _check_loss_arguments(network: uvfa.UVFANetwork, betas: Array,
                          gammas: Array, retrace_lambda: float,
                          target_epsilon: float, priority_eta: float,
                          value_transform: str, where: str,
                          traces: str = "retrace",
                          advantage_learning: float = 0.) -> None:
  """Checks the hyperparameters of `loss` (the batch: `check_batch`)."""
  if not _checks.is_traced(advantage_learning) and not (
      0 <= advantage_learning < 1):  # False for NaN.
    raise ValueError(f"{where}: `advantage_learning` must be in [0, 1), got "
                     f"{advantage_learning!r}.")
  if traces not in TRACES:
    raise ValueError(f"{where}: `traces` must be one of {TRACES}, got "
                     f"{traces!r}.")
  _check_scalar(retrace_lambda, 0., 1., "retrace_lambda", where)
  _check_scalar(target_epsilon, 0., 1., "target_epsilon", where)
  if (traces == "uncorrected" and not _checks.is_traced(target_epsilon)
      and target_epsilon <= 0):
    # rlax's trace is lambda min(1, pi / (mu + 1e-8)): with mu = pi it is
    # lambda only where pi > 0, and a greedy pi is 0 off its argmax.
    raise ValueError(f"{where}: `traces` 'uncorrected' needs "
                     f"`target_epsilon` > 0, got {target_epsilon!r}.")
  _check_scalar(priority_eta, 0., 1., "priority_eta", where)
  if value_transform not in VALUE_TRANSFORMS:
    raise ValueError(f"{where}: `value_transform` must be one of "
                     f"{VALUE_TRANSFORMS}, got {value_transform!r}.")
  for x, name in ((betas, "betas"), (gammas, "gammas")):
    _checks.check_shape(x, (network.num_mixtures,), name, where)


def _unroll_q(network: uvfa.UVFANetwork, params: hk.Params,
              target_params: hk.Params, batch: SequenceBatch, burn_in: int,
              t1: int, b: int, streams: bool = False,
              with_value: bool = False) -> Tuple[Any, Any]:
  """(online Q, target Q), each [T + 1 - burn_in, B, A], after the burn-in.

  With `streams` (Agent57's split network), each is the pair (Q_e, Q_i) of
  `network.unroll_streams` instead; with `with_value` (DiCE) the online
  part is the pair (Q, V [T + 1 - burn_in, B]) of
  `network.unroll_with_value`. The burn-in steps only warm the recurrent
  states (no gradient); the target parameters are under stop_gradient.
  """
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
  if streams:
    online_e, online_i, _ = network.unroll_streams(params, inputs,
                                                   online_state, step_is_first)
    target_e, target_i, _ = network.unroll_streams(
        target_params, inputs, target_state, step_is_first)
    return (online_e, online_i), (target_e, target_i)
  if with_value:
    online_q, online_v, _ = network.unroll_with_value(
        params, inputs, online_state, step_is_first)
    target_q, _ = network.unroll(target_params, inputs, target_state,
                                 step_is_first)
    return (online_q, online_v), target_q
  online_q, _ = network.unroll(params, inputs, online_state, step_is_first)
  target_q, _ = network.unroll(target_params, inputs, target_state,
                               step_is_first)
  return online_q, target_q


def _retrace_td(online_q: Array, target_q: Array, batch: SequenceBatch, *,
                betas: Array, gammas: Array, burn_in: int,
                retrace_lambda: float, target_epsilon: float,
                retrace_eps: float, value_transform: str,
                policy_q: Optional[Array] = None,
                stream: Optional[str] = None, traces: str = "retrace",
                advantage_learning: float = 0.
                ) -> Tuple[Array, Array, Array]:
  """The Retrace TD errors of `loss` (module docstring), after burn-in.

  `policy_q` (default `online_q`) is what the target policy is
  epsilon-greedy on; `stream` picks the reward: None for r^e + beta_j r^i,
  "extrinsic" for r^e, "intrinsic" for r^i (Agent57's split values).

  `traces` "uncorrected" gives Retrace pi's own probability of the taken
  action as mu, so that its trace c_s = lambda min(1, pi / mu) is lambda
  (`loss`). `advantage_learning` alpha subtracts alpha (max_b Q^-(x_t, b)
  - Q^-(x_t, a_t)) from each target (`loss`).

  Returns:
    (td [T', B], valid float32 [T', B], action int [T' + 1, B]) with
    T' = T - burn_in.
  """
  mixture_index = jnp.asarray(batch.mixture_index)

  def steps(x):
    return jnp.asarray(x)[burn_in:]

  action = steps(batch.action)
  valid = retrace.valid_mask(steps(batch.mask)).astype(jnp.float32)  # [T', B]
  if stream is None:
    rewards = retrace.mixture_rewards(steps(batch.extrinsic_reward)[1:],
                                      steps(batch.intrinsic_reward)[1:],
                                      mixture_index, betas)
  else:
    rewards = jnp.asarray(steps(getattr(batch, f"{stream}_reward"))[1:])
  discounts = (retrace.mixture_discounts(mixture_index, gammas)[None]
               * steps(batch.discount)[1:])
  policy_q = online_q if policy_q is None else policy_q
  pi = retrace.epsilon_greedy_probs(jax.lax.stop_gradient(policy_q[1:]),
                                    target_epsilon)
  # Cut the trace at padding (recipe of `retrace.valid_mask`).
  lambda_ = retrace_lambda * jnp.concatenate([valid[1:], valid[-1:]], axis=0)
  if traces == "uncorrected":
    mu = jnp.take_along_axis(pi, action[1:, ..., None], axis=-1)[..., 0]
  else:
    mu = steps(batch.behaviour_prob)[1:]
  retrace_args = (online_q[:-1], target_q[1:], action[:-1], action[1:],
                  rewards, discounts, pi, mu, lambda_)
  if value_transform == "identity":
    td = _identity_retrace(*retrace_args)
  else:
    td = retrace.transformed_retrace(*retrace_args, eps=retrace_eps)
  if _checks.is_traced(advantage_learning) or advantage_learning != 0:
    td = td - advantage_learning * action_gap(target_q[:-1], action[:-1])
  return td, valid, action


def action_gap(q: Array, action: Array) -> Array:
  """max_b q[..., b] - q[..., action]: the taken action's gap, [T, B].

  Args:
    q: action values shaped [T, B, A] (any space; `loss` passes the target
      network's transformed values).
    action: int [T, B].
  """
  taken = jnp.take_along_axis(q, action[..., None], axis=-1)[..., 0]
  return jax.lax.stop_gradient(jnp.max(q, axis=-1) - taken)


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
    dice: Optional[DiceSettings] = None,
    traces: str = "retrace",
    advantage_learning: float = 0.,
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
      priorities (default 0, docs/design.md#sequences; R2D2: up to 40).
    priority_eta: eta of the R2D2 priorities (0.9).
    value_transform: "signed_hyperbolic" (Table 6: h of eq. 16 with
      `retrace_eps`) or "identity" (Table 7, Disco Maze: "Retrace loss
      transformation: identity", i.e. plain Retrace, eq. 10-13, with the
      squared error taken on untransformed values; `retrace_eps` is unused).
    dice: DiCE's learner instead of the Retrace loss (`DiceSettings`; needs
      `batch.tau` and `network.unroll_with_value`; see below).
    traces: "retrace" (App. E: c_s = lambda min(1, pi(a_s|x_s) /
      mu(a_s|x_s)), mu the stored behaviour probability) or "uncorrected"
      (c_s = lambda on every step: Peng's Q(lambda) (Peng & Williams, 1996),
      the uncorrected multi-step return of R2D2's n-step targets taken to
      lambda-returns; ours, not the paper's: the trace is not cut where an
      exploratory lane's action differs from pi's; needs `target_epsilon` >
      0, so that pi gives every action some probability). DiCE ignores it.
    advantage_learning: alpha in [0, 1) of the advantage-learning operator
      (Baird, 1999; Bellemare et al., 2016, "Increasing the action gap":
      T_AL Q(x, a) = T Q(x, a) - alpha (V(x) - Q(x, a)), V(x) = max_b
      Q(x, b)), applied to each transformed Retrace target with the target
      network's values: td_t -= alpha (max_b Q^-(x_t, b) - Q^-(x_t, a_t)).
      Ours, not the paper's (default 0: eq. 14-15 unchanged): it widens
      the gap between the greedy action and the others by about
      1 / (1 - alpha) while keeping the greedy policy optimal (Bellemare
      et al.'s optimality-preserving operators), for tasks where gamma
      near 1 leaves actions that do nothing within (1 - gamma) V of the
      best. Not with DiCE or split values.

  DiCE's learner (`dice` set; 004 Sec. 3, App. B Alg. 3):
  `ngu_jax.losses.dice.dice_loss` on the sequences after burn-in -- Q by
  Retrace towards pi_tau = softmax(Q / tau) with the sequence's stored tau
  (`batch.tau`) and traces min(pi / mu, c_bar), V (the dueling head's value
  stream) by V-trace, and eq. 8's policy gradient, weighted, no entropy term
  -- on the reward r^e + beta_j r^i with gamma_j (DiCE's own setting is
  beta = 0, N = 1: the `dice` preset), in the space of h (or the identity);
  `target_epsilon` is unused; priorities from the Retrace TD errors; the
  metrics add `dice_q_loss`, `dice_v_loss`, `dice_pi_loss` and
  `dice_entropy`.

  Agent57's split values (`network.unroll_streams` set, the network of
  `ngu_jax.networks.split_uvfa`; Sec. 3.1, App. B): theta^e is regressed
  onto r^e and theta^i onto r^i (not multiplied by beta_j), both with the
  sequence's gamma_j and ONE target policy, epsilon-greedy on the combined
  online Q = h(h^-1(Q_e) + beta_j h^-1(Q_i)) (h from `value_transform`,
  beta_j from `betas`, which must be the table the network combines with);
  the loss is the sum of the two streams' losses above; `td_errors` and the
  priorities are the combined delta_e + beta_j delta_i; the metrics add
  `q_extrinsic_mean` and `q_intrinsic_mean`.

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
  _check_loss_arguments(network, betas, gammas, retrace_lambda,
                        target_epsilon, priority_eta, value_transform, where,
                        traces, advantage_learning)
  if ((_checks.is_traced(advantage_learning) or advantage_learning != 0)
      and (dice is not None or network.unroll_streams is not None)):
    raise ValueError(f"{where}: `advantage_learning` is for the Retrace loss "
                     "of one value stream (not DiCE, not split values).")
  if dice is not None:
    return _dice_loss(network, params, target_params, batch, dice,
                      betas=betas, gammas=gammas, burn_in=burn_in,
                      retrace_eps=retrace_eps, priority_eta=priority_eta,
                      value_transform=value_transform, t1=t1, b=b,
                      where=where)
  # `check_batch` checked the values the networks and Retrace would check
  # again (one host callback instead of one per check under jit).
  split = network.unroll_streams is not None
  retrace_kwargs = dict(betas=betas, gammas=gammas, burn_in=burn_in,
                        retrace_lambda=retrace_lambda,
                        target_epsilon=target_epsilon,
                        retrace_eps=retrace_eps,
                        value_transform=value_transform, traces=traces,
                        advantage_learning=advantage_learning)
  with _checks.runtime_checks_disabled():
    online_q, target_q = _unroll_q(network, params, target_params, batch,
                                   burn_in, t1, b, streams=split)
    if split:
      # Agent57 Sec. 3.1, App. B: theta^e on r^e and theta^i on r^i, both
      # with gamma_j and ONE target policy, epsilon-greedy on the combined
      # online Q.
      (online_e, online_i), (target_e, target_i) = online_q, target_q
      beta = jnp.asarray(betas)[jnp.asarray(batch.mixture_index)]  # [B]
      online_q = split_values.combine_q(
          online_e, online_i, jnp.broadcast_to(beta, online_e.shape[:-1]),
          None if value_transform == "identity"
          else retrace.signed_hyperbolic_pair(retrace_eps))
      td_e, valid, action = _retrace_td(online_e, target_e, batch,
                                        policy_q=online_q, stream="extrinsic",
                                        **retrace_kwargs)
      td_i, _, _ = _retrace_td(online_i, target_i, batch, policy_q=online_q,
                               stream="intrinsic", **retrace_kwargs)
      stream_tds = (td_e, td_i)
      td = split_values.combined_td_error(td_e, td_i, beta)
    else:
      td, valid, action = _retrace_td(online_q, target_q, batch,
                                      **retrace_kwargs)
      stream_tds = (td,)

  is_valid = valid > 0
  count = jnp.maximum(valid.sum(axis=0), 1.)  # [B]
  lane_loss = sum(
      jnp.sum(0.5 * jnp.square(jnp.where(is_valid, x, 0.)), axis=0) / count
      for x in stream_tds)
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
  if split:
    for name, q in (("q_extrinsic_mean", online_e),
                    ("q_intrinsic_mean", online_i)):
      taken = jnp.take_along_axis(q[:-1], action[:-1, :, None],
                                  axis=-1)[..., 0]
      metrics[name] = jax.lax.stop_gradient(
          jnp.sum(jnp.where(is_valid, taken, 0.)) / num_valid)
  return total, LossExtras(priorities=priorities, metrics=metrics,
                           td_errors=td, valid=valid)


def _dice_loss(network: uvfa.UVFANetwork, params: hk.Params,
               target_params: hk.Params, batch: SequenceBatch,
               dice: DiceSettings, *, betas: Array, gammas: Array,
               burn_in: int, retrace_eps: float, priority_eta: float,
               value_transform: str, t1: int, b: int, where: str
               ) -> Tuple[Array, LossExtras]:
  """`loss` with DiCE's learner (its docstring)."""
  if network.unroll_with_value is None:
    raise ValueError(f"{where}: DiCE's learner needs a network with one "
                     "value stream (`unroll_with_value`; not Agent57's split "
                     "values).")
  if batch.tau is None:
    raise ValueError(f"{where}: DiCE's learner needs `batch.tau`, the "
                     "temperature of each sequence (acted by Boltzmann lanes: "
                     "behaviour_policy 'boltzmann').")
  _checks.check_shape(batch.tau, (b,), "batch.tau", where)
  tau = jnp.asarray(batch.tau)
  _checks.check_floating(tau, "batch.tau", where)
  _checks.check_values(~(tau > 0) | ~jnp.isfinite(tau),
                       "must be finite and > 0", "batch.tau", where)
  mixture_index = jnp.asarray(batch.mixture_index)

  def steps(x):
    return jnp.asarray(x)[burn_in:]

  with _checks.runtime_checks_disabled():
    (online_q, online_v), target_q = _unroll_q(
        network, params, target_params, batch, burn_in, t1, b,
        with_value=True)
    total, extras = dice_losses.dice_loss(
        online_q, online_v, target_q, steps(batch.action),
        steps(batch.extrinsic_reward), steps(batch.discount),
        steps(batch.behaviour_prob), tau, steps(batch.mask),
        gamma=jnp.asarray(gammas)[mixture_index],
        intrinsic_rewards=steps(batch.intrinsic_reward),
        beta=jnp.asarray(betas)[mixture_index],
        importance_weights=batch.importance_weights,
        q_weight=dice.q_weight, v_weight=dice.v_weight,
        pi_weight=dice.pi_weight, lambda_=dice.lambda_, c_bar=dice.c_bar,
        rho_bar=dice.rho_bar, entropy_weight=dice.entropy_weight,
        eps=None if value_transform == "identity" else retrace_eps)
  td, valid = extras.td_errors, extras.valid
  is_valid = valid > 0
  num_valid = jnp.maximum(valid.sum(), 1.)
  action = steps(batch.action)
  q_taken = jnp.take_along_axis(online_q[:-1], action[:-1, :, None],
                                axis=-1)[..., 0]
  m = extras.metrics
  metrics = jax.lax.stop_gradient({
      "loss": total, "td_abs_mean": m["td_abs_mean"],
      "q_mean": jnp.sum(jnp.where(is_valid, q_taken, 0.)) / num_valid,
      "dice_q_loss": m["q_loss"], "dice_v_loss": m["v_loss"],
      "dice_pi_loss": m["pi_loss"], "dice_entropy": m["entropy"]})
  return total, LossExtras(
      priorities=retrace.priorities(td, valid, priority_eta),
      metrics=metrics, td_errors=td, valid=valid)


def _split_lanes(batch: SequenceBatch, m: int, b: int) -> SequenceBatch:
  """The B lanes of `batch` as M chunks of B / M (a leading axis M)."""
  def lanes_major(x):  # [B, ...] -> [M, B / M, ...]
    x = jnp.asarray(x)
    return x.reshape((m, b // m) + x.shape[1:])

  def time_major(x):  # [T + 1, B, ...] -> [M, T + 1, B / M, ...]
    x = jnp.asarray(x)
    return jnp.moveaxis(x.reshape((x.shape[0], m, b // m) + x.shape[2:]),
                        1, 0)

  return SequenceBatch(**{
      name: (jax.tree_util.tree_map(lanes_major, value)
             if name in ("mixture_index", "importance_weights",
                         "initial_state", "tau") else time_major(value))
      for name, value in batch._asdict().items()})


def _merge_chunks(losses: Array, extras: LossExtras, b: int
                  ) -> Tuple[Array, LossExtras]:
  """(loss, `LossExtras` of all B lanes) from those of M chunks ([M, ...])."""
  def unchunk(x):  # [M, T', B / M] -> [T', B]
    return jnp.moveaxis(x, 0, 1).reshape((x.shape[1], b))

  td, valid = unchunk(extras.td_errors), unchunk(extras.valid)
  chunk_valid = extras.valid.sum(axis=(1, 2))  # [M]
  num_valid = jnp.maximum(chunk_valid.sum(), 1.)
  total = jnp.mean(losses)
  metrics = {
      "loss": total,
      "td_abs_mean": jnp.sum(jnp.abs(td) * valid) / num_valid,
  }
  for name in extras.metrics:
    if name.startswith("q_"):  # q_mean; q_extrinsic_mean, q_intrinsic_mean.
      metrics[name] = jnp.sum(extras.metrics[name] * chunk_valid) / num_valid
  return total, LossExtras(priorities=extras.priorities.reshape(b),
                           metrics=metrics, td_errors=td, valid=valid)


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

  chunks = _split_lanes(batch, m, b)

  def body(grad_sum, chunk):
    (chunk_loss, extras), grads = grad_fn(network, params, target_params,
                                          chunk, **kwargs)
    return jax.tree_util.tree_map(jnp.add, grad_sum, grads), (chunk_loss,
                                                              extras)

  zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
  grad_sum, (losses, extras) = jax.lax.scan(body, zeros, chunks)
  grads = jax.tree_util.tree_map(lambda g: g / m, grad_sum)

  return _merge_chunks(losses, extras, b), grads
