"""DiCE's Boltzmann policy family and learner losses.

"An Entropy Regularization Free Mechanism for Policy-based RL" (DiCE),
Sec. 3.1-3.2, App. B (Algorithm 3) and App. C (Table 5);
docs/design.md#beyond-ngu records the readings.

The policy family (Sec. 3.1) is the Boltzmann policy of the advantage,

  pi_tau(. | x) = softmax(A(x, .) / tau),   tau in (0, +inf),

which equals softmax(Q(x, .) / tau) for a dueling head Q = V + A (a per-row
shift): `boltzmann_probs` accepts either. The actor draws tau once per episode
(the bandit vote, App. A) and stores it, with mu(a_s | x_s), with each
sequence; the learner rebuilds pi_tau with the stored tau.

The learner (Algorithm 3, Sec. 2 eq. 2-6 and Sec. 3.2 eq. 8) has three
losses, weighted alpha = 10 (Q), xi = 1 (V), beta = 10 (pi), no entropy term:

* Q: Retrace (eq. 2) towards the target policy pi_tau(. | x_{t+1}) with traces
  c_t = lambda min(pi / mu, c_bar), c_bar = 1.05 (`dice_retrace`);
* V: V-trace (eq. 4) with rho_bar = c_bar = 1.05 (`dice_vtrace`);
* pi: -tau * stop_gradient(rho_t (r_t + gamma v_{t+1} - V(x_t)))
  * log pi_tau(a_t | x_t) (eq. 8; `dice_policy_gradient_loss`), whose
  gradient w.r.t. the logits is -adv_t (onehot(a_t) - pi_tau): free of tau.

Value space. DiCE (Table 5) shapes the reward instead of transforming values
(`shape_reward`). This library's Q-networks output h(Q) (NGU App. E,
eq. 16-17), so every value function here takes `eps`: the transform's
epsilon, or None for the identity (the paper's setting). With a transform the
dueling head's V lives in the same h-space as Q (Q_h = V_h + A_h), and both
recursions run in the untransformed space: Retrace as in NGU eq. (14)-(15),
V-trace on h^{-1}(V), the V loss regressing V_h on h(v_s), and the
policy-gradient advantage in the untransformed space (eq. 8 as written).

Alignment (the sequence layout of `ngu_jax.losses.retrace`): a replayed
sequence holds steps s = 0..T; `reward[s]`, `discount[s]` arrive with x_s;
index t of every [T, B] argument is the transition x_t -> x_{t+1}.
"""

from typing import Dict, NamedTuple, Optional, Tuple, Union

import chex
import jax
import jax.numpy as jnp
import numpy as np
import rlax

from ngu_jax import _checks
from ngu_jax.losses import retrace

Array = chex.Array

# Table 5 (App. C).
DEFAULT_C_BAR = 1.05
DEFAULT_RHO_BAR = 1.05
DEFAULT_Q_WEIGHT = 10.
DEFAULT_V_WEIGHT = 1.
DEFAULT_PI_WEIGHT = 10.
DEFAULT_GAMMA = 0.997
# Eq. (2) has no lambda (Table 5 lists none): traces are min(pi / mu, c_bar).
DEFAULT_LAMBDA = 1.
# Floor on mu in the importance ratio pi / mu (mu = 0 only at padding).
_MU_FLOOR = 1e-8

# Validation helpers shared with the NGU Retrace loss.
# pylint: disable=protected-access
_lanes_first = retrace._lanes_first
_check_integer = retrace._check_integer
_check_lambda = retrace._check_lambda
_check_lambda_values = retrace._check_lambda_values
_check_retrace_inputs = retrace._check_retrace_inputs
_check_retrace_values = retrace._check_retrace_values
_check_per_row = retrace._check_per_row
# pylint: enable=protected-access


def _is_traced(x) -> bool:
  return _checks.is_traced(x)


def _tx_pair(eps: Optional[float], where: str) -> rlax.TxPair:
  """(h, h^{-1}) of NGU eq. (16)-(17), or the identity when eps is None."""
  if eps is None:
    return rlax.IDENTITY_PAIR
  if not _is_traced(eps) and not (np.isfinite(eps) and eps > 0):
    raise ValueError(f"{where}: `eps` must be a finite number > 0 (or None "
                     f"for no value transform), got {eps}.")
  return retrace.signed_hyperbolic_pair(eps)


def _check_clip(value, name: str, where: str, low: float = 1.) -> None:
  """A concrete importance-sampling clip must be finite and >= low."""
  if _is_traced(value):
    return
  if not (np.ndim(value) == 0 and np.isfinite(value) and value >= low):
    raise ValueError(f"{where}: `{name}` must be a finite number >= {low}, "
                     f"got {value}.")


