"""Controllable-state embedding f and inverse-dynamics head h.

Badia et al. (2020), "Never Give Up", Sec. 2 "Embedding network" and App. H.1
(Fig. 15), following Pathak et al. (2017): a Siamese network f maps an
observation to a p-dimensional controllable state, and a one-hidden-layer
MLP h predicts the action a_t from (f(x_t), f(x_{t+1})):

  p(a | x_t, x_{t+1}) = softmax(h(f(x_t), f(x_{t+1}))).

f = torso (conv stack for images, MLP for vectors) -> Linear(p), p = 32.
h = concat(f(x_t), f(x_{t+1})) -> Linear 128 -> ReLU -> Linear |A| (logits).

Fig. 15 is an image that our text copy of the paper does not contain, so
whether f ends with a nonlinearity is not stated there: f's output is linear
by default (the episodic memory compares raw embeddings) and
`embedding_activation="relu"` adds a ReLU.

The network is a container of pure functions over ONE parameter set (f's
parameters are shared by `embed` and `inverse_logits`). The caller jits.
"""

from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp

from ngu_jax import types as ngu_types
from ngu_jax.networks import torsos

EMBEDDING_ACTIVATIONS = (None, "relu")


class EmbeddingNetwork(NamedTuple):
  """Pure functions of the NGU embedding network (NGU Sec. 2, App. H.1).

  Attributes:
    init: `init(key) -> params`; builds dummy inputs from
      `observation_shape` and initialises f and h together.
    embed: `embed(params, observation) -> embedding`; observation shaped
      [B, *observation_shape] (a dtype `encoding` takes, e.g. uint8 or float
      pixels), embedding shaped
      [B, embedding_dim] float32. This is f, used for the episodic memory.
    inverse_logits: `inverse_logits(params, observation_t, observation_tp1)
      -> logits`; observations shaped [B, *observation_shape], logits shaped
      [B, num_actions] (unnormalised log p(a_t | x_t, x_{t+1})).
    observation_shape: shape of ONE observation, e.g. (84, 84, 1).
    num_actions: |A|.
    embedding_dim: p, the controllable-state size.
    encoding: the observations' `ngu_jax.types.ObservationEncoding`.
  """
  init: Callable[[jax.Array], hk.Params]
  embed: Callable[[hk.Params, jax.Array], jax.Array]
  inverse_logits: Callable[[hk.Params, jax.Array, jax.Array], jax.Array]
  observation_shape: Tuple[int, ...]
  num_actions: int
  embedding_dim: int
  encoding: ngu_types.ObservationEncoding = ngu_types.PIXELS


class Embedder(hk.Module):
  """The controllable-state embedding f (NGU Sec. 2, App. H.1).

  torso (conv stack / MLP) -> Linear(embedding_dim) [-> ReLU].
  Input shaped [B, *observation_shape] (encoded by the torso as `encoding`
  says; None: pixels), output shaped [B, embedding_dim].
  """

  def __init__(self,
               observation_shape: Tuple[int, ...],
               embedding_dim: int = 32,
               torso: str = "auto",
               embedding_activation: Optional[str] = None,
               mlp_hidden_sizes: Sequence[int] = (256, 256),
               name: Optional[str] = "embedder",
               *,
               encoding: Optional[ngu_types.ObservationEncoding] = None,
               grid_filters: Sequence[int] = torsos.GRID_FILTERS):
    super().__init__(name=name)
    self._encoding = torsos.as_encoding(encoding, "networks.Embedder")
    self._observation_shape = tuple(observation_shape)
    self._embedding_dim = embedding_dim
    self._torso = torso
    self._activation = embedding_activation
    self._mlp_hidden_sizes = tuple(mlp_hidden_sizes)
    self._grid_filters = tuple(grid_filters)

  def __call__(self, observation: jax.Array) -> jax.Array:
    x = torsos.make_torso(self._observation_shape, self._torso,
                          encoding=self._encoding, conv_only=True,
                          grid_filters=self._grid_filters,
                          mlp_hidden_sizes=self._mlp_hidden_sizes)(observation)
    x = hk.Linear(self._embedding_dim, name="embedding")(x)
    if self._activation == "relu":
      x = jax.nn.relu(x)
    return x


class InverseDynamicsHead(hk.Module):
  """The action classifier h (NGU Sec. 2, App. H.1).

  concat(e_t, e_tp1) -> Linear(hidden_size) -> ReLU -> Linear(num_actions).
  Inputs shaped [B, p] each, logits shaped [B, num_actions].
  """

  def __init__(self, num_actions: int, hidden_size: int = 128,
               name: Optional[str] = "inverse_dynamics_head"):
    super().__init__(name=name)
    self._num_actions = num_actions
    self._hidden_size = hidden_size

  def __call__(self, embedding_t: jax.Array,
               embedding_tp1: jax.Array) -> jax.Array:
    x = jnp.concatenate([embedding_t, embedding_tp1], axis=-1)
    x = jax.nn.relu(hk.Linear(self._hidden_size, name="hidden")(x))
    return hk.Linear(self._num_actions, name="logits")(x)


