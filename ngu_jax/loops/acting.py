"""The host acting step, its episode statistics and the evaluation actors.

What every host loop does per actor step of B lanes (Badia et al. 2020,
App. A: an actor steps its environment lanes with the latest parameters),
written once and used by the Python loop (`ngu_jax.loops.python.loop`) and
the distributed actor and evaluator nodes (`ngu_jax.loops.distributed.nodes`):

1. episode statistics of the timestep just received (`record_episodes`):
   each lane's running return (reset on FIRST: the reward arriving with a
   FIRST step belongs to no episode), and for the lanes that are LAST the
   finished episode's return and coverage (Sec. 4.1, Fig. 2: the fraction
   of a Disco Maze's free cells visited), its episode extras (the values
   of `timestep.extras[name]` at LAST for each name of `EPISODE_EXTRAS`
   the environment reports, e.g. the noisy-TV grid's "frontier" and
   "tv_steps"), the episode count and, in grid worlds with evaluations,
   the cells visited (heatmaps);
2. `Actor.select_action`, `Actor.observe` (the step goes to the adder);
3. the actor diagnostics of the step summed on the device
   (`diagnostics.actor_step_sums`, one jitted call: no transfer per step);
4. `Actor.update` (a parameter pull every `actor_update_period` steps,
   Table 6), noting the staleness of each pull where the parameters come
   from a `distributed.clients.VariableClient`.

`ActingStep` is that step; `EpisodeStats` the statistics it updates
(drained at each metrics row / report). The compiled loop
(`ngu_jax.loops.compiled`) runs the same step as a JAX function
(`compiled.state.episode_stats`, then `compiled.loop._Parts._act`) and
`tests/loops/test_acting.py` checks the two agree on the same episodes.

Coverage is what the environment declares (`BatchedEnv.
make_coverage_tracker()`, as it declares its observation encoding), never
guessed from the environment's name: Disco Maze ("disco_maze" and the
functional "jax/disco_maze") returns a `disco_maze.CoverageTracker`,
every other environment None.

Evaluation actors (`make_evaluation_actors`; `ngu_jax.loops.evaluation`
plays their episodes): one per mixture j in {0, N - 1} (the exploitative
and the most exploratory policy, App. A), acting with
`config.eval_epsilon`, in their own environment. Their seeds, in every
host loop:

  evaluation environment   seed + EVAL_ENV_SEED_OFFSET (10,000), so its
                           episodes differ from the training lanes';
  actor of mixture j       PRNGKey(seed + EVAL_ACTOR_SEED_OFFSET + j)
                           (seed + 1 + j), apart from the training actor's
                           key (split from PRNGKey(seed)).

The compiled loop draws its in-program evaluation keys as
fold_in(PRNGKey(seed + EVAL_ENV_SEED_OFFSET), n) for the n-th evaluation.
"""

import dataclasses
import functools
from typing import Any, Dict, List, Optional

import jax
import numpy as np

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import envs
from ngu_jax import mixtures
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import metrics_log

# Seed offsets of the evaluation parts (module docstring).
EVAL_ENV_SEED_OFFSET = 10_000
EVAL_ACTOR_SEED_OFFSET = 1
# The extras read at each finished episode's LAST step (module docstring,
# step 1); one metrics column each (`metrics_log.EPISODE_EXTRAS`).
EPISODE_EXTRAS = metrics_log.EPISODE_EXTRAS


def evaluation_env_seed(seed: int) -> int:
  """The evaluation environment's seed for a run seeded `seed`."""
  return int(seed) + EVAL_ENV_SEED_OFFSET


def evaluation_mixtures(num_mixtures: int) -> List[int]:
  """The evaluated mixtures j: [0, N - 1] ([0] when N = 1), App. A."""
  return sorted({0, int(num_mixtures) - 1})


