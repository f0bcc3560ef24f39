"""The four variant families of the NGU agent and their registry.

NGU's agent is a composition: an intrinsic reward (NGU Sec. 2), a behaviour
policy (App. A; DiCE 004 Sec. 3.1), a meta-controller choosing each lane's
mixture j (App. A; Agent57 Sec. 3.2) and a value loss (App. E; Agent57 Sec.
3.1; DiCE Alg. 3). Each family has a config of its own in `NGUConfig`
(`config.intrinsic`, `.policy`, `.meta`, `.loss`) whose `kind` names one
registered part; `compose(config)` picks the four parts once, and the actor
(`actor.init` / `select_action`) and the learner (`learning.sgd_step`) call
the parts' functions instead of testing names.

A part is a frozen dataclass of pure functions (jittable; the config and the
networks are static) and of flags that say what it needs. Parts read and
write the actor's state through the `ActorState` slots they own (named in
each part class below); a part with state of its own that no slot holds
keeps it in `ActorState.variant_state`, a dict keyed by family name.

Adding a kind is one module that builds its part plus one call of
`register(family, kind, part)`: the config then accepts the kind
(`config.KINDS`) and `compose` returns the part. docs/design.md
("Variants: where they are chosen") walks through one.
"""

import dataclasses
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu import config as config_lib

# Slot updates a part returns: ActorState field -> new value.
Slots = Dict[str, Any]


class RewardStep(NamedTuple):
  """What an intrinsic reward computes for one step of B lanes.

  Attributes:
    intrinsic: r^i_t before its zeroing at FIRST, float32 [B].
    episodic_reward: the episodic (or RECODE) reward before any modulation,
      float32 [B]; 0 where the kind has none.
    alpha: the life-long modulator alpha_t (eq. 1 context), float32 [B]; 1
      where the kind has none.
    rnd_error: the RND error of x_t, float32 [B]; 0 where none is computed.
  """
  intrinsic: Any
  episodic_reward: Any
  alpha: Any
  rnd_error: Any


@dataclasses.dataclass(frozen=True)
class IntrinsicReward:
  """One kind of intrinsic reward r^i_t (NGU Sec. 2; `config.intrinsic`).

  Slots owned: `memory`, `embedding_params`, `error_stats`, `recode`,
  `recode_reward_stats` (those the kind uses; the others stay as `init` of
  the actor makes them: None, or fresh RND-error statistics).

  Attributes:
    init: (config, networks, num_lanes, key) -> (slots, key): the kind's
      slots for B fresh lanes; `key` is the actor's, returned split if the
      kind drew from it.
    step: (config, networks, params, state, observation, first, wipe) ->
      (`RewardStep`, slots): r^i of x_t for B lanes (`first` bool [B], FIRST
      steps; `wipe` bool [B], the lanes whose episodic memory is wiped now).
    episodic: whether it has an episodic reward (the `mean_episodic_reward`
      column).
    modulated: whether r^i is modulated by RND's alpha (eq. 1): the alpha
      columns apply (with `config.use_rnd`).
    reads_rnd: whether the actor computes RND errors (with
      `config.use_rnd`).
    reads_embedding: whether the actor reads the embedding f (the
      inverse-dynamics columns apply).
    trains_embedding: whether the learner trains f.
    trains_rnd: whether the learner trains the RND predictor.
  """
  init: Callable[..., Tuple[Slots, Any]]
  step: Callable[..., Tuple[RewardStep, Slots]]
  episodic: bool
  modulated: bool
  reads_rnd: bool
  reads_embedding: bool
  trains_embedding: bool
  trains_rnd: bool


@dataclasses.dataclass(frozen=True)
class BehaviourPolicy:
  """How the training lanes pick a_t from Q (`config.policy`).

  Evaluation lanes are eps-greedy with `config.eval_epsilon` whatever the
  kind (NGU App. A's evaluator): `init(..., evaluation=True)` gives no slots
  and `sample` falls back to eps-greedy where its slots are None.

  Slots owned: `temperature_x`, `bva` (DiCE's), or any of
  `variant_state["policy"]`.

  Attributes:
    init: (config, num_lanes, key, evaluation) -> (slots, key).
    episode_start: (config, state, key, finished, episode_return) -> (slots,
      key): the lanes' settings for their next episode where `finished`
      (bool [B]: a FIRST after an episode), `episode_return` the finished
      episodes' undiscounted r^e (float32 [B]).
    sample: (config, state, key, q, epsilon) -> (action int32 [B], mu
      float32 [B], tau float32 [B] or None): a_t ~ the policy, its
      probability mu(a_t | x_t), and the temperatures if the kind has them.
    has_temperatures: whether training lanes have temperatures tau (the
      `diagnostics.TEMPERATURE_COLUMNS` apply).
    tau: (state) -> the lanes' temperatures float32 [B], or None where the
      kind (or an evaluation actor) has none (`ActorExtras.tau`).
    needs_episode_return: whether training lanes track their episode's
      undiscounted r^e (`ActorState.episode_return`).
  """
  init: Callable[..., Tuple[Slots, Any]]
  episode_start: Callable[..., Tuple[Slots, Any]]
  sample: Callable[..., Tuple[Any, Any, Optional[Any]]]
  has_temperatures: bool
  tau: Callable[[Any], Optional[Any]]
  needs_episode_return: bool