def _check_tau(tau, lead: Tuple[int, ...], dtype, where: str) -> Array:
  """Validates a temperature broadcastable to `lead` (finite, > 0)."""
  tau = jnp.asarray(tau)
  if not jnp.issubdtype(tau.dtype, jnp.floating):
    tau = tau.astype(dtype)
  lanes = _check_per_row(tau, lead, "tau", "the logits'", where)
  if not (_is_traced(lanes) and not _checks.runtime_checks_enabled()):
    _checks.check_values(lanes <= 0, "has values <= 0 (tau must be > 0)",
                         "tau", where)
  return tau


def _check_logits(logits, name: str, where: str) -> Array:
  logits = jnp.asarray(logits)
  _checks.check_floating(logits, name, where)
  if logits.ndim < 1:
    raise ValueError(f"{where}: `{name}` must have an action axis (rank >= "
                     f"1), got shape {logits.shape}.")
  _checks.check_finite(logits if logits.ndim > 1 else logits[None], name,
                       where)
  return logits


def _scaled_logits(logits: Array, tau: Array) -> Array:
  """(v - max v) / tau, row-wise: <= 0, finite or -inf, so softmax is stable.

  The shift is a constant per row (no effect on softmax or its gradient); it
  keeps v / tau from overflowing for tiny tau.
  """
  shifted = logits - jax.lax.stop_gradient(logits.max(axis=-1, keepdims=True))
  return shifted / jnp.asarray(tau, logits.dtype)[..., None]


def boltzmann_probs(logits: Array, tau: Union[float, Array]) -> Array:
  """pi_tau = softmax(v / tau), DiCE's policy family (Sec. 3.1).

  Stable for any tau > 0 (tested from 1e-3 to 1e6): tau -> 0+ gives the
  argmax (ties shared), tau -> +inf the uniform policy.

  Args:
    logits: v = A(x, .) (or Q(x, .), same policy), shaped [..., A].
    tau: temperature > 0, a scalar or broadcastable to [...] (one per row,
      e.g. per lane [B] for logits [T, B, A]).

  Returns:
    Probabilities shaped [..., A]; rows sum to 1.
  """
  where = "dice.boltzmann_probs"
  logits = _check_logits(logits, "logits", where)
  tau = _check_tau(tau, logits.shape[:-1], logits.dtype, where)
  return jax.nn.softmax(_scaled_logits(logits, tau), axis=-1)


def boltzmann_log_probs(logits: Array, tau: Union[float, Array]) -> Array:
  """log pi_tau = log softmax(v / tau) (Sec. 3.1); shapes as `boltzmann_probs`.

  Entries may be -inf where pi_tau underflows (tiny tau); the log
  probability of the row's argmax is always finite.
  """
  where = "dice.boltzmann_log_probs"
  logits = _check_logits(logits, "logits", where)
  tau = _check_tau(tau, logits.shape[:-1], logits.dtype, where)
  return jax.nn.log_softmax(_scaled_logits(logits, tau), axis=-1)


def sample_boltzmann(key: Array, logits: Array,
                     tau: Union[float, Array]) -> Array:
  """Draws a ~ pi_tau(. | x) = softmax(v / tau) (Algorithm 1, the actor).

  Args:
    key: a PRNG key.
    logits: v = A(x, .) or Q(x, .), shaped [..., A].
    tau: temperature > 0, a scalar or broadcastable to [...].

  Returns:
    Actions, int32, shaped [...].
  """
  where = "dice.sample_boltzmann"
  logits = _check_logits(logits, "logits", where)
  tau = _check_tau(tau, logits.shape[:-1], logits.dtype, where)
  return jax.random.categorical(key, _scaled_logits(logits, tau), axis=-1)


def boltzmann_behaviour_probability(logits: Array, actions: Array,
                                    tau: Union[float, Array]) -> Array:
  """mu(a | x) = pi_tau(a | x) of the taken actions (what the actor stores).

  Args:
    logits: the actor's v = A(x, .) or Q(x, .), shaped [..., A].
    actions: taken actions in [0, A), integer, shaped [...].
    tau: the lane's episode temperature > 0, scalar or broadcastable to [...].

  Returns:
    pi_tau(actions | x), shaped [...].
  """
  where = "dice.boltzmann_behaviour_probability"
  logits = _check_logits(logits, "logits", where)
  _checks.check_shape(actions, logits.shape[:-1], "actions", where)
  actions = jnp.asarray(actions)
  _check_integer(actions, "actions", where)
  _checks.check_in_range(actions if actions.ndim else actions[None], 0,
                         logits.shape[-1], "actions", where)
  tau = _check_tau(tau, logits.shape[:-1], logits.dtype, where)
  probs = jax.nn.softmax(_scaled_logits(logits, tau), axis=-1)
  return jnp.take_along_axis(probs, actions[..., None], axis=-1)[..., 0]


