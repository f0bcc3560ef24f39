"""Recurrent PPO with NGU's intrinsic reward: the library's components in another agent.

This file is what a user writes to put NGU's exploration bonus into their own
agent. PPO is the baseline here, not a product: a compact recurrent PPO in the
shape of purejaxrl's (Lu et al. 2022, `ppo_rnn.py`: `make_train(config) ->
train(key)`, one jitted program, vmapped over seeds) with CleanRL's choices
(Huang et al. 2022, `ppo.py`: GAE, clipped surrogate and value losses,
per-minibatch advantage normalisation, global gradient clipping). Written
from those descriptions, not copied.

What comes from the library, unchanged:

* `ngu_jax.networks.make_embedding_network`: f and the inverse-dynamics head
  h (NGU Sec. 2), trained on the rollout's transitions with
  `ngu_jax.losses.inverse_dynamics_loss`;
* `ngu_jax.intrinsic.episodic`: each lane's episodic memory (Alg. 1), wiped
  at its episode starts (`episodic.reset`);
* `ngu_jax.networks.make_rnd_networks` + `ngu_jax.losses.rnd_loss` +
  `ngu_jax.intrinsic.lifelong.modulator`: the life-long novelty alpha
  (eq. 1's modulator), with RND's observation whitening;
* `ngu_jax.intrinsic.lifelong.ngu_intrinsic_reward`: r^i = r^episodic *
  clip(alpha, 1, L) (eq. 1);
* `ngu_jax.intrinsic.recode`: RECODE's shared clustering memory instead of
  the episodic one (`intrinsic="recode"`), and `lifelong.rnd_reward` for the
  RND-only bonus (`intrinsic="rnd"`).

The intrinsic reward of the transition x_t -> x_{t+1} is the novelty of
x_{t+1} (as NGU credits r^i_{t+1}), divided by a running standard deviation
of all intrinsic rewards (`lifelong.divide_by_running_std`, the RND paper's
habit of normalising the bonus, our choice of horizon), and PPO optimises
r^e + beta * r^i with one value head, both returns episodic; or, with
`intrinsic_return="non_episodic"`, as the RND paper does (Burda et al.
2019, Sec. 2.3): two value heads, the intrinsic return not cut at episode
ends, so that ending an episode (at DoorKey's goal) does not forgo the
bonus that staying would pay. `intrinsic_normalization="standardize"`
subtracts the running mean too (`lifelong.standardize`): the bonus then
averages 0 per step, which removes that incentive with one value head.
`normalize_advantages=False` uses the advantages as they are (torch-ac's
MiniGrid PPO) instead of CleanRL's per-minibatch normalisation.

Environments: any `ngu_jax.envs.FunctionalEnv` (`envs.make_functional`),
whose auto-reset step after a LAST ignores the action: such steps are masked
out of every loss. `python -m examples.ppo_ngu --env gymnax/DeepSea-bsuite
--env-kwarg size=10 --total-env-steps 200000 --seeds 0 1` trains and prints
the training success rate per update; with `--output-dir DIR` it trains in
chunks instead (`run`): a metrics.csv per seed with the training and greedy
(`make_pieces(...).evaluate`) success and return, .npz checkpoints and
`--resume`, as `experiments.minigrid` runs it.
"""

import argparse
import dataclasses
import functools
import json
import os
import time
from typing import Any, Dict, NamedTuple, Optional, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments import train as train_cli
from ngu_jax import envs
from ngu_jax import networks
from ngu_jax import npz_io
from ngu_jax.envs import base as env_base
from ngu_jax.envs import functional
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.intrinsic import recode
from ngu_jax.loops import metrics_log
from ngu_jax.losses import inverse_dynamics_loss
from ngu_jax.losses import rnd as rnd_losses
from ngu_jax.types import FEATURES

INTRINSIC = ("none", "ngu", "rnd", "recode")
INTRINSIC_RETURNS = ("episodic", "non_episodic")
INTRINSIC_NORMALIZATIONS = ("std", "standardize")


