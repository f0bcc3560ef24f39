"""Transformed Retrace loss, NGU learner helpers and R2D2 priorities.

Implements the learner-side value loss of NGU (Badia et al., 2020), App. E,
eq. (14)-(15): Retrace (Munos et al., 2016) computed in the untransformed
space of a squashed action-value function, with the signed-hyperbolic pair

  h(z)      = sign(z) (sqrt(|z| + 1) - 1) + eps z                (eq. 16)
  h^{-1}(z) = sign(z) (((sqrt(1 + 4 eps (|z| + 1 + eps)) - 1) / (2 eps))^2 - 1)

(eq. 17; `rlax.signed_hyperbolic` / `rlax.signed_parabolic`). The recursion
itself is `rlax.transformed_retrace`, vmapped over the batch axis.

Alignment (one lane, dm_env; docs/design.md#alignment). A replayed
sequence holds T + 1 steps s = 0..T: observation x_s, action a_s taken at x_s,
the reward and discount that arrived *with* x_s (so `reward[s + 1]` belongs to
the transition s -> s + 1, i.e. r^e_{s+1} + beta_j r^i_{s+1}) and the actor's
mu[s] = mu(a_s | x_s). Index t of every `transformed_retrace` argument is the
transition t -> t + 1, t = 0..T-1:

  q_tm1[t]      = Q(x_t, .; theta)            online net     = online_q[:-1]
  a_tm1[t]      = a_t                                        = actions[:-1]
  q_t[t]        = Q(x_{t+1}, .; theta^-)      target net     = target_q[1:]
  a_t[t]        = a_{t+1}                                    = actions[1:]
  r_t[t]        = paper's r_t = r(x_t, a_t)                  = reward[1:]
  discount_t[t] = gamma_j * env discount arriving with x_{t+1}
                  (0 if x_{t+1} is terminal)                = gamma_j * disc[1:]
  pi_t[t]       = pi(. | x_{t+1}), eps-greedy w.r.t. online_q[1:]
  mu_t[t]       = mu(a_{t+1} | x_{t+1})                      = mu[1:]

In the paper's notation the target for (x_t, a_t) is eq. (14) truncated at the
end of the sequence,

  y_t = h( h^{-1}(Q^-(x_t, a_t))
           + sum_{s=t}^{T-1} (prod_{i=t}^{s-1} discount_t[i] c_{i+1})
                             delta^h_s ),
  delta^h_s = r_t[s] + discount_t[s] sum_a pi_t[s, a] h^{-1}(q_t[s, a])
              - h^{-1}(Q^-(x_s, a_s)),                                 (eq. 15)
  c_{s+1} = lambda_ min(1, pi_t[s, a_t[s]] / mu_t[s])                  (eq. 8)

and the returned TD error is y_t - q_tm1[t, a_tm1[t]] (the loss is its square,
eq. 13, in the transformed space). Q^-(x_t, a_t) cancels against the first
term of delta^h_t, which is why no target value for x_0 is needed; the trace of
the last step, c_T, is never used. rlax adds 1e-8 to mu in c (its own `eps`,
unrelated to the transform's `eps` here).

Learner recipe (all [T + 1, B] sequences, j = mixture index [B]):

  valid = valid_mask(seq_mask)                                       # [T, B]
  r = mixture_rewards(r_ext[1:], r_int[1:], j, betas)                # [T, B]
  discount = mixture_discounts(j, gammas)[None] * env_discount[1:]   # [T, B]
  pi = epsilon_greedy_probs(online_q[1:], 0.01)                      # [T, B, A]
  td = transformed_retrace(online_q[:-1], target_q[1:], actions[:-1],
                           actions[1:], r, discount, pi, mu[1:], 0.95)
  loss = mean over valid steps of 0.5 * td**2;  p = priorities(td, valid)
"""

import functools
from typing import Tuple, Union

import chex
import jax
import jax.numpy as jnp
import numpy as np
import rlax

from ngu_jax import _checks

_is_traced = _checks.is_traced
_value_check = _checks.check_values
_check_closed_range = _checks.check_closed_range
_check_binary = _checks.check_binary

Array = chex.Array