def policy_entropy(probs: Array) -> Array:
  """H[pi] = -sum_a pi(a) log pi(a), with 0 log 0 = 0 (Sec. 3.1).

  H[pi_tau] grows with tau, from 0 (tau -> 0+, distinct maximum) to log |A|
  (tau -> +inf).

  Args:
    probs: probabilities, shaped [..., A].

  Returns:
    Entropies (nats), shaped [...].
  """
  where = "dice.policy_entropy"
  probs = _check_logits(probs, "probs", where)
  return -jnp.sum(jax.scipy.special.xlogy(probs, probs), axis=-1)


def shape_reward(r: Array) -> Array:
  """DiCE's reward shape log(|r| + 1) (2 * 1{r >= 0} - 1{r < 0}) (Table 5).

  Written as printed: a reward r >= 0 becomes 2 log(1 + r), a reward r < 0
  becomes -log(1 + |r|).

  Args:
    r: rewards, any shape.

  Returns:
    Shaped rewards, same shape.
  """
  r = jnp.asarray(r)
  _checks.check_floating(r, "r", "dice.shape_reward")
  return jnp.log1p(jnp.abs(r)) * jnp.where(r >= 0, 2., -1.).astype(r.dtype)


def _check_time_batch(arrays, t: int, b: int, where: str) -> None:
  for x, name in arrays:
    _checks.check_shape(x, (t, b), name, where)


def _check_mask(mask, t: int, b: int, where: str) -> Optional[Array]:
  if mask is None:
    return None
  _checks.check_shape(mask, (t, b), "mask", where)
  mask = jnp.asarray(mask)
  _checks.check_binary(_lanes_first(mask), "mask", where)
  return mask


def dice_retrace(
    q_tm1: Array,
    q_t: Array,
    a_tm1: Array,
    a_t: Array,
    r_t: Array,
    discount_t: Array,
    pi_t: Array,
    mu_t: Array,
    lambda_: Union[float, Array] = DEFAULT_LAMBDA,
    c_bar: float = DEFAULT_C_BAR,
    eps: Optional[float] = 1e-3,
    stop_target_gradients: bool = True,
) -> Array:
  """Batched (transformed) Retrace TD errors with trace clip c_bar (eq. 2).

  DiCE Sec. 2 eq. (2) with the expected-value form of Retrace (Munos et al.,
  2016) and the target policy pi = pi_tau(. | x_{t+1}) of the sequence's
  stored tau (docs/design.md#beyond-ngu). With y_t the target of transition t,

    y_t = h( r_t + discount_t [ sum_a pi_t[t, a] h^{-1}(q_t[t, a])
                 - c_{t+1} h^{-1}(q_t[t, a_t[t]]) + c_{t+1} h^{-1}(y_{t+1}) ] ),
    c_{t+1} = lambda_[t] * min(pi_t[t, a_t[t]] / mu_t[t], c_bar),

  and y_{T-1} = h(r + discount E_pi h^{-1}(q_t[T-1])). Returns
  y_t - q_tm1[t, a_tm1[t]] (`rlax.transformed_general_off_policy_returns_
  from_action_values` with these traces, vmapped over B; rlax's own retrace
  caps the ratio at 1). With c_bar = 1, lambda_ = l and eps = None this is
  `rlax.retrace(..., lambda_=l)` (up to its 1e-8 on mu).

  Args:
    q_tm1: online Q(x_t, .), shaped [T, B, A] (h-space when eps is set).
    q_t: target-network Q(x_{t+1}, .), shaped [T, B, A].
    a_tm1: actions a_t, integer, shaped [T, B].
    a_t: actions a_{t+1}, integer, shaped [T, B].
    r_t: rewards of x_t -> x_{t+1}, shaped [T, B].
    discount_t: gamma times the environment discount at x_{t+1}, in [0, 1],
      shaped [T, B].
    pi_t: target policy pi_tau(. | x_{t+1}), rows summing to 1, [T, B, A].
    mu_t: mu(a_{t+1} | x_{t+1}), in [0, 1], shaped [T, B].
    lambda_: in [0, 1]: a scalar, or [T, B] scaling the trace at x_{t+1}
      (e.g. 0 to cut it at the last real step). Default 1: DiCE eq. (2) and
      Table 5 have no lambda.
    c_bar: the trace clip, >= 1 (Table 5: 1.05); use lambda_ to cut more.
    eps: epsilon of h (NGU eq. 16), or None for no transform.
    stop_target_gradients: whether no gradient flows through the targets.

  Returns:
    TD errors, shaped [T, B] (in h-space when eps is set).

  Raises:
    ValueError: wrong ranks / shapes / dtypes, NaN or inf, actions outside
      [0, A), probabilities outside [0, 1] or rows of pi_t not summing to 1,
      discounts outside [0, 1], lambda_ outside [0, 1], c_bar < 1, eps <= 0.
  """
  where = "dice.dice_retrace"
  inputs = _check_retrace_inputs(q_tm1, q_t, a_tm1, a_t, r_t, discount_t,
                                 pi_t, mu_t, lambda_, where)
  _check_clip(c_bar, "c_bar", where)
  tx = _tx_pair(eps, where)
  _check_retrace_values(*inputs, where)
  q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_ = inputs

  pi_t = jax.lax.stop_gradient(pi_t)
  pi_a_t = jnp.take_along_axis(pi_t, a_t[..., None], axis=-1)[..., 0]
  c_t = lambda_ * jnp.minimum(pi_a_t / jnp.maximum(mu_t, _MU_FLOOR), c_bar)

  def one_lane(q_t, a_t, r_t, discount_t, c_t, pi_t):
    return rlax.transformed_general_off_policy_returns_from_action_values(
        tx, q_t, a_t, r_t, discount_t, c_t, pi_t, stop_target_gradients)

  targets = jax.vmap(one_lane, in_axes=1, out_axes=1)(
      q_t, a_t, r_t, discount_t, c_t, pi_t)
  if stop_target_gradients:
    targets = jax.lax.stop_gradient(targets)
  q_a_tm1 = jnp.take_along_axis(q_tm1, a_tm1[..., None], axis=-1)[..., 0]
  return targets - q_a_tm1