@dataclasses.dataclass(frozen=True)
class PPOConfig:
  """PPO (CleanRL's defaults for small tasks) and the bonus's settings."""
  num_envs: int = 16
  num_steps: int = 32  # rollout length T per update
  total_env_steps: int = 200_000
  update_epochs: int = 4
  num_minibatches: int = 4  # over lanes: each keeps its whole sequence
  learning_rate: float = 2.5e-4
  gamma: float = 0.99
  gae_lambda: float = 0.95
  clip_eps: float = 0.2
  ent_coef: float = 0.01
  vf_coef: float = 0.5
  max_grad_norm: float = 0.5
  hidden: int = 64
  gru_size: int = 64
  # The bonus: "none" (plain PPO), "ngu", "rnd" or "recode".
  intrinsic: str = "ngu"
  beta: float = 0.1  # weight of the normalised r^i
  # "episodic": PPO optimises r^e + beta r^i with one value head, both
  # returns cut at termination. "non_episodic": the RND paper's (Burda et
  # al. 2019, Sec. 2.3) two value heads V^E and V^I, the intrinsic return
  # running on across episode ends, and A = A^E + beta A^I.
  intrinsic_return: str = "episodic"
  # "std": r^i / running std (the RND paper's habit; the bonus stays >= 0).
  # "standardize": (r^i - running mean) / running std
  # (`lifelong.standardize`): mean 0, so an always-positive bonus no longer
  # pays the agent to stay in the episode instead of ending it at the goal.
  intrinsic_normalization: str = "std"
  # CleanRL's `norm_adv`: each minibatch's advantages to zero mean and unit
  # std. torch-ac (rl-starter-files, MiniGrid) does not normalise them.
  normalize_advantages: bool = True
  aux_learning_rate: float = 5e-4  # f, h and the RND predictor
  embedding_dim: int = 32
  num_neighbors: int = 10
  memory_capacity: int = 1000  # slots per lane (a ring buffer)
  kernel_epsilon: float = 1e-3
  rnd_output_dim: int = 64
  rnd_clip: float = 5.0  # L of eq. 1
  horizon: int = 1000  # of every running statistic (in values)
  eval_episodes: int = 16  # greedy episodes per evaluation (`run`)

  def __post_init__(self):
    if self.intrinsic not in INTRINSIC:
      raise ValueError(f"PPOConfig: `intrinsic` must be one of {INTRINSIC}, "
                       f"got {self.intrinsic!r}.")
    if self.intrinsic_return not in INTRINSIC_RETURNS:
      raise ValueError("PPOConfig: `intrinsic_return` must be one of "
                       f"{INTRINSIC_RETURNS}, got {self.intrinsic_return!r}.")
    if self.intrinsic_normalization not in INTRINSIC_NORMALIZATIONS:
      raise ValueError("PPOConfig: `intrinsic_normalization` must be one of "
                       f"{INTRINSIC_NORMALIZATIONS}, got "
                       f"{self.intrinsic_normalization!r}.")
    if not isinstance(self.normalize_advantages, bool):
      raise ValueError("PPOConfig: `normalize_advantages` must be a bool "
                       f"(True or False), got {self.normalize_advantages!r}.")
    if self.num_envs % self.num_minibatches:
      raise ValueError("PPOConfig: `num_envs` must be a multiple of "
                       f"`num_minibatches`, got {self.num_envs} and "
                       f"{self.num_minibatches}.")
    for name in ("num_envs", "num_steps", "total_env_steps", "update_epochs",
                 "num_minibatches", "eval_episodes"):
      if getattr(self, name) < 1:
        raise ValueError(f"PPOConfig: `{name}` must be >= 1, got "
                         f"{getattr(self, name)!r}.")

  @property
  def num_value_heads(self) -> int:
    return 2 if self.intrinsic_return == "non_episodic" else 1

  @property
  def num_updates(self) -> int:
    return max(1, self.total_env_steps // (self.num_envs * self.num_steps))


# ---------------------------------------------------------------- PPO itself


def gae(rewards: jax.Array, values: jax.Array, discounts: jax.Array,
        valid: jax.Array, last_value: jax.Array, gamma: float, lam: float,
        episodic: bool = True) -> Tuple[jax.Array, jax.Array]:
  """Generalised advantage estimates (Schulman et al. 2016) over [T, B].

  Step t's transition has reward r_t, continuation `discounts[t]` (0 where
  x_{t+1} ends the episode by termination) and is `valid` unless it is an
  auto-reset step (its action is ignored): there the advantage is 0.
  delta_t = r_t + gamma d_t V_{t+1} - V_t and
  A_t = delta_t + gamma lam d_t A_{t+1}.

  episodic (the default): the trace is cut at an invalid step (A_{t+1} = 0
  past it; V_{t+1} is the value of the episode's last observation, which
  bootstraps a truncated episode). `episodic=False`: the return of the RND
  paper's intrinsic stream (Burda et al. 2019, Sec. 2.3), which runs on
  across episode ends: d_t = 1 everywhere and an auto-reset step is skipped,
  so the transition into an episode's last observation continues with the
  value and advantage of the next episode's first step.

  Returns:
    (advantages, returns = advantages + values), both [T, B].
  """
  if not episodic:
    discounts = jnp.ones_like(discounts)

  def body(carry, inputs):
    next_value, next_advantage = carry
    reward, value, discount, ok = inputs
    delta = reward + gamma * discount * next_value - value
    advantage = delta + gamma * lam * discount * next_advantage
    if episodic:
      carry = (value, jnp.where(ok, advantage, 0.))
    else:
      carry = jax.tree_util.tree_map(
          lambda new, old: jnp.where(ok, new, old), (value, advantage), carry)
    return carry, jnp.where(ok, advantage, 0.)

  _, advantages = jax.lax.scan(
      body, (last_value, jnp.zeros_like(last_value)),
      (rewards, values, discounts, valid), reverse=True)
  return advantages, advantages + values


def ppo_loss(logits: jax.Array, values: jax.Array, actions: jax.Array,
             old_log_probs: jax.Array, old_values: jax.Array,
             advantages: jax.Array, returns: jax.Array, valid: jax.Array,
             clip_eps: float, vf_coef: float, ent_coef: float,
             normalize_advantages: bool = True
             ) -> Tuple[jax.Array, Dict[str, jax.Array]]:
  """PPO's clipped objective (Schulman et al. 2017, eq. 7) as CleanRL writes it.

  Over the valid steps (masked means): advantages normalised to zero mean
  and unit std (unless `normalize_advantages` is False, as in torch-ac);
  policy loss mean(max(-A rho, -A clip(rho, 1 - eps,
  1 + eps))) with rho = pi(a)/pi_old(a); value loss 0.5 mean(max((V - R)^2,
  (V_old + clip(V - V_old, -eps, eps) - R)^2)), summed over value heads
  (`values`, `old_values`, `returns` [..., heads], as the RND paper's
  V^E + V^I); entropy bonus.
  loss = policy + vf_coef * value - ent_coef * entropy. Shapes: logits
  [..., A], `values`, `old_values`, `returns` [...] or [..., heads],
  everything else [...].
  """
  mask = valid.astype(jnp.float32)
  count = jnp.maximum(mask.sum(), 1.)
  mean = lambda x: jnp.sum(x * mask) / count
  adv_mean = mean(advantages)
  adv_std = jnp.sqrt(mean((advantages - adv_mean) ** 2))
  adv = ((advantages - adv_mean) / (adv_std + 1e-8) if normalize_advantages
         else advantages)
  log_probs = jax.nn.log_softmax(logits)
  log_prob = jnp.take_along_axis(log_probs, actions[..., None], -1)[..., 0]
  ratio = jnp.exp(log_prob - old_log_probs)
  policy = mean(jnp.maximum(-adv * ratio,
                            -adv * jnp.clip(ratio, 1 - clip_eps,
                                            1 + clip_eps)))
  clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
  squared = jnp.maximum((values - returns) ** 2, (clipped - returns) ** 2)
  if squared.ndim > mask.ndim:  # several heads: their losses add up
    squared = jnp.sum(squared, axis=-1)
  value = 0.5 * mean(squared)
  entropy = mean(-jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1))
  loss = policy + vf_coef * value - ent_coef * entropy
  return loss, {"policy_loss": policy, "value_loss": value,
                "entropy": entropy,
                "clip_fraction": mean((jnp.abs(ratio - 1) > clip_eps
                                       ).astype(jnp.float32))}


