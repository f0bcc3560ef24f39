"""The CASM action-prediction loss (RECODE Sec. 4, Fig. 2).

RECODE (003) Sec. 4: the CASM representation (`ngu_jax.networks.casm`) is
trained by maximum likelihood of the hidden actions, with N = 4 random masks
per trajectory "to help reduce gradient variance". Our reading
(docs/design.md#beyond-ngu): each mask shows a_t (and hides o_t) with
probability 1/2 independently per step, and the loss is the mean, over
every (mask, lane, t) whose action a_t is hidden and whose transition
o_t -> o_{t+1} is valid, of -log p(a_t) (`casm_loss`).
"""

from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp

from ngu_jax import _checks
from ngu_jax.losses.inverse_dynamics import l2_penalty


def sample_action_masks(key: jax.Array, num_masks: int, shape: Tuple[int, int],
                        probability: float = 0.5) -> jax.Array:
  """N random "action shown" masks (RECODE Sec. 4: N = 4 per trajectory).

  At each step exactly one of o_t and a_t is provided: True shows a_t
  (o_t hidden), False shows o_t (a_t hidden, so a_t is a prediction target).

  Args:
    key: PRNG key.
    num_masks: N >= 1.
    shape: (T, B).
    probability: P(a_t shown), independently per (mask, step, lane); ours:
      1/2 (the paper does not give the distribution).

  Returns:
    bool [N, T, B].

  Raises:
    ValueError: num_masks < 1 or probability outside [0, 1].
  """
  where = "losses.casm.sample_action_masks"
  if int(num_masks) < 1:
    raise ValueError(f"{where}: `num_masks` must be >= 1, got {num_masks}.")
  if not 0 <= probability <= 1:
    raise ValueError(f"{where}: `probability` must be in [0, 1], got "
                     f"{probability}.")
  return jax.random.bernoulli(key, probability,
                              (int(num_masks),) + tuple(shape))


def valid_transitions(mask: jax.Array,
                      step_is_first: Optional[jax.Array] = None) -> jax.Array:
  """bool [T - 1, B]: o_t -> o_{t+1} is a real transition of one episode.

  Both steps real (`mask`, as `losses.valid_mask`) and o_{t+1} not the first
  step of a new episode.

  Args:
    mask: 0/1 or bool [T, B] (1: real step, 0: padding).
    step_is_first: bool [T, B] or None (no episode starts inside).
  """
  m = jnp.asarray(mask) > 0
  valid = m[:-1] & m[1:]
  if step_is_first is not None:
    valid &= ~jnp.asarray(step_is_first, bool)[1:]
  return valid


def casm_loss(
    logits: jax.Array,
    actions: jax.Array,
    action_shown: jax.Array,
    valid: jax.Array,
    params: Optional[Any] = None,
    l2_weight: float = 1e-5,
) -> Tuple[jax.Array, Dict[str, jax.Array]]:
  """Masked NLL of the hidden actions plus an L2 penalty (RECODE Sec. 4).

    w[n, t, b] = valid[t, b] * (1 - action_shown[n, t, b]),
    nll = sum(w * -log softmax(logits)[a_t]) / max(sum(w), 1),
    loss = nll + l2_weight * sum(θ²) (over every leaf of `params`, as
    `inverse_dynamics_loss`).

  Args:
    logits: [N, T - 1, B, A] from `CASMNetwork.logits` (entry t: a_t).
    actions: integers [T, B] (or [T - 1, B]) in [0, A): a_t taken at o_t.
    action_shown: bool [N, T, B] (or [N, T - 1, B]): the masks.
    valid: bool/0-1 [T - 1, B] (`valid_transitions`).
    params: parameters to regularise, or None.
    l2_weight: >= 0.

  Returns:
    (loss, metrics): metrics "nll", "l2_penalty", "accuracy" (argmax ==
    a_t over the counted targets; 0 when there are none) and "num_targets"
    (sum of w).

  Raises:
    ValueError: on inconsistent shapes, non-integer or out-of-range actions,
      NaN/inf logits, or a negative `l2_weight` (value checks raise at run
      time under jit, see `ngu_jax._checks`).
  """
  where = "losses.casm_loss"
  _checks.check_rank(logits, 4, "logits", where)
  _checks.check_floating(logits, "logits", where)
  n, t1, b, num_actions = logits.shape
  actions = jnp.asarray(actions)
  action_shown = jnp.asarray(action_shown)
  if actions.shape == (t1 + 1, b):
    actions = actions[:-1]
  _checks.check_shape(actions, (t1, b), "actions", where)
  if not jnp.issubdtype(actions.dtype, jnp.integer):
    raise ValueError(f"{where}: `actions` must be integers, got dtype "
                     f"{actions.dtype}.")
  if action_shown.shape == (n, t1 + 1, b):
    action_shown = action_shown[:, :-1]
  _checks.check_shape(action_shown, (n, t1, b), "action_shown", where)
  _checks.check_shape(valid, (t1, b), "valid", where)
  if isinstance(l2_weight, (int, float)) and l2_weight < 0:
    raise ValueError(f"{where}: `l2_weight` must be >= 0, got {l2_weight}.")
  _checks.check_in_range(actions, 0, num_actions, "actions", where)
  _checks.check_finite(logits, "logits", where)

  w = (jnp.asarray(valid) > 0)[None] & ~action_shown.astype(bool)
  w = w.astype(jnp.float32)  # [N, T - 1, B].
  count = jnp.sum(w)
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  a = jnp.broadcast_to(actions[None], (n, t1, b))
  taken = jnp.take_along_axis(log_probs, a[..., None], axis=-1)[..., 0]
  nll = -jnp.sum(w * taken) / jnp.maximum(count, 1.)
  correct = (jnp.argmax(logits, axis=-1) == a).astype(jnp.float32)
  accuracy = jnp.sum(w * correct) / jnp.maximum(count, 1.)
  penalty = (l2_weight * l2_penalty(params) if params is not None
             else jnp.zeros((), jnp.float32))
  return nll + penalty, {"nll": nll, "l2_penalty": penalty,
                         "accuracy": accuracy, "num_targets": count}