class VTraceOutput(NamedTuple):
  """What `dice_vtrace` returns (all shaped [T, B]).

  Attributes:
    errors: h(v_s) - v_tm1, the V loss's TD errors in the value space of
      v_tm1 (no gradient through h(v_s) when stop_target_gradients).
    targets: v_s, the V-trace targets in the untransformed space (no
      gradient).
    pg_advantages: rho_s (r_s + discount_s v_{s+1} - h^{-1}(v_tm1[s])), the
      advantage of eq. (6) / (8) in the untransformed space (no gradient);
      v_{s+1} = targets[s + 1] for s < T - 1 and h^{-1}(v_t[T - 1]) last.
  """
  errors: Array
  targets: Array
  pg_advantages: Array


def dice_vtrace(
    v_tm1: Array,
    v_t: Array,
    r_t: Array,
    discount_t: Array,
    rho_tm1: Array,
    lambda_: Union[float, Array] = DEFAULT_LAMBDA,
    rho_bar: float = DEFAULT_RHO_BAR,
    c_bar: float = DEFAULT_C_BAR,
    eps: Optional[float] = 1e-3,
    mask: Optional[Array] = None,
    stop_target_gradients: bool = True,
) -> VTraceOutput:
  """Batched (transformed) V-trace with clips rho_bar and c_bar (eq. 4).

  DiCE Sec. 2 eq. (4), i.e. Espeholt et al. (2018) eq. (1). With V = h^{-1}
  (v_tm1) (V(x_{s+1}) = h^{-1}(v_t[s])), ratio_s = pi(a_s|x_s) / mu(a_s|x_s),
  rho_s = min(ratio_s, rho_bar), c_s = lambda_[s] min(ratio_s, c_bar),
  delta_s = mask[s] rho_s (r_t[s] + discount_t[s] V(x_{s+1}) - V(x_s)):

    v_s - V(x_s) = delta_s + discount_t[s] c_s (v_{s+1} - V(x_{s+1})),

  computed backwards from v_T = V(x_T) (a `lax.scan` over T; no rlax call:
  `rlax.vtrace` fixes c_bar = 1, c_s = lambda_ min(1, ratio_s), and
  lambda_ cannot emulate c_bar != 1 as min(ratio, c_bar) is not a multiple of
  min(ratio, 1)). With rho_bar = c_bar = 1, lambda_ = 1, eps = None it equals
  `rlax.vtrace` (tested). Transitions with mask 0 (a zero-padded tail)
  contribute no delta, so the last real step bootstraps on its own V.

  Args:
    v_tm1: V(x_s) from the value head, shaped [T, B] (h-space when eps).
    v_t: V(x_{s+1}) (bootstrap values), shaped [T, B].
    r_t: rewards of x_s -> x_{s+1}, shaped [T, B].
    discount_t: gamma times the environment discount at x_{s+1}, in [0, 1],
      shaped [T, B].
    rho_tm1: the unclipped ratios pi(a_s|x_s) / mu(a_s|x_s) >= 0, [T, B].
    lambda_: in [0, 1], scalar or [T, B] (scales c_s); default 1.
    rho_bar: the clip of rho, >= c_bar (Table 5: 1.05).
    c_bar: the clip of the traces c, >= 1 (Table 5: 1.05).
    eps: epsilon of h (NGU eq. 16), or None for no transform.
    mask: optional 0/1 transition mask, shaped [T, B].
    stop_target_gradients: whether no gradient flows through the targets.

  Returns:
    A `VTraceOutput` of [T, B] arrays.

  Raises:
    ValueError: wrong shapes / dtypes, NaN or inf, discounts outside [0, 1],
      negative ratios, lambda_ outside [0, 1], c_bar < 1, rho_bar < c_bar,
      eps <= 0, a mask other than 0/1.
  """
  where = "dice.dice_vtrace"
  _checks.check_rank(v_tm1, 2, "v_tm1", where)
  t, b = np.shape(v_tm1)
  _check_time_batch(((v_t, "v_t"), (r_t, "r_t"), (discount_t, "discount_t"),
                     (rho_tm1, "rho_tm1")), t, b, where)
  v_tm1, v_t, r_t, discount_t, rho_tm1 = map(
      jnp.asarray, (v_tm1, v_t, r_t, discount_t, rho_tm1))
  floats = ((v_tm1, "v_tm1"), (v_t, "v_t"), (r_t, "r_t"),
            (discount_t, "discount_t"), (rho_tm1, "rho_tm1"))
  for x, name in floats:
    _checks.check_floating(x, name, where)
  _check_clip(c_bar, "c_bar", where)
  if not _is_traced(c_bar):
    _check_clip(rho_bar, "rho_bar", where, low=float(c_bar))
  tx = _tx_pair(eps, where)
  lambda_ = _check_lambda(lambda_, t, b, where)
  _check_lambda_values(lambda_, where)
  mask = _check_mask(mask, t, b, where)
  for x, name in floats:
    _checks.check_finite(_lanes_first(x), name, where)
  _checks.check_closed_range(_lanes_first(discount_t), 0., 1., "discount_t",
                             where)
  _checks.check_closed_range(_lanes_first(rho_tm1), 0., np.inf, "rho_tm1",
                             where)

  value_tm1 = tx.apply_inv(v_tm1)
  value_t = tx.apply_inv(v_t)
  rho_tm1 = jax.lax.stop_gradient(rho_tm1)
  rho = jnp.minimum(rho_tm1, rho_bar)
  c = lambda_ * jnp.minimum(rho_tm1, c_bar)
  delta = rho * (r_t + discount_t * value_t - value_tm1)
  if mask is not None:
    delta = delta * mask.astype(delta.dtype)

  def body(acc, xs):
    delta_s, discount_s, c_s = xs
    acc = delta_s + discount_s * c_s * acc
    return acc, acc

  _, diffs = jax.lax.scan(body, jnp.zeros_like(value_t[-1]),
                          (delta, discount_t, jnp.broadcast_to(c, (t, b))),
                          reverse=True)
  targets = value_tm1 + diffs
  # v_{s+1} for s < T - 1, and v_T = V(x_T) (as `rlax.vtrace_td_error_and_
  # advantage` with lambda_ = 1).
  targets_tp1 = jnp.concatenate([targets[1:], value_t[-1:]], axis=0)
  pg_advantages = rho * (r_t + discount_t * targets_tp1 - value_tm1)
  targets_h = tx.apply(targets)
  if stop_target_gradients:
    targets_h = jax.lax.stop_gradient(targets_h)
  return VTraceOutput(errors=targets_h - v_tm1,
                      targets=jax.lax.stop_gradient(targets),
                      pg_advantages=jax.lax.stop_gradient(pg_advantages))