# ----------------------------------------------------------------- networks


def _make_actor_critic(env: functional.FunctionalEnv, config: PPOConfig):
  """A GRU actor-critic: MLP torso -> GRU (reset at episode starts) ->
  policy logits and value. `apply(params, obs [T, B, ...], first [T, B],
  h [B, H]) -> (logits [T, B, A], values [T, B], h)`; values [T, B, 2]
  (V^E, V^I) with `config.num_value_heads` 2."""
  encoding = env.observation_encoding()
  num_actions = env.num_actions

  def forward(observation, first, h):
    t, b = first.shape
    flat = observation.reshape((t * b,) + observation.shape[2:])
    x = networks.encode_observation(flat, encoding).reshape(t * b, -1)
    x = hk.nets.MLP([config.hidden, config.hidden], activate_final=True)(x)
    x = x.reshape(t, b, -1)
    core = hk.GRU(config.gru_size)

    def step(h, inputs):
      x_t, first_t = inputs
      h = jnp.where(first_t[:, None], jnp.zeros_like(h), h)
      out, h = core(x_t, h)
      return h, out

    h, outs = hk.scan(step, h, (x, first))
    logits = hk.Linear(num_actions, w_init=hk.initializers.Orthogonal(0.01)
                       )(outs)
    heads = config.num_value_heads
    values = hk.Linear(heads, w_init=hk.initializers.Orthogonal(1.))(outs)
    return logits, (values[..., 0] if heads == 1 else values), h

  return hk.without_apply_rng(hk.transform(forward))


class Bonus(NamedTuple):
  """The library's intrinsic-reward parts for this environment."""
  embedding: Optional[networks.EmbeddingNetwork]
  rnd: Optional[networks.RNDNetworks]
  memory_config: Optional[episodic.EpisodicMemoryConfig]
  recode_config: Optional[recode.RecodeConfig]


def make_bonus(env: functional.FunctionalEnv, config: PPOConfig) -> Bonus:
  shape = env.observation_spec().shape
  encoding = env.observation_encoding()
  uses = config.intrinsic
  embedding = rnd = memory = recode_config = None
  if uses in ("ngu", "recode"):
    embedding = networks.make_embedding_network(
        shape, env.num_actions, config.embedding_dim, encoding=encoding,
        mlp_hidden_sizes=(config.hidden,), hidden_size=config.hidden)
  if uses in ("ngu", "rnd"):
    # RND whitens its inputs, which are then plain features.
    rnd = networks.make_rnd_networks(
        shape, config.rnd_output_dim, encoding=FEATURES,
        mlp_hidden_sizes=(config.hidden,))
  if uses == "ngu":
    memory = episodic.EpisodicMemoryConfig(
        capacity=config.memory_capacity, num_neighbors=config.num_neighbors,
        kernel_epsilon=config.kernel_epsilon,
        distance_horizon=config.horizon)
  if uses == "recode":
    recode_config = recode.RecodeConfig()
  return Bonus(embedding, rnd, memory, recode_config)


