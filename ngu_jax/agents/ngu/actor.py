"""The NGU actor: one pure, jittable step over B lanes, and the `Actor`.

Badia et al. (2020), "Never Give Up", Sec. 2-3 and App. A (actors), in the
style of Acme's `ActorCore` (`init`, `select_action`, `get_extras`). The
variant families' parts (`variants.compose(config)`: meta-controller,
behaviour policy, intrinsic reward) do their steps; the actor calls them in
this order and tests no kind's name. One call of `select_action` does, for
all B lanes at once:

  0. episode starts (`parts.meta.episode_start`,
     `parts.policy.episode_start`): with Agent57's meta-controller ("ucb",
     Sec. 3.2), where a lane's step is FIRST after a finished episode, its
     bandit records that episode (mixture j, undiscounted r^e) and draws j
     for the new one (`ngu_jax.meta.sliding_window_ucb`); j stays fixed
     within an episode; likewise with the Boltzmann policy (DiCE, 004 Sec.
     3.1, App. A) each lane's temperature source gives the new episode's
     x = log(1 + 1/tau): its Bandits Vote ensemble records (x, undiscounted
     r^e) and draws x (`ngu_jax.meta.bandits_vote`), or x is redrawn
     uniformly, or stays at the fixed tau's;
  1. reset the lanes whose step is FIRST: LSTM state to zeros, previous
     action to -1, previous rewards to 0; wipe their episodic memory (every
     `memory_wipe_period`-th episode, Table 9) and let them adopt the latest
     embedding parameters (see "Embedding parameters" below);
  2-3. r^i_t (`parts.intrinsic.step`, `variants.intrinsic`): for NGU, embed
     f(x_t) with the lane's embedding parameters, query and insert it in
     the lane's episodic memory: r^episodic_t (Alg. 1); the RND error
     err(x_t) (optionally on whitened observations), life-long modulator
     alpha_t and r^i_t = r^episodic_t min(max(alpha_t, 1), L) (eq. 1). The
     RND-only baseline (Sec. 4.1) skips the memory: r^i_t = err(x_t) /
     sigma_e (`lifelong.rnd_reward`); RECODE (003 Sec. 3) is one step of
     the actor's clustering memory, shared by all its lanes and never wiped
     (`ngu_jax.intrinsic.recode`) on f(x_t) of the latest embedding
     parameters, its reward divided by the running std of those rewards
     over all lanes (`lifelong.divide_by_running_std`); "none" is 0;
     optionally r^i is then normalised over all lanes
     (`config.intrinsic.normalization`: divided by its running std, or
     standardised to running mean 0);
  4. UVFA Q forward from the carried LSTM state with the extra inputs
     (a_{t-1}, r^e_t, r^i_t, j) (Sec. 3);
  5. the action a_t and its behaviour probability mu(a_t | x_t)
     (`parts.policy.sample`): epsilon_l-greedy for the lane's mixture j, or
     with the Boltzmann policy a_t ~ softmax(Q(x_t, ., j) / tau) (DiCE's
     pi_tau: the dueling advantage's softmax, as Q - A is constant over
     actions) on the network's Q (in the h-transformed space when the
     transform is on).

Alignment (docs/design.md#alignment). The caller passes the dm_env
step of each lane: x_t with the reward r^e_t and FIRST flag that arrived
with it. r^i_t is the novelty of x_t itself, so it is available when acting
at x_t: the actor computes it first (steps 2-3) and feeds it to the
Q-network at the same step (step 4), exactly as the learner replays it
(`SequenceBatch.prev_intrinsic_reward[s] = intrinsic_reward[s]`). At a FIRST
step the network inputs a_{t-1}, r^e_t, r^i_t are -1 (an all-zero one-hot),
0 and 0, and the stored r^i_t is 0 as well (it is credited to no transition;
f(x_0) still enters the memory and err(x_0) the modulator statistics).

Embedding parameters ("Embeddings target update period: once/episode",
Table 6). The episodic memory compares embeddings of one episode, so they must
come from one f. With `config.embedding_params_per_lane` (default) every lane
keeps its own copy of the embedding parameters, replaced by the latest
`params.embedding` only when its memory is wiped (its episode start): a
[B]-leading copy of f's parameters in `ActorState` (for the Atari torso about
170k floats per lane, 22 MB for B = 32, less than the memory itself), and f
runs vmapped over lanes (grouped convolutions). With the flag off every lane
uses the latest `params.embedding`. All other parameters are used as passed:
the caller refreshes `params` every `config.actor_update_period` steps.

RND observation whitening uses the statistics the learner keeps and
publishes in `NGUParams.rnd_observation_stats`; the error statistics of the
modulator are the actor's own (`ActorState.error_stats`, over all its lanes,
a moving average over `config.rnd_error_horizon` errors, see
`ngu_jax.intrinsic.lifelong`). Until the published observation statistics
hold any observation (the learner initialises them at its first update from
a whole replayed batch), RND errors are on another scale: they do not enter
the error statistics, and alpha = 1 (the RND-only reward is 0).

Everything above is pure; the caller jits, e.g.
  step = jax.jit(functools.partial(select_action, config, networks),
                 donate_argnums=1)   # (params, state, ...) after partial
  action, state = step(params, state, observation, reward, step_is_first)

`Actor` is that caller for host loops (Acme's `GenericActor`): it jits the
policy's `select_action`, holds the `ActorState`, pulls parameters from a
variable source and writes each step to a replay adder. The networks and
their parameters (`NGUNetworks`, `NGUParams`, `make_networks`,
`init_params`) are in `ngu_jax.agents.ngu.networks`.
"""