# Tolerance on sum_a pi(a|x) == 1 (float32 eps-greedy rows are exact to ~1e-7).
_PROBABILITY_SUM_ATOL = 1e-3


def _lanes_first(x: Array) -> Array:
  """[T, B, ...] -> [B, T, ...], so that `_checks` messages name lanes (B)."""
  return jnp.swapaxes(x, 0, 1)


def _check_integer(x: Array, name: str, where: str) -> None:
  if not jnp.issubdtype(x.dtype, jnp.integer):
    raise ValueError(f"{where}: `{name}` must be an integer array of action "
                     f"indices, got dtype {x.dtype}.")


def _skip_value_checks(x) -> bool:
  return _is_traced(x) and not _checks.runtime_checks_enabled()


def _check_scalar_range(value, low: float, high: float, name: str,
                        where: str) -> None:
  """Checks a concrete scalar hyperparameter (traced values are skipped)."""
  if _is_traced(value):
    return
  if not low <= value <= high:  # False for NaN.
    raise ValueError(f"{where}: `{name}` must be in [{low}, {high}], got "
                     f"{value}.")


def _check_lambda(lambda_, t: int, b: int, where: str):
  """Static checks of a Retrace / V-trace lambda_ (trace scale, eq. 8).

  Args:
    lambda_: a scalar in [0, 1] (range-checked when concrete), or an array of
      them shaped [T, B].
    t: T.
    b: B.
    where: the public function, for error messages.

  Returns:
    lambda_ unchanged if a scalar, else as a floating jax array [T, B]. Its
    values are checked by `_check_lambda_values`.
  """
  if np.ndim(lambda_) > 0:
    _checks.check_shape(lambda_, (t, b), "lambda_", where)
    lambda_ = jnp.asarray(lambda_)
    _checks.check_floating(lambda_, "lambda_", where)
    return lambda_
  _check_scalar_range(lambda_, 0., 1., "lambda_", where)
  return lambda_


def _check_lambda_values(lambda_, where: str) -> None:
  """Rejects NaN/inf or entries outside [0, 1] of a [T, B] lambda_.

  A scalar lambda_ was checked by `_check_lambda` already (when concrete).
  """
  if np.ndim(lambda_) > 0:
    _checks.check_finite(_lanes_first(lambda_), "lambda_", where)
    _check_closed_range(_lanes_first(lambda_), 0., 1., "lambda_", where)


def _retrace_floats(q_tm1, q_t, r_t, discount_t, pi_t, mu_t):
  """The floating-point inputs of a Retrace loss, paired with their names."""
  return ((q_tm1, "q_tm1"), (q_t, "q_t"), (r_t, "r_t"),
          (discount_t, "discount_t"), (pi_t, "pi_t"), (mu_t, "mu_t"))


def _check_retrace_inputs(q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t,
                          mu_t, lambda_, where: str) -> tuple:
  """Static checks of a Retrace loss's inputs (the layout of eq. 14-15).

  The checks shared by `transformed_retrace` and `dice.dice_retrace`: ranks,
  matching T / B / A, floating values and integer actions, and lambda_
  (`_check_lambda`). All of them run at trace time; the value checks are
  `_check_retrace_values`, which a caller runs after its own hyperparameter
  checks.

  Args:
    q_tm1, q_t, pi_t: floating, shaped [T, B, A] (as `transformed_retrace`).
    a_tm1, a_t: integer actions, shaped [T, B].
    r_t, discount_t, mu_t: floating, shaped [T, B].
    lambda_: a scalar, or shaped [T, B].
    where: the public function, for error messages.

  Returns:
    (q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_) as jax
    arrays (a scalar lambda_ unchanged).

  Raises:
    ValueError: on wrong ranks, mismatched T/B/A, non-float values,
      non-integer actions, or a concrete scalar lambda_ outside [0, 1].
  """
  for x, name in ((q_tm1, "q_tm1"), (q_t, "q_t"), (pi_t, "pi_t")):
    _checks.check_rank(x, 3, name, where)
  for x, name in ((a_tm1, "a_tm1"), (a_t, "a_t"), (r_t, "r_t"),
                  (discount_t, "discount_t"), (mu_t, "mu_t")):
    _checks.check_rank(x, 2, name, where)
  t, b, a = np.shape(q_tm1)
  for x, name in ((q_t, "q_t"), (pi_t, "pi_t")):
    _checks.check_shape(x, (t, b, a), name, where)
  for x, name in ((a_tm1, "a_tm1"), (a_t, "a_t"), (r_t, "r_t"),
                  (discount_t, "discount_t"), (mu_t, "mu_t")):
    _checks.check_shape(x, (t, b), name, where)
  q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t = map(
      jnp.asarray, (q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t))
  for x, name in _retrace_floats(q_tm1, q_t, r_t, discount_t, pi_t, mu_t):
    _checks.check_floating(x, name, where)
  _check_integer(a_tm1, "a_tm1", where)
  _check_integer(a_t, "a_t", where)
  lambda_ = _check_lambda(lambda_, t, b, where)
  return q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_


