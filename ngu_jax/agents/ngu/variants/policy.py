"""The behaviour policies: eps-greedy and Boltzmann (`config.policy`).

* "epsilon_greedy": lane l acts eps_l-greedily on Q(x, ., j) (NGU App. A;
  Ape-X's eps_l = 0.4^(1 + 7 l / (L - 1))).
* "boltzmann": a ~ softmax(Q(x, ., j) / tau) (DiCE 004 Sec. 3.1), one tau
  per lane per episode from `config.policy.temperature_source`: each lane's
  Bandits Vote ensemble over x = log(1 + 1/tau) rewarded with the episode's
  undiscounted r^e (App. A), a fixed tau, or x drawn uniformly (Table 4's
  ablations).

Each is a `BehaviourPolicy` part (`variants.parts`).
"""

import math
from typing import Tuple

import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.agents.ngu.variants import parts
from ngu_jax.losses import dice
from ngu_jax.losses import retrace
from ngu_jax.meta import bandits_vote


def epsilon_greedy_sample(key: jax.Array, q: jax.Array, epsilon: jax.Array
                          ) -> Tuple[jax.Array, jax.Array]:
  """Samples a ~ eps-greedy(q) and returns mu(a) (App. A; Ape-X).

  The policy is `retrace.epsilon_greedy_probs` (ties share the greedy mass
  equally), so mu equals `retrace.behaviour_probability(q, a, epsilon)`.

  Args:
    key: PRNG key.
    q: action values shaped [B, A].
    epsilon: per-lane epsilons shaped [B] (or a scalar).

  Returns:
    (actions int32 [B], mu float32 [B]).
  """
  probs = retrace.epsilon_greedy_probs(q, epsilon)
  logits = jnp.where(probs > 0, jnp.log(jnp.maximum(probs, 1e-30)), -jnp.inf)
  actions = jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)
  # Under jit on XLA:CPU (jax 0.4.30 and 0.10.2), reading mu with
  # `take_along_axis(probs, actions)` here returned the probability of another
  # action (reproduced: test_q_inputs_and_behaviour_probability fails with
  # it); the one-hot sum is correct.
  mu = jnp.sum(probs * jax.nn.one_hot(actions, probs.shape[-1],
                                      dtype=probs.dtype), axis=-1)
  return actions, mu


def boltzmann_sample(key: jax.Array, q: jax.Array, tau: jax.Array
                     ) -> Tuple[jax.Array, jax.Array]:
  """Samples a ~ softmax(q / tau) and returns mu(a) (DiCE Sec. 3.1).

  Args:
    key: PRNG key.
    q: action values shaped [B, A].
    tau: per-lane temperatures > 0 shaped [B].

  Returns:
    (actions int32 [B], mu float32 [B]).
  """
  probs = dice.boltzmann_probs(q, tau)
  actions = dice.sample_boltzmann(key, q, tau).astype(jnp.int32)
  # The one-hot sum, not take_along_axis (`epsilon_greedy_sample`).
  mu = jnp.sum(probs * jax.nn.one_hot(actions, probs.shape[-1],
                                      dtype=probs.dtype), axis=-1)
  return actions, mu


def bva_config(config: NGUConfig) -> bandits_vote.BVAConfig:
  """The lanes' Bandits Vote ensembles (DiCE App. A; `config.policy`)."""
  p = config.policy
  return bandits_vote.BVAConfig(
      num_bandits=p.bva_num_bandits, num_candidates=p.bva_num_candidates,
      learning_rates=p.bva_learning_rates, widths=p.bva_widths,
      c=p.bva_c, x_high=_x_high(config), tile_size=p.bva_tile_size)


def _x_high(config: NGUConfig) -> float:
  """The largest x = log(1 + 1/tau): 1/tau <= `bva_max_inverse_tau`."""
  return math.log1p(config.policy.bva_max_inverse_tau)


# ---------------------------------------------------------- eps-greedy


def _no_slots_init(config, num_lanes, key, evaluation):
  del config, num_lanes, evaluation
  return {}, key


def _no_episode_start(config, state, key, finished, episode_return):
  del config, state, finished, episode_return
  return {}, key


def _epsilon_greedy(config, state, key, q, epsilon):
  del config, state
  action, mu = epsilon_greedy_sample(key, q, epsilon)
  return action, mu, None


EPSILON_GREEDY = parts.BehaviourPolicy(
    init=_no_slots_init, episode_start=_no_episode_start,
    sample=_epsilon_greedy, has_temperatures=False,
    tau=lambda state: None,
    needs_episode_return=False)


# ----------------------------------------------------------- Boltzmann


def _boltzmann_init(config, num_lanes, key, evaluation):
  """DiCE App. A: each lane's first episode plays a drawn (or the fixed) x;
  later ones are drawn at episode starts (`episode_start`). Evaluation
  lanes are eps-greedy (no slots)."""
  if evaluation:
    return {}, key
  key, temperature_key = jax.random.split(key)
  source = config.policy.temperature_source
  b = num_lanes
  if source == "fixed":
    x = jnp.full((b,), math.log1p(1. / config.policy.boltzmann_tau),
                 jnp.float32)
    return {"temperature_x": x, "bva": None}, key
  if source == "random":
    return {"temperature_x": jax.random.uniform(
        temperature_key, (b,), jnp.float32, 0., _x_high(config)),
            "bva": None}, key
  cfg = bva_config(config)
  init_key, draw_key = jax.random.split(temperature_key)
  states = jax.vmap(lambda k: bandits_vote.init(k, cfg))(
      jax.random.split(init_key, b))
  x = jax.vmap(lambda st, k: bandits_vote.sample_x(st, k, cfg))(
      states, jax.random.split(draw_key, b))
  return {"temperature_x": x, "bva": states}, key


def _boltzmann_episode_start(config, state, key, finished, episode_return):
  """The lane's temperature for its new episode where `finished`."""
  x, bva_state = state.temperature_x, state.bva
  if x is None:  # Evaluation lanes.
    return {}, key
  key, temperature_key = jax.random.split(key)
  source = config.policy.temperature_source
  b = x.shape[0]
  if source == "random":
    drawn = jax.random.uniform(temperature_key, (b,), jnp.float32, 0.,
                               _x_high(config))
    x = jnp.where(finished, drawn, x)
  elif source == "bva":
    cfg = bva_config(config)
    bva_state, x = jax.vmap(
        lambda st, k, done, g, cur: bandits_vote.episode_step(
            st, k, done, g, cur, cfg))(
                bva_state, jax.random.split(temperature_key, b), finished,
                episode_return, x)
  return {"temperature_x": x, "bva": bva_state}, key


def _tau(state):
  x = state.temperature_x
  return None if x is None else bandits_vote.tau_from_x(x)


def _boltzmann(config, state, key, q, epsilon):
  if state.temperature_x is None:  # Evaluation lanes: eps-greedy.
    return _epsilon_greedy(config, state, key, q, epsilon)
  tau = _tau(state)
  action, mu = boltzmann_sample(key, q, tau)
  return action, mu, tau


BOLTZMANN = parts.BehaviourPolicy(
    init=_boltzmann_init, episode_start=_boltzmann_episode_start,
    sample=_boltzmann, has_temperatures=True, tau=_tau,
    needs_episode_return=True)


parts.register("policy", "epsilon_greedy", EPSILON_GREEDY)
parts.register("policy", "boltzmann", BOLTZMANN)