from typing import (Any, Callable, Dict, Mapping, NamedTuple, Optional,
                    Tuple)

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks
from ngu_jax import mixtures
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu import variants
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.envs import base as env_base
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.intrinsic import recode as recode_lib
from ngu_jax.meta import bandits_vote
from ngu_jax.meta import sliding_window_ucb as ucb
from ngu_jax.networks import torsos
from ngu_jax.networks import uvfa
from ngu_jax.replay import adder as adder_lib



class ActorExtras(NamedTuple):
  """What the last `select_action` produced besides the action ([B] each).

  Field names match `ngu_jax.replay.adder.AdderStep`.

  Attributes:
    behaviour_prob: mu(a_t | x_t) of the taken action, float32.
    intrinsic_reward: r^i_t, the NGU intrinsic reward of x_t (0 at FIRST).
    prev_action: network input a_{t-1} (-1 at FIRST), int32.
    prev_extrinsic_reward: network input r^e_t (0 at FIRST), float32.
    prev_intrinsic_reward: network input r^i_t (= intrinsic_reward).
    mixture_index: j, int32.
    epsilon: eps_l, float32.
    recurrent_state: `LSTMState` fed to the network with x_t (after the
      FIRST reset), arrays [B, lstm_size].
    episodic_reward: r^episodic_t before modulation (diagnostic); under
      RECODE its reward before the division by the running std.
    rnd_error: err(x_t) (0 without RND; diagnostic).
    alpha: the modulator alpha_t (1 without RND; diagnostic).
    q_value: max_a Q(x_t, a, j) of the lane's mixture j (diagnostic).
    q_values: Q(x_t, ., j), float32 [B, A] (diagnostic: per-cell action
      values, `ngu_jax.agents.ngu.diagnostics.cell_step_sums`).
    tau: with `behaviour_policy` "boltzmann", each lane's temperature of its
      current episode, float32 [B] (stored with the sequences: the DiCE
      learner's pi_tau); None otherwise.
  """
  behaviour_prob: jax.Array
  intrinsic_reward: jax.Array
  prev_action: jax.Array
  prev_extrinsic_reward: jax.Array
  prev_intrinsic_reward: jax.Array
  mixture_index: jax.Array
  epsilon: jax.Array
  recurrent_state: uvfa.LSTMState
  episodic_reward: jax.Array
  rnd_error: jax.Array
  alpha: jax.Array
  q_value: jax.Array
  q_values: jax.Array
  tau: Optional[jax.Array] = None