def dice_policy_gradient_loss(logits_tm1: Array, a_tm1: Array,
                              advantages: Array,
                              tau: Union[float, Array]) -> Array:
  """Per-step policy loss of eq. (8): -tau sg(adv_t) log pi_tau(a_t | x_t).

  DiCE Sec. 3.2: multiplying the objective by tau frees the gradient's scale
  from tau; w.r.t. the logits v the gradient of one step is
  -sg(adv_t) (onehot(a_t) - pi_tau(. | x_t)). No entropy term (Table 5).

  Args:
    logits_tm1: v(x_t, .) = A (or Q), with gradient, shaped [T, B, A].
    a_tm1: actions a_t, integer in [0, A), shaped [T, B].
    advantages: rho_t (r_t + gamma v_{t+1} - V(x_t)) (`VTraceOutput.
      pg_advantages`), shaped [T, B]; never differentiated.
    tau: temperatures > 0: a scalar, [B] (per sequence) or [T, B].

  Returns:
    The per-step losses, shaped [T, B].
  """
  where = "dice.dice_policy_gradient_loss"
  _checks.check_rank(logits_tm1, 3, "logits_tm1", where)
  t, b, a = np.shape(logits_tm1)
  _check_time_batch(((a_tm1, "a_tm1"), (advantages, "advantages")), t, b,
                    where)
  logits_tm1 = _check_logits(logits_tm1, "logits_tm1", where)
  a_tm1, advantages = jnp.asarray(a_tm1), jnp.asarray(advantages)
  _check_integer(a_tm1, "a_tm1", where)
  _checks.check_floating(advantages, "advantages", where)
  _checks.check_in_range(_lanes_first(a_tm1), 0, a, "a_tm1", where)
  _checks.check_finite(_lanes_first(advantages), "advantages", where)
  tau = _check_tau(tau, (t, b), logits_tm1.dtype, where)
  log_pi = jax.nn.log_softmax(_scaled_logits(logits_tm1, tau), axis=-1)
  log_pi_a = jnp.take_along_axis(log_pi, a_tm1[..., None], axis=-1)[..., 0]
  return -tau * jax.lax.stop_gradient(advantages) * log_pi_a


