"""The NGU Q-network: a recurrent dueling UVFA (R2D2 with extra inputs).

Badia et al. (2020), "Never Give Up", Sec. 3 ("Proposed architecture") and
App. H.3 (Fig. 17), built on R2D2 (Kapturowski et al., 2019) and the dueling
architecture (Wang et al., 2016). One network approximates the N action-value
functions Q(x, a, beta_j):

  torso(x_t)                                   [B, F]
  concat with the extras                       [B, F + A + 2 + N]
      one-hot(a_{t-1}) [A], r^e_t [1], r^i_t [1], one-hot(j) [N]
  LSTM(lstm_size)                              [B, lstm_size]
  dueling head: V = Linear 1 (ReLU (Linear head_hidden)),
                Adv = Linear A (ReLU (Linear head_hidden)),
                Q = V + Adv - mean_a Adv          [B, A]

Alignment (docs/design.md#alignment): extra inputs at time t are the previous
action a_{t-1}, the extrinsic reward r^e_t and the intrinsic reward r^i_t that
arrived with x_t (the rewards of the transition x_{t-1} -> x_t), all zero at
an episode's first step, and the lane's mixture index j. The network does not
zero them itself: the caller (actor, learner) passes them as stored.

Rewards enter unscaled and unclipped, as the paper describes; a caller that
wants them squashed does so before the call.

The network is a container of pure functions over one parameter set, built
with Haiku; the caller jits (`apply`, `unroll` and `initial_state` close over
static configuration only).
"""

from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks
from ngu_jax import types as ngu_types
from ngu_jax.networks import lstm as lstm_lib
from ngu_jax.networks import torsos

LSTMState = hk.LSTMState
LSTM_UNROLLS = ("fused", "reference")


class UVFAInputs(NamedTuple):
  """Per-step inputs of the UVFA network, with leading batch axes [...].

  `apply` takes [B]-leading inputs, `unroll` [T, B]-leading (time-major).

  Attributes:
    observation: x_t, shaped [..., *observation_shape], of a dtype the
      network's `ObservationEncoding` takes (pixels: uint8, scaled by 1/255,
      or floating point; symbolic: integer codes; ...).
    prev_action: a_{t-1}, integer in [-1, A), shaped [...]; -1 at episode
      start (no previous action), which one-hot encodes as all zeros.
    prev_extrinsic_reward: r^e_t, float, shaped [...] (0 at episode start).
    prev_intrinsic_reward: r^i_t, float, shaped [...] (0 at episode start).
    mixture_index: j, integer in [0, N), shaped [...].
  """
  observation: jax.Array
  prev_action: jax.Array
  prev_extrinsic_reward: jax.Array
  prev_intrinsic_reward: jax.Array
  mixture_index: jax.Array


class UVFANetwork(NamedTuple):
  """Pure functions of the NGU Q-network (NGU Sec. 3, App. H.3).

  Attributes:
    init: `init(key) -> params`.
    apply: `apply(params, inputs, state) -> (q, new_state)`: one step;
      `inputs` has a [B] batch axis, `state` is an `LSTMState` of arrays
      shaped [B, lstm_size], q is shaped [B, A] float32. No state reset: the
      caller passes `initial_state` (or resets lanes) at episode starts.
    apply_with_value: `apply_with_value(params, inputs, state) -> (q, value,
      new_state)`: as `apply`, also returning the dueling value stream V
      shaped [B] (so that Q - V has mean 0 over actions).
    unroll: `unroll(params, inputs, state, step_is_first) -> (q,
      final_state)`: time-major unroll; `inputs` has [T, B] leading axes,
      `step_is_first` is shaped [T, B]; the recurrent state is reset to the
      initial state before every step where `step_is_first` is True. q is
      shaped [T, B, A].
    initial_state: `initial_state(batch_size) -> LSTMState` of zeros shaped
      [batch_size, lstm_size] (no parameters needed).
    observation_shape: shape of ONE observation.
    num_actions: A.
    num_mixtures: N.
    lstm_size: LSTM width.
    torso: the resolved torso kind, "atari" | "grid" | "mlp".
    encoding: the observations' `ngu_jax.types.ObservationEncoding`.
    unroll_streams: None for one network; for Agent57's split values
      (`ngu_jax.networks.split_uvfa`) `unroll_streams(params, inputs, state,
      step_is_first) -> (q_extrinsic, q_intrinsic, final_state)`, each q
      shaped [T, B, A]; `apply` and `unroll` then return their combination.
    unroll_with_value: `unroll_with_value(params, inputs, state,
      step_is_first) -> (q, value, final_state)`: as `unroll`, also returning
      the dueling value stream V shaped [T, B] (DiCE's learner; None where
      the network has no single V, e.g. Agent57's split values).
  """
  init: Callable[[jax.Array], hk.Params]
  apply: Callable[..., Tuple[jax.Array, LSTMState]]
  apply_with_value: Callable[..., Tuple[jax.Array, jax.Array, LSTMState]]
  unroll: Callable[..., Tuple[jax.Array, LSTMState]]
  initial_state: Callable[[int], LSTMState]
  observation_shape: Tuple[int, ...]
  num_actions: int
  num_mixtures: int
  lstm_size: int
  torso: str
  encoding: ngu_types.ObservationEncoding = ngu_types.PIXELS
  unroll_streams: Optional[Callable[..., Tuple[jax.Array, jax.Array,
                                               LSTMState]]] = None
  unroll_with_value: Optional[Callable[..., Tuple[jax.Array, jax.Array,
                                                  LSTMState]]] = None