class ActorState(NamedTuple):
  """State of B actor lanes (a pytree; B leading unless stated).

  Attributes:
    recurrent_state: LSTM state after the last step, [B, lstm_size].
    prev_action: a_{t-1}, the action taken at the last step, int32 [B].
    memory: the lanes' episodic memories (`episodic.EpisodicMemoryState`);
      None under RECODE.
    error_stats: running RND-error statistics of the modulator (scalars).
    embedding_params: each lane's embedding parameters, every leaf with a
      leading [B] axis (`config.embedding_params_per_lane`), else None.
    episode_count: int32 [B], episodes started so far in the lane.
    mixture_index: j of each lane, int32 [B].
    epsilon: eps_l of each lane, float32 [B].
    key: PRNG key of the action sampling.
    extras: `ActorExtras` of the last step.
    recode: under RECODE, the memory all lanes share
      (`ngu_jax.intrinsic.recode.RecodeState`), else None.
    recode_reward_stats: under RECODE, the running statistics of its
      rewards over all lanes (`lifelong.RunningStats`), else None.
    intrinsic_reward_stats: with `config.intrinsic.normalization` "std" or
      "standardize", the running statistics of r^i over all lanes
      (`lifelong.RunningStats`), else None.
    bandit: with `config.meta.kind` "ucb", each lane's Agent57
      meta-controller (`ngu_jax.meta.sliding_window_ucb.UCBState`, every
      leaf [B]-leading), else None.
    episode_return: with a bandit or a Bandits Vote ensemble, the
      undiscounted r^e of each lane's current episode so far, float32 [B],
      else None.
    temperature_x: with `config.policy.kind` "boltzmann", each lane's
      x = log(1 + 1/tau) of its current episode, float32 [B], else None.
    bva: with "boltzmann" and `temperature_source` "bva", each lane's
      Bandits Vote ensemble (`ngu_jax.meta.bandits_vote.BVAState`, every
      leaf [B]-leading), else None.
    variant_state: the state of a variant kind that none of the slots above
      holds, by family ("intrinsic", "policy", "meta"), else None (no
      built-in kind uses it; `ngu_jax.agents.ngu.variants.parts`).

  The slots from `memory` on belong to the variant families: each kind's
  part (`ngu_jax.agents.ngu.variants`) makes and updates the slots it uses.
  """
  recurrent_state: uvfa.LSTMState
  prev_action: jax.Array
  memory: episodic.EpisodicMemoryState
  error_stats: lifelong.RunningStats
  embedding_params: Any
  episode_count: jax.Array
  mixture_index: jax.Array
  epsilon: jax.Array
  key: jax.Array
  extras: ActorExtras
  recode: Optional[recode_lib.RecodeState] = None
  recode_reward_stats: Optional[lifelong.RunningStats] = None
  intrinsic_reward_stats: Optional[lifelong.RunningStats] = None
  bandit: Optional[ucb.UCBState] = None
  episode_return: Optional[jax.Array] = None
  temperature_x: Optional[jax.Array] = None
  bva: Optional[bandits_vote.BVAState] = None
  variant_state: Optional[Dict[str, Any]] = None


def _check_lanes(value, name: str) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"agents.ngu.actor.init: `{name}` must be an int, got "
                     f"{value!r}.")
  return int(value)


