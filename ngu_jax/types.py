"""Shared pytrees of ngu_jax: the replayed sequence the NGU learner trains on.

Alignment (shared/DESIGN.md, dm_env convention): the reward and discount
that arrive *with* observation x_s are stored at index s, so the transition
(x_s, a_s) -> x_{s+1} is credited `extrinsic_reward[s + 1]` +
beta_j `intrinsic_reward[s + 1]` and discounted by gamma_j `discount[s + 1]`.
"""

from typing import Any, NamedTuple

import jax


class SequenceBatch(NamedTuple):
  """A batch of B replayed sequences of T + 1 steps, time-major.

  Stored vs derived: every field is stored by the actor / adder; nothing is
  derived by the learner. In particular the network's extra inputs are stored
  per step exactly as the actor fed them to the Q-network (NGU Sec. 3), so
  actor and learner see the same inputs:

    prev_action[s]           = action[s - 1]            (a_{s-1})
    prev_extrinsic_reward[s] = extrinsic_reward[s]      (r^e_s, with x_s)
    prev_intrinsic_reward[s] = intrinsic_reward[s]      (r^i_s, novelty of x_s)

  where `step_is_first[s]` the rewards are 0 and `prev_action` is -1 (no
  previous action: its one-hot input is all zeros, DESIGN.md "Conventions");
  `prev_action[0]` is the action taken
  before the sequence starts (the last action of the previous, overlapping
  sequence), which the sequence itself does not contain.

  Attributes:
    observation: x_s, shaped [T + 1, B, *observation_shape], uint8 or float.
    action: a_s taken at x_s, integer in [0, A), shaped [T + 1, B].
    extrinsic_reward: r^e_s arriving with x_s, float, shaped [T + 1, B].
    intrinsic_reward: r^i_s, the intrinsic reward of x_s (credited, with
      `extrinsic_reward[s]`, to the transition into x_s), float, [T + 1, B].
    discount: environment discount arriving with x_s (0 if x_s is terminal,
      1 otherwise), in [0, 1], shaped [T + 1, B].
    step_is_first: True where x_s begins an episode, bool, shaped [T + 1, B].
    behaviour_prob: mu(a_s | x_s) of the acting policy, in [0, 1],
      shaped [T + 1, B].
    mask: 1 (True) for real steps, 0 for zero-padding at the tail of a
      sequence cut by the end of an episode, shaped [T + 1, B].
    prev_action: network input a_{s-1}, integer in [-1, A) (-1 at episode
      starts), [T + 1, B].
    prev_extrinsic_reward: network input r^e_s, float, [T + 1, B].
    prev_intrinsic_reward: network input r^i_s, float, [T + 1, B].
    mixture_index: mixture j of each sequence, integer in [0, N), [B].
    initial_state: the actor's recurrent state before x_0 (an
      `ngu_jax.networks.LSTMState` of arrays shaped [B, lstm_size]).
    importance_weights: prioritised-replay importance-sampling weights,
      float >= 0, shaped [B].
  """
  observation: jax.Array
  action: jax.Array
  extrinsic_reward: jax.Array
  intrinsic_reward: jax.Array
  discount: jax.Array
  step_is_first: jax.Array
  behaviour_prob: jax.Array
  mask: jax.Array
  prev_action: jax.Array
  prev_extrinsic_reward: jax.Array
  prev_intrinsic_reward: jax.Array
  mixture_index: jax.Array
  initial_state: Any
  importance_weights: jax.Array
