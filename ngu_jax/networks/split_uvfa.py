"""Agent57's split Q-network: theta^e and theta^i behind one UVFA interface.

Agent57 (Badia et al., 2020, Sec. 3.1, App. B) learns the extrinsic and the
intrinsic action values with two networks of the NGU architecture and acts on

  Q(x, a, j) = h( h^{-1}(Q(x, a, j; theta^e)) + beta_j h^{-1}(Q(x, a, j; theta^i)) ).

`make_split_uvfa_network(base, betas, tx_pair)` returns a `UVFANetwork` that
the actors, loops, replay and checkpoints use exactly as they use one
network:

* params = {"extrinsic": theta^e, "intrinsic": theta^i}, each a parameter
  set of `base`;
* the recurrent state is one `LSTMState` of width 2 lstm_size: the two
  networks' states side by side ([:, :H] extrinsic, [:, H:] intrinsic), so
  that sequences store and restore it like NGU's;
* `apply` / `unroll` return the combined Q above, with beta_j taken from the
  table by each input's mixture index j;
* `unroll_streams` returns Q_e and Q_i, which the learner regresses onto r^e
  and r^i separately (`ngu_jax.agents.ngu.value_loss`).

Both networks see the same inputs (observation, a_{t-1}, r^e_t, r^i_t, j).
"""

from typing import Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import rlax

from ngu_jax.losses import split_values
from ngu_jax.networks import uvfa

STREAMS = ("extrinsic", "intrinsic")


def lead_size(inputs: uvfa.UVFAInputs, rank: int) -> int:
  """The batch size B of [B]- (rank 1) or [T, B]-leading (rank 2) inputs."""
  shape = np.shape(inputs.observation)
  return shape[rank - 1] if len(shape) >= rank else -1


def split_state(state: uvfa.LSTMState, batch: int, size: int, where: str
                ) -> Tuple[uvfa.LSTMState, uvfa.LSTMState]:
  """Two networks' recurrent states kept side by side in one `LSTMState`
  of width 2 `size`: ([:, :size], [:, size:]), each shaped [batch, size]."""
  if not (hasattr(state, "hidden") and hasattr(state, "cell")):
    raise ValueError(f"{where}: `state` must be an LSTMState(hidden, cell), "
                     f"got {type(state).__name__}.")
  for name in ("hidden", "cell"):
    shape = np.shape(getattr(state, name))
    if shape != (batch, 2 * size):
      raise ValueError(f"{where}: `state.{name}` must have shape [{batch}, "
                       f"{2 * size}], got {shape}.")
  return (jax.tree_util.tree_map(lambda x: x[:, :size], state),
          jax.tree_util.tree_map(lambda x: x[:, size:], state))


def join_state(first: uvfa.LSTMState, second: uvfa.LSTMState
               ) -> uvfa.LSTMState:
  """The inverse of `split_state`: the two states side by side."""
  return jax.tree_util.tree_map(
      lambda a, b: jnp.concatenate([a, b], axis=-1), first, second)


def make_split_uvfa_network(base: uvfa.UVFANetwork, betas: Sequence[float],
                            tx_pair: Optional[rlax.TxPair] = None
                            ) -> uvfa.UVFANetwork:
  """Two copies of `base` (theta^e, theta^i) acting on their combination.

  Args:
    base: one UVFA network (`make_uvfa_network`), the architecture of both.
    betas: beta_j of the N mixtures, shaped [N] (`ngu_jax.mixtures.betas`).
    tx_pair: (h, h^{-1}) of the agent's value transform; None for the
      identity (Q = Q_e + beta_j Q_i).

  Returns:
    A `UVFANetwork` with `lstm_size` = 2 base.lstm_size and `unroll_streams`
    set (module docstring).
  """
  where = "networks.make_split_uvfa_network"
  if base.unroll_streams is not None:
    raise ValueError(f"{where}: `base` is split already.")
  betas = np.asarray(betas, np.float32)
  if betas.shape != (base.num_mixtures,) or not np.all(np.isfinite(betas)):
    raise ValueError(f"{where}: `betas` must be {base.num_mixtures} finite "
                     f"numbers (one per mixture), got shape {betas.shape}.")
  size = base.lstm_size

  def combine(q_e: jax.Array, q_i: jax.Array, mixture_index: jax.Array
              ) -> jax.Array:
    beta = jnp.asarray(betas)[jnp.asarray(mixture_index)]
    return split_values.combine_q(q_e, q_i, beta, tx_pair)

  def init(key: jax.Array) -> hk.Params:
    key_e, key_i = jax.random.split(key)
    return {"extrinsic": base.init(key_e), "intrinsic": base.init(key_i)}

  def initial_state(batch_size: int) -> uvfa.LSTMState:
    state = base.initial_state(batch_size)
    return join_state(state, state)

  def apply_with_value(params, inputs, state):
    state_e, state_i = split_state(state, lead_size(inputs, 1), size,
                                   "networks.split_uvfa.apply")
    q_e, v_e, new_e = base.apply_with_value(params["extrinsic"], inputs,
                                            state_e)
    q_i, v_i, new_i = base.apply_with_value(params["intrinsic"], inputs,
                                            state_i)
    q = combine(q_e, q_i, inputs.mixture_index)
    value = combine(v_e[..., None], v_i[..., None], inputs.mixture_index)
    return q, value[..., 0], join_state(new_e, new_i)

  def apply(params, inputs, state):
    q, _, new_state = apply_with_value(params, inputs, state)
    return q, new_state

  def unroll_streams(params, inputs, state, step_is_first):
    state_e, state_i = split_state(state, lead_size(inputs, 2), size,
                                   "networks.split_uvfa.unroll")
    q_e, final_e = base.unroll(params["extrinsic"], inputs, state_e,
                               step_is_first)
    q_i, final_i = base.unroll(params["intrinsic"], inputs, state_i,
                               step_is_first)
    return q_e, q_i, join_state(final_e, final_i)

  def unroll(params, inputs, state, step_is_first):
    q_e, q_i, final_state = unroll_streams(params, inputs, state,
                                           step_is_first)
    return combine(q_e, q_i, inputs.mixture_index), final_state

  return base._replace(init=init, apply=apply,
                       apply_with_value=apply_with_value, unroll=unroll,
                       initial_state=initial_state, lstm_size=2 * size,
                       unroll_streams=unroll_streams,
                       unroll_with_value=None)  # No single V here.