def init(config: NGUConfig, networks: networks_lib.NGUNetworks,
         key: jax.Array, num_lanes: int, *, first_lane: int = 0,
         total_lanes: int = 0, evaluation: bool = False,
         eval_mixture_index: int = 0
         ) -> ActorState:
  """The state of `num_lanes` fresh lanes.

  Lane l (global index first_lane + l among `total_lanes` lanes of all
  actors) acts with mixture j = l mod N and eps_l = 0.4^(1 + 7 l / (L - 1))
  (App. A; `ngu_jax.mixtures`). With Agent57's meta-controller
  (`config.meta.kind == "ucb"`) j is the lane's bandit's choice (arm 0
  first) and eps_l is App. A's over all lanes: `actor_epsilons_per_mixture`
  spreads epsilons over the lanes of each fixed mixture, which a lane no
  longer has. An evaluation actor uses `eval_mixture_index`
  (default 0, the exploitative policy) and `config.eval_epsilon` in every
  lane.

  The first `select_action` of every lane should be a FIRST step (an
  `env.reset()`); until a lane's first FIRST it uses the latest embedding
  parameters.

  Args:
    config: the agent's config.
    networks: the agent's networks (shapes only; no parameters needed).
    key: PRNG key of the action sampling.
    num_lanes: B, the lanes of this actor.
    first_lane: global index of this actor's first lane.
    total_lanes: L, lanes of all actors together; 0 means `num_lanes`.
    evaluation: act as an evaluator (see above).
    eval_mixture_index: j of every lane when `evaluation`.

  Returns:
    An `ActorState`.
  """
  where = "agents.ngu.actor.init"
  num_lanes = _check_lanes(num_lanes, "num_lanes")
  first_lane = _check_lanes(first_lane, "first_lane")
  total_lanes = _check_lanes(total_lanes, "total_lanes") or num_lanes
  if num_lanes < 1 or first_lane < 0 or first_lane + num_lanes > total_lanes:
    raise ValueError(f"{where}: need num_lanes >= 1 and 0 <= first_lane <= "
                     f"total_lanes - num_lanes, got num_lanes={num_lanes}, "
                     f"first_lane={first_lane}, total_lanes={total_lanes}.")
  if networks.uvfa.num_mixtures != config.num_mixtures:
    raise ValueError(f"{where}: the networks have "
                     f"{networks.uvfa.num_mixtures} mixtures, the config "
                     f"{config.num_mixtures}.")
  lanes = slice(first_lane, first_lane + num_lanes)
  if evaluation:
    if not 0 <= eval_mixture_index < config.num_mixtures:
      raise ValueError(f"{where}: `eval_mixture_index` must be in [0, "
                       f"{config.num_mixtures}), got {eval_mixture_index}.")
    epsilon = np.full(num_lanes, config.eval_epsilon, np.float32)
    mixture = np.full(num_lanes, eval_mixture_index, np.int32)
  parts = variants.compose(config)
  if not evaluation:
    if config.actor_epsilons_per_mixture and parts.meta.fixed_mixtures:
      epsilon = mixtures.actor_epsilons_per_mixture(
          total_lanes, config.num_mixtures, config.actor_base_epsilon,
          config.actor_epsilon_alpha)[lanes]
    else:
      epsilon = mixtures.actor_epsilons(total_lanes, config.actor_base_epsilon,
                                        config.actor_epsilon_alpha)[lanes]
    mixture = mixtures.actor_mixtures(total_lanes, config.num_mixtures)[lanes]
  b = num_lanes
  # The families' slots (`variants.parts`), in this order: the meta-
  # controller's (no key), the behaviour policy's and the intrinsic
  # reward's, each splitting the action stream's key if it draws.
  meta_slots, mixture = parts.meta.init(config, mixture, evaluation)
  policy_slots, key = parts.policy.init(config, b, key, evaluation)
  reward_slots, key = parts.intrinsic.init(config, networks, b, key)
  episode_return = None
  if not evaluation and (parts.meta.needs_episode_return
                         or parts.policy.needs_episode_return):
    episode_return = jnp.zeros((b,), jnp.float32)
  # Every leaf gets its own buffer (no array shared between fields), so that
  # callers can jit `select_action` with the state donated: XLA refuses to
  # donate one buffer twice.
  def zeros():
    return jnp.zeros((b,), jnp.float32)

  def initial():
    return jax.tree_util.tree_map(jnp.copy, networks.uvfa.initial_state(b))

  # (jax 0.4.30 returns one buffer for repeated jnp.asarray of one array.)
  mixture, epsilon = jnp.asarray(mixture), jnp.asarray(epsilon)
  extras = ActorExtras(
      behaviour_prob=zeros(), intrinsic_reward=zeros(),
      prev_action=jnp.full((b,), -1, jnp.int32),
      prev_extrinsic_reward=zeros(), prev_intrinsic_reward=zeros(),
      mixture_index=jnp.copy(mixture), epsilon=jnp.copy(epsilon),
      recurrent_state=initial(), episodic_reward=zeros(), rnd_error=zeros(),
      alpha=jnp.ones((b,)), q_value=zeros(),
      q_values=jnp.zeros((b, networks.uvfa.num_actions), jnp.float32))
  state = ActorState(
      recurrent_state=initial(),
      prev_action=jnp.full((b,), -1, jnp.int32),
      memory=None,
      error_stats=lifelong.init(),
      embedding_params=None,
      episode_count=jnp.zeros((b,), jnp.int32),
      mixture_index=mixture,
      epsilon=epsilon,
      key=key,
      extras=extras,
      intrinsic_reward_stats=(lifelong.init()
                              if config.intrinsic.normalization != "none"
                              else None),
      episode_return=episode_return)
  for family, slots in (("meta", meta_slots), ("policy", policy_slots),
                        ("intrinsic", reward_slots)):
    state = _with_slots(state, family, slots)
  return state._replace(extras=extras._replace(tau=parts.policy.tau(state)))


