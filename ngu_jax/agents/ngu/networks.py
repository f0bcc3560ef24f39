"""The NGU networks: Q-network, embedding network and RND networks.

Badia et al. (2020), "Never Give Up", Sec. 2-3 and App. H: the recurrent
dueling UVFA Q(x, a, j) (Sec. 3), the controllable-state embedding f with
its inverse-dynamics head h (Sec. 2, "Episodic memory"), and the RND target
g and predictor g_hat (Sec. 2, "Integrating life-long curiosity"), in the
style of Acme's per-agent `networks.py`:

  make_networks(config, observation_shape, num_actions, encoding)
      -> NGUNetworks                       (pure haiku transforms)
  init_params(networks, key) -> NGUParams  (what the learner publishes)

The layers live in `ngu_jax.networks`; this module only picks and sizes
them from an `NGUConfig`. The acting functions are in
`ngu_jax.agents.ngu.actor`, the learner in `ngu_jax.agents.ngu.learning`.
"""

import functools
from typing import NamedTuple, Optional, Sequence, Tuple, Union

import haiku as hk
import jax

from ngu_jax import types as ngu_types
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.networks import casm as casm_lib
from ngu_jax.networks import embedding as embedding_lib
from ngu_jax.losses import retrace
from ngu_jax.networks import rnd as rnd_lib
from ngu_jax.networks import separate_exploit
from ngu_jax.networks import split_uvfa
from ngu_jax.networks import uvfa
from ngu_jax.types import ObservationEncoding


class NGUNetworks(NamedTuple):
  """The three networks of NGU (Sec. 2-3, App. H); see `make_networks`."""
  uvfa: uvfa.UVFANetwork  # Q(x, a, j): recurrent dueling UVFA (with
  # config.loss.split_values, Agent57's pair theta^e, theta^i: `split_uvfa`).
  # f and inverse dynamics h, or (config.embedding_loss "casm") f and CASM.
  embedding: Union[embedding_lib.EmbeddingNetwork, casm_lib.CASMNetwork]
  rnd: rnd_lib.RNDNetworks  # RND target g and predictor g_hat.


class NGUParams(NamedTuple):
  """Parameters the learner publishes to the actors (a pytree).

  Attributes:
    q: online UVFA parameters theta.
    embedding: parameters of f and h (or of f and CASM's action embedding,
      transformer and g: `config.embedding_loss`).
    rnd_predictor: trained RND predictor g_hat.
    rnd_target: fixed random RND target g (never trained).
    rnd_observation_stats: `ObservationNormStats` whitening the RND inputs
      (used only with `config.rnd_observation_normalization`).
  """
  q: hk.Params
  embedding: hk.Params
  rnd_predictor: hk.Params
  rnd_target: hk.Params
  rnd_observation_stats: rnd_lib.ObservationNormStats


# Networks built for the latest (config, observation spec) pairs: the same
# arguments return the same `NGUNetworks` object, so that the functions
# jitted over it (`learning.sgd_step`, `actor.select_action`, closed over
# config and networks) are the same functions and compile once per process
# -- for a resumed run, the evaluation actors, or a sweep's repeated configs.
NETWORKS_CACHE_SIZE = 8


def make_networks(config: NGUConfig, observation_shape: Sequence[int],
                  num_actions: int,
                  encoding: Optional[ObservationEncoding] = None
                  ) -> NGUNetworks:
  """Builds the UVFA, embedding and RND networks from the config.

  The networks are pure functions (haiku transforms) with no state of their
  own, so equal arguments return the same object (the latest
  `NETWORKS_CACHE_SIZE` are kept): what is jitted over them compiles once.

  Args:
    config: the agent's config (torso, sizes, N).
    observation_shape: shape of ONE observation, e.g. (84, 84, 1).
    num_actions: A.
    encoding: what the observations are, as the environment declares it
      (`BatchedEnv.observation_encoding()`); None: "pixels". The Q-network
      and the embedding network encode their inputs with it. The RND
      networks do too, except with `config.rnd_observation_normalization`:
      they then receive whitened float observations of the raw shape
      (`networks.normalize_observation`) and use them as they are
      (`ngu_jax.types.FEATURES`).

  Returns:
    An `NGUNetworks`.
  """
  encoding = ngu_types.PIXELS if encoding is None else encoding
  return _cached_networks(config, tuple(int(d) for d in observation_shape),
                          int(num_actions), encoding)


