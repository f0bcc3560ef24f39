"""ngu_jax.losses: inverse-dynamics, RND and transformed Retrace losses.

`split_values` holds Agent57's extrinsic / intrinsic value combination.
"""

from ngu_jax.losses.inverse_dynamics import inverse_dynamics_loss
from ngu_jax.losses.inverse_dynamics import l2_penalty
from ngu_jax.losses.rnd import rnd_error
from ngu_jax.losses.rnd import rnd_loss
from ngu_jax.losses.retrace import behaviour_probability
from ngu_jax.losses.retrace import epsilon_greedy_probs
from ngu_jax.losses.retrace import mixture_discounts
from ngu_jax.losses.retrace import mixture_rewards
from ngu_jax.losses.retrace import priorities
from ngu_jax.losses.retrace import signed_hyperbolic_pair
from ngu_jax.losses.retrace import transformed_retrace
from ngu_jax.losses.retrace import valid_mask
from ngu_jax.losses.split_values import combine_q
from ngu_jax.losses.split_values import combined_td_error

__all__ = (
    "inverse_dynamics_loss",
    "l2_penalty",
    "rnd_error",
    "rnd_loss",
    "behaviour_probability",
    "epsilon_greedy_probs",
    "mixture_discounts",
    "mixture_rewards",
    "priorities",
    "signed_hyperbolic_pair",
    "transformed_retrace",
    "valid_mask",
    "combine_q",
    "combined_td_error",
)