def select_action(config: NGUConfig, networks: networks_lib.NGUNetworks,
                  params: networks_lib.NGUParams, state: ActorState,
                  observation: jax.Array, reward: jax.Array,
                  step_is_first: jax.Array
                  ) -> Tuple[jax.Array, ActorState]:
  """One actor step of B lanes: intrinsic reward, Q forward, action.

  See the module docstring for the order of operations and the alignment.

  Args:
    config: the agent's config (static under jit).
    networks: the agent's networks (static under jit).
    params: the latest published parameters.
    state: the lanes' state (from `init` or the previous call).
    observation: x_t shaped [B, *observation_shape] (uint8 or float).
    reward: r^e_t arriving with x_t, float [B] (ignored at FIRST).
    step_is_first: bool [B], True where x_t starts an episode
      (`timestep.first()`).

  Returns:
    (action int32 [B], new_state); `get_extras(new_state)` holds the step's
    mu, r^i and network inputs for the adder.

  Raises:
    ValueError: on wrong shapes or dtypes (and NaN/inf, eagerly or at run
      time under jit, see `ngu_jax._checks`).
  """
  where = "agents.ngu.actor.select_action"
  b = state.prev_action.shape[0]
  _checks.check_shape(observation, (b,) + networks.uvfa.observation_shape,
                      "observation", where)
  _checks.check_shape(reward, (b,), "reward", where)
  _checks.check_floating(reward, "reward", where)
  _checks.check_shape(step_is_first, (b,), "step_is_first", where)
  first = jnp.asarray(step_is_first)
  if first.dtype != jnp.bool_:
    raise ValueError(f"{where}: `step_is_first` must be bool, got dtype "
                     f"{first.dtype}.")
  observation = jnp.asarray(observation)
  # The step's inputs are checked here, as one host callback under jit; the
  # networks and the memory then work on checked or derived values and do
  # not check them again (each callback is a sync point of the step).
  with _checks.one_callback():
    _checks.check_finite(reward, "reward", where)
    torsos.check_observation_values(observation, networks.uvfa.encoding,
                                    "observation", where)
  with _checks.runtime_checks_disabled():
    return _select_action(config, networks, params, state, observation,
                          reward, first, b)


def _select_action(config: NGUConfig, networks: networks_lib.NGUNetworks,
                   params: networks_lib.NGUParams, state: ActorState,
                   observation: jax.Array, reward: jax.Array,
                   first: jax.Array, b: int) -> Tuple[jax.Array, ActorState]:
  """`select_action` on checked inputs."""
  parts = variants.compose(config)
  finished = first & (state.episode_count > 0)
  key = state.key

  # 0. Episode starts: Agent57's meta-controller (Sec. 3.2) records each
  # finished episode's (j, undiscounted r^e) and draws j for the new one;
  # DiCE's lanes draw their new episode's temperature (App. A).
  slots, key = parts.meta.episode_start(config, state, key, finished,
                                        state.episode_return)
  state = _with_slots(state, "meta", slots)
  slots, key = parts.policy.episode_start(config, state, key, finished,
                                          state.episode_return)
  state = _with_slots(state, "policy", slots)
  if state.episode_return is not None:
    state = state._replace(episode_return=jnp.where(
        first, 0., state.episode_return + jnp.asarray(reward, jnp.float32)))

  # 1. Episode starts: memory wipe (every n-th episode), which the intrinsic
  # reward applies (with its parameter refresh).
  wipe = first & (state.episode_count % config.memory_wipe_period == 0)

  # 2-3. r^i_t of x_t (NGU eq. 1, the RND-only baseline, RECODE or none;
  # `variants.intrinsic`); 0 at FIRST.
  reward_step, slots = parts.intrinsic.step(config, networks, params, state,
                                            observation, first, wipe)
  state = _with_slots(state, "intrinsic", slots)
  state = state._replace(
      episode_count=state.episode_count + first.astype(jnp.int32))
  intrinsic = reward_step.intrinsic
  if config.intrinsic.normalization != "none":
    # 3b. The optional normalisation of r^i over all lanes (FIRST steps,
    # whose r^i is 0 and credited to no transition, do not count).
    normalize = (lifelong.standardize
                 if config.intrinsic.normalization == "standardize"
                 else lifelong.divide_by_running_std)
    intrinsic, stats = normalize(
        state.intrinsic_reward_stats, intrinsic,
        horizon=config.intrinsic.normalization_horizon, valid=~first)
    state = state._replace(intrinsic_reward_stats=stats)
  intrinsic = jnp.where(first, 0., intrinsic)
  mixture_index = state.mixture_index

  # 4. UVFA forward with (a_{t-1}, r^e_t, r^i_t, j), LSTM reset at FIRST.
  initial = networks.uvfa.initial_state(b)
  recurrent_state = variants.parts.where_lanes(first, initial,
                                               state.recurrent_state)
  prev_action = jnp.where(first, -1, state.prev_action).astype(jnp.int32)
  prev_extrinsic = jnp.where(first, 0., jnp.asarray(reward, jnp.float32))
  inputs = uvfa.UVFAInputs(
      observation=observation, prev_action=prev_action,
      prev_extrinsic_reward=prev_extrinsic, prev_intrinsic_reward=intrinsic,
      mixture_index=mixture_index)
  q, new_recurrent_state = networks.uvfa.apply(params.q, inputs,
                                               recurrent_state)

  # 5. The behaviour policy's action and its probability mu(a_t | x_t).
  key, sample_key = jax.random.split(key)
  action, mu, tau = parts.policy.sample(config, state, sample_key, q,
                                        state.epsilon)

  extras = ActorExtras(
      behaviour_prob=mu, intrinsic_reward=intrinsic, prev_action=prev_action,
      prev_extrinsic_reward=prev_extrinsic, prev_intrinsic_reward=intrinsic,
      mixture_index=mixture_index, epsilon=state.epsilon,
      recurrent_state=recurrent_state,
      episodic_reward=reward_step.episodic_reward,
      rnd_error=reward_step.rnd_error, alpha=reward_step.alpha,
      q_value=jnp.max(q, axis=-1), q_values=q.astype(jnp.float32), tau=tau)
  new_state = state._replace(
      recurrent_state=new_recurrent_state, prev_action=action, key=key,
      extras=extras)
  return action, new_state