class BonusState(NamedTuple):
  """Everything the bonus carries between steps (a pytree; None if unused)."""
  params: Any  # {"embedding": ..., "rnd": RNDParams}
  opt_state: Any
  memory: Any  # episodic.EpisodicMemoryState [B] or recode.RecodeState
  obs_stats: Any  # RND's observation whitening statistics
  error_stats: lifelong.RunningStats  # the modulator's (or RND-only's)
  reward_stats: lifelong.RunningStats  # for the final normalisation


def _flat(x):
  return x.reshape((-1,) + x.shape[2:])


def intrinsic_reward(bonus: Bonus, config: PPOConfig, state: BonusState,
                     observation: jax.Array, first: jax.Array
                     ) -> Tuple[jax.Array, jax.Array, BonusState]:
  """The raw bonus of B lanes' observations x_{t+1} ([B, ...]) and the new
  state; `first`: x_{t+1} starts an episode (its memory is wiped first and
  its bonus is 0, as in NGU). Returns (raw r^i [B], alpha [B], state)."""
  b = first.shape[0]
  alpha = jnp.ones((b,), jnp.float32)
  memory, error_stats, obs_stats = (state.memory, state.error_stats,
                                    state.obs_stats)
  if bonus.rnd is not None:
    whitened = networks.normalize_observation(obs_stats, observation)
    error = rnd_losses.rnd_error(
        bonus.rnd.predictor(state.params["rnd"].predictor, whitened),
        bonus.rnd.target(state.params["rnd"].target, whitened))
    statistic = (lifelong.modulator if config.intrinsic == "ngu"
                 else lifelong.rnd_reward)
    value, error_stats = statistic(error_stats, error, horizon=config.horizon,
                                   valid=obs_stats.count > 0)
  if config.intrinsic == "rnd":
    raw = value
  elif config.intrinsic == "ngu":
    alpha = value
    memory = episodic.reset(memory, first)
    embeddings = bonus.embedding.embed(state.params["embedding"], observation)
    r_episodic, memory = episodic.step(bonus.memory_config, memory, embeddings)
    raw = lifelong.ngu_intrinsic_reward(r_episodic, alpha, config.rnd_clip)
  elif config.intrinsic == "recode":
    embeddings = bonus.embedding.embed(state.params["embedding"], observation)
    raw, memory = recode.step(bonus.recode_config, memory, embeddings)
  else:
    raw = jnp.zeros((b,), jnp.float32)
  raw = jnp.where(first, 0., raw)
  return raw, alpha, state._replace(memory=memory, error_stats=error_stats)


def _bonus_losses(bonus: Bonus, params, obs_stats, observation,
                  next_observation, actions, valid):
  """Inverse dynamics for f and h, RND's predictor loss, on the valid
  transitions of the rollout (flattened [T * B])."""
  total, metrics = 0., {}
  if bonus.embedding is not None:
    logits = bonus.embedding.inverse_logits(params["embedding"], observation,
                                            next_observation)
    # Auto-reset transitions carry no action: masked out.
    inverse, aux = inverse_dynamics_loss(logits, actions, params["embedding"],
                                         mask=valid)
    total = total + inverse
    metrics["action_prediction_accuracy"] = aux["accuracy"]
  if bonus.rnd is not None:
    whitened = networks.normalize_observation(obs_stats, next_observation)
    loss, _ = rnd_losses.rnd_loss(
        bonus.rnd.predictor(params["rnd"].predictor, whitened),
        jax.lax.stop_gradient(bonus.rnd.target(params["rnd"].target,
                                               whitened)))
    total = total + loss
    metrics["rnd_loss"] = loss
  return total, metrics


# -------------------------------------------------------------------- train


class Transition(NamedTuple):
  observation: jax.Array  # x_t [T, B, ...]
  first: jax.Array  # x_t starts an episode
  valid: jax.Array  # the action at x_t is an agent decision (not LAST)
  action: jax.Array
  log_prob: jax.Array
  value: jax.Array
  extrinsic: jax.Array  # r^e_{t+1}
  intrinsic: jax.Array  # normalised r^i_{t+1}
  alpha: jax.Array
  discount: jax.Array  # of x_{t+1}
  next_observation: jax.Array
  ended: jax.Array  # x_{t+1} ends an episode (LAST)
  success: jax.Array  # ... with a positive last reward (DeepSea's treasure)


class Pieces(NamedTuple):
  """The training program in parts (`make_pieces`), for a host that logs,
  evaluates and checkpoints between updates (`run`)."""
  init: Any  # key -> runner state
  update: Any  # (runner, None) -> (runner, metrics of one update)
  evaluate: Any  # (runner, key) -> {"return", "success"}, greedy episodes
  env: functional.FunctionalEnv


def make_train(config: PPOConfig, env_name: str,
               env_kwargs: Optional[Dict[str, Any]] = None):
  """purejaxrl's shape: `train(key) -> (runner state, metrics [updates])`.

  Jit it, and vmap it over keys for seeds:
    train = jax.jit(jax.vmap(make_train(PPOConfig(), "gymnax/DeepSea-bsuite",
                                        {"size": 10})))
  """
  pieces = make_pieces(config, env_name, env_kwargs)

  def train(key: jax.Array):
    runner = pieces.init(key)
    return jax.lax.scan(pieces.update, runner, None, config.num_updates)

  return train