class DiceLossExtras(NamedTuple):
  """The auxiliary outputs of `dice_loss` (the `has_aux` part).

  Attributes:
    metrics: scalars "loss", "q_loss", "v_loss", "pi_loss" (the unweighted
      losses), "entropy" (mean H[pi_tau(. | x_t)] over valid transitions),
      "tau_mean" (mean tau over valid transitions), "td_abs_mean".
    td_errors: the Q loss's Retrace TD errors, shaped [T, B] (no gradient).
    priorities: `retrace.priorities(td_errors, valid)`, shaped [B].
    valid: the transition mask, shaped [T, B], float.
  """
  metrics: Dict[str, Array]
  td_errors: Array
  priorities: Array
  valid: Array


def _lane_mean(x: Array, valid: Array) -> Array:
  """Per-lane mean over valid transitions ([T, B] -> [B]); 0 if none."""
  return (valid * x).sum(axis=0) / jnp.maximum(valid.sum(axis=0), 1.)


def dice_loss(
    online_q: Array,
    online_v: Array,
    target_q: Array,
    actions: Array,
    rewards: Array,
    discounts: Array,
    behaviour_prob: Array,
    tau: Array,
    sequence_mask: Array,
    gamma: Union[float, Array] = DEFAULT_GAMMA,
    intrinsic_rewards: Optional[Array] = None,
    beta: Union[float, Array] = 0.,
    importance_weights: Optional[Array] = None,
    q_weight: float = DEFAULT_Q_WEIGHT,
    v_weight: float = DEFAULT_V_WEIGHT,
    pi_weight: float = DEFAULT_PI_WEIGHT,
    lambda_: float = DEFAULT_LAMBDA,
    c_bar: float = DEFAULT_C_BAR,
    rho_bar: float = DEFAULT_RHO_BAR,
    eps: Optional[float] = 1e-3,
    entropy_weight: float = 0.,
) -> Tuple[Array, DiceLossExtras]:
  """DiCE's learner loss on replayed sequences (App. B Algorithm 3, App. C).

  loss = q_weight L_Q + v_weight L_V + pi_weight L_pi - entropy_weight H
  (Table 5: alpha = 10, xi = 1, beta = 10; no entropy term, so
  entropy_weight = 0; Sec. 4.3's "entropy" ablation of Table 4 adds one with
  coefficient 1), each L (and H) the mean over lanes of
  w_b times the lane's mean over valid transitions (as the NGU value loss) of

    L_Q: 0.5 td^2, td = `dice_retrace` with pi_t = pi_tau(. | x_{t+1}) from
         online_q[1:] and the stored tau, q_t = target_q[1:], mu = mu[1:];
    L_V: 0.5 err^2, err = `dice_vtrace(...).errors` with v_tm1 = online_v[:-1],
         v_t = online_v[1:] (targets without gradient, as IMPALA) and ratios
         pi_tau(a_t | x_t) / mu(a_t | x_t);
    L_pi: `dice_policy_gradient_loss` on online_q[:-1] with the V-trace
         advantages;
    H:   the entropy of pi_tau(. | x_t) from online_q[:-1] and the stored tau
         (with gradient: the regulariser of IMPALA / A3C on the policy the
         gradient trains).

  pi_tau = softmax(Q / tau) = softmax(A / tau) for Q = V + A, with the same
  gradient (log softmax is shift-invariant), so Q is passed, not A. Traces
  (Retrace) are cut at the last real step and padded transitions give no
  V-trace delta (`retrace.valid_mask`), so a truncated sequence bootstraps
  there. Rewards are the extrinsic reward alone by default (Table 5: no
  intrinsic reward); with `intrinsic_rewards` and `beta` (beta_j per lane)
  the reward is r^e + beta r^i, NGU's augmented reward.

  Args:
    online_q: online Q(x_s, .), s = 0..T, shaped [T + 1, B, A].
    online_v: online V(x_s) from the dueling head, shaped [T + 1, B].
    target_q: target-network Q(x_s, .), shaped [T + 1, B, A].
    actions: a_s, integer in [0, A), shaped [T + 1, B].
    rewards: extrinsic reward arriving with x_s, shaped [T + 1, B].
    discounts: environment discount arriving with x_s, in [0, 1], [T + 1, B].
    behaviour_prob: stored mu(a_s | x_s), in [0, 1], shaped [T + 1, B].
    tau: the stored temperatures, > 0: [B] (one per sequence) or [T + 1, B]
      (when a sequence spans an episode start).
    sequence_mask: 1 for real steps, 0 for padding, shaped [T + 1, B].
    gamma: discount, a scalar or [B] (gamma_j per lane); Table 5: 0.997.
    intrinsic_rewards: optional r^i arriving with x_s, shaped [T + 1, B].
    beta: intrinsic reward scale, scalar or [B]; ignored without
      `intrinsic_rewards`.
    importance_weights: optional prioritised-replay weights >= 0, [B].
    q_weight: alpha, the Q loss weight (Table 5: 10).
    v_weight: xi, the V loss weight (Table 5: 1).
    pi_weight: beta of Table 5, the policy loss weight (10).
    lambda_: Retrace / V-trace lambda in [0, 1] (default 1: none in eq. 2-4).
    c_bar: trace clip >= 1 (Table 5: 1.05).
    rho_bar: V-trace rho clip >= c_bar (Table 5: 1.05).
    eps: epsilon of the value transform h, or None for none.
    entropy_weight: the entropy regulariser's coefficient >= 0 (0: DiCE;
      1: Table 4's "entropy" ablation).

  Returns:
    (loss, `DiceLossExtras`).

  Raises:
    ValueError: on the first bad input (shapes, dtypes, values, tau <= 0,
      c_bar < 1, rho_bar < c_bar, negative weights).
  """
  with _checks.one_callback():
    return _dice_loss(
        online_q, online_v, target_q, actions, rewards, discounts,
        behaviour_prob, tau, sequence_mask, gamma, intrinsic_rewards, beta,
        importance_weights, q_weight, v_weight, pi_weight, lambda_, c_bar,
        rho_bar, eps, entropy_weight)