def make_evaluation_actors(builder: builder_lib.NGUBuilder, networks: Any,
                           spec: builder_lib.EnvironmentSpec,
                           variable_source: Any, config: NGUConfig,
                           seed: int) -> Dict[int, actor_lib.Actor]:
  """The evaluation actors: mixture j -> an `Actor` without an adder.

  Args:
    builder: the run's `NGUBuilder`.
    networks: the agent's networks (`builder.make_networks`).
    spec: the evaluation environment's spec (B evaluation lanes).
    variable_source: where the actors pull parameters from (the learner,
      or a `VariableClient` of the learner node).
    config: the agent's config (N mixtures, eval_epsilon).
    seed: the run's seed; actor j is keyed PRNGKey(seed + 1 + j).

  Returns:
    {j: actor} for j in `evaluation_mixtures(N)`, each acting with
    `config.eval_epsilon` and mixture j (`builder.make_policy(evaluation=
    True)`).
  """
  actors = {}
  for mixture in evaluation_mixtures(config.num_mixtures):
    policy = builder.make_policy(networks, spec, evaluation=True,
                                 eval_mixture_index=mixture)
    actors[mixture] = builder.make_actor(
        jax.random.PRNGKey(seed + EVAL_ACTOR_SEED_OFFSET + mixture), policy,
        spec, variable_source)
  return actors


def make_coverage_tracker(env: envs.BatchedEnv) -> Optional[Any]:
  """The coverage tracker `env` declares (`make_coverage_tracker`), or None.

  An environment written before the declaration (no such method) tracks no
  coverage.
  """
  make = getattr(env, "make_coverage_tracker", None)
  return None if make is None else make()


@functools.lru_cache(maxsize=8)
def actor_sums_fn(num_mixtures: int, beta: float):
  """jit of sums + `diagnostics.actor_step_sums` (one compile per betas).

  Returns:
    add(sums, extras, step_is_first) -> sums: float32
    [len(diagnostics.ACTOR_SUMS)] plus the step's sums over B lanes
    (extras: `diagnostics.ACTOR_EXTRAS` -> [B, ...]; step_is_first bool [B]).
  """
  betas = mixtures.betas(num_mixtures, beta)

  def add(sums, extras, step_is_first):
    return sums + diagnostics.actor_step_sums(extras, step_is_first, betas)
  return jax.jit(add)


def zero_actor_sums() -> np.ndarray:
  """float32 [len(diagnostics.ACTOR_SUMS)] zeros."""
  return np.zeros(len(diagnostics.ACTOR_SUMS), np.float32)


def zero_episode_extras() -> Dict[str, List[float]]:
  """{name: []} for each name of `EPISODE_EXTRAS` (nothing recorded)."""
  return {name: [] for name in EPISODE_EXTRAS}


@dataclasses.dataclass
class EpisodeStats:
  """Episode statistics of B training lanes (module docstring, step 1).

  The Python loop's `python_state.LoopState` carries the same fields (it
  checkpoints them) and is passed to `record_episodes` / `ActingStep`
  directly.

  Attributes:
    episode_return: float64 [B], the return of each lane's running episode.
    returns / coverages: returns and coverages of the episodes finished
      since the last `drain` (coverages only where a tracker is given).
    episode_extras: {name: values} for each name of `EPISODE_EXTRAS`: the
      extras[name] at LAST of the episodes finished since the last `drain`
      (empty where the environment does not report it).
    episodes: episodes finished so far (never drained).
    visits: int64 [H, W] grid-cell visits since the last `drain`, or None
      (not counted).
    actor_sums: float32 [len(diagnostics.ACTOR_SUMS)] (on the device), the
      `diagnostics.actor_step_sums` of the steps since the last `drain`.
    staleness: learner steps behind of each parameter pull since the last
      `drain` (`ActingStep` with a `VariableClient`).
  """
  episode_return: np.ndarray
  returns: List[float] = dataclasses.field(default_factory=list)
  coverages: List[float] = dataclasses.field(default_factory=list)
  episode_extras: Dict[str, List[float]] = dataclasses.field(
      default_factory=zero_episode_extras)
  episodes: int = 0
  visits: Optional[np.ndarray] = None
  actor_sums: Any = None
  staleness: List[float] = dataclasses.field(default_factory=list)

  @classmethod
  def zeros(cls, num_lanes: int,
            visits_shape: Optional[Any] = None) -> "EpisodeStats":
    """Fresh statistics of B = `num_lanes` lanes (visits if a shape)."""
    return cls(
        episode_return=np.zeros(num_lanes, np.float64),
        visits=(None if visits_shape is None
                else np.zeros(tuple(visits_shape), np.int64)),
        actor_sums=jax.numpy.asarray(zero_actor_sums()))

  def observe(self, timestep: envs.TimeStep,
              coverage: Optional[Any] = None) -> None:
    """`record_episodes(self, timestep, coverage)`."""
    record_episodes(self, timestep, coverage)

  def drain(self) -> Dict[str, Any]:
    """The statistics since the last drain, then cleared.

    Returns:
      {"returns", "coverages", "staleness": lists, "episode_extras":
      {name: list} (`EPISODE_EXTRAS`), "actor_sums": float32 numpy
      [len(diagnostics.ACTOR_SUMS)], "visits": int64 [H, W] or None}.
      `episodes` and the running returns are kept.
    """
    out = dict(returns=self.returns, coverages=self.coverages,
               staleness=self.staleness, episode_extras=self.episode_extras,
               actor_sums=np.asarray(jax.device_get(self.actor_sums)),
               visits=self.visits)
    self.returns, self.coverages, self.staleness = [], [], []
    self.episode_extras = zero_episode_extras()
    self.actor_sums = jax.numpy.asarray(zero_actor_sums())
    if self.visits is not None:
      self.visits = np.zeros_like(self.visits)
    return out