def _check_retrace_values(q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t,
                          mu_t, lambda_, where: str) -> None:
  """Value checks of a Retrace loss's inputs (eq. 14-15; run time).

  NaN/inf in any float input, actions outside [0, A), discount_t / pi_t /
  mu_t outside [0, 1], rows of pi_t not summing to 1 (within
  `_PROBABILITY_SUM_ATOL`), and an array lambda_ (`_check_lambda_values`).
  Eager on concrete arrays, a host callback when traced (see `_checks`);
  messages name the lanes (B).

  Args:
    q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_: as
      `_check_retrace_inputs` returns them (shapes [T, B, A] and [T, B]).
    where: the public function, for error messages.

  Raises:
    ValueError: eagerly, or from the jitted function when its result is
      used.
  """
  num_actions = np.shape(q_tm1)[-1]
  for x, name in _retrace_floats(q_tm1, q_t, r_t, discount_t, pi_t, mu_t):
    _checks.check_finite(_lanes_first(x), name, where)
  _checks.check_in_range(_lanes_first(a_tm1), 0, num_actions, "a_tm1", where)
  _checks.check_in_range(_lanes_first(a_t), 0, num_actions, "a_t", where)
  _check_closed_range(_lanes_first(discount_t), 0., 1., "discount_t", where)
  _check_closed_range(_lanes_first(pi_t), 0., 1., "pi_t", where)
  _check_closed_range(_lanes_first(mu_t), 0., 1., "mu_t", where)
  if not _skip_value_checks(pi_t):
    _value_check(
        _lanes_first(jnp.abs(pi_t.sum(-1) - 1.) > _PROBABILITY_SUM_ATOL),
        "has rows (over actions) that do not sum to 1", "pi_t", where)
  _check_lambda_values(lambda_, where)


def signed_hyperbolic_pair(eps: float = 1e-3) -> rlax.TxPair:
  """The NGU value transform pair (h, h^{-1}) of App. E, eq. (16)-(17).

  Args:
    eps: the transform's epsilon (Table 6: 1e-3; App. E prints 1e-2).

  Returns:
    `rlax.TxPair(apply=h, apply_inv=h^{-1})`.
  """
  return rlax.TxPair(
      functools.partial(rlax.signed_hyperbolic, eps=eps),
      functools.partial(rlax.signed_parabolic, eps=eps))