def _with_slots(state: ActorState, family: str, slots: Dict[str, Any]
                ) -> ActorState:
  """`state` with a family part's slot updates (`variants.parts`); its
  "variant_state" entry goes to `state.variant_state[family]`."""
  if "variant_state" in slots:
    slots = dict(slots)
    own = dict(state.variant_state or {})
    own[family] = slots.pop("variant_state")
    slots["variant_state"] = own
  return state._replace(**slots)


def adder_step(observation: Any, action: Any, reward: Any, discount: Any,
               step_is_first: Any, extras: Mapping[str, Any]
               ) -> adder_lib.AdderStep:
  """Step t of B lanes for a sequence adder (NGU App. A, `SequenceBatch`).

  The one place that pairs a timestep (x_t, r^e_t, d_t, FIRST) and the
  action a_t with the actor's extras (`get_extras`): the host adder
  (`Actor.observe`, numpy) and the device adder of the compiled loop
  (jax arrays) both write what this returns.

  Args:
    observation: x_t, [B, ...]. action: a_t, int [B]. reward: r^e_t, [B].
    discount: d_t, [B]. step_is_first: bool [B].
    extras: `get_extras(state)` after the `select_action` that chose a_t.
  """
  return adder_lib.AdderStep(
      observation=observation,
      action=action.astype(np.int32),
      extrinsic_reward=reward.astype(np.float32),
      intrinsic_reward=extras["intrinsic_reward"],
      discount=discount.astype(np.float32),
      step_is_first=step_is_first,
      behaviour_prob=extras["behaviour_prob"],
      prev_action=extras["prev_action"],
      prev_extrinsic_reward=extras["prev_extrinsic_reward"],
      prev_intrinsic_reward=extras["prev_intrinsic_reward"],
      mixture_index=extras["mixture_index"],
      epsilon=extras["epsilon"],
      recurrent_state=extras["recurrent_state"],
      tau=extras.get("tau"))