def _lanes_first(x: jax.Array, lead_rank: int) -> jax.Array:
  """[T, B, ...] -> [B, T, ...] so that check messages name lanes (B)."""
  return jnp.swapaxes(x, 0, 1) if lead_rank == 2 else x


def _check_extras(inputs: UVFAInputs, lead: Tuple[int, ...], num_actions: int,
                  num_mixtures: int, where: str) -> None:
  """Shape, dtype and value checks of the four non-observation inputs."""
  lead_rank = len(lead)
  for name in ("prev_action", "prev_extrinsic_reward",
               "prev_intrinsic_reward", "mixture_index"):
    _checks.check_shape(getattr(inputs, name), lead, name, where)
  # prev_action -1 means "no previous action" (episode start): its one-hot is
  # all zeros (docs/design.md#alignment: extra inputs are 0 at episode start).
  for name, low, high in (("prev_action", -1, num_actions),
                          ("mixture_index", 0, num_mixtures)):
    x = jnp.asarray(getattr(inputs, name))
    if not jnp.issubdtype(x.dtype, jnp.integer):
      raise ValueError(f"{where}: `{name}` must be an integer array, got "
                       f"dtype {x.dtype}.")
    lanes = _lanes_first(x, lead_rank) if lead_rank else x[None]
    _checks.check_in_range(lanes, low, high, name, where)
  for name in ("prev_extrinsic_reward", "prev_intrinsic_reward"):
    x = jnp.asarray(getattr(inputs, name))
    _checks.check_floating(x, name, where)
    lanes = _lanes_first(x, lead_rank) if lead_rank else x[None]
    _checks.check_finite(lanes, name, where)


def _embed_extras(inputs: UVFAInputs, num_actions: int,
                  num_mixtures: int) -> jax.Array:
  """Unchecked `embed_extras`."""
  return jnp.concatenate([
      jax.nn.one_hot(inputs.prev_action, num_actions, dtype=jnp.float32),
      jnp.asarray(inputs.prev_extrinsic_reward, jnp.float32)[..., None],
      jnp.asarray(inputs.prev_intrinsic_reward, jnp.float32)[..., None],
      jax.nn.one_hot(inputs.mixture_index, num_mixtures, dtype=jnp.float32),
  ], axis=-1)


def embed_extras(inputs: UVFAInputs, num_actions: int,
                 num_mixtures: int) -> jax.Array:
  """The extra inputs concatenated to the torso features (NGU Sec. 3).

  [one-hot(a_{t-1}) (A), r^e_t (1), r^i_t (1), one-hot(j) (N)], in this
  order. A `prev_action` of -1 (episode start) gives an all-zero one-hot. `inputs.observation` is not used (it may be None).

  Args:
    inputs: `UVFAInputs` whose `prev_action`, `prev_extrinsic_reward`,
      `prev_intrinsic_reward` and `mixture_index` share one shape [...]
      (e.g. [B] or [T, B]); actions and mixture indices integer, rewards
      floating point.
    num_actions: A.
    num_mixtures: N.

  Returns:
    float32 array shaped [..., A + 2 + N].

  Raises:
    ValueError: on mismatched shapes, wrong dtypes, actions outside [0, A),
      mixture indices outside [0, N) or NaN/inf rewards (the value checks run
      eagerly, or at run time under jit; see `ngu_jax._checks`). Error
      messages name entries of the leading axis as lanes.
  """
  where = "networks.uvfa.embed_extras"
  lead = tuple(np.shape(inputs.prev_action))
  _check_extras(inputs, lead, num_actions, num_mixtures, where)
  return _embed_extras(inputs, num_actions, num_mixtures)


