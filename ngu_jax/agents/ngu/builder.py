"""The NGU builder: the six Acme builder methods (shared/DESIGN.md).

Badia et al. (2020), "Never Give Up", App. A (distributed agent: actors,
replay, learner). `NGUBuilder(config, replay_backend="embedded")` holds the
config and the replay backend and assembles the pure parts of the agent into
the pieces a run loop needs:

  make_replay_tables(env_spec, policy) -> PrioritizedReplay (embedded), or
                                          ReverbReplay (replay_backend="reverb")
  make_dataset_iterator(replay)        -> iterator of (keys, SequenceBatch)
  make_adder(replay, env_spec, policy) -> SequenceAdder writing into replay
  make_actor(key, policy, env_spec, variable_source, adder) -> Actor
  make_learner(key, networks, dataset, logger_fn, env_spec, replay, counter)
                                       -> Learner
  make_policy(networks, env_spec, evaluation) -> NGUPolicy

`Actor` and `Learner` are the only stateful objects: thin wrappers that jit
the pure `actor.select_action` and `learning.sgd_step`, hold their state and
move data between the environment, the adder, the replay and each other. All
the math stays in the pure functions.

Usage (single process; see `ngu_jax.loops.run_experiment`):
  builder = NGUBuilder(config)
  spec = make_environment_spec(env)
  networks = builder.make_networks(spec)
  policy = builder.make_policy(networks, spec)
  replay = builder.make_replay_tables(spec, policy, rate_limit=False)
  learner = builder.make_learner(key1, networks,
                                 builder.make_dataset_iterator(replay),
                                 replay_client=replay)
  actor = builder.make_actor(key2, policy, spec, learner,
                             builder.make_adder(replay, spec, policy))
"""

import functools
import logging
from typing import (Any, Callable, Dict, Iterator, NamedTuple, Optional,
                    Sequence, Tuple)

import jax
import numpy as np

from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.envs import base as env_base
from ngu_jax.replay import adder as adder_lib
from ngu_jax.replay import device as device_replay
from ngu_jax.replay import prioritized
from ngu_jax.types import ObservationEncoding
from ngu_jax.types import PIXELS
from ngu_jax.types import SequenceBatch

MIN_PRIORITY = 1e-6
"""Floor of the priorities written back to the replay.

`PrioritizedReplay.update_priorities` rejects p <= 0, but `sgd_step` returns
0 for sequences with non-finite data (and a sequence whose TD errors are all
exactly 0 also has priority 0). Such items get `MIN_PRIORITY` instead: they
stay in the replay but are (almost) never sampled again until evicted.
"""


class EnvironmentSpec(NamedTuple):
  """What the agent needs to know about a batched environment (Acme style).

  Attributes:
    observations: spec of ONE observation (shape, dtype).
    actions: `DiscreteArray` spec of one action (`num_values` = A).
    num_lanes: B, the environment lanes an actor steps together.
    observation_encoding: what the observations are
      (`ngu_jax.types.ObservationEncoding`, declared by the environment:
      pixels, symbolic codes, binary grids, features); the networks encode
      them accordingly. Default "pixels".
  """
  observations: Any
  actions: Any
  num_lanes: int
  observation_encoding: ObservationEncoding = PIXELS

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return tuple(self.observations.shape)

  @property
  def num_actions(self) -> int:
    return int(self.actions.num_values)


def make_environment_spec(env: env_base.BatchedEnv) -> EnvironmentSpec:
  """The `EnvironmentSpec` of a `BatchedEnv`, with its declared encoding."""
  return EnvironmentSpec(observations=env.observation_spec(),
                         actions=env.action_spec(), num_lanes=env.num_envs,
                         observation_encoding=env.observation_encoding())


class NGUPolicy(NamedTuple):
  """The acting policy: pure functions closed over config and networks.

  Acme's `ActorCore` (NGU App. A actors): `init(key, num_lanes,
  first_lane=0, total_lanes=0)` gives the lanes' `ActorState` (training
  lanes get eps_l and j = l mod N of their global index; evaluation
  lanes get `eval_epsilon` and j = `eval_mixture_index`),
  `select_action(params, state, observation, reward, step_is_first)` is
  `actor.select_action` and `get_extras` is `actor.get_extras`. Nothing here
  is jitted; `Actor` does that.
  """
  init: Callable[..., actor_lib.ActorState]
  select_action: Callable[..., Tuple[jax.Array, actor_lib.ActorState]]
  get_extras: Callable[[actor_lib.ActorState], Dict[str, Any]]
  evaluation: bool