def with_training_statistics(state: ActorState, source: ActorState
                             ) -> ActorState:
  """`state` (an evaluation actor's) with the running statistics of `source`.

  The network's inputs include r^i_{t-1} (NGU Sec. 2, Fig. 4), and r^i is
  normalised by statistics that an actor accumulates over its whole life:
  the RND-error mean and deviation of the modulator alpha (eq. 2 context,
  `lifelong.modulator`), the running average d_m^2 of the k-NN distances of
  the episodic kernel (Alg. 1; kept across episodes, `episodic.reset`), and
  under RECODE the shared memory and its reward statistics. A fresh actor has
  none of them: in its first episodes alpha swings between 0 and 2+ and the
  episodic reward is 3-4x the training lanes' (measured at DeepSea 10, where
  the greedy j = 0 policy of 4 of 5 Agent57 seeds then left the path its
  training lanes follow). An evaluator that plays a single episode from a
  fresh state is therefore evaluated on inputs the network never saw. This
  gives it the training lanes' statistics instead (read-only: `source` is
  unchanged), as the paper's evaluators run on one life-long stream.

  Copied: `error_stats`, `recode`, `recode_reward_stats`,
  `intrinsic_reward_stats` (shared by all lanes), and each memory's
  `mean_sq_distance` / `distance_count` -- the training lanes' pooled
  average (count-weighted) and their mean count, the same for every lane of
  `state` (the two may have different lane counts).
  Nothing else changes (memories stay empty, LSTM states, keys, epsilons and
  mixtures are `state`'s).

  Args:
    state: an `ActorState` of B_e lanes (e.g. `init(..., evaluation=True)`).
    source: the training actor's `ActorState` of B lanes, of the same config.

  Returns:
    The new state of B_e lanes.
  """
  memory = state.memory
  if memory is not None and source.memory is not None:
    counts = jnp.asarray(source.memory.distance_count, jnp.float32)
    total = jnp.sum(counts)
    # 0 when no lane has a distance yet (every count 0).
    pooled = (jnp.sum(counts * source.memory.mean_sq_distance)
              / jnp.maximum(total, 1.))
    b = memory.mean_sq_distance.shape[0]
    memory = memory._replace(
        mean_sq_distance=jnp.full((b,), pooled,
                                  memory.mean_sq_distance.dtype),
        distance_count=jnp.full((b,), jnp.round(total / counts.shape[0]),
                                jnp.float32).astype(
                                    memory.distance_count.dtype))
  return state._replace(
      memory=memory, error_stats=source.error_stats, recode=source.recode,
      recode_reward_stats=source.recode_reward_stats,
      intrinsic_reward_stats=source.intrinsic_reward_stats)


def lane_controllers(state: ActorState) -> Dict[str, Any]:
  """The lanes' learned controllers, as they are (jittable).

  Args:
    state: the lanes' `ActorState`.

  Returns:
    With Agent57's meta-controller the bandit windows ("arms", "returns"
    [B, W], "num_episodes" [B]: `UCBState` fields); with DiCE's Boltzmann
    lanes "temperature_x" [B] and the last "q_values" [B, A]; with Bandits
    Vote temperatures "bva" (`BVAState` fields, [B, ...]). Empty with none.
    `diagnostics.lane_controller_columns` turns them into metrics columns.
  """
  out = {}
  if state.bandit is not None:
    out.update(state.bandit._asdict())
  if state.temperature_x is not None:
    out.update(temperature_x=state.temperature_x,
               q_values=state.extras.q_values)
  if state.bva is not None:
    out["bva"] = state.bva._asdict()
  return out


def get_extras(state: ActorState) -> Dict[str, Any]:
  """The last step's extras for the replay adder (`AdderStep` field names).

  Returns:
    A dict with "behaviour_prob", "intrinsic_reward", "prev_action",
    "prev_extrinsic_reward", "prev_intrinsic_reward", "mixture_index",
    "epsilon", "recurrent_state" (all [B]-leading) and the diagnostics
    "episodic_reward", "rnd_error", "alpha", "q_value", "q_values".
  """
  return state.extras._asdict()


class NGUPolicy(NamedTuple):
  """The acting policy: pure functions closed over config and networks.

  Acme's `ActorCore` (NGU App. A actors): `init(key, num_lanes,
  first_lane=0, total_lanes=0)` gives the lanes' `ActorState` (training
  lanes get eps_l and j = l mod N of their global index; evaluation
  lanes get `eval_epsilon` and j = `eval_mixture_index`),
  `select_action(params, state, observation, reward, step_is_first)` is
  `select_action` and `get_extras` is `get_extras` (this module). Nothing here
  is jitted; `Actor` does that.
  """
  init: Callable[..., ActorState]
  select_action: Callable[..., Tuple[jax.Array, ActorState]]
  get_extras: Callable[[ActorState], Dict[str, Any]]
  evaluation: bool


