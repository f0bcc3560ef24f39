"""Deprecated alias of `ngu_jax.agents.ngu.value_loss` (NGU App. E value loss).

`ngu_jax.agents.ngu.losses` is deprecated; use
`ngu_jax.agents.ngu.value_loss`; it will be removed in the next release.
Every name here is the `value_loss` object itself (same classes, same
functions), so isinstance checks and saved states are unaffected.
"""

import warnings

from ngu_jax.agents.ngu.value_loss import FLOAT_STEP_FIELDS
from ngu_jax.agents.ngu.value_loss import STEP_FIELDS
from ngu_jax.agents.ngu.value_loss import VALUE_TRANSFORMS
from ngu_jax.agents.ngu.value_loss import LossExtras
from ngu_jax.agents.ngu.value_loss import check_batch
from ngu_jax.agents.ngu.value_loss import loss
from ngu_jax.agents.ngu.value_loss import loss_and_grad

warnings.warn(
    "ngu_jax.agents.ngu.losses is deprecated; use "
    "ngu_jax.agents.ngu.value_loss; it will be removed in the next release.",
    DeprecationWarning, stacklevel=2)

__all__ = (
    "FLOAT_STEP_FIELDS",
    "STEP_FIELDS",
    "VALUE_TRANSFORMS",
    "LossExtras",
    "check_batch",
    "loss",
    "loss_and_grad",
)