def transformed_retrace(
    q_tm1: Array,
    q_t: Array,
    a_tm1: Array,
    a_t: Array,
    r_t: Array,
    discount_t: Array,
    pi_t: Array,
    mu_t: Array,
    lambda_: Union[float, Array],
    eps: float = 1e-3,
    stop_target_gradients: bool = True,
) -> Array:
  """Batched transformed Retrace TD errors (NGU App. E, eq. 14-15).

  `rlax.transformed_retrace` with the signed-hyperbolic pair of parameter
  `eps`, vmapped over the batch axis 1. See the module docstring for what index
  t means for every argument and how the result maps onto eq. (14)-(15).

  Args:
    q_tm1: online Q(x_t, .), shaped [T, B, A].
    q_t: target-network Q(x_{t+1}, .), shaped [T, B, A].
    a_tm1: actions a_t taken at x_t, integer, shaped [T, B].
    a_t: actions a_{t+1} taken at x_{t+1}, integer, shaped [T, B].
    r_t: rewards of the transitions x_t -> x_{t+1}, shaped [T, B].
    discount_t: discounts of those transitions (gamma_j times the environment
      discount at x_{t+1}), in [0, 1], shaped [T, B].
    pi_t: target policy pi(. | x_{t+1}), rows summing to 1, shaped [T, B, A].
    mu_t: behaviour probability mu(a_{t+1} | x_{t+1}) in [0, 1], shaped [T, B].
    lambda_: Retrace lambda in [0, 1] (Table 6: 0.95): a scalar, or shaped
      [T, B] to scale the trace c at x_{t+1} per step (e.g. to cut traces at
      padding; see `valid_mask`).
    eps: epsilon of the transform h (Table 6: 1e-3).
    stop_target_gradients: whether no gradient flows through the targets.

  Returns:
    TD errors y_t - q_tm1[t, a_tm1[t]] in the transformed space, shaped [T, B].

  Raises:
    ValueError: on wrong ranks, mismatched T/B/A, non-float values or
      non-integer actions, NaN/inf, actions outside [0, A), probabilities
      outside [0, 1], rows of pi_t not summing to 1, discounts outside [0, 1],
      lambda_ outside [0, 1] or eps <= 0.

  NOTE: `stop_target_gradients` must be a Python bool; `eps` and a scalar
  `lambda_` are only range-checked when they are concrete.
  """
  where = "transformed_retrace"
  inputs = _check_retrace_inputs(q_tm1, q_t, a_tm1, a_t, r_t, discount_t,
                                 pi_t, mu_t, lambda_, where)
  if not _is_traced(eps) and not (np.isfinite(eps) and eps > 0):
    raise ValueError(f"{where}: `eps` must be a finite number > 0, got {eps}.")
  _check_retrace_values(*inputs, where)
  q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_ = inputs
  lambda_is_array = np.ndim(lambda_) > 0

  tx_pair = signed_hyperbolic_pair(eps)

  def one_lane(q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_):
    return rlax.transformed_retrace(
        q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_,
        stop_target_gradients=stop_target_gradients, tx_pair=tx_pair)

  in_axes = (1,) * 8 + (1 if lambda_is_array else None,)
  return jax.vmap(one_lane, in_axes=in_axes, out_axes=1)(
      q_tm1, q_t, a_tm1, a_t, r_t, discount_t, pi_t, mu_t, lambda_)


def _check_per_row(x: Array, lead: Tuple[int, ...], name: str, rows_of: str,
                   where: str) -> Array:
  """Checks a parameter of one policy row each (epsilon, DiCE's tau).

  Args:
    x: a scalar, or an array broadcastable to `lead`.
    lead: the rows' shape [...]: the values' shape [..., A] without the
      action axis.
    name: the parameter's name, for error messages.
    rows_of: whose rows, for error messages, e.g. "q's".
    where: the public function, for error messages.

  Returns:
    x broadcast to `lead` (shaped [1] when lead is ()), lanes leading, for
    further value checks; it was checked to be free of NaN / inf.

  Raises:
    ValueError: (eagerly, or from the jitted function) on a shape not
      broadcastable to `lead`, or on NaN / inf.
  """
  try:
    ok = jnp.broadcast_shapes(np.shape(x), tuple(lead)) == tuple(lead)
  except ValueError:
    ok = False
  if not ok:
    raise ValueError(f"{where}: `{name}` must be a scalar or broadcastable to "
                     f"{tuple(lead)} ({rows_of} shape without the action "
                     f"axis), got shape {np.shape(x)}.")
  lanes = jnp.broadcast_to(x, lead) if lead else x[None]
  _checks.check_finite(lanes, name, where)
  return lanes


def _check_epsilon(epsilon, q: Array, where: str) -> Array:
  """Validates an exploration epsilon broadcastable to q.shape[:-1]."""
  epsilon = jnp.asarray(epsilon, dtype=q.dtype)
  lanes = _check_per_row(epsilon, np.shape(q)[:-1], "epsilon", "q's", where)
  _check_closed_range(lanes, 0., 1., "epsilon", where)
  return epsilon


def _check_q(q, where: str) -> Array:
  _checks.check_floating(q, "q", where)
  q = jnp.asarray(q)
  if q.ndim < 1:
    raise ValueError(f"{where}: `q` must have an action axis (rank >= 1), got "
                     f"shape {q.shape}.")
  _checks.check_finite(q if q.ndim > 1 else q[None], "q", where)
  return q