def make_embedding_network(
    observation_shape: Sequence[int],
    num_actions: int,
    embedding_dim: int = 32,
    torso: str = "auto",
    *,
    embedding_activation: Optional[str] = None,
    hidden_size: int = 128,
    mlp_hidden_sizes: Sequence[int] = (256, 256),
    encoding: Optional[ngu_types.ObservationEncoding] = None,
    grid_filters: Sequence[int] = torsos.GRID_FILTERS,
) -> EmbeddingNetwork:
  """Builds the NGU embedding network f and its inverse-dynamics head h.

  NGU Sec. 2 "Embedding network", App. H.1 (Fig. 15), App. F (Tables 6, 7).
  f is trained only through h's action-prediction loss (see
  `ngu_jax.losses.inverse_dynamics_loss`).

  Args:
    observation_shape: shape of ONE observation: [H, W, C] images (e.g.
      (84, 84, 1) for Atari, (21, 21, 3) for Disco Maze) or [D] vectors.
    num_actions: |A|, the number of discrete actions.
    embedding_dim: p, size of the controllable state (32 in NGU).
    torso: "atari" | "grid" | "mlp" | "auto" (see
      `ngu_jax.networks.resolve_torso_kind`); f uses the torso's conv stack
      only (no dense layer) followed by Linear(embedding_dim).
    embedding_activation: None (linear output, default) or "relu". Fig. 15 is
      not in our text copy of the paper, so this is a documented choice.
    hidden_size: width of h's hidden layer (128 in NGU).
    mlp_hidden_sizes: layer widths of the MLP torso (vector observations).
    encoding: what the observations are (`ngu_jax.types.ObservationEncoding`,
      declared by the environment); None: "pixels". The torso encodes them
      and its kind is resolved on the encoded shape. NOTE: symbolic codes
      out of range are rejected on concrete arrays only; under jit the
      Q-network (`make_uvfa_network`), which the actor and learner call on
      the same observations, checks them (the actor vmaps f over lanes,
      where a run-time check would cost one host callback per lane).
    grid_filters: channels of the grid torso's two convolutions (Table 7:
      (16, 32)).

  Returns:
    An `EmbeddingNetwork` of pure functions sharing one parameter set.

  Raises:
    ValueError: for an unsupported observation shape / torso kind, an
      unknown activation, or non-positive sizes.
  """
  observation_shape = tuple(int(s) for s in observation_shape)
  encoding = torsos.as_encoding(encoding, "networks.make_embedding_network")
  torsos.resolve_torso_kind(observation_shape, torso, encoding)  # Early.
  grid_filters = torsos.check_grid_filters(
      grid_filters, "networks.make_embedding_network")
  if embedding_activation not in EMBEDDING_ACTIVATIONS:
    raise ValueError(
        "networks.make_embedding_network: embedding_activation must be one of "
        f"{EMBEDDING_ACTIVATIONS}, got {embedding_activation!r}.")
  for name, value in (("num_actions", num_actions),
                      ("embedding_dim", embedding_dim),
                      ("hidden_size", hidden_size)):
    if int(value) < 1:
      raise ValueError(f"networks.make_embedding_network: `{name}` must be "
                       f">= 1, got {value}.")

  def fns():
    embedder = Embedder(observation_shape, embedding_dim, torso,
                        embedding_activation, mlp_hidden_sizes,
                        encoding=encoding, grid_filters=grid_filters)
    head = InverseDynamicsHead(num_actions, hidden_size)

    def embed(observation):
      return embedder(observation)

    def inverse_logits(observation_t, observation_tp1):
      # One pass of the Siamese f over both observations.
      both = jnp.concatenate([observation_t, observation_tp1], axis=0)
      embedding_t, embedding_tp1 = jnp.split(embedder(both), 2, axis=0)
      return head(embedding_t, embedding_tp1)

    def init(observation_t, observation_tp1):
      return inverse_logits(observation_t, observation_tp1)

    return init, (embed, inverse_logits)

  transformed = hk.without_apply_rng(hk.multi_transform(fns))
  embed_apply, inverse_apply = transformed.apply

  def init(key: jax.Array) -> hk.Params:
    dummy = torsos.dummy_observation(observation_shape, encoding)
    return transformed.init(key, dummy, dummy)

  def embed(params: hk.Params, observation: jax.Array) -> jax.Array:
    torsos.check_observation_batch(observation, observation_shape,
                                   "observation", "networks.embedding.embed",
                                   encoding,
                                   runtime_code_check=False)
    return embed_apply(params, observation)

  def inverse_logits(params: hk.Params, observation_t: jax.Array,
                     observation_tp1: jax.Array) -> jax.Array:
    where = "networks.embedding.inverse_logits"
    torsos.check_observation_batch(observation_t, observation_shape,
                                   "observation_t", where, encoding,
                                   runtime_code_check=False)
    torsos.check_observation_batch(observation_tp1, observation_shape,
                                   "observation_tp1", where, encoding,
                                   runtime_code_check=False)
    if observation_t.shape[0] != observation_tp1.shape[0]:
      raise ValueError(
          f"{where}: `observation_t` and `observation_tp1` must have the same "
          f"batch size, got {observation_t.shape[0]} and "
          f"{observation_tp1.shape[0]}.")
    if observation_t.dtype != observation_tp1.dtype:
      raise ValueError(
          f"{where}: `observation_t` and `observation_tp1` must have the same "
          f"dtype, got {observation_t.dtype} and {observation_tp1.dtype}.")
    return inverse_apply(params, observation_t, observation_tp1)

  return EmbeddingNetwork(init=init, embed=embed,
                          inverse_logits=inverse_logits,
                          observation_shape=observation_shape,
                          num_actions=int(num_actions),
                          embedding_dim=int(embedding_dim),
                          encoding=encoding)