class DuelingHead(hk.Module):
  """Dueling head (Wang et al., 2016; R2D2; NGU App. H.3).

  V = Linear 1 (ReLU (Linear hidden)), Adv = Linear A (ReLU (Linear hidden)),
  Q = V + Adv - mean_a Adv. Input shaped [B, D]; outputs Q [B, A], V [B].
  With `zero_output_init` the two output layers ("value", "advantage")
  start at zero weights (their biases always do), so Q = 0 at
  initialisation for every input (ours, not the papers'; see
  `make_uvfa_network`).
  """

  def __init__(self, num_actions: int, hidden_size: int = 512,
               name: Optional[str] = "dueling_head",
               zero_output_init: bool = False):
    super().__init__(name=name)
    self._num_actions = num_actions
    self._hidden_size = hidden_size
    self._output_init = (hk.initializers.Constant(0.)
                         if zero_output_init else None)

  def __call__(self, x: jax.Array) -> Tuple[jax.Array, jax.Array]:
    value = jax.nn.relu(hk.Linear(self._hidden_size, name="value_hidden")(x))
    value = hk.Linear(1, w_init=self._output_init, name="value")(value)[..., 0]
    adv = jax.nn.relu(hk.Linear(self._hidden_size, name="advantage_hidden")(x))
    adv = hk.Linear(self._num_actions, w_init=self._output_init,
                    name="advantage")(adv)
    q = value[..., None] + adv - adv.mean(axis=-1, keepdims=True)
    return q, value


def _check_positive(value, name: str, where: str) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or (
      value < 1):
    raise ValueError(f"{where}: `{name}` must be a positive integer, got "
                     f"{value!r}.")
  return int(value)