class Actor:
  """B environment lanes acting with the latest published parameters.

  A thin stateful wrapper (Acme's `GenericActor`) around the pure
  `NGUPolicy`; one jitted `select_action` serves all lanes (NGU App. A).
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

  def __init__(self, config: NGUConfig, policy: NGUPolicy, key: jax.Array,
               num_lanes: int, variable_source: Any,
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
  def state(self) -> actor_lib.ActorState:
    """The current actor state (donated, hence invalid, at the next step)."""
    return self._state

  @property
  def params(self) -> Optional[actor_lib.NGUParams]:
    """The parameters acted with (pulled last), None before the first pull."""
    return self._params

  @property
  def num_updates(self) -> int:
    """`update` calls so far (a pull at every `actor_update_period`-th)."""
    return self._num_updates

  def restore(self, state: actor_lib.ActorState,
              params: Optional[actor_lib.NGUParams] = None,
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
    self._adder.add(actor_lib.adder_step(
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


@functools.lru_cache(maxsize=8)
def _jitted_sgd_step(config: NGUConfig, networks: actor_lib.NGUNetworks):
  """One jitted `sgd_step` per (config, networks): learners share compiles.

  No donation: actors may still hold the published parameters.
  """
  return jax.jit(functools.partial(learning.sgd_step, config, networks))


class Learner:
  """Jitted `learning.sgd_step` over batches from the replay (NGU App. A).

  Thin stateful wrapper: holds the `LearnerState`, draws (keys, batch) from
  the dataset, applies the pure `sgd_step`, writes the new priorities back
  to the replay (floored at `MIN_PRIORITY`) and logs skipped steps (the NaN
  guard of `sgd_step`). `get_variables()` publishes the parameters to
  actors (Acme's `VariableSource`).
  """

  def __init__(self, config: NGUConfig, networks: actor_lib.NGUNetworks,
               key: jax.Array,
               dataset: Iterator[Tuple[np.ndarray, SequenceBatch]],
               replay: Any = None,
               logger_fn: Optional[Callable[[Dict[str, float]], Any]] = None,
               counter: Any = None):
    self._config = config
    self._dataset = dataset
    self._replay = replay
    self._logger_fn = logger_fn
    self._counter = counter
    self._state = learning.init_learner(config, networks, key)
    self._sgd_step = _jitted_sgd_step(config, networks)

  @property
  def state(self) -> learning.LearnerState:
    return self._state

  def restore(self, state: learning.LearnerState) -> None:
    """Replaces the learner's state, e.g. from a checkpoint.

    Args:
      state: a `LearnerState` (parameters, target parameters, the three
        optimiser states, RND observation statistics, steps, skipped steps,
        key) of numpy or jax arrays, copied to fresh device buffers.
    """
    self._state = jax.tree_util.tree_map(
        lambda x: jax.numpy.array(x, copy=True), state)

  def step(self) -> Dict[str, float]:
    """One sgd step on the next batch; returns the metrics as floats."""
    keys, batch = next(self._dataset)
    self._state, priorities, metrics = self._sgd_step(self._state, batch)
    metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
    if metrics["step_skipped"]:
      logging.error("NGU learner: sgd step skipped (non-finite batch, loss "
                    "or gradient; %d non-finite sequences); %d skipped so far.",
                    int(metrics["nonfinite_lanes"]),
                    int(metrics["skipped_steps"]))
    if self._replay is not None:
      priorities = np.maximum(np.asarray(priorities, np.float64),
                              MIN_PRIORITY)
      self._replay.update_priorities(keys, priorities)
    if self._counter is not None:
      self._counter.increment(learner_steps=1)
    if self._logger_fn is not None:
      self._logger_fn(metrics)
    return metrics

  def get_variables(self, names: Optional[Sequence[str]] = None
                    ) -> actor_lib.NGUParams:
    """The latest `NGUParams` (all of them; `names` is ignored)."""
    del names
    return self._state.params


class NGUBuilder:
  """Builds the NGU agent's parts from one `NGUConfig` (Acme builder).

  Besides the config, the builder holds one deployment choice, the replay
  backend of `make_replay_tables` (as Acme's builders take theirs, e.g.
  `DQNBuilder(config, actor_backend=...)`): the protocol methods keep their
  signatures, so code that only calls them (a run loop, a launcher) runs on
  either backend unchanged.

  Args:
    config: the agent's config.
    replay_backend: "embedded" (default): `ngu_jax.replay.PrioritizedReplay`
      in this process's memory. "reverb": `ReverbReplay`, the same interface
      over a Reverb server this object starts (the `[reverb]` extra; see
      `ngu_jax.replay.reverb_tables`).

  Raises:
    ValueError: on a `replay_backend` not in `REPLAY_BACKENDS`.
  """

  REPLAY_BACKENDS = ("embedded", "reverb")

  def __init__(self, config: NGUConfig, replay_backend: str = "embedded"):
    if not (isinstance(replay_backend, str)
            and replay_backend in self.REPLAY_BACKENDS):
      raise ValueError(f"NGUBuilder: unknown `replay_backend` "
                       f"{replay_backend!r}; choose one of "
                       f"{', '.join(map(repr, self.REPLAY_BACKENDS))}.")
    self._config = config
    self._replay_backend = replay_backend

  @property
  def config(self) -> NGUConfig:
    return self._config

  @property
  def replay_backend(self) -> str:
    """What `make_replay_tables` builds: "embedded" or "reverb"."""
    return self._replay_backend

  def make_networks(self, env_spec: EnvironmentSpec
                    ) -> actor_lib.NGUNetworks:
    """Convenience: `actor.make_networks` for the spec (Sec. 3, App. H).

    The networks encode observations as `env_spec.observation_encoding`
    says.
    """
    return actor_lib.make_networks(self._config, env_spec.observation_shape,
                                   env_spec.num_actions,
                                   env_spec.observation_encoding)

  def make_replay_tables(self, env_spec: Optional[EnvironmentSpec] = None,
                         policy: Optional[NGUPolicy] = None, *,
                         rate_limit: bool = True, seed: int = 0) -> Any:
    """The prioritised sequence replay (App. A; R2D2 Sec. 2.3).

    Capacity `replay_capacity` sequences, priority exponent 0.9 and
    importance exponent 0.6 (Table 6), sampling from `min_replay_size`, on
    the builder's `replay_backend`; both backends get the same arguments.

    Args:
      env_spec: unused (the replay allocates at its first insert).
      policy: unused.
      rate_limit: enforce `samples_per_insert` in the replay (for actors and
        learner in separate threads or processes). A single-threaded loop
        cannot wait on itself: it passes False and paces the learner itself
        (`ngu_jax.loops.python_loop`).
      seed: seed of the replay's sampling RNG (the Reverb backend accepts it
        but samples with Reverb's own RNG).

    Returns:
      A `PrioritizedReplay` ("embedded"), or a `ReverbReplay` ("reverb"):
      it runs a Reverb server (listening on all interfaces of a free port,
      a Reverb 0.14 limitation) until its `close()`, which the caller owns.

    Raises:
      ImportError: for "reverb" where dm-reverb is not installed; the message
        says how to install the `[reverb]` extra.
    """
    del env_spec, policy
    config = self._config
    kwargs = dict(
        capacity=config.replay_capacity,
        priority_exponent=config.priority_exponent,
        importance_exponent=config.importance_sampling_exponent,
        min_size=config.min_replay_size, seed=seed,
        samples_per_insert=config.samples_per_insert if rate_limit else None)
    if self._replay_backend == "reverb":
      # Imported on demand: Reverb is an optional extra with its own stack.
      from ngu_jax.replay import reverb_tables  # pylint: disable=g-import-not-at-top
      return reverb_tables.ReverbReplay(**kwargs)
    return prioritized.PrioritizedReplay(**kwargs)

  def make_dataset_iterator(self, replay_client: Any,
                            timeout: Optional[float] = None
                            ) -> Iterator[Tuple[np.ndarray, SequenceBatch]]:
    """Endless (keys, SequenceBatch) of `batch_size` prioritised samples.

    Each batch carries the importance weights (N P(i))^-0.6 / max (Table 6).
    `timeout` is passed to `replay.sample` (None: wait for data).
    """
    config = self._config
    batch_size = config.batch_size

    def iterate():
      while True:
        keys, items, weights = replay_client.sample(batch_size,
                                                    timeout=timeout)
        yield keys, adder_lib.to_sequence_batch(items, weights)
    return iterate()

  def make_adder(self, replay_client: Any, env_spec: EnvironmentSpec,
                 policy: Optional[NGUPolicy] = None
                 ) -> adder_lib.SequenceAdder:
    """A `SequenceAdder` of burn_in + trace_length steps every replay_period.

    Table 6: trace length 80, replay period 40 (Table 7: 50 / 50).
    """
    del policy
    config = self._config
    return adder_lib.SequenceAdder(
        replay_client.insert, env_spec.num_lanes,
        sequence_length=config.trace_length, period=config.replay_period,
        burn_in=config.burn_in)

  def make_device_replay(self) -> device_replay.DeviceReplay:
    """The compiled loop's replay: pure `init / add / sample /
    update_priorities` on the device (`replay.device`), with the
    capacity and exponents of `make_replay_tables` (Table 6)."""
    config = self._config
    return device_replay.make_prioritized_replay(
        config.replay_capacity, config.priority_exponent,
        config.importance_sampling_exponent)

  def make_device_adder(self, num_lanes: int
                        ) -> device_replay.DeviceSequenceAdder:
    """The compiled loop's adder: `make_adder`'s windows (burn_in +
    trace_length steps every replay_period) as pure `init / add / flush`
    over `num_lanes` lanes (`replay.device`)."""
    config = self._config
    return device_replay.make_sequence_adder(
        num_lanes, sequence_length=config.trace_length,
        period=config.replay_period, burn_in=config.burn_in)

  def make_actor(self, random_key: jax.Array, policy: NGUPolicy,
                 env_spec: EnvironmentSpec, variable_source: Any = None,
                 adder: Optional[adder_lib.SequenceAdder] = None, *,
                 first_lane: int = 0, total_lanes: int = 0) -> Actor:
    """An `Actor` over the spec's B lanes (App. A actors).

    `first_lane` / `total_lanes`: this actor's lanes are lanes first_lane,
    ..., first_lane + B - 1 of all actors' `total_lanes` (their eps_l and
    mixtures; App. A); default: the actor's own B lanes.
    """
    return Actor(self._config, policy, random_key, env_spec.num_lanes,
                 variable_source, adder, first_lane=first_lane,
                 total_lanes=total_lanes)

  def make_learner(self, random_key: jax.Array,
                   networks: actor_lib.NGUNetworks,
                   dataset: Iterator[Tuple[np.ndarray, SequenceBatch]],
                   logger_fn: Optional[Callable[[Dict[str, float]],
                                                Any]] = None,
                   env_spec: Optional[EnvironmentSpec] = None,
                   replay_client: Any = None, counter: Any = None
                   ) -> Learner:
    """A `Learner` (App. A learner); priorities go to `replay_client`."""
    del env_spec
    return Learner(self._config, networks, random_key, dataset,
                   replay=replay_client, logger_fn=logger_fn,
                   counter=counter)

  def make_policy(self, networks: actor_lib.NGUNetworks,
                  env_spec: Optional[EnvironmentSpec] = None,
                  evaluation: bool = False, eval_mixture_index: int = 0
                  ) -> NGUPolicy:
    """The acting policy (App. A): eps_l-greedy lanes, or evaluation lanes.

    Args:
      networks: the agent's networks.
      env_spec: unused (lanes are given to `init`).
      evaluation: act with `config.eval_epsilon` and one mixture.
      eval_mixture_index: that mixture (0: the exploitative policy).

    Returns:
      An `NGUPolicy`.
    """
    del env_spec
    config = self._config
    init = functools.partial(actor_lib.init, config, networks,
                             evaluation=evaluation,
                             eval_mixture_index=eval_mixture_index)
    return NGUPolicy(
        init=lambda key, num_lanes, first_lane=0, total_lanes=0: init(
            key, num_lanes, first_lane=first_lane, total_lanes=total_lanes),
        select_action=functools.partial(actor_lib.select_action, config,
                                        networks),
        get_extras=actor_lib.get_extras, evaluation=evaluation)
