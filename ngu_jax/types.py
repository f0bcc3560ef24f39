"""Shared types of ngu_jax: the replayed sequence and observation encodings.

`SequenceBatch` is the replayed sequence the NGU learner trains on;
`ObservationEncoding` is what an environment declares its observations to
be (pixels, symbolic codes, binary grids, real features), so that the
networks encode them accordingly instead of guessing from the dtype
(docs/design.md#observation-encodings).

Alignment (dm_env convention, docs/design.md#alignment): the reward and discount
that arrive *with* observation x_s are stored at index s, so the transition
(x_s, a_s) -> x_{s+1} is credited `extrinsic_reward[s + 1]` +
beta_j `intrinsic_reward[s + 1]` and discounted by gamma_j `discount[s + 1]`.
"""

import dataclasses
import operator
from typing import Any, NamedTuple, Sequence, Tuple

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
  previous action: its one-hot input is all zeros, docs/design.md#alignment);
  `prev_action[0]` is the action taken
  before the sequence starts (the last action of the previous, overlapping
  sequence), which the sequence itself does not contain.

  Attributes:
    observation: x_s, shaped [T + 1, B, *observation_shape], in the
      environment's own dtype (uint8 pixels, integer codes, bool or float
      grids, float features; see `ObservationEncoding`).
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
    tau: with DiCE's Boltzmann behaviour policy, the temperature each
      sequence was acted with, float > 0, [B] (the learner's target policy
      pi_tau); None otherwise.
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
  tau: Any = None


ENCODING_KINDS = ("pixels", "symbolic", "binary", "features")


@dataclasses.dataclass(frozen=True)
class ObservationEncoding:
  """What an environment's observations are, and how networks encode them.

  Declared by every environment (`ngu_jax.envs.BatchedEnv.
  observation_encoding()`) and carried to the networks
  (`ngu_jax.networks.make_torso(..., encoding=...)`): a torso encodes a batch
  [B, *observation_shape] before its first layer
  (`ngu_jax.networks.encode_observation`), and picks its kind from the
  ENCODED shape (`encoded_shape`). Kinds:

  * "pixels": images (Atari frames, Disco Maze renders). uint8 is scaled by
    1/255 to float32, floating point is used as it is; other dtypes are
    rejected. The shape is unchanged (vectors [D] or images [H, W, C]). The
    NGU paper's networks (App. H) see pixels only; this is the default.
  * "symbolic": integer codes, one per channel (MiniGrid's object / colour /
    state triples). `num_values[c]` is the number of codes of channel c
    (codes in [0, num_values[c])); each channel is one-hot encoded and the
    one-hots are concatenated: [..., C] -> [..., sum(num_values)] float32.
    The last axis is the channel axis; a scalar [] or a grid [H, W] is one
    channel (a channel axis is added first). Codes out of range are
    rejected (eagerly, or at run time under jit; see `ngu_jax._checks`).
  * "binary": 0/1 grids or vectors (DeepSea, MinAtar, bool arrays), cast to
    float32 as they are. Encoded like "features"; the 0/1 promise is checked
    by the environment conformance tests (tests/envs/conformance.py), not at
    run time.
  * "features": real-valued features (CartPole's state, whitened
    observations), cast to float32 as they are; bool and integer input are
    cast too.

  For "symbolic", "binary" and "features", a grid [H, W] gets a trailing
  channel axis ([H, W, 1], then a conv torso) and a scalar [] becomes [1].

  Attributes:
    kind: one of `ENCODING_KINDS`.
    num_values: for "symbolic", the number of codes of every channel (all
      >= 1); empty for the other kinds.

  Raises:
    ValueError: unknown kind, "symbolic" without `num_values` or with a
      count < 1, or `num_values` given for another kind.
  """
  kind: str = "pixels"
  num_values: Tuple[int, ...] = ()

  def __post_init__(self):
    where = "ObservationEncoding"
    if self.kind not in ENCODING_KINDS:
      raise ValueError(f"{where}: unknown kind {self.kind!r}; expected one "
                       f"of {ENCODING_KINDS}.")
    try:
      values = tuple(operator.index(n) for n in self.num_values)
      ok = not any(isinstance(n, bool) for n in self.num_values)
    except TypeError:
      ok = False
    if not ok:
      raise ValueError(f"{where}: `num_values` must be a sequence of ints, "
                       f"got {self.num_values!r}.")
    object.__setattr__(self, "num_values", values)
    if self.kind == "symbolic":
      if not values or min(values) < 1:
        raise ValueError(
            f"{where}: kind 'symbolic' needs `num_values`, the number of "
            f"codes of every channel (each >= 1), got {values!r}.")
    elif values:
      raise ValueError(f"{where}: `num_values` is only for kind 'symbolic', "
                       f"got {values!r} with kind {self.kind!r}.")

  def encoded_shape(self, observation_shape: Sequence[int]
                    ) -> Tuple[int, ...]:
    """The shape of ONE encoded observation (what the torso sees).

    Args:
      observation_shape: shape of ONE raw observation, e.g. (7, 7, 3).

    Returns:
      "pixels": the shape unchanged. Otherwise rank 0 -> (1,) and
      [H, W] -> [H, W, 1] first; then for "symbolic" the channel axis
      becomes sum(num_values), e.g. (7, 7, 3) -> (7, 7, 20) for
      num_values (11, 6, 3).

    Raises:
      ValueError: for "symbolic", when the observation does not have one
        channel per `num_values` entry.
    """
    shape = tuple(int(s) for s in observation_shape)
    if self.kind == "pixels":
      return shape
    if len(shape) in (0, 2):
      shape = shape + (1,)
    if self.kind != "symbolic":
      return shape
    if shape[-1] != len(self.num_values):
      raise ValueError(
          f"ObservationEncoding.encoded_shape: kind 'symbolic' needs one "
          f"`num_values` entry per channel (last axis): observation shape "
          f"{tuple(observation_shape)} has {shape[-1]} channel(s), "
          f"num_values {self.num_values} has {len(self.num_values)}.")
    return shape[:-1] + (sum(self.num_values),)


PIXELS = ObservationEncoding("pixels")
BINARY = ObservationEncoding("binary")
FEATURES = ObservationEncoding("features")


def symbolic(num_values: Sequence[int]) -> ObservationEncoding:
  """`ObservationEncoding("symbolic", num_values)`, e.g. MiniGrid (11, 6, 3)."""
  return ObservationEncoding("symbolic", tuple(num_values))
