"""State and statistics of the compiled loop (`ngu_jax.loops.compiled`).

The pytrees the compiled loop carries (`TrainState`: environments, actor,
adder, replay, learner, key, counters and the sums since the last metrics
row) and the pure helpers that update the statistics from a timestep; all
one seed, vmapped over seeds by the caller.
"""

from typing import Any, Dict, NamedTuple, Tuple

import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu import diagnostics
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.envs import base as env_base
from ngu_jax.envs import functional
from ngu_jax.loops import acting
from ngu_jax.replay import device

LEARNER_METRICS = tuple(name for _, name in diagnostics.LEARNER_COLUMNS)
# The extras read at each finished episode's LAST step, as the host loops'
# (`acting.EPISODE_EXTRAS`; one metrics column each).
EPISODE_EXTRAS = acting.EPISODE_EXTRAS


class Counters(NamedTuple):
  """Loop counters of one seed (int32 scalars)."""
  env_steps: jax.Array  # all lanes' agent steps
  actor_steps: jax.Array  # iterations (B env steps each)
  learner_steps: jax.Array  # sgd steps (skipped ones included)
  episodes: jax.Array  # episodes finished by the training lanes
  ready_at: jax.Array  # env_steps when the replay first held min size; -1


class ChunkStats(NamedTuple):
  """Sums since the last metrics row (reset by `CompiledLoop.reset_stats`).

  Attributes:
    returns: [3] float32: sum of finished episodes' returns, their count,
      and how many had a positive return (successes).
    coverage: [2] float32: sum of finished episodes' coverage, count.
    episode_extras: float32 [len(EPISODE_EXTRAS), 2]: per extra name, the
      sum of extras[name] at the LAST step of the finished episodes and
      their count (0 where the environment does not report it).
    actor_sums: float32 [len(diagnostics.ACTOR_SUMS)].
    learner_sums: float32 [len(LEARNER_METRICS) + 1]: sums of the learner
      metrics, then the number of learner steps.
    visits: int32 [H, W] visits of the training lanes (grid worlds; [1, 1]
      otherwise).
    cells: float32 [H, W, C] per-cell sums of the training lanes
      (`diagnostics.cell_step_sums`; [1, 1, C] without positions).
  """
  returns: jax.Array
  coverage: jax.Array
  episode_extras: jax.Array
  actor_sums: jax.Array
  learner_sums: jax.Array
  visits: jax.Array
  cells: jax.Array


class TrainState(NamedTuple):
  """Everything the compiled loop carries (one seed; a pytree of arrays)."""
  env_state: Any  # the B lanes' environment states
  timestep: env_base.TimeStep  # the last timestep of the B lanes
  episode_return: jax.Array  # float32 [B], returns of the running episodes
  actor: actor_lib.ActorState
  actor_params: networks_lib.NGUParams  # the parameters the actor acts with
  adder: Any  # device.AdderState
  replay: Any  # device.ReplayState
  learner: learning.LearnerState
  key: jax.Array
  counters: Counters
  stats: ChunkStats
  # With Agent57's meta-controller: the evaluator's bandit
  # (`sliding_window_ucb.UCBState`, `loops.evaluation`); None otherwise.
  eval_bandit: Any = None


class LearnerCarry(NamedTuple):
  """What the learner's while loop carries (`compiled._Parts._learn`)."""
  learner: learning.LearnerState
  replay: Any  # device.ReplayState without its items (None)
  key: jax.Array
  learner_sums: jax.Array
  counters: Counters


def visits_shape(env: functional.FunctionalEnv):
  return tuple(env.grid_shape) if env.grid_shape is not None else (1, 1)


def add_visits(visits: jax.Array, timestep: env_base.TimeStep,
                weight: jax.Array) -> jax.Array:
  """Adds `weight` [B] at each lane's extras["position"] (row, col)."""
  position = timestep.extras.get("position")
  if position is None:
    return visits
  h, w = visits.shape
  row = jnp.clip(position[:, 0], 0, h - 1)
  col = jnp.clip(position[:, 1], 0, w - 1)
  return visits.at[row, col].add(weight.astype(visits.dtype))