@dataclasses.dataclass(frozen=True)
class MetaController:
  """How each training lane's mixture j is chosen (`config.meta`).

  Slots owned: `bandit`, `mixture_index` (at episode starts), or any of
  `variant_state["meta"]`.

  Attributes:
    init: (config, mixture, evaluation) -> (slots, mixture): the lanes'
      controllers and their first mixtures, from App. A's fixed assignment
      `mixture` (int32 [B]).
    episode_start: (config, state, key, finished, episode_return) -> (slots,
      key): the next episode's j where `finished`.
    fixed_mixtures: whether a lane keeps one mixture for its life (so App.
      A's epsilons can be spread over each mixture's lanes,
      `config.actor_epsilons_per_mixture`).
    needs_episode_return: as `BehaviourPolicy`'s.
  """
  init: Callable[..., Tuple[Slots, Any]]
  episode_start: Callable[..., Tuple[Slots, Any]]
  fixed_mixtures: bool
  needs_episode_return: bool


@dataclasses.dataclass(frozen=True)
class ValueLoss:
  """The learner's value loss (`config.loss`).

  Attributes:
    loss_arguments: (config) -> dict of keyword arguments of
      `value_loss.loss_and_grad` that select and set the loss (e.g. `dice`,
      DiCE's `DiceSettings`; {} for the transformed Retrace of App. E).
  """
  loss_arguments: Callable[[Any], Dict[str, Any]]


def where_lanes(mask: Any, new: Any, old: Any) -> Any:
  """Per-lane select over pytrees whose leaves have a leading [B] axis:
  `new` where `mask` (bool [B]), else `old`."""
  def select(n, o):
    m = mask.reshape(mask.shape + (1,) * (o.ndim - 1))
    return jnp.where(m, n, o)
  return jax.tree_util.tree_map(select, new, old)


FAMILY_TYPES = {"intrinsic": IntrinsicReward, "policy": BehaviourPolicy,
                "meta": MetaController, "loss": ValueLoss}

_REGISTRY: Dict[str, Dict[str, Any]] = {f: {} for f in FAMILY_TYPES}


def register(family: str, kind: str, part: Any) -> None:
  """Makes `kind` a choice of `family` ("intrinsic", "policy", "meta",
  "loss"), built by `part` (an instance of the family's part class).

  Registering a kind again replaces its part (a notebook re-running a cell).

  Raises:
    ValueError: an unknown family, a kind that is not a non-empty string,
      or a part of another class.
  """
  if family not in FAMILY_TYPES:
    raise ValueError(f"variants.register: unknown family {family!r}; "
                     f"choose one of {sorted(FAMILY_TYPES)}.")
  if not isinstance(kind, str) or not kind:
    raise ValueError(f"variants.register: `kind` must be a non-empty "
                     f"string, got {kind!r}.")
  if not isinstance(part, FAMILY_TYPES[family]):
    raise ValueError(
        f"variants.register: a {family!r} part must be a "
        f"{FAMILY_TYPES[family].__name__}, got {type(part).__name__}.")
  _REGISTRY[family][kind] = part
  if kind not in config_lib.KINDS[family]:
    config_lib.KINDS[family].append(kind)


def get(family: str, kind: str) -> Any:
  """The part registered as `kind` of `family`.

  Raises:
    ValueError: an unknown family or kind (the message lists the kinds).
  """
  if family not in _REGISTRY:
    raise ValueError(f"variants.get: unknown family {family!r}; choose one "
                     f"of {sorted(_REGISTRY)}.")
  if kind not in _REGISTRY[family]:
    raise ValueError(f"variants.get: no {family!r} kind {kind!r} is "
                     f"registered; known: {sorted(_REGISTRY[family])}.")
  return _REGISTRY[family][kind]


class Variants(NamedTuple):
  """The four parts of one config (`compose`)."""
  intrinsic: IntrinsicReward
  policy: BehaviourPolicy
  meta: MetaController
  loss: ValueLoss


def compose(config: Any) -> Variants:
  """The parts `config` names: `config.<family>.kind` of each family."""
  return Variants(*(get(family, getattr(config, family).kind)
                    for family in Variants._fields))
