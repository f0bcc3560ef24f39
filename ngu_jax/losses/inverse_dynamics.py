"""Inverse-dynamics (action prediction) loss for the NGU embedding network.

Badia et al. (2020), "Never Give Up", Sec. 2 "Embedding network": f and h are
trained by maximum likelihood of the taken action a_t under
p(a | x_t, x_{t+1}) = softmax(h(f(x_t), f(x_{t+1}))); App. A (learner,
bullet 3): only the last 5 steps of each replayed sequence are used; App. F
Table 6: "Action prediction network L2 weight 1e-5".
"""

from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp

from ngu_jax import _checks


def l2_penalty(params: Any) -> jax.Array:
  """Sum of squared entries over every leaf of a parameter pytree.

  Args:
    params: any pytree of arrays (e.g. Haiku params); None gives 0.

  Returns:
    A float32 scalar: sum over leaves of sum(leaf ** 2) (no factor 1/2).
  """
  leaves = jax.tree_util.tree_leaves(params)
  total = jnp.zeros((), jnp.float32)
  for leaf in leaves:
    total = total + jnp.sum(jnp.square(leaf.astype(jnp.float32)))
  return total


def inverse_dynamics_loss(
    logits: jax.Array,
    actions: jax.Array,
    params: Optional[Any] = None,
    l2_weight: float = 1e-5,
    mask: Optional[jax.Array] = None,
) -> Tuple[jax.Array, Dict[str, jax.Array]]:
  """Mean negative log-likelihood of the taken actions plus an L2 penalty.

  NGU Sec. 2 (maximum likelihood of a_t given x_t, x_{t+1}) and Table 6
  (L2 weight 1e-5):

    loss = mean_b[-log softmax(logits_b)[a_b]] + l2_weight * sum(θ²),

  the sum running over every leaf of `params` (f and h: weights and biases).

  NOTE: the batch axis is any flattening of examples, e.g. the last 5 steps
  of B replayed sequences reshaped from [5, B] to [5 * B] (App. A).

  Args:
    logits: action logits h(f(x_t), f(x_{t+1})), shaped [B, A].
    actions: the actions a_t taken between x_t and x_{t+1}, integers shaped
      [B] with values in [0, A).
    params: parameters to regularise (a pytree), or None for no L2 term.
    l2_weight: weight of the L2 term (Table 6: 1e-5).
    mask: optional bool [B]: only these examples count (the NLL and the
      accuracy are their means; 0 if none), e.g. a rollout's transitions
      whose action the environment ignored (an auto-reset step) left out.

  Returns:
    (loss, metrics): the scalar loss and a dict of scalars "nll" (the mean
    NLL), "l2_penalty" (the weighted L2 term) and "accuracy" (fraction of
    examples whose argmax logit is the taken action).

  Raises:
    ValueError: on wrong ranks / batch sizes, non-integer actions, actions
      outside [0, A), NaN/inf logits, or a negative `l2_weight`. Value
      checks raise at run time under jit (see `ngu_jax._checks`).
  """
  where = "losses.inverse_dynamics_loss"
  _checks.check_rank(logits, 2, "logits", where)
  _checks.check_floating(logits, "logits", where)
  batch_size, num_actions = logits.shape
  _checks.check_shape(actions, (batch_size,), "actions", where)
  if not jnp.issubdtype(actions.dtype, jnp.integer):
    raise ValueError(f"{where}: `actions` must be integers, got dtype "
                     f"{actions.dtype}.")
  if isinstance(l2_weight, (int, float)) and l2_weight < 0:
    raise ValueError(f"{where}: `l2_weight` must be >= 0, got {l2_weight}.")
  if mask is not None:
    _checks.check_shape(mask, (batch_size,), "mask", where)
    if jnp.asarray(mask).dtype != jnp.bool_:
      raise ValueError(f"{where}: `mask` must be bool, got dtype "
                       f"{jnp.asarray(mask).dtype}.")
  _checks.check_in_range(actions, 0, num_actions, "actions", where)
  _checks.check_finite(logits, "logits", where)

  weights = (jnp.ones((batch_size,), jnp.float32) if mask is None
             else jnp.asarray(mask, jnp.float32))
  count = jnp.maximum(jnp.sum(weights), 1.)
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  taken = jnp.take_along_axis(log_probs, actions[:, None], axis=-1)[:, 0]
  nll = -jnp.sum(weights * taken) / count
  penalty = (l2_weight * l2_penalty(params) if params is not None
             else jnp.zeros((), jnp.float32))
  accuracy = jnp.sum(weights * (jnp.argmax(logits, axis=-1) == actions
                                ).astype(jnp.float32)) / count
  loss = nll + penalty
  return loss, {"nll": nll, "l2_penalty": penalty, "accuracy": accuracy}
