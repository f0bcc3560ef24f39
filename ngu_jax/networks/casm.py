"""Coupled Action-State Masking (CASM): RECODE's multi-step action prediction.

RECODE (Saade et al., "Robust Exploration via Clustering-based Online Density
Estimation", 003), Sec. 4 "Representation learning methods" and Fig. 2: a
causally-masked transformer reads a trajectory of observation and action embeddings in which, at each timestep
t, EXACTLY ONE of o_t (as e_t = f(o_t)) and a_t is provided; its output at t
is projected to the embedding size (z_t, dim z_t = dim f(o_t)) and the
difference between z_t and an observation embedding goes into an MLP
classifier g that predicts a hidden action. RECODE's memory reads e_t =
f(o_t), the transformer's INPUT, so no trajectory information leaks into the
reward: `embed` is the same f, with the same signature and parameter names,
as `ngu_jax.networks.embedding`.

What the paper leaves open, and our choices (docs/design.md#beyond-ngu):

* Prediction target: at every step t whose action is hidden (so o_t is the
  token shown at t),

    p(a_t | o_{<=t}, a_{<t} as shown, o_{t+1}) = softmax(g(f(o_{t+1}) - z_t)),

  z_t the transformer output at t over the tokens 0..t. This is 1-step
  inverse dynamics (NGU Sec. 2) with the earlier, partly masked trajectory
  as extra context (the paper's motivation: (o_t, o_{t+1}) alone may not
  localise the agent in a partially observed domain). f(o_{t+1}) is the
  classifier's input, not a token, so it is available whether or not o_{t+1}
  is shown at t + 1.
* Tokens: shown observation: Linear(width)(e_t) + a learned "observation"
  type vector; shown action: a learned action embedding (hk.Embed(A, width))
  + a learned "action" type vector; plus a learned positional embedding
  (max_length positions: the replayed window burn_in + trace_length).
* Transformer: pre-LayerNorm blocks (haiku's `MultiHeadAttention` with a
  causal mask, then an MLP with one ReLU hidden layer), a final LayerNorm
  and Linear(embedding_dim) -> z_t. Attention never crosses an episode
  boundary (`step_is_first` starts a new segment).
* Grid-world sizes (config defaults): 2 layers, width 64, 4 heads, MLP 128;
  g = Linear(hidden) -> ReLU -> Linear(A) as NGU's h (hidden 128).
* Masks: `ngu_jax.losses.casm` draws N = 4 (Sec. 4) Bernoulli(1/2)
  "action shown" masks per trajectory.

The network is a container of pure functions over ONE parameter set (f,
the action embedding, the transformer and g). The caller jits.
"""

from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp

from ngu_jax import types as ngu_types
from ngu_jax.networks import embedding as embedding_lib
from ngu_jax.networks import torsos


class CASMNetwork(NamedTuple):
  """Pure functions of the CASM representation (RECODE Sec. 4, Fig. 2).

  Attributes:
    init: `init(key) -> params`; f, the action embedding, the transformer
      and g together.
    embed: `embed(params, observation) -> embedding`; observation shaped
      [B, *observation_shape], embedding [B, embedding_dim] float32: f
      alone, exactly as `EmbeddingNetwork.embed` (what RECODE / the episodic
      memory read).
    logits: `logits(params, observations, actions, action_shown,
      step_is_first=None) -> logits`: observations [T, B,
      *observation_shape], actions int [T, B], action_shown bool [T, B] or
      [N, T, B] (N masks of the same trajectories), step_is_first bool
      [T, B] or None (one episode per lane); logits [T - 1, B, A] (or
      [N, T - 1, B, A]): entry t is g(f(o_{t+1}) - z_t), the logits of a_t,
      meaningful where a_t is hidden (see the module docstring).
    observation_shape: shape of ONE observation.
    num_actions: |A|.
    embedding_dim: D = dim f(o_t) = dim z_t.
    encoding: the observations' `ngu_jax.types.ObservationEncoding`.
    max_length: most timesteps `logits` takes (positional embeddings).
  """
  init: Callable[[jax.Array], hk.Params]
  embed: Callable[[hk.Params, jax.Array], jax.Array]
  logits: Callable[..., jax.Array]
  observation_shape: Tuple[int, ...]
  num_actions: int
  embedding_dim: int
  encoding: ngu_types.ObservationEncoding
  max_length: int