def make_pieces(config: PPOConfig, env_name: str,
                env_kwargs: Optional[Dict[str, Any]] = None) -> Pieces:
  """`make_train`'s init and update, and a greedy evaluation (`Pieces`)."""
  env = envs.make_functional(env_name, **dict(env_kwargs or {}))
  net = _make_actor_critic(env, config)
  bonus = make_bonus(env, config)
  b, t = config.num_envs, config.num_steps
  policy_opt = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                           optax.adam(config.learning_rate, eps=1e-5))
  bonus_opt = optax.adam(config.aux_learning_rate)
  obs_shape = env.observation_spec().shape
  normalise_bonus = (lifelong.standardize
                     if config.intrinsic_normalization == "standardize"
                     else lifelong.divide_by_running_std)

  def init(key):
    k_env, k_net, k_emb, k_rnd, k_rec = jax.random.split(key, 5)
    env_state, ts = jax.vmap(env.reset)(jax.random.split(k_env, b))
    dummy = jnp.zeros((1, 1) + obs_shape, env.observation_spec().dtype)
    params = net.init(k_net, dummy, jnp.ones((1, 1), bool),
                      jnp.zeros((1, config.gru_size)))
    bonus_params, memory = {}, None
    if bonus.embedding is not None:
      bonus_params["embedding"] = bonus.embedding.init(k_emb)
    if bonus.rnd is not None:
      bonus_params["rnd"] = bonus.rnd.init(k_rnd)
    if bonus.memory_config is not None:
      memory = episodic.init(bonus.memory_config, b, config.embedding_dim)
    if bonus.recode_config is not None:
      memory = recode.init(bonus.recode_config, config.embedding_dim, k_rec)
    bonus_state = BonusState(
        params=bonus_params, opt_state=bonus_opt.init(bonus_params),
        memory=memory,
        obs_stats=networks.observation_normalizer_init(obs_shape),
        error_stats=lifelong.init(), reward_stats=lifelong.init())
    return (params, policy_opt.init(params), bonus_state, env_state, ts,
            jnp.zeros((b, config.gru_size)), key)

  def rollout(carry, _):
    params, bonus_state, env_state, ts, h, key = carry
    key, k_act = jax.random.split(key)
    first = ts.step_type == env_base.StepType.FIRST
    logits, value, h = net.apply(params, ts.observation[None], first[None], h)
    action = jax.random.categorical(k_act, logits[0])
    log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits[0]),
                                   action[:, None], -1)[:, 0]
    env_state, next_ts = jax.vmap(env.step)(env_state, action)
    next_first = next_ts.step_type == env_base.StepType.FIRST
    raw, alpha, bonus_state = intrinsic_reward(
        bonus, config, bonus_state, next_ts.observation, next_first)
    valid = ts.step_type != env_base.StepType.LAST
    normalised, reward_stats = normalise_bonus(
        bonus_state.reward_stats, raw, horizon=config.horizon,
        valid=valid & ~next_first)
    bonus_state = bonus_state._replace(reward_stats=reward_stats)
    last = next_ts.step_type == env_base.StepType.LAST
    transition = Transition(
        observation=ts.observation, first=first, valid=valid, action=action,
        log_prob=log_prob, value=value[0], extrinsic=next_ts.reward,
        intrinsic=jnp.where(valid, normalised, 0.), alpha=alpha,
        discount=next_ts.discount, next_observation=next_ts.observation,
        ended=last, success=last & (next_ts.reward > 0))
    return (params, bonus_state, env_state, next_ts, h, key), transition

  def update(runner, _):
    params, opt_state, bonus_state, env_state, ts, h, key = runner
    h0 = h
    (_, bonus_state, env_state, ts, h, key), traj = jax.lax.scan(
        rollout, (params, bonus_state, env_state, ts, h, key), None, t)
    first = ts.step_type == env_base.StepType.FIRST
    _, last_value, _ = net.apply(params, ts.observation[None], first[None], h)
    if config.num_value_heads == 1:
      rewards = traj.extrinsic + config.beta * traj.intrinsic
      advantages, returns = gae(rewards, traj.value, traj.discount,
                                traj.valid, last_value[0], config.gamma,
                                config.gae_lambda)
    else:  # RND Sec. 2.3: V^E episodic, V^I non-episodic
      # (A rollout that ends on an episode's LAST step bootstraps V^I from
      # that last observation: the next episode's first is not seen yet.)
      adv_e, ret_e = gae(traj.extrinsic, traj.value[..., 0], traj.discount,
                         traj.valid, last_value[0, :, 0], config.gamma,
                         config.gae_lambda)
      adv_i, ret_i = gae(traj.intrinsic, traj.value[..., 1], traj.discount,
                         traj.valid, last_value[0, :, 1], config.gamma,
                         config.gae_lambda, episodic=False)
      advantages = adv_e + config.beta * adv_i
      returns = jnp.stack([ret_e, ret_i], axis=-1)

    def minibatch_loss(p, lanes):
      pick = lambda x: x[:, lanes]
      logits, values, _ = net.apply(p, pick(traj.observation),
                                    pick(traj.first), h0[lanes])
      return ppo_loss(logits, values, pick(traj.action), pick(traj.log_prob),
                      pick(traj.value), pick(advantages), pick(returns),
                      pick(traj.valid), config.clip_eps, config.vf_coef,
                      config.ent_coef, config.normalize_advantages)

    def epoch(carry, _):
      p, o, k = carry
      k, k_perm = jax.random.split(k)
      order = jax.random.permutation(k_perm, b).reshape(
          config.num_minibatches, -1)

      def minibatch(carry, lanes):
        p, o = carry
        (loss, metrics), grads = jax.value_and_grad(
            minibatch_loss, has_aux=True)(p, lanes)
        updates, o = policy_opt.update(grads, o, p)
        return (optax.apply_updates(p, updates), o), dict(metrics, loss=loss)

      (p, o), metrics = jax.lax.scan(minibatch, (p, o), order)
      return (p, o, k), metrics

    (params, opt_state, key), metrics = jax.lax.scan(
        epoch, (params, opt_state, key), None, config.update_epochs)
    metrics = jax.tree_util.tree_map(jnp.mean, metrics)

    # The bonus's own learning: f and h by inverse dynamics, RND's
    # predictor, and RND's observation statistics.
    if bonus.embedding is not None or bonus.rnd is not None:
      obs_stats = networks.observation_normalizer_update(
          bonus_state.obs_stats, _flat(traj.next_observation))
      (_, bonus_metrics), grads = jax.value_and_grad(
          functools.partial(_bonus_losses, bonus), has_aux=True)(
              bonus_state.params, obs_stats, _flat(traj.observation),
              _flat(traj.next_observation), _flat(traj.action),
              _flat(traj.valid))
      updates, bonus_opt_state = bonus_opt.update(
          grads, bonus_state.opt_state, bonus_state.params)
      bonus_state = bonus_state._replace(
          params=optax.apply_updates(bonus_state.params, updates),
          opt_state=bonus_opt_state, obs_stats=obs_stats)
      metrics.update(bonus_metrics)
    finished = jnp.sum(traj.ended)
    metrics.update(
        success_rate=jnp.sum(traj.success) / jnp.maximum(finished, 1),
        episodes=finished, successes=jnp.sum(traj.success),
        # r^e summed over the update's valid steps: over the episodes that
        # ended in it when rewards come at the episode's end (MiniGrid).
        extrinsic_sum=jnp.sum(jnp.where(traj.valid, traj.extrinsic, 0.)),
        extrinsic_reward=jnp.mean(traj.extrinsic),
        intrinsic_reward=jnp.mean(traj.intrinsic),
        alpha=jnp.mean(traj.alpha))
    return (params, opt_state, bonus_state, env_state, ts, h, key), metrics

  def evaluate(runner, key: jax.Array) -> Dict[str, jax.Array]:
    """One greedy (argmax) episode in each of `config.eval_episodes` fresh
    lanes with the runner's parameters: mean return and the fraction of
    episodes with a positive return (the success of goal tasks)."""
    params = runner[0]
    n = config.eval_episodes
    env_state, ts = jax.vmap(env.reset)(jax.random.split(key, n))
    h = jnp.zeros((n, config.gru_size))

    def running(carry):
      t, _, _, _, done, _ = carry
      return ~jnp.all(done) & (t < env.max_episode_steps)

    def body(carry):
      t, env_state, ts, h, done, ret = carry
      first = ts.step_type == env_base.StepType.FIRST
      logits, _, h = net.apply(params, ts.observation[None], first[None], h)
      env_state, ts = jax.vmap(env.step)(env_state,
                                         jnp.argmax(logits[0], -1))
      ret = ret + jnp.where(done, 0., ts.reward)
      done = done | (ts.step_type == env_base.StepType.LAST)
      return t + 1, env_state, ts, h, done, ret

    carry = (jnp.int32(0), env_state, ts, h, jnp.zeros((n,), bool),
             jnp.zeros((n,), jnp.float32))
    *_, ret = jax.lax.while_loop(running, body, carry)
    return {"return": jnp.mean(ret), "success": jnp.mean(ret > 0)}

  return Pieces(init, update, evaluate, env)