def epsilon_greedy_probs(q: Array, epsilon: Union[float, Array] = 0.01
                        ) -> Array:
  """Epsilon-greedy policy probabilities w.r.t. Q (NGU App. E, eq. 12 ff.).

  pi(a|x) = epsilon / A + (1 - epsilon) [a in argmax Q(x, .)] / |argmax|.
  Ties share the greedy mass equally (as `distrax.EpsilonGreedy`, which
  `rlax.epsilon_greedy` wraps); the result has no gradient w.r.t. `q`.

  Args:
    q: action values, shaped [..., A].
    epsilon: in [0, 1]; a scalar or an array broadcastable to [...] (e.g.
      per-lane actor epsilons shaped [B] for q shaped [B, A]).

  Returns:
    Probabilities shaped [..., A]; each row sums to 1.
  """
  where = "epsilon_greedy_probs"
  q = _check_q(q, where)
  return _epsilon_greedy(q, _check_epsilon(epsilon, q, where))


def _epsilon_greedy(q: Array, epsilon: Array) -> Array:
  epsilon = epsilon[..., None]
  greedy = (q == q.max(axis=-1, keepdims=True)).astype(q.dtype)
  greedy = greedy / greedy.sum(axis=-1, keepdims=True)
  return (1. - epsilon) * greedy + epsilon / q.shape[-1]


def behaviour_probability(q: Array, actions: Array,
                          epsilon: Union[float, Array]) -> Array:
  """mu(a|x) of the taken actions under the actor's epsilon-greedy policy.

  The reference for the behaviour probabilities the actor stores (App. E,
  eq. 8); ties as in `epsilon_greedy_probs`.

  Args:
    q: the actor's action values, shaped [..., A].
    actions: taken actions in [0, A), integer, shaped [...].
    epsilon: in [0, 1]; a scalar or broadcastable to [...] (e.g. the per-lane
      epsilons eps_l shaped [B]).

  Returns:
    mu(actions | x), shaped [...].
  """
  where = "behaviour_probability"
  q = _check_q(q, where)
  _checks.check_shape(actions, q.shape[:-1], "actions", where)
  actions = jnp.asarray(actions)
  _check_integer(actions, "actions", where)
  _checks.check_in_range(actions if actions.ndim else actions[None], 0,
                         q.shape[-1], "actions", where)
  probs = _epsilon_greedy(q, _check_epsilon(epsilon, q, where))
  return jnp.take_along_axis(probs, actions[..., None], axis=-1)[..., 0]


def _check_mixture(mixture_index: Array, table: Array, table_name: str,
                   where: str) -> tuple[Array, Array]:
  _checks.check_rank(mixture_index, 1, "mixture_index", where)
  _checks.check_rank(table, 1, table_name, where)
  mixture_index, table = jnp.asarray(mixture_index), jnp.asarray(table)
  _check_integer(mixture_index, "mixture_index", where)
  _checks.check_floating(table, table_name, where)
  _checks.check_in_range(mixture_index, 0, table.shape[0], "mixture_index",
                         where)
  _checks.check_finite(table, table_name, where)
  return mixture_index, table


def mixture_discounts(mixture_index: Array, gammas: Array) -> Array:
  """Per-lane discount gamma_j of each lane's mixture j (NGU Sec. 3, App. A).

  Args:
    mixture_index: mixture j of each lane, integer in [0, N), shaped [B].
    gammas: the N discounts gamma_0..gamma_{N-1}, in [0, 1], shaped [N].

  Returns:
    gamma_j per lane, shaped [B].
  """
  where = "mixture_discounts"
  mixture_index, gammas = _check_mixture(mixture_index, gammas, "gammas",
                                         where)
  _check_closed_range(gammas, 0., 1., "gammas", where)
  return gammas[mixture_index]


