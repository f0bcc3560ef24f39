"""Agent57's state-action value decomposition (Badia et al., 2020, Sec. 3.1).

Agent57 learns the extrinsic and the intrinsic action values with two
networks, theta^e on r^e and theta^i on r^i, and acts on their combination

  Q(x, a, j) = h( h^{-1}(Q(x, a, j; theta^e)) + beta_j h^{-1}(Q(x, a, j; theta^i)) )

with h the value transform (NGU App. E, eq. 16-17; the identity when the agent
uses none). Both networks are trained by transformed Retrace with the
sequence's gamma_j and ONE target policy, epsilon-greedy on the combined
online Q. Because Retrace in the untransformed space is linear in the rewards
and in h^{-1}(Q), the two targets then combine to the single-stream target on
r^e + beta_j r^i (Agent57 App. B):

  h^{-1}(y^e) + beta_j h^{-1}(y^i) = h^{-1}(y)     (same pi, mu, traces c)

tests/losses/test_split_values.py checks this identity, and that it fails
when each stream follows its own greedy policy.
"""

from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
import rlax

from ngu_jax import _checks

Array = jax.Array


def _identity_pair() -> rlax.TxPair:
  return rlax.TxPair(lambda x: x, lambda x: x)


def _beta_per_row(beta, q: Array, where: str) -> Array:
  beta = jnp.asarray(beta)
  _checks.check_floating(beta, "beta", where)
  if beta.ndim and beta.shape != q.shape[:-1]:
    raise ValueError(f"{where}: `beta` must be a scalar or shaped like q's "
                     f"leading axes {tuple(q.shape[:-1])}, got "
                     f"{tuple(beta.shape)}.")
  return beta[..., None] if beta.ndim else beta


def combine_q(q_extrinsic: Array, q_intrinsic: Array, beta: Union[float, Array],
              tx_pair: Optional[rlax.TxPair] = None) -> Array:
  """Q = h(h^{-1}(Q_e) + beta h^{-1}(Q_i)) (Agent57 Sec. 3.1, eq. 3).

  Args:
    q_extrinsic: Q(x, ., j; theta^e), shaped [..., A].
    q_intrinsic: Q(x, ., j; theta^i), shaped like `q_extrinsic`.
    beta: beta_j, a scalar or shaped [...] (one per row, e.g. per lane).
    tx_pair: (h, h^{-1}), e.g. `retrace.signed_hyperbolic_pair(eps)`; None
      for the identity (then Q = Q_e + beta Q_i).

  Returns:
    The combined action values, shaped [..., A].
  """
  where = "split_values.combine_q"
  q_extrinsic, q_intrinsic = jnp.asarray(q_extrinsic), jnp.asarray(q_intrinsic)
  if q_extrinsic.ndim < 1:
    raise ValueError(f"{where}: `q_extrinsic` must have an action axis, got "
                     f"shape {q_extrinsic.shape}.")
  _checks.check_shape(q_intrinsic, q_extrinsic.shape, "q_intrinsic", where)
  _checks.check_floating(q_extrinsic, "q_extrinsic", where)
  _checks.check_floating(q_intrinsic, "q_intrinsic", where)
  beta = _beta_per_row(beta, q_extrinsic, where)
  tx = tx_pair or _identity_pair()
  return tx.apply(tx.apply_inv(q_extrinsic) + beta * tx.apply_inv(q_intrinsic))


def combined_td_error(td_extrinsic: Array, td_intrinsic: Array,
                      beta: Union[float, Array]) -> Array:
  """delta_e + beta_j delta_i, the TD error that sets replay priorities.

  docs/design.md#agent57-as-built: Agent57 does not say which TD error its priorities
  use; we take the combined one, so that a sequence is replayed for what the
  acting policy's value got wrong.

  Args:
    td_extrinsic: the extrinsic stream's TD errors, shaped [T, B].
    td_intrinsic: the intrinsic stream's, shaped [T, B].
    beta: beta_j per lane, a scalar or shaped [B].

  Returns:
    Shaped [T, B].
  """
  where = "split_values.combined_td_error"
  _checks.check_rank(td_extrinsic, 2, "td_extrinsic", where)
  _checks.check_shape(td_intrinsic, np.shape(td_extrinsic), "td_intrinsic",
                      where)
  beta = jnp.asarray(beta)
  if beta.ndim:
    _checks.check_shape(beta, (np.shape(td_extrinsic)[1],), "beta", where)
  return jnp.asarray(td_extrinsic) + beta * jnp.asarray(td_intrinsic)