# ---------------------------------------------------------- runs on disk

METRICS_COLUMNS = ("env_steps", "updates", "episodes", "mean_episode_return",
                   "episode_success_rate", "eval_return", "eval_success",
                   "mean_intrinsic_reward", "mean_alpha",
                   "action_prediction_accuracy", "rnd_loss", "entropy",
                   "env_steps_per_s", "elapsed_s")
CHECKPOINT_FORMAT = "ngu_jax.examples.ppo_ngu/1"


def _rows(metrics: Dict[str, np.ndarray], seed_index: int
          ) -> Tuple[Dict[str, float], float]:
  """One log row's columns from the updates since the last row (one seed),
  and the number of episodes that ended in them."""
  pick = lambda name: np.asarray(metrics[name][seed_index], np.float64)
  episodes = float(pick("episodes").sum())
  row = {"mean_episode_return": (float(pick("extrinsic_sum").sum()) / episodes
                                 if episodes else float("nan")),
         "episode_success_rate": (float(pick("successes").sum()) / episodes
                                  if episodes else float("nan")),
         "mean_intrinsic_reward": float(pick("intrinsic_reward").mean()),
         "mean_alpha": float(pick("alpha").mean()),
         "entropy": float(pick("entropy").mean())}
  for name in ("action_prediction_accuracy", "rnd_loss"):
    row[name] = float(pick(name).mean()) if name in metrics else float("nan")
  return row, episodes