@functools.lru_cache(maxsize=NETWORKS_CACHE_SIZE)
def _cached_networks(config: NGUConfig, observation_shape: Tuple[int, ...],
                     num_actions: int, encoding: ObservationEncoding
                     ) -> NGUNetworks:
  """`make_networks` for hashable, normalised arguments."""
  q_network = uvfa.make_uvfa_network(
      observation_shape, num_actions, config.num_mixtures, config.torso,
      config.lstm_size, config.head_hidden,
      grid_output_size=config.grid_output_size,
      grid_filters=config.grid_filters,
      mlp_hidden_sizes=config.mlp_hidden_sizes, encoding=encoding,
      zero_output_init=config.zero_q_output_init)
  if config.loss.split_values:
    # Agent57 Sec. 3.1: theta^e and theta^i, combined with the learner's
    # beta table and value transform.
    q_network = split_uvfa.make_split_uvfa_network(
        q_network, config.mixture_betas(),
        None if config.value_transform == "identity"
        else retrace.signed_hyperbolic_pair(config.value_transform_eps))
  if config.separate_exploit_network:
    # Not in the paper: j = 0 on theta^0, j >= 1 on theta^x (a diagnostic
    # of the shared weights; `networks.separate_exploit`).
    q_network = separate_exploit.make_separate_exploit_network(q_network)
  if config.embedding_loss == "casm":
    # RECODE's CASM (003 Sec. 4): the same f plus the action embedding,
    # causal transformer and classifier g, over the replayed window.
    embedding_network = casm_lib.make_casm_network(
        observation_shape, num_actions, config.embedding_dim, config.torso,
        max_length=config.burn_in + config.trace_length,
        num_layers=config.casm_num_layers, width=config.casm_width,
        num_heads=config.casm_num_heads, mlp_hidden=config.casm_mlp_hidden,
        hidden_size=config.inverse_dynamics_hidden,
        grid_filters=config.grid_filters,
        mlp_hidden_sizes=config.mlp_hidden_sizes, encoding=encoding)
  else:
    embedding_network = embedding_lib.make_embedding_network(
        observation_shape, num_actions, config.embedding_dim, config.torso,
        hidden_size=config.inverse_dynamics_hidden,
        grid_filters=config.grid_filters,
        mlp_hidden_sizes=config.mlp_hidden_sizes, encoding=encoding)
  rnd_networks = rnd_lib.make_rnd_networks(
      observation_shape, config.rnd_output_dim, config.torso,
      grid_filters=config.grid_filters,
      mlp_hidden_sizes=config.mlp_hidden_sizes,
      encoding=(ngu_types.FEATURES if config.rnd_observation_normalization
                else encoding))
  return NGUNetworks(uvfa=q_network, embedding=embedding_network,
                     rnd=rnd_networks)


def init_params(networks: NGUNetworks, key: jax.Array) -> NGUParams:
  """Fresh parameters of the three networks (independent keys)."""
  q_key, embedding_key, rnd_key = jax.random.split(key, 3)
  rnd_params = networks.rnd.init(rnd_key)
  return NGUParams(
      q=networks.uvfa.init(q_key),
      embedding=networks.embedding.init(embedding_key),
      rnd_predictor=rnd_params.predictor,
      rnd_target=rnd_params.target,
      rnd_observation_stats=rnd_lib.observation_normalizer_init(
          networks.rnd.observation_shape))