class CASMTransformer(hk.Module):
  """Causal transformer over coupled action/state tokens -> z_t (Fig. 2).

  Inputs time-major: embeddings [T, B, D], actions int [T, B], action_shown
  bool [T, B], segment ids int [T, B] (attention only within a segment);
  output z shaped [T, B, D], z_t a function of the tokens 0..t only.
  """

  def __init__(self, num_actions: int, embedding_dim: int, max_length: int,
               num_layers: int = 2, width: int = 64, num_heads: int = 4,
               mlp_hidden: int = 128, name: Optional[str] = "casm_transformer"):
    super().__init__(name=name)
    self._num_actions = num_actions
    self._embedding_dim = embedding_dim
    self._max_length = max_length
    self._num_layers = num_layers
    self._width = width
    self._num_heads = num_heads
    self._mlp_hidden = mlp_hidden

  def __call__(self, embeddings: jax.Array, actions: jax.Array,
               action_shown: jax.Array, segments: jax.Array) -> jax.Array:
    t = embeddings.shape[0]
    w = self._width
    init = hk.initializers.TruncatedNormal(0.02)
    observation_type = hk.get_parameter("observation_type", [w], init=init)
    action_type = hk.get_parameter("action_type", [w], init=init)
    position = hk.get_parameter("position", [self._max_length, w], init=init)
    obs_tokens = hk.Linear(w, name="observation_in")(embeddings)
    act_tokens = hk.Embed(self._num_actions, w, name="action_in")(actions)
    x = jnp.where(action_shown[..., None], act_tokens + action_type,
                  obs_tokens + observation_type)
    x = x + position[:t, None, :]
    x = jnp.swapaxes(x, 0, 1)  # [B, T, W].
    seg = jnp.swapaxes(segments, 0, 1)  # [B, T].
    causal = jnp.tril(jnp.ones((t, t), bool))
    mask = causal[None] & (seg[:, :, None] == seg[:, None, :])  # [B, T, T].
    mask = mask[:, None]  # [B, 1, T, T] (all heads).
    w_init = hk.initializers.VarianceScaling(1.0, "fan_avg", "uniform")
    for i in range(self._num_layers):
      h = hk.LayerNorm(-1, True, True, name=f"ln_attention_{i}")(x)
      x = x + hk.MultiHeadAttention(
          self._num_heads, w // self._num_heads, w_init=w_init,
          model_size=w, name=f"attention_{i}")(h, h, h, mask=mask)
      h = hk.LayerNorm(-1, True, True, name=f"ln_mlp_{i}")(x)
      h = jax.nn.relu(hk.Linear(self._mlp_hidden, name=f"mlp_in_{i}")(h))
      x = x + hk.Linear(w, name=f"mlp_out_{i}")(h)
    x = hk.LayerNorm(-1, True, True, name="ln_final")(x)
    z = hk.Linear(self._embedding_dim, name="projection")(x)
    return jnp.swapaxes(z, 0, 1)  # [T, B, D].


class CASMClassifier(hk.Module):
  """The action classifier g (RECODE Fig. 2): g(f(o_{t+1}) - z_t).

  Input (the difference) shaped [..., D], logits shaped [..., A].
  """

  def __init__(self, num_actions: int, hidden_size: int = 128,
               name: Optional[str] = "casm_classifier"):
    super().__init__(name=name)
    self._num_actions = num_actions
    self._hidden_size = hidden_size

  def __call__(self, difference: jax.Array) -> jax.Array:
    x = jax.nn.relu(hk.Linear(self._hidden_size, name="hidden")(difference))
    return hk.Linear(self._num_actions, name="logits")(x)


