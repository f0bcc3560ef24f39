"""NGU builder: Acme's six builder methods (docs/design.md#builder-protocol).

Badia et al. (2020), "Never Give Up", App. A (distributed agent: actors,
replay, learner). `NGUBuilder(config, replay_backend="embedded")` holds the
config and the replay backend and assembles the pure parts of the agent into
the pieces a run loop needs:

  make_replay_tables(env_spec, policy) -> PrioritizedReplay (embedded), or
                                          ReverbReplay (replay_backend="reverb")
  make_dataset_iterator(replay)        -> iterator of (keys, SequenceBatch)
  make_adder(replay, env_spec, policy) -> SequenceAdder writing into replay
  make_actor(key, policy, env_spec, variable_source, adder) -> actor.Actor
  make_learner(key, networks, dataset, logger_fn, env_spec, replay, counter)
                                       -> learning.Learner
  make_policy(networks, env_spec, evaluation) -> NGUPolicy

This module is the wiring only. The parts it wires live beside it, in
Acme's layout: `networks` (NGUNetworks, NGUParams), `actor` (the pure
`select_action` and the stateful `Actor`), `learning` (the pure `sgd_step`
and the stateful `Learner`), `value_loss` and `auxiliary` (the losses) and
`config`. `Actor` and `Learner` are the only stateful objects: thin wrappers
that jit the pure functions, hold their state and move data between the
environment, the adder, the replay and each other. All the math stays in the
pure functions.

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
from typing import (Any, Callable, Dict, Iterator, NamedTuple, Optional,
                    Tuple)

import jax
import numpy as np

from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.envs import base as env_base
from ngu_jax.replay import adder as adder_lib
from ngu_jax.replay import device as device_replay
from ngu_jax.replay import prioritized
from ngu_jax.types import ObservationEncoding
from ngu_jax.types import PIXELS
from ngu_jax.types import SequenceBatch


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


# The policy type lives with the acting functions it bundles.
NGUPolicy = actor_lib.NGUPolicy


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
                    ) -> networks_lib.NGUNetworks:
    """Convenience: `networks.make_networks` for the spec (Sec. 3, App. H).

    The networks encode observations as `env_spec.observation_encoding`
    says.
    """
    return networks_lib.make_networks(self._config, env_spec.observation_shape,
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
        (`ngu_jax.loops.python.loop`). The limiter's error buffer is
        `prioritized.default_error_buffer` for the batch size, so that a
        learner waiting for its batch and an actor's one-sequence insert
        cannot both wait.
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
        samples_per_insert=config.samples_per_insert if rate_limit else None,
        # A learner waiting for a batch never blocks an actor's insert.
        error_buffer=(prioritized.default_error_buffer(
            config.min_replay_size, config.samples_per_insert,
            config.batch_size) if rate_limit else None))
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
                 first_lane: int = 0, total_lanes: int = 0
                 ) -> actor_lib.Actor:
    """An `Actor` over the spec's B lanes (App. A actors).

    `first_lane` / `total_lanes`: this actor's lanes are lanes first_lane,
    ..., first_lane + B - 1 of all actors' `total_lanes` (their eps_l and
    mixtures; App. A); default: the actor's own B lanes.
    """
    return actor_lib.Actor(self._config, policy, random_key,
                           env_spec.num_lanes, variable_source, adder,
                           first_lane=first_lane, total_lanes=total_lanes)

  def make_learner(self, random_key: jax.Array,
                   networks: networks_lib.NGUNetworks,
                   dataset: Iterator[Tuple[np.ndarray, SequenceBatch]],
                   logger_fn: Optional[Callable[[Dict[str, float]],
                                                Any]] = None,
                   env_spec: Optional[EnvironmentSpec] = None,
                   replay_client: Any = None, counter: Any = None
                   ) -> learning.Learner:
    """A `Learner` (App. A learner); priorities go to `replay_client`."""
    del env_spec
    return learning.Learner(self._config, networks, random_key, dataset,
                            replay=replay_client, logger_fn=logger_fn,
                            counter=counter)

  def make_policy(self, networks: networks_lib.NGUNetworks,
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
        select_action=_select_action(config, networks),
        get_extras=actor_lib.get_extras, evaluation=evaluation)


@functools.lru_cache(maxsize=networks_lib.NETWORKS_CACHE_SIZE)
def _select_action(config: NGUConfig, networks: networks_lib.NGUNetworks
                   ) -> Callable[..., Any]:
  """`actor.select_action` closed over (config, networks): one function per
  pair, so that every `Actor` jitting it (training and evaluation actors,
  a resumed run's) shares one compilation."""
  return functools.partial(actor_lib.select_action, config, networks)