class Actor:
  """B environment lanes acting with the latest published parameters.

  A thin stateful wrapper (Acme's `GenericActor`) around the pure
  `NGUPolicy`; one jitted `select_action` serves all lanes (NGU
  App. A).
  Per environment step the caller does:

    action = actor.select_action(timestep)   # x_t, r^e_t, FIRST -> a_t
    actor.observe(timestep, action)          # writes step t to the adder
    actor.update()                           # counts steps, pulls params
    timestep = env.step(action)

  Parameters are pulled from `variable_source.get_variables()` before the
  first action and then at every `config.actor_update_period`-th call of
  `update` (Table 6: every 100 actor steps).

  Several actors share one set of eps_l and mixtures (App. A): lane l of
  this actor is lane `first_lane + l` of `total_lanes` (0: `num_lanes`).
  """

  def __init__(self, config: NGUConfig, policy: NGUPolicy,
               key: jax.Array, num_lanes: int, variable_source: Any,
               adder: Optional[adder_lib.SequenceAdder] = None,
               first_lane: int = 0, total_lanes: int = 0):
    self._config = config
    self._policy = policy
    self._variable_source = variable_source
    self._adder = adder
    self._state = policy.init(key, num_lanes, first_lane=first_lane,
                              total_lanes=total_lanes)
    # The state (episodic memories, per-lane embedding params, LSTM) is
    # donated so that XLA updates it in place: it is the largest array of the
    # step (123 MB of memory for 32 Atari lanes) and copying it would cost
    # more than the whole k-NN query. A state read through `state` is
    # therefore invalid after the next `select_action`.
    self._select = jax.jit(policy.select_action, donate_argnums=1)
    self._params = None
    self._num_updates = 0

  @property
  def state(self) -> ActorState:
    """The current actor state (donated, hence invalid, at the next step)."""
    return self._state

  @property
  def params(self) -> Optional[networks_lib.NGUParams]:
    """The parameters acted with (pulled last), None before the first pull."""
    return self._params

  @property
  def num_updates(self) -> int:
    """`update` calls so far (a pull at every `actor_update_period`-th)."""
    return self._num_updates

  def restore(self, state: ActorState,
              params: Optional[networks_lib.NGUParams] = None,
              num_updates: int = 0) -> None:
    """Replaces the actor's state, e.g. from a checkpoint.

    With the `state`, `params` and `num_updates` read from an actor (between
    two steps), this actor continues exactly as that one would have.

    Args:
      state: an `ActorState` of this actor's lanes (LSTM states, episodic
        memories, per-lane embedding parameters, key, error statistics,
        extras); numpy or jax arrays, copied into fresh device buffers (the
        state is donated at every step).
      params: the parameters the actor acts with until its next pull; None:
        pull before the next action.
      num_updates: the `update` count (phase of the periodic pull).
    """
    copy = lambda x: jax.numpy.array(x, copy=True)
    self._state = jax.tree_util.tree_map(copy, state)
    self._params = (None if params is None
                    else jax.tree_util.tree_map(copy, params))
    self._num_updates = int(num_updates)

  def adopt_statistics(self, source: ActorState) -> None:
    """Takes the running statistics of `source` (a training actor's state;
    `with_training_statistics`), copied: this actor's state is donated at
    every step, `source` stays valid."""
    adopted = with_training_statistics(self._state, source)
    self._state = jax.tree_util.tree_map(
        lambda x: jax.numpy.array(x, copy=True), adopted)

  def select_action(self, timestep: env_base.TimeStep) -> np.ndarray:
    """Acts on a `TimeStep` of all lanes; returns int32 actions [B]."""
    if self._params is None:
      self._params = self._variable_source.get_variables()
    action, self._state = self._select(
        self._params, self._state, timestep.observation,
        np.asarray(timestep.reward, np.float32), timestep.first())
    return np.asarray(action)

  def observe(self, timestep: env_base.TimeStep, action: np.ndarray) -> None:
    """Writes step t (x_t, a_t and the actor's extras) to the adder.

    Call after `select_action(timestep)` returned `action`. A no-op without
    an adder (evaluation actors).
    """
    if self._adder is None:
      return
    extras = jax.device_get(self._policy.get_extras(self._state))
    self._adder.add(adder_step(
        timestep.observation, np.asarray(action),
        np.asarray(timestep.reward), np.asarray(timestep.discount),
        timestep.first(), extras))

  def update(self, wait: bool = False) -> None:
    """Counts one actor step; pulls parameters every actor_update_period.

    Args:
      wait: pull now regardless of the count.
    """
    self._num_updates += 1
    config = self._config
    if wait or self._num_updates % config.actor_update_period == 0:
      self._params = self._variable_source.get_variables()

  def flush(self) -> None:
    """Emits the adder's pending (padded) sequences, e.g. at the end."""
    if self._adder is not None:
      self._adder.flush()