def segment_ids(step_is_first: jax.Array) -> jax.Array:
  """Episode index within each lane: cumsum of `step_is_first` over time.

  Args:
    step_is_first: bool [T, B].

  Returns:
    int32 [T, B]; steps t, s of a lane share an id iff no episode starts in
    (min(t, s), max(t, s)].
  """
  return jnp.cumsum(jnp.asarray(step_is_first).astype(jnp.int32), axis=0)


def make_casm_network(
    observation_shape: Sequence[int],
    num_actions: int,
    embedding_dim: int = 32,
    torso: str = "auto",
    *,
    max_length: int = 80,
    num_layers: int = 2,
    width: int = 64,
    num_heads: int = 4,
    mlp_hidden: int = 128,
    hidden_size: int = 128,
    embedding_activation: Optional[str] = None,
    mlp_hidden_sizes: Sequence[int] = (256, 256),
    encoding: Optional[ngu_types.ObservationEncoding] = None,
    grid_filters: Sequence[int] = torsos.GRID_FILTERS,
) -> CASMNetwork:
  """Builds the CASM representation network (RECODE Sec. 4, Fig. 2).

  Args:
    observation_shape: shape of ONE observation ([H, W, C] or [D]).
    num_actions: |A|.
    embedding_dim: D, size of e_t = f(o_t) and of z_t.
    torso: f's torso kind, as `make_embedding_network`.
    max_length: most timesteps per trajectory (learned positions).
    num_layers, width, num_heads, mlp_hidden: transformer sizes (ours, for
      grid worlds: 2, 64, 4, 128; the paper's table is missing from our
      copy). `width` must be a multiple of `num_heads`.
    hidden_size: width of g's hidden layer (as NGU's h: 128).
    embedding_activation, mlp_hidden_sizes, encoding, grid_filters: f's, as
      `make_embedding_network`.

  Returns:
    A `CASMNetwork` of pure functions sharing one parameter set.

  Raises:
    ValueError: for an unsupported observation shape / torso, an unknown
      activation, non-positive sizes, or width not divisible by num_heads.
  """
  where = "networks.make_casm_network"
  observation_shape = tuple(int(s) for s in observation_shape)
  encoding = torsos.as_encoding(encoding, where)
  torsos.resolve_torso_kind(observation_shape, torso, encoding)  # Early.
  grid_filters = torsos.check_grid_filters(grid_filters, where)
  if embedding_activation not in embedding_lib.EMBEDDING_ACTIVATIONS:
    raise ValueError(
        f"{where}: embedding_activation must be one of "
        f"{embedding_lib.EMBEDDING_ACTIVATIONS}, got {embedding_activation!r}.")
  for name, value in (("num_actions", num_actions),
                      ("embedding_dim", embedding_dim),
                      ("max_length", max_length), ("num_layers", num_layers),
                      ("width", width), ("num_heads", num_heads),
                      ("mlp_hidden", mlp_hidden),
                      ("hidden_size", hidden_size)):
    if int(value) < 1:
      raise ValueError(f"{where}: `{name}` must be >= 1, got {value}.")
  if width % num_heads:
    raise ValueError(f"{where}: `width` ({width}) must be a multiple of "
                     f"`num_heads` ({num_heads}).")
  num_actions, max_length = int(num_actions), int(max_length)

  def fns():
    embedder = embedding_lib.Embedder(
        observation_shape, embedding_dim, torso, embedding_activation,
        mlp_hidden_sizes, encoding=encoding, grid_filters=grid_filters)
    transformer = CASMTransformer(num_actions, embedding_dim, max_length,
                                  num_layers, width, num_heads, mlp_hidden)
    classifier = CASMClassifier(num_actions, hidden_size)

    def embed(observation):
      return embedder(observation)

    def logits(observations, actions, action_shown, segments):
      # observations [T, B, ...]; actions, segments [T, B]; shown [N, T, B].
      t, b = actions.shape
      n = action_shown.shape[0]
      flat = observations.reshape((t * b,) + observations.shape[2:])
      e = embedder(flat).reshape((t, b, -1))  # f once, shared by the masks.

      def tile(x):  # [T, B, ...] -> [T, N * B, ...] (mask-major lanes).
        return jnp.concatenate([x] * n, axis=1)

      shown = jnp.moveaxis(action_shown, 0, 1).reshape((t, n * b))
      z = transformer(tile(e), tile(actions), shown, tile(segments))
      out = classifier(tile(e)[1:] - z[:-1])  # [T - 1, N * B, A].
      return jnp.moveaxis(out.reshape((t - 1, n, b, -1)), 1, 0)

    def init(observations, actions, action_shown, segments):
      return logits(observations, actions, action_shown, segments)

    return init, (embed, logits)

  transformed = hk.without_apply_rng(hk.multi_transform(fns))
  embed_apply, logits_apply = transformed.apply

  def init(key: jax.Array) -> hk.Params:
    dummy = torsos.dummy_observation(observation_shape, encoding)  # [1, ...]
    obs = jnp.concatenate([dummy, dummy], axis=0)[:, None]  # [2, 1, ...]
    actions = jnp.zeros((2, 1), jnp.int32)
    shown = jnp.array([[[False], [True]]])  # [1, 2, 1]: both token kinds.
    return transformed.init(key, obs, actions, shown, actions)

  def embed(params: hk.Params, observation: jax.Array) -> jax.Array:
    torsos.check_observation_batch(observation, observation_shape,
                                   "observation", "networks.casm.embed",
                                   encoding, runtime_code_check=False)
    return embed_apply(params, observation)

  def logits(params: hk.Params, observations: jax.Array, actions: jax.Array,
             action_shown: jax.Array,
             step_is_first: Optional[jax.Array] = None) -> jax.Array:
    where = "networks.casm.logits"
    observations = jnp.asarray(observations)
    actions = jnp.asarray(actions)
    action_shown = jnp.asarray(action_shown)
    if observations.ndim != len(observation_shape) + 2 or tuple(
        observations.shape[2:]) != observation_shape:
      raise ValueError(
          f"{where}: `observations` must be shaped [T, B, "
          f"*{observation_shape}], got {observations.shape}.")
    t, b = observations.shape[:2]
    if t < 2 or t > max_length:
      raise ValueError(f"{where}: need 2 <= T <= max_length ({max_length}) "
                       f"timesteps, got T = {t}.")
    if actions.shape != (t, b) or not jnp.issubdtype(actions.dtype,
                                                    jnp.integer):
      raise ValueError(f"{where}: `actions` must be integers shaped "
                       f"{(t, b)}, got {actions.dtype} {actions.shape}.")
    squeeze = action_shown.ndim == 2
    if squeeze:
      action_shown = action_shown[None]
    if action_shown.ndim != 3 or action_shown.shape[1:] != (t, b) or (
        action_shown.dtype != jnp.bool_):
      raise ValueError(f"{where}: `action_shown` must be bool shaped "
                       f"{(t, b)} or [N, {t}, {b}], got {action_shown.dtype} "
                       f"{action_shown.shape}.")
    if step_is_first is None:
      segments = jnp.zeros((t, b), jnp.int32)
    else:
      step_is_first = jnp.asarray(step_is_first)
      if step_is_first.shape != (t, b):
        raise ValueError(f"{where}: `step_is_first` must be shaped {(t, b)}, "
                         f"got {step_is_first.shape}.")
      segments = segment_ids(step_is_first)
    out = logits_apply(params, observations, actions, action_shown, segments)
    return out[0] if squeeze else out

  return CASMNetwork(init=init, embed=embed, logits=logits,
                     observation_shape=observation_shape,
                     num_actions=num_actions,
                     embedding_dim=int(embedding_dim), encoding=encoding,
                     max_length=max_length)
