"""ngu_jax.meta: controllers that choose a lane's policy per episode.

`sliding_window_ucb` is Agent57's meta-controller (Badia et al., 2020,
Sec. 3.2): a sliding-window UCB bandit over the N (beta_j, gamma_j) mixtures.
"""

from ngu_jax.meta import bandits_vote
from ngu_jax.meta import sliding_window_ucb

__all__ = ("bandits_vote", "sliding_window_ucb")
