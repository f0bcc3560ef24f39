"""ngu_jax.networks: torsos, the NGU embedding network and RND networks."""

from ngu_jax.networks.embedding import Embedder
from ngu_jax.networks.embedding import EmbeddingNetwork
from ngu_jax.networks.embedding import InverseDynamicsHead
from ngu_jax.networks.embedding import make_embedding_network
from ngu_jax.networks.rnd import ObservationNormStats
from ngu_jax.networks.rnd import RNDNetworks
from ngu_jax.networks.rnd import RNDParams
from ngu_jax.networks.rnd import make_rnd_networks
from ngu_jax.networks.rnd import normalize_observation
from ngu_jax.networks.rnd import observation_normalizer_init
from ngu_jax.networks.rnd import observation_normalizer_update
from ngu_jax.networks.torsos import AtariConvStack
from ngu_jax.networks.torsos import AtariTorso
from ngu_jax.networks.torsos import GridTorso
from ngu_jax.networks.torsos import MLPTorso
from ngu_jax.networks.torsos import check_observation_batch
from ngu_jax.networks.torsos import encode_observation
from ngu_jax.networks.torsos import make_torso
from ngu_jax.networks.torsos import resolve_torso_kind
from ngu_jax.networks.uvfa import DuelingHead
from ngu_jax.networks.uvfa import LSTMState
from ngu_jax.networks.uvfa import UVFAInputs
from ngu_jax.networks.uvfa import UVFANetwork
from ngu_jax.networks.uvfa import embed_extras
from ngu_jax.networks.uvfa import make_uvfa_network
from ngu_jax.types import ObservationEncoding

__all__ = (
    "AtariConvStack",
    "AtariTorso",
    "Embedder",
    "EmbeddingNetwork",
    "GridTorso",
    "InverseDynamicsHead",
    "MLPTorso",
    "ObservationEncoding",
    "ObservationNormStats",
    "RNDNetworks",
    "RNDParams",
    "check_observation_batch",
    "encode_observation",
    "make_embedding_network",
    "make_rnd_networks",
    "make_torso",
    "normalize_observation",
    "observation_normalizer_init",
    "observation_normalizer_update",
    "resolve_torso_kind",
    "DuelingHead",
    "LSTMState",
    "UVFAInputs",
    "UVFANetwork",
    "embed_extras",
    "make_uvfa_network",
)