def mixture_rewards(r_ext: Array, r_int: Array, mixture_index: Array,
                    betas: Array) -> Array:
  """Augmented reward r^e + beta_j r^i of each lane's mixture j (NGU Sec. 2).

  Args:
    r_ext: extrinsic rewards, shaped [T, B].
    r_int: intrinsic rewards, aligned with `r_ext`, shaped [T, B].
    mixture_index: mixture j of each lane, integer in [0, N), shaped [B].
    betas: the N intrinsic-reward scales beta_0..beta_{N-1}, shaped [N].

  Returns:
    r_ext + beta_j r_int, shaped [T, B].
  """
  where = "mixture_rewards"
  _checks.check_rank(r_ext, 2, "r_ext", where)
  t, b = np.shape(r_ext)
  _checks.check_shape(r_int, (t, b), "r_int", where)
  _checks.check_shape(mixture_index, (b,), "mixture_index", where)
  mixture_index, betas = _check_mixture(mixture_index, betas, "betas", where)
  r_ext, r_int = jnp.asarray(r_ext), jnp.asarray(r_int)
  for x, name in ((r_ext, "r_ext"), (r_int, "r_int")):
    _checks.check_floating(x, name, where)
    _checks.check_finite(_lanes_first(x), name, where)
  return r_ext + betas[mixture_index][None, :] * r_int


def valid_mask(sequence_mask: Array) -> Array:
  """Mask of real transitions in a zero-padded replay sequence.

  Transition t (x_t -> x_{t+1}, index t of `transformed_retrace`) is valid iff
  both x_t and x_{t+1} are real steps. Padded transitions get finite but
  meaningless TD errors: mask them out of the loss and of `priorities`.

  After a terminal step the discount is 0, so padding never reaches a real
  target. After a *truncated* episode (last real step with discount > 0),
  cut the trace at the last real step too:
  `lambda_ = 0.95 * jnp.concatenate([valid[1:], valid[-1:]], axis=0)`
  (lambda_[t] scales the trace at x_{t+1}), so the last real target bootstraps
  on E_pi Q there; this is harmless after a terminal step, so always safe.

  Args:
    sequence_mask: 1 (or True) for real steps, 0 for padding, shaped [T + 1, B].

  Returns:
    The transition mask, shaped [T, B], with the dtype of `sequence_mask`.
  """
  where = "valid_mask"
  _checks.check_rank(sequence_mask, 2, "sequence_mask", where)
  if np.shape(sequence_mask)[0] < 2:
    raise ValueError(f"{where}: `sequence_mask` needs at least 2 steps, got "
                     f"shape {np.shape(sequence_mask)}.")
  m = jnp.asarray(sequence_mask)
  _check_binary(_lanes_first(m), "sequence_mask", where)
  return jnp.logical_and(m[:-1], m[1:]).astype(m.dtype)


def priorities(td_errors: Array, mask: Array, eta: float = 0.9) -> Array:
  """R2D2 sequence priorities p = eta max|delta| + (1 - eta) mean|delta|.

  Kapturowski et al. (2019), Sec. 2.3, as used by NGU App. A (which prints
  "priority exponent eta = 1.0"; docs/design.md#priorities fixes eta = 0.9
  and the sampling exponent 0.9 of Table 6). Max and mean
  run over valid steps only; a fully masked sequence gets priority 0. TD errors
  at masked steps may be anything (even NaN); NaN/inf at valid steps raises.

  Args:
    td_errors: TD errors, shaped [T, B].
    mask: 1 (or True) for valid transitions, 0 otherwise, shaped [T, B].
    eta: mixing weight in [0, 1].

  Returns:
    Priorities, shaped [B].
  """
  where = "priorities"
  _checks.check_rank(td_errors, 2, "td_errors", where)
  _checks.check_shape(mask, np.shape(td_errors), "mask", where)
  _check_scalar_range(eta, 0., 1., "eta", where)
  td_errors, mask = jnp.asarray(td_errors), jnp.asarray(mask)
  _checks.check_floating(td_errors, "td_errors", where)
  _check_binary(_lanes_first(mask), "mask", where)
  valid = mask.astype(bool)
  abs_td = jnp.where(valid, jnp.abs(td_errors), 0.)
  _checks.check_finite(_lanes_first(abs_td), "td_errors", where)
  count = valid.sum(axis=0)
  max_td = abs_td.max(axis=0)
  mean_td = abs_td.sum(axis=0) / jnp.maximum(count, 1).astype(abs_td.dtype)
  return eta * max_td + (1. - eta) * mean_td