def make_uvfa_network(
    observation_shape: Sequence[int],
    num_actions: int,
    num_mixtures: int,
    torso: str = "auto",
    lstm_size: int = 512,
    head_hidden: int = 512,
    *,
    grid_output_size: int = 256,
    grid_filters: Sequence[int] = torsos.GRID_FILTERS,
    mlp_hidden_sizes: Sequence[int] = (256, 256),
    encoding: Optional[ngu_types.ObservationEncoding] = None,
    lstm_unroll: str = "fused",
    zero_output_init: bool = False,
) -> UVFANetwork:
  """Builds the NGU recurrent dueling UVFA Q-network (NGU Sec. 3, App. H.3).

  Args:
    observation_shape: shape of ONE observation: [H, W, C] images (e.g.
      (84, 84, 1) for Atari) or [D] vectors.
    num_actions: A.
    num_mixtures: N, the number of (beta_j, gamma_j) pairs (32 in NGU).
    torso: "atari" | "grid" | "mlp" | "auto" (see
      `ngu_jax.networks.resolve_torso_kind`); the full torso is used (the
      Atari torso ends with Linear 512 -> ReLU, as in R2D2).
    lstm_size: LSTM width (512 in R2D2 / NGU).
    head_hidden: hidden width of each dueling stream (512 in R2D2 / NGU).
    grid_output_size: dense width of the grid torso.
    grid_filters: channels of the grid torso's two convolutions (Table 7:
      (16, 32)).
    mlp_hidden_sizes: layer widths of the MLP torso.
    encoding: what the observations are (`ngu_jax.types.ObservationEncoding`,
      declared by the environment); None: "pixels". The torso encodes them
      and its kind is resolved on the encoded shape.
    lstm_unroll: how `unroll` runs the LSTM over time: "fused"
      (`ngu_jax.networks.lstm.unroll`: the input projection as one product
      over all steps, a hand-written backward pass) or "reference"
      (`hk.dynamic_unroll(hk.ResetCore(hk.LSTM))`, the straightforward
      unroll). The same function and parameters; "reference" is for tests
      and benchmarks.
    zero_output_init: start the dueling head's two output layers at zero
      weights, so that Q(x, a, j) = 0 for every input at initialisation
      (ours, not NGU's or R2D2's, which do not state their initialisation;
      haiku's default, False, draws them with std 1/sqrt(head_hidden)). The
      layers below still learn: the output weights get non-zero gradients
      at the first update. Why: at gamma near 1 a value function forgets
      its initial values slowly, and the default's spread of Q across
      actions at initialisation (about 0.02-0.04 on MiniGrid's views) is
      larger than the action gaps of a sparse-reward task (about 0.003 per
      step at gamma 0.997). Measured: on DoorKey-5x5 it does not cure the
      greedy policy's idling (docs/results.md); kept as an ablation.

  Returns:
    A `UVFANetwork` of pure functions sharing one parameter set.

  Raises:
    ValueError: for an unsupported observation shape / torso kind or
      non-positive sizes. The returned functions raise ValueError on inputs
      of the wrong shape, dtype or range (see `UVFANetwork`).
  """
  where = "networks.make_uvfa_network"
  observation_shape = tuple(int(s) for s in observation_shape)
  encoding = torsos.as_encoding(encoding, where)
  kind = torsos.resolve_torso_kind(observation_shape, torso, encoding)
  num_actions = _check_positive(num_actions, "num_actions", where)
  num_mixtures = _check_positive(num_mixtures, "num_mixtures", where)
  lstm_size = _check_positive(lstm_size, "lstm_size", where)
  head_hidden = _check_positive(head_hidden, "head_hidden", where)
  grid_filters = torsos.check_grid_filters(grid_filters, where)
  if lstm_unroll not in LSTM_UNROLLS:
    raise ValueError(f"{where}: `lstm_unroll` must be one of {LSTM_UNROLLS}, "
                     f"got {lstm_unroll!r}.")

  def fns():
    torso_module = torsos.make_torso(
        observation_shape, kind, encoding=encoding,
        grid_output_size=grid_output_size, grid_filters=grid_filters,
        mlp_hidden_sizes=mlp_hidden_sizes)
    core = hk.LSTM(lstm_size, name="lstm")
    head = DuelingHead(num_actions, head_hidden,
                       zero_output_init=bool(zero_output_init))

    def features(inputs):
      x = torso_module(inputs.observation)
      extras = _embed_extras(inputs, num_actions, num_mixtures)
      return jnp.concatenate([x, extras], axis=-1)

    def step(inputs, state):
      out, new_state = core(features(inputs), state)
      q, value = head(out)
      return (q, value), new_state

    def unroll_features(inputs):
      return hk.BatchApply(features)(inputs)

    def unroll_head(out):
      return hk.BatchApply(head)(out)  # (q, value)

    def reference_unroll(inputs, state, step_is_first):
      x = hk.BatchApply(features)(inputs)
      out, final_state = hk.dynamic_unroll(
          hk.ResetCore(core), (x, step_is_first), state)
      return hk.BatchApply(head)(out), final_state

    return step, (step, unroll_features, unroll_head, reference_unroll)

  transformed = hk.without_apply_rng(hk.multi_transform(fns))
  step_apply, features_apply, head_apply, reference_apply = transformed.apply

  def fused_apply(params, inputs, state, step_is_first):
    # The torso, the LSTM's input projection and the head run on all T * B
    # steps at once; only the recurrent product scans (`networks.lstm`,
    # the same function as hk.dynamic_unroll(hk.ResetCore(core))).
    x = features_apply(params, inputs)
    core_params = params["lstm/linear"]
    out, final_state = lstm_lib.unroll(core_params["w"], core_params["b"], x,
                                       step_is_first, state)
    return head_apply(params, out), final_state

  unroll_apply = fused_apply if lstm_unroll == "fused" else reference_apply

  def initial_state(batch_size: int) -> LSTMState:
    batch_size = _check_positive(batch_size, "batch_size",
                                 "networks.uvfa.initial_state")
    zeros = jnp.zeros((batch_size, lstm_size), jnp.float32)
    return LSTMState(hidden=zeros, cell=zeros)

  def init(key: jax.Array) -> hk.Params:
    dummy = UVFAInputs(
        observation=torsos.dummy_observation(observation_shape, encoding),
        prev_action=jnp.zeros((1,), jnp.int32),
        prev_extrinsic_reward=jnp.zeros((1,), jnp.float32),
        prev_intrinsic_reward=jnp.zeros((1,), jnp.float32),
        mixture_index=jnp.zeros((1,), jnp.int32))
    return transformed.init(key, dummy, initial_state(1))

  def check_state(state, batch: int, where: str) -> LSTMState:
    if not (hasattr(state, "hidden") and hasattr(state, "cell")):
      raise ValueError(f"{where}: `state` must be an LSTMState(hidden, cell), "
                       f"got {type(state).__name__}.")
    for name in ("hidden", "cell"):
      x = getattr(state, name)
      _checks.check_shape(x, (batch, lstm_size), f"state.{name}", where)
      _checks.check_floating(x, f"state.{name}", where)
      _checks.check_finite(x, f"state.{name}", where)
    return LSTMState(hidden=jnp.asarray(state.hidden),
                     cell=jnp.asarray(state.cell))

  def check_inputs(inputs, lead_rank: int, where: str) -> Tuple[int, ...]:
    if not isinstance(inputs, UVFAInputs):
      raise ValueError(f"{where}: `inputs` must be a UVFAInputs, got "
                       f"{type(inputs).__name__}.")
    obs = inputs.observation
    _checks.check_shape(obs, (None,) * lead_rank + observation_shape,
                        "observation", where)
    obs = jnp.asarray(obs)
    torsos.check_observation_values(_lanes_first(obs, lead_rank), encoding,
                                    "observation", where)
    lead = tuple(np.shape(obs)[:lead_rank])
    _check_extras(inputs, lead, num_actions, num_mixtures, where)
    return lead

  def apply_with_value(params: hk.Params, inputs: UVFAInputs,
                       state: LSTMState
                      ) -> Tuple[jax.Array, jax.Array, LSTMState]:
    where = "networks.uvfa.apply"
    (batch,) = check_inputs(inputs, 1, where)
    state = check_state(state, batch, where)
    (q, value), new_state = step_apply(params, inputs, state)
    return q, value, new_state

  def apply(params: hk.Params, inputs: UVFAInputs,
            state: LSTMState) -> Tuple[jax.Array, LSTMState]:
    q, _, new_state = apply_with_value(params, inputs, state)
    return q, new_state

  def unroll_with_value(params: hk.Params, inputs: UVFAInputs,
                        state: LSTMState, step_is_first: jax.Array
                        ) -> Tuple[jax.Array, jax.Array, LSTMState]:
    (q, value), final_state = _unroll(params, inputs, state, step_is_first,
                                      "networks.uvfa.unroll_with_value")
    return q, value, final_state

  def unroll(params: hk.Params, inputs: UVFAInputs, state: LSTMState,
             step_is_first: jax.Array) -> Tuple[jax.Array, LSTMState]:
    (q, _), final_state = _unroll(params, inputs, state, step_is_first,
                                  "networks.uvfa.unroll")
    return q, final_state

  def _unroll(params, inputs, state, step_is_first, where):
    t, b = check_inputs(inputs, 2, where)
    state = check_state(state, b, where)
    _checks.check_shape(step_is_first, (t, b), "step_is_first", where)
    step_is_first = jnp.asarray(step_is_first)
    if step_is_first.dtype != jnp.bool_:
      if not jnp.issubdtype(step_is_first.dtype, jnp.integer):
        raise ValueError(f"{where}: `step_is_first` must be bool (or 0/1 "
                         f"integers), got dtype {step_is_first.dtype}.")
      _checks.check_binary(step_is_first.T, "step_is_first", where)
      step_is_first = step_is_first.astype(bool)
    return unroll_apply(params, inputs, state, step_is_first)

  return UVFANetwork(init=init, apply=apply,
                     apply_with_value=apply_with_value, unroll=unroll,
                     unroll_with_value=unroll_with_value,
                     initial_state=initial_state,
                     observation_shape=observation_shape,
                     num_actions=num_actions, num_mixtures=num_mixtures,
                     lstm_size=lstm_size, torso=kind, encoding=encoding)
