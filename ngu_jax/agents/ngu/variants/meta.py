"""The meta-controllers: App. A's fixed mixtures and Agent57's UCB bandits.

* "none": lane l plays mixture j = l mod N for its whole life (NGU App. A).
* "ucb": each training lane's sliding-window UCB bandit (Agent57 Sec. 3.2,
  App. G; `ngu_jax.meta.sliding_window_ucb`) picks j at every episode start,
  rewarded with the finished episode's undiscounted r^e; a fresh bandit
  plays arm 0 first (each arm once, in order).

Each is a `MetaController` part (`variants.parts`). Evaluation lanes play
their given mixture with either.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.agents.ngu.variants import parts
from ngu_jax.meta import sliding_window_ucb as ucb


def _fixed_init(config, mixture, evaluation):
  del config, evaluation
  return {}, mixture


def _fixed_episode_start(config, state, key, finished, episode_return):
  del config, state, finished, episode_return
  return {}, key


FIXED = parts.MetaController(
    init=_fixed_init, episode_start=_fixed_episode_start,
    fixed_mixtures=True, needs_episode_return=False)


def _ucb_init(config: NGUConfig, mixture, evaluation):
  if evaluation:
    return {}, mixture
  b = mixture.shape[0]
  bandit = jax.vmap(lambda _: ucb.init(config.meta.window))(jnp.arange(b))
  return {"bandit": bandit}, np.zeros(b, np.int32)


def _ucb_episode_start(config: NGUConfig, state, key, finished,
                       episode_return):
  """Where a lane's episode ended, its bandit records (j, undiscounted r^e)
  and draws j for the new one (Sec. 3.2)."""
  if state.bandit is None:  # Evaluation lanes.
    return {}, key
  b = state.mixture_index.shape[0]
  key, bandit_key = jax.random.split(key)
  bandit, mixture_index = jax.vmap(functools.partial(
      ucb.episode_step, num_arms=config.num_mixtures,
      epsilon=config.meta.epsilon, beta=config.meta.beta,
      normalise=config.meta.normalise_returns))(
          state.bandit, jax.random.split(bandit_key, b), state.mixture_index,
          episode_return, finished)
  return {"bandit": bandit, "mixture_index": mixture_index}, key


UCB = parts.MetaController(
    init=_ucb_init, episode_start=_ucb_episode_start, fixed_mixtures=False,
    needs_episode_return=True)


parts.register("meta", "none", FIXED)
parts.register("meta", "ucb", UCB)
