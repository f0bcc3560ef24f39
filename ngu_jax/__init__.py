"""ngu_jax: composable JAX components for Never Give Up (Badia et al., 2020)."""

from ngu_jax import agents
from ngu_jax import envs
from ngu_jax import intrinsic
from ngu_jax import losses
from ngu_jax import meta
from ngu_jax import mixtures
from ngu_jax import networks
from ngu_jax import replay
from ngu_jax._checks import runtime_checks_enabled
from ngu_jax._checks import set_runtime_checks

__version__ = "0.1.0"

__all__ = (
    "agents",
    "envs",
    "intrinsic",
    "losses",
    "meta",
    "mixtures",
    "networks",
    "replay",
    "runtime_checks_enabled",
    "set_runtime_checks",
)