def _dice_loss(online_q, online_v, target_q, actions, rewards, discounts,
               behaviour_prob, tau, sequence_mask, gamma, intrinsic_rewards,
               beta, importance_weights, q_weight, v_weight, pi_weight,
               lambda_, c_bar, rho_bar, eps, entropy_weight):
  """`dice_loss`, its traced value checks gathered by the caller."""
  where = "dice.dice_loss"
  _checks.check_rank(online_q, 3, "online_q", where)
  t1, b, a = np.shape(online_q)
  if t1 < 2:
    raise ValueError(f"{where}: sequences need at least 2 steps, got "
                     f"online_q of shape {(t1, b, a)}.")
  _checks.check_shape(target_q, (t1, b, a), "target_q", where)
  _check_time_batch(((online_v, "online_v"), (actions, "actions"),
                     (rewards, "rewards"), (discounts, "discounts"),
                     (behaviour_prob, "behaviour_prob"),
                     (sequence_mask, "sequence_mask")), t1, b, where)
  if intrinsic_rewards is not None:
    _checks.check_shape(intrinsic_rewards, (t1, b), "intrinsic_rewards", where)
  for value, name in ((q_weight, "q_weight"), (v_weight, "v_weight"),
                      (pi_weight, "pi_weight"),
                      (entropy_weight, "entropy_weight")):
    if not _is_traced(value) and not (np.isfinite(value) and value >= 0):
      raise ValueError(f"{where}: `{name}` must be a finite number >= 0, got "
                       f"{value}.")
  if np.ndim(lambda_) != 0:
    raise ValueError(f"{where}: `lambda_` must be a scalar, got shape "
                     f"{np.shape(lambda_)}.")
  _check_lambda(lambda_, t1 - 1, b, where)  # A scalar in [0, 1].
  tau = jnp.asarray(tau)
  if tau.shape not in ((b,), (t1, b)):
    raise ValueError(f"{where}: `tau` must have shape [{b}] (one per "
                     f"sequence) or [{t1}, {b}] (per step), got "
                     f"{tuple(tau.shape)}.")
  online_q, online_v, target_q, rewards, discounts, behaviour_prob = map(
      jnp.asarray, (online_q, online_v, target_q, rewards, discounts,
                    behaviour_prob))
  for x, name in ((online_v, "online_v"), (rewards, "rewards"),
                  (discounts, "discounts"),
                  (behaviour_prob, "behaviour_prob")):
    _checks.check_floating(x, name, where)
  _checks.check_finite(_lanes_first(behaviour_prob), "behaviour_prob", where)
  _checks.check_closed_range(_lanes_first(behaviour_prob), 0., 1.,
                             "behaviour_prob", where)
  tau_steps = jnp.broadcast_to(tau, (t1, b)) if tau.ndim == 1 else tau
  _check_tau(tau_steps.T, (b, t1), online_q.dtype, where)
  tau_steps = tau_steps.astype(online_q.dtype)

  gamma = jnp.asarray(gamma, online_q.dtype)
  if gamma.shape not in ((), (b,)):
    raise ValueError(f"{where}: `gamma` must be a scalar or shaped [{b}], "
                     f"got {tuple(gamma.shape)}.")
  lanes_gamma = jnp.broadcast_to(gamma, (b,))
  _checks.check_finite(lanes_gamma, "gamma", where)
  _checks.check_closed_range(lanes_gamma, 0., 1., "gamma", where)
  r = rewards[1:]
  if intrinsic_rewards is not None:
    intrinsic_rewards = jnp.asarray(intrinsic_rewards)
    _checks.check_floating(intrinsic_rewards, "intrinsic_rewards", where)
    _checks.check_finite(_lanes_first(intrinsic_rewards), "intrinsic_rewards",
                         where)
    beta = jnp.asarray(beta, online_q.dtype)
    if beta.shape not in ((), (b,)):
      raise ValueError(f"{where}: `beta` must be a scalar or shaped [{b}], "
                       f"got {tuple(beta.shape)}.")
    r = r + beta * intrinsic_rewards[1:]
  if importance_weights is None:
    weights = jnp.ones((b,), online_q.dtype)
  else:
    _checks.check_shape(importance_weights, (b,), "importance_weights", where)
    weights = jnp.asarray(importance_weights)
    _checks.check_floating(weights, "importance_weights", where)
    _checks.check_finite(weights, "importance_weights", where)
    _checks.check_closed_range(weights, 0., np.inf, "importance_weights",
                               where)

  valid = retrace.valid_mask(sequence_mask).astype(online_q.dtype)  # [T, B]
  # The trace at x_{t+1} is cut where x_{t+1} is the last real step.
  trace_cut = jnp.concatenate([valid[1:], valid[-1:]], axis=0)
  discount_t = lanes_gamma[None] * discounts[1:]

  # pi_tau at every step, from the online Q and the stored tau.
  log_pi = jax.nn.log_softmax(_scaled_logits(online_q, tau_steps), axis=-1)
  pi = jnp.exp(log_pi)

  td = dice_retrace(online_q[:-1], target_q[1:], actions[:-1], actions[1:],
                    r, discount_t, jax.lax.stop_gradient(pi[1:]),
                    behaviour_prob[1:], lambda_=lambda_ * trace_cut,
                    c_bar=c_bar, eps=eps)

  log_pi_a = jnp.take_along_axis(log_pi[:-1], actions[:-1, ..., None],
                                 axis=-1)[..., 0]
  mu_tm1 = behaviour_prob[:-1]
  # pi / mu in log space: pi_tau may underflow for tiny tau.
  ratio = jnp.exp(log_pi_a - jnp.log(jnp.maximum(mu_tm1, _MU_FLOOR)))
  vtrace = dice_vtrace(online_v[:-1], online_v[1:], r, discount_t,
                       jax.lax.stop_gradient(ratio),
                       lambda_=lambda_ * trace_cut, rho_bar=rho_bar,
                       c_bar=c_bar, eps=eps, mask=valid)
  pg = dice_policy_gradient_loss(online_q[:-1], actions[:-1],
                                 vtrace.pg_advantages, tau_steps[:-1])

  def weighted(per_step):
    return jnp.mean(weights * _lane_mean(per_step, valid))

  q_loss = weighted(0.5 * jnp.square(td))
  v_loss = weighted(0.5 * jnp.square(vtrace.errors))
  pi_loss = weighted(pg)
  # H[pi_tau(. | x_t)] per step, with gradient (the regulariser's term).
  # (log pi is -inf where pi_tau underflows to 0; those terms are 0.)
  entropy = -jnp.sum(
      pi[:-1] * jnp.where(pi[:-1] > 0, log_pi[:-1], 0.), axis=-1)
  loss = q_weight * q_loss + v_weight * v_loss + pi_weight * pi_loss
  if _is_traced(entropy_weight) or entropy_weight != 0:
    loss = loss - entropy_weight * weighted(entropy)

  n_valid = jnp.maximum(valid.sum(), 1.)
  td = jax.lax.stop_gradient(td)
  metrics = {
      "loss": loss,
      "q_loss": q_loss,
      "v_loss": v_loss,
      "pi_loss": pi_loss,
      "entropy": jax.lax.stop_gradient((valid * entropy).sum() / n_valid),
      "tau_mean": (valid * tau_steps[:-1]).sum() / n_valid,
      "td_abs_mean": (valid * jnp.abs(td)).sum() / n_valid,
  }
  return loss, DiceLossExtras(metrics=metrics, td_errors=td,
                              priorities=retrace.priorities(td, valid),
                              valid=valid)
