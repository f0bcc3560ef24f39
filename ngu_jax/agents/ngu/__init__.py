"""ngu_jax.agents.ngu: the Never Give Up agent (Badia et al., 2020)."""

from ngu_jax.agents.ngu.learning import LossExtras
from ngu_jax.agents.ngu.learning import check_batch
from ngu_jax.agents.ngu.learning import loss
from ngu_jax.agents.ngu.learning import loss_and_grad
from ngu_jax.types import SequenceBatch

__all__ = (
    "LossExtras",
    "SequenceBatch",
    "check_batch",
    "loss",
    "loss_and_grad",
)