def cells_shape(env: functional.FunctionalEnv) -> Tuple[int, ...]:
  num_actions = int(env.action_spec().num_values)
  return visits_shape(env) + (len(diagnostics.cell_channels(num_actions)),)


def add_cells(cells: jax.Array, timestep: env_base.TimeStep, extras,
              action: jax.Array, num_mixtures: int) -> jax.Array:
  """Adds one actor step's `diagnostics.cell_step_sums` at x_t's cells."""
  position = timestep.extras.get("position")
  if position is None:
    return cells
  first = timestep.step_type == env_base.StepType.FIRST
  return cells + diagnostics.cell_step_sums(
      cells.shape[:2], position, extras, action, first, num_mixtures)


def zero_episode_extras() -> jax.Array:
  """`ChunkStats.episode_extras` with nothing recorded."""
  return jnp.zeros((len(EPISODE_EXTRAS), 2), jnp.float32)


def zero_stats(env: functional.FunctionalEnv) -> ChunkStats:
  return ChunkStats(
      returns=jnp.zeros((3,), jnp.float32),
      coverage=jnp.zeros((2,), jnp.float32),
      episode_extras=zero_episode_extras(),
      actor_sums=jnp.zeros((len(diagnostics.ACTOR_SUMS),), jnp.float32),
      learner_sums=jnp.zeros((len(LEARNER_METRICS) + 1,), jnp.float32),
      visits=jnp.zeros(visits_shape(env), jnp.int32),
      cells=jnp.zeros(cells_shape(env), jnp.float32))


def episode_stats(state: TrainState) -> TrainState:
  """Step 1 of the module docstring: statistics of the timestep received.

  As the host loops' `acting.record_episodes`: the running returns, and at
  the LAST lanes the finished episodes' return, coverage and the episode
  extras (`EPISODE_EXTRAS`) the environment reports, summed into
  `ChunkStats`.
  """
  ts = state.timestep
  first = ts.step_type == env_base.StepType.FIRST
  last = ts.step_type == env_base.StepType.LAST
  episode_return = (jnp.where(first, 0., state.episode_return)
                    + jnp.where(first, 0., ts.reward))
  lastf = last.astype(jnp.float32)
  stats = state.stats
  returns = stats.returns + jnp.stack([
      jnp.sum(lastf * episode_return), jnp.sum(lastf),
      jnp.sum(lastf * (episode_return > 0))])
  coverage = stats.coverage
  if "coverage" in ts.extras:
    coverage = coverage + jnp.stack([
        jnp.sum(lastf * ts.extras["coverage"]), jnp.sum(lastf)])
  episode_extras = stats.episode_extras
  for i, name in enumerate(EPISODE_EXTRAS):
    if name in ts.extras:
      value = ts.extras[name].astype(jnp.float32)
      episode_extras = episode_extras.at[i].add(jnp.stack([
          jnp.sum(lastf * value), jnp.sum(lastf)]))
  visits = add_visits(stats.visits, ts, jnp.ones_like(first, jnp.int32))
  counters = state.counters._replace(
      episodes=state.counters.episodes + jnp.sum(last).astype(jnp.int32))
  return state._replace(
      episode_return=episode_return, counters=counters,
      stats=stats._replace(returns=returns, coverage=coverage,
                           episode_extras=episode_extras, visits=visits))


def chunk_metrics(state: TrainState) -> Dict[str, jax.Array]:
  """The scalars a metrics row needs from a state (jittable, vmappable)."""
  c, s = state.counters, state.stats
  lanes = actor_lib.lane_controllers(state.actor)
  return {**{k: lanes[k] for k in diagnostics.CONTROLLER_FIELDS if k in lanes},
      "env_steps": c.env_steps, "actor_steps": c.actor_steps,
      "episodes": c.episodes, "learner_steps": c.learner_steps,
      "replay_size": device.replay_size(state.replay),
      "returns": s.returns, "coverage": s.coverage,
      "episode_extras": s.episode_extras,
      "actor_sums": s.actor_sums, "learner_sums": s.learner_sums,
      "visits": s.visits, "cells": s.cells,
      "error_mean": state.actor.error_stats.mean,
      "error_var": state.actor.error_stats.var,
      "error_count": state.actor.error_stats.count,
  }