def record_episodes(stats: Any, timestep: envs.TimeStep,
                    coverage: Optional[Any] = None) -> None:
  """Step 1 of the module docstring: statistics of the timestep received.

  Args:
    stats: an `EpisodeStats` or an object with its fields (the Python
      loop's `LoopState`); updated in place.
    timestep: the `TimeStep` of the B lanes just received.
    coverage: the environment's coverage tracker
      (`make_coverage_tracker`), fed every timestep; None: no coverage.

  The episode extras (`EPISODE_EXTRAS`) the timestep's extras hold ([B]
  each) are read at the LAST lanes into `stats.episode_extras`.
  """
  first, last = timestep.first(), timestep.last()
  stats.episode_return = np.where(
      first, 0., stats.episode_return) + np.where(first, 0., timestep.reward)
  if coverage is not None:
    lane_coverage = coverage.update(timestep)
    stats.coverages.extend(lane_coverage[last].tolist())
  extras = timestep.extras or {}
  for name in EPISODE_EXTRAS:
    if name in extras:
      values = np.asarray(extras[name])[last]
      stats.episode_extras.setdefault(name, []).extend(values.tolist())
  stats.returns.extend(stats.episode_return[last].tolist())
  stats.episodes += int(last.sum())
  if stats.visits is not None:
    positions = diagnostics.grid_positions(timestep)
    if positions is not None:
      stats.visits = diagnostics.add_visits(stats.visits, positions)


class ActingStep:
  """One host acting step of B lanes (module docstring, steps 1-4).

  Per environment step the loop does:

    action = acting(timestep, stats)   # statistics, act, observe, update
    timestep = env.step(action)

  Args:
    actor: the training `Actor` (with its adder).
    config: the agent's config (the betas of the actor diagnostics).
    coverage: the environment's coverage tracker
      (`make_coverage_tracker(env)`), or None.
    variables: the actor's `VariableClient` (distributed actors): the
      staleness of every pull at `update` goes to `stats.staleness`; None:
      not recorded.
  """

  def __init__(self, actor: actor_lib.Actor, config: NGUConfig,
               coverage: Optional[Any] = None,
               variables: Optional[Any] = None):
    self.actor = actor
    self.coverage = coverage
    self._variables = variables
    self._add_sums = actor_sums_fn(config.num_mixtures, config.beta)

  def __call__(self, timestep: envs.TimeStep, stats: Any) -> np.ndarray:
    """Acts on `timestep`; returns the int32 actions [B] to apply.

    Args:
      timestep: the `TimeStep` of the B lanes just received.
      stats: an `EpisodeStats` (or the Python loop's `LoopState`): its
        episode statistics and `actor_sums` are updated in place.
    """
    record_episodes(stats, timestep, self.coverage)
    actor = self.actor
    action = actor.select_action(timestep)
    actor.observe(timestep, action)
    extras = actor.state.extras
    stats.actor_sums = self._add_sums(
        stats.actor_sums,
        {k: getattr(extras, k) for k in diagnostics.ACTOR_EXTRAS},
        timestep.first())
    variables = self._variables
    pulls = None if variables is None else variables.pulls
    actor.update()
    if variables is not None and variables.pulls != pulls:
      stats.staleness.append(float(variables.staleness))
    return action