@functools.lru_cache(maxsize=8)
def _programs(config: PPOConfig, env_name: str, env_kwargs: Tuple[Any, ...],
              log_updates: int):
  """`run`'s jitted programs over vmapped seeds (init, `log_updates`
  updates, evaluate), kept for runs in the same process with the same
  settings (the budget aside: `config.total_env_steps` is 1 here)."""
  pieces = make_pieces(config, env_name, dict(env_kwargs))
  return (jax.jit(jax.vmap(pieces.init)),
          jax.jit(jax.vmap(lambda r: jax.lax.scan(pieces.update, r, None,
                                                  log_updates))),
          jax.jit(jax.vmap(pieces.evaluate)))


def run(config: PPOConfig, env_name: str, env_kwargs: Optional[Dict[str, Any]],
        seeds, output_dir: str, log_every: int, eval_every: int,
        checkpoint_every: int, resume: bool = False,
        progress: bool = True) -> str:
  """Trains the seeds side by side (vmapped), logging to disk; resumable.

  Writes `output_dir/seed_<s>/metrics.csv` (`METRICS_COLUMNS`; the layout of
  the compiled loop's vmapped runs, so `experiments.compare` reads both),
  `output_dir/config.json`, and `output_dir/checkpoint/` (the runner states
  as .npz, no pickle; `state.json` with the clock and each seed's row
  count and last row: the rows are in metrics.csv, cut back to that count
  on resume) every
  `checkpoint_every` env steps and at the end. With `resume`, continues
  from that checkpoint; its config (the budget aside) must equal this one.
  Intervals are rounded up to whole updates (`num_envs * num_steps` env
  steps), and the evaluation (`evaluate`, greedy) and checkpoint intervals
  and the budget up to whole log intervals.

  Returns:
    `output_dir`.
  """
  seeds = [int(s) for s in seeds]
  if not seeds or len(set(seeds)) != len(seeds):
    raise ValueError(f"run: `seeds` must be distinct, got {seeds}.")
  for name, value in (("log_every", log_every), ("eval_every", eval_every),
                      ("checkpoint_every", checkpoint_every)):
    if value < 1:
      raise ValueError(f"run: `{name}` must be >= 1, got {value}.")
  per_update = config.num_envs * config.num_steps
  updates_per = lambda steps: max(1, -(-int(steps) // per_update))
  log_updates = updates_per(log_every)
  # Evaluations and checkpoints fall on log rows.
  eval_updates = -(-updates_per(eval_every) // log_updates) * log_updates
  ckpt_updates = -(-updates_per(checkpoint_every) // log_updates) * log_updates
  total_updates = config.num_updates
  saved_config = {"ppo": {k: v for k, v in dataclasses.asdict(config).items()
                          if k != "total_env_steps"},
                  "env_name": env_name, "env_kwargs": dict(env_kwargs or {}),
                  "seeds": seeds, "log_every_updates": log_updates,
                  "eval_every_updates": eval_updates}
  saved_config = json.loads(json.dumps(saved_config))
  ckpt = os.path.join(output_dir, "checkpoint")
  # Per seed: the last row in memory, every row in its metrics.csv.
  rows = [metrics_log.MetricsRows(
      os.path.join(output_dir, f"seed_{seed}", metrics_log.METRICS_FILE),
      METRICS_COLUMNS) for seed in seeds]
  updates, elapsed, episodes = 0, 0., np.zeros(len(seeds))
  state = None
  if resume:
    directory = npz_io.find_directory(ckpt)
    state = npz_io.read_json(os.path.join(directory, "state.json"))
    if state.get("format") != CHECKPOINT_FORMAT:
      raise ValueError(f"run: {directory} is not a checkpoint of this "
                       f"example (format {state.get('format')!r}).")
    # Checkpoints from before `intrinsic_return` existed: one value head.
    state["config"]["ppo"].setdefault("intrinsic_return", "episodic")
    # ... and before `intrinsic_normalization`, `normalize_advantages`.
    state["config"]["ppo"].setdefault("intrinsic_normalization", "std")
    state["config"]["ppo"].setdefault("normalize_advantages", True)
    if state["config"] != saved_config:
      differ = sorted(k for k in set(state["config"]) | set(saved_config)
                      if state["config"].get(k) != saved_config.get(k))
      raise ValueError(f"run: the config differs from the checkpoint's in "
                       f"{differ}; resume with the same settings.")
  init, chunk, evaluate = _programs(
      dataclasses.replace(config, total_env_steps=1), env_name,
      tuple(sorted(dict(env_kwargs or {}).items())), log_updates)
  runner = init(jnp.stack([jax.random.PRNGKey(s) for s in seeds]))
  if state is not None:
    runner = npz_io.load_pytree(os.path.join(directory, "runner.npz"), runner)
    for seed_rows, saved in zip(rows, metrics_log.saved_metrics(
        state, num_seeds=len(rows))):
      seed_rows.restore(saved)
    updates = int(state["updates"])
    elapsed, episodes = float(state["elapsed_s"]), np.asarray(
        state["episodes"], np.float64)
  os.makedirs(output_dir, exist_ok=True)
  npz_io.write_json(os.path.join(output_dir, "config.json"),
                    dict(saved_config, total_env_steps=config.total_env_steps))

  for seed, seed_rows in zip(seeds, rows):
    os.makedirs(os.path.join(output_dir, f"seed_{seed}"), exist_ok=True)
    seed_rows.open(resume)

  def save():
    with npz_io.atomic_directory(ckpt) as tmp:
      npz_io.save_pytree(os.path.join(tmp, "runner.npz"), runner)
      npz_io.write_json(os.path.join(tmp, "state.json"), {
          "format": CHECKPOINT_FORMAT, "config": saved_config,
          "metrics": [seed_rows.state() for seed_rows in rows],
          "updates": updates, "elapsed_s": elapsed,
          "episodes": episodes.tolist()})

  eval_key = jax.random.PRNGKey(12345)
  last_saved = updates
  try:
    while updates < total_updates:
      start = time.time()
      runner, metrics = chunk(runner)
      metrics = jax.device_get(metrics)
      updates += log_updates
      env_steps = updates * per_update
      row_eval = {"eval_return": float("nan"), "eval_success": float("nan")}
      results = None
      if updates % eval_updates == 0 or updates >= total_updates:
        results = jax.device_get(evaluate(runner, jax.random.split(
            jax.random.fold_in(eval_key, updates), len(seeds))))
      seconds = time.time() - start
      elapsed += seconds
      for i in range(len(seeds)):
        row, finished = _rows(metrics, i)
        episodes[i] += finished
        row.update(env_steps=env_steps, updates=updates,
                   episodes=episodes[i], elapsed_s=elapsed,
                   env_steps_per_s=log_updates * per_update / seconds,
                   **row_eval)
        if results is not None:
          row.update(eval_return=float(results["return"][i]),
                     eval_success=float(results["success"][i]))
        rows[i].append(row)
      if progress:
        print(f"[ppo_ngu] env steps {env_steps:,}/"
              f"{total_updates * per_update:,}  training success "
              f"{[round(r.last['episode_success_rate'], 3) for r in rows]}"
              + ("" if results is None else "  greedy success "
                 f"{np.round(results['success'], 3).tolist()}"), flush=True)
      if updates - last_saved >= ckpt_updates or updates >= total_updates:
        save()
        last_saved = updates
  finally:
    for seed_rows in rows:
      seed_rows.close()
  return output_dir


def main(argv=None) -> Dict[str, np.ndarray]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--env", default="gymnax/DeepSea-bsuite")
  parser.add_argument("--env-kwarg", action="append", default=[],
                      metavar="KEY=VALUE")
  parser.add_argument("--intrinsic", choices=INTRINSIC, default="ngu")
  parser.add_argument("--total-env-steps", type=int, default=200_000)
  parser.add_argument("--seeds", type=int, nargs="+", default=[0])
  parser.add_argument("--set", action="append", default=[],
                      metavar="FIELD=VALUE", help="a PPOConfig field")
  parser.add_argument("--output-dir", default=None,
                      help="log metrics.csv per seed and checkpoints here "
                      "(`run`); without it, train in one program and print")
  parser.add_argument("--resume", action="store_true")
  parser.add_argument("--no-progress", action="store_true")
  parser.add_argument("--log-every", type=int, default=10_000)
  parser.add_argument("--eval-every", type=int, default=50_000)
  parser.add_argument("--checkpoint-every", type=int, default=100_000)
  args = parser.parse_args(argv)
  kwargs = train_cli.key_values(args.env_kwarg, "--env-kwarg")
  fields = {f.name for f in dataclasses.fields(PPOConfig)}
  overrides = train_cli.key_values(args.set, "--set")
  unknown = sorted(set(overrides) - fields - {"intrinsic", "total_env_steps"})
  if unknown:
    parser.error(f"--set: unknown PPOConfig field(s) {unknown}; known: "
                 f"{sorted(fields)}")
  try:
    config = PPOConfig(**{**overrides, "intrinsic": args.intrinsic,
                          "total_env_steps": args.total_env_steps})
  except (TypeError, ValueError) as e:
    parser.error(str(e))
  if args.output_dir is not None:
    run(config, args.env, kwargs, args.seeds, args.output_dir,
        args.log_every, args.eval_every, args.checkpoint_every,
        resume=args.resume, progress=not args.no_progress)
    return {}
  train = jax.jit(jax.vmap(make_train(config, args.env, kwargs)))
  _, metrics = train(jnp.stack([jax.random.PRNGKey(s) for s in args.seeds]))
  metrics = jax.device_get(metrics)
  steps = config.num_envs * config.num_steps
  for i in range(0, config.num_updates, max(1, config.num_updates // 20)):
    print(f"env steps {(i + 1) * steps:>9,}  success rate per seed "
          f"{np.round(metrics['success_rate'][:, i], 3)}  r^i "
          f"{np.round(metrics['intrinsic_reward'][:, i], 3)}")
  return metrics


if __name__ == "__main__":
  main()
