"""Random Network Distillation prediction error and loss.

Badia et al. (2020), "Never Give Up", Sec. 2 "Integrating life-long
curiosity" (after Burda et al., 2018): the predictor ĝ is trained to match
the fixed random target g by minimising

  err(x) = ||ĝ(x; θ) - g(x)||²

with respect to θ; the same err(x) drives the life-long novelty modulator
α_t (see `ngu_jax.intrinsic`). App. A (learner): the predictor is trained on
the last 5 steps of each replayed sequence.

The networks g and ĝ are `ngu_jax.networks.rnd`; this module holds only the
loss on their outputs. Modules are named by topic inside packages named by
kind, as `losses.inverse_dynamics` is the loss of the inverse-dynamics head
in `networks.embedding`: `ngu_jax.losses.rnd` and `ngu_jax.networks.rnd`.
"""

from typing import Tuple

import jax
import jax.numpy as jnp

from ngu_jax import _checks


def _check(predicted: jax.Array, target: jax.Array, where: str) -> None:
  _checks.check_rank(predicted, 2, "predicted", where)
  _checks.check_floating(predicted, "predicted", where)
  _checks.check_shape(target, predicted.shape, "target", where)
  _checks.check_floating(target, "target", where)
  _checks.check_finite(predicted, "predicted", where)
  _checks.check_finite(target, "target", where)


def _squared_error(predicted: jax.Array, target: jax.Array) -> jax.Array:
  diff = predicted - jax.lax.stop_gradient(target)
  return jnp.sum(jnp.square(diff), axis=-1)


def rnd_error(predicted: jax.Array, target: jax.Array) -> jax.Array:
  """Per-example RND error err(x) = ||ĝ(x) - g(x)||² (NGU Sec. 2).

  The target is wrapped in `jax.lax.stop_gradient`: g is never trained.

  Args:
    predicted: predictor outputs ĝ(x), shaped [B, K].
    target: target outputs g(x), shaped [B, K].

  Returns:
    Squared L2 norms shaped [B] (a sum over K, not a mean).

  Raises:
    ValueError: on wrong ranks / mismatched shapes, non-float inputs, or
      NaN/inf values (at run time under jit, see `ngu_jax._checks`).
  """
  _check(predicted, target, "losses.rnd_error")
  return _squared_error(predicted, target)


def rnd_loss(predicted: jax.Array,
             target: jax.Array) -> Tuple[jax.Array, jax.Array]:
  """RND predictor loss: the batch mean of err(x) (NGU Sec. 2).

  Its gradient with respect to `predicted` is 2 (ĝ - g) / B; with respect to
  `target` it is 0.

  Args:
    predicted: predictor outputs ĝ(x), shaped [B, K].
    target: target outputs g(x), shaped [B, K].

  Returns:
    (loss, error): the scalar mean over the batch of `rnd_error`, and the
    per-example error shaped [B] (e.g. for logging or the modulator).
  """
  _check(predicted, target, "losses.rnd_loss")
  error = _squared_error(predicted, target)
  return jnp.mean(error), error
