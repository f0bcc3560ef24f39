"""One batched environment interface for every NGU actor.

An actor runs B environment *lanes* in lock-step (NGU Sec. 3 / App. F: each
actor steps its own environment copies; docs/design.md#data-flow). Every
adapter in `ngu_jax.envs` (envpool Atari and MiniGrid, Random Disco Maze,
gymnax) implements `BatchedEnv` and returns a dm_env-like `TimeStep` whose
arrays carry a leading lane axis B.

Semantics (identical for every adapter, checked by
`tests/envs/conformance.py`):

* `reset()` starts a fresh episode in every lane: all lanes FIRST, reward 0,
  discount 1.
* `step(actions)` advances every lane by one *agent* step. The reward and
  discount that arrive with observation x_t are r_t and d_t (dm_env
  alignment, docs/design.md#alignment).
* Auto-reset: after a lane returns LAST, its next `step` ignores that lane's
  action and returns FIRST with the first observation of a fresh episode,
  reward 0 and discount 1. FIRST never appears elsewhere (except at reset).
* Termination (the episode really ended, e.g. game over, wall hit, goal
  reached) returns LAST with discount 0.
* Truncation (a time limit, e.g. Atari's 27,000 agent steps, Table 8) returns
  LAST with discount 1, so value bootstrapping continues through it.
* MID steps have discount 1.
* Bad input is rejected at the boundary with a ValueError that names the
  lane(s): actions of the wrong shape, a non-integer dtype or out of range
  (`validate_actions`), and float observations holding NaN/inf
  (`check_observation_finite`).

Every adapter declares what its observations are
(`BatchedEnv.observation_encoding()`, an `ngu_jax.types.ObservationEncoding`:
pixels, symbolic codes, binary grids or real features); the networks encode
them accordingly.

Specs are dm_env's (`dm_env.specs.Array`, `BoundedArray`, `DiscreteArray`,
re-exported here; dm_env is a dependency of envpool) and describe ONE lane;
batched arrays have shape `(num_envs,) + spec.shape`.
"""

import abc
from typing import Any, Dict, NamedTuple, Optional, Tuple

import dm_env
from dm_env import specs
import numpy as np

from ngu_jax import _checks
from ngu_jax.types import ObservationEncoding

# Per-lane specs: reuse dm_env's (shape, dtype, name[, minimum, maximum]).
Array = specs.Array
BoundedArray = specs.BoundedArray
DiscreteArray = specs.DiscreteArray

# dm_env's IntEnum: FIRST = 0, MID = 1, LAST = 2.
StepType = dm_env.StepType

STEP_TYPE_DTYPE = np.int32


class TimeStep(NamedTuple):
  """One step of B lanes (dm_env TimeStep with a leading lane axis).

  Attributes:
    step_type: `StepType` values (FIRST/MID/LAST), int32, shaped [B].
    reward: r_t, the reward arriving with `observation`, float32, [B];
      0 on FIRST.
    discount: d_t in {0, 1} from the environment, float32, [B]; 0 only on a
      terminating LAST, 1 on FIRST, MID and truncating LAST.
    observation: x_t, shaped [B, *observation_spec().shape].
    extras: adapter-specific side information, dict of arrays shaped
      [B, ...] (e.g. `lives`, `agent_pos`); may be empty.
  """
  step_type: Any
  reward: Any
  discount: Any
  observation: Any
  extras: Dict[str, Any]

  def first(self) -> np.ndarray:
    """Lanes starting an episode, bool [B]."""
    return np.asarray(self.step_type) == StepType.FIRST

  def mid(self) -> np.ndarray:
    """Lanes in the middle of an episode, bool [B]."""
    return np.asarray(self.step_type) == StepType.MID

  def last(self) -> np.ndarray:
    """Lanes ending an episode (terminated or truncated), bool [B]."""
    return np.asarray(self.step_type) == StepType.LAST


class BatchedEnv(abc.ABC):
  """B environment lanes stepped together; see the module docstring.

  Usable as a context manager: `with make(...) as env:` closes it on exit.
  """

  @property
  def num_envs(self) -> int:
    """Number of lanes B (an implementation sets `_num_envs` or overrides
    this)."""
    return self._num_envs

  @abc.abstractmethod
  def observation_spec(self) -> specs.Array:
    """Spec of one lane's observation (shape without the lane axis)."""

  def observation_encoding(self) -> ObservationEncoding:
    """What the observations are, for the networks to encode them.

    docs/design.md#observation-encodings: declared, never guessed from
    the dtype. Every adapter declares one `ngu_jax.types.ObservationEncoding`:
    "pixels" (images, uint8 scaled by 1/255), "symbolic" (integer codes per
    channel with their counts), "binary" (0/1 grids) or "features" (real
    values). `tests/envs/conformance.py` checks it against the observations.

    Raises:
      NotImplementedError: the adapter did not declare it (the default).
    """
    raise NotImplementedError(
        f"{type(self).__name__}.observation_encoding: this environment does "
        "not declare what its observations are. Adapter authors: override "
        "`observation_encoding()` to return an ngu_jax.types."
        "ObservationEncoding, e.g. ObservationEncoding('pixels') for images, "
        "ObservationEncoding('symbolic', num_values=(11, 6, 3)) for integer "
        "codes, ObservationEncoding('binary') for 0/1 grids or "
        "ObservationEncoding('features') for real-valued vectors.")

  def make_coverage_tracker(self) -> Any:
    """A tracker of each lane's episode coverage, or None (the default).

    Environments whose episodes have a coverage (Disco Maze, NGU Sec. 4.1,
    Fig. 2: the fraction of the maze's free cells visited) declare it
    here, as they declare their observation encoding; the loops ask for it
    instead of matching environment names (`ngu_jax.loops.acting`).

    Returns:
      None, or a fresh tracker over this environment's B lanes with
      `update(timestep) -> float32 [B]` (each lane's coverage so far; on a
      LAST lane, the finished episode's) and `get_state()` /
      `set_state(dict of arrays)` for checkpoints, e.g.
      `disco_maze.CoverageTracker`.
    """
    return None

  def visit_grid_shape(self) -> Optional[Tuple[int, int]]:
    """The grid of cells whose visits the loops count, or None (default).

    Grid worlds declare it, as they declare their coverage: the training
    and evaluation visit heatmaps (`ngu_jax.loops.metrics_log`) count the
    agent's `extras["position"]` (row, col) on this grid. (0, 0): a grid
    world whose size is not known up front; the counts grow to the cells
    visited.
    """
    return None

  @abc.abstractmethod
  def action_spec(self) -> specs.DiscreteArray:
    """Spec of one lane's action: `DiscreteArray(num_values=A)`."""

  @abc.abstractmethod
  def reset(self) -> TimeStep:
    """Starts a fresh episode in every lane: all FIRST, reward 0, discount 1."""

  @abc.abstractmethod
  def step(self, actions) -> TimeStep:
    """Advances every lane by one agent step.

    Args:
      actions: integer actions in [0, A), shaped [B]. The action of a lane
        that returned LAST on the previous step is ignored (that lane
        auto-resets and returns FIRST).

    Returns:
      The `TimeStep` of all B lanes.
    """

  def close(self) -> None:
    """Releases resources (threads, C++ pools). Default: nothing to do."""

  def __enter__(self) -> "BatchedEnv":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


def validate_actions(actions, num_envs: int, num_actions: int,
                     where: str) -> np.ndarray:
  """Checks a batch of discrete actions at an environment's boundary.

  Args:
    actions: array-like of integer actions, shaped [num_envs] (numpy or JAX).
    num_envs: the number of lanes B.
    num_actions: A; valid actions are in [0, A).
    where: the public function, e.g. "AtariEnv.step", used in messages.

  Returns:
    The actions as a numpy int32 array shaped [B].

  Raises:
    ValueError: wrong shape, non-integer dtype (bool and float included), or
      values out of range; range errors name the offending lane(s).
  """
  actions = np.asarray(actions)
  if actions.shape != (num_envs,):
    _checks.check_shape(actions, (num_envs,), "actions", where)
  if actions.dtype.kind not in "iu":  # Rejects bool, float, object.
    raise ValueError(f"{where}: `actions` must have an integer dtype, got "
                     f"{actions.dtype}.")
  if actions.dtype == np.int32:  # Fast path: negatives wrap to >= 2^31.
    out_of_range = actions.view(np.uint32).max() >= np.uint32(num_actions)
  else:
    out_of_range = actions.min() < 0 or actions.max() >= num_actions
  if out_of_range:
    _checks.check_in_range(actions, 0, num_actions, "actions", where)
  return actions.astype(np.int32, copy=False)


def check_positive_int(value, name: str, where: str) -> int:
  """Returns `value` as an int, or raises ValueError unless it is an int >= 1.

  For constructor arguments such as `num_envs` or `max_episode_steps`.
  """
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{where}: `{name}` must be an int, got {value!r}.")
  if value < 1:
    raise ValueError(f"{where}: `{name}` must be >= 1, got {value}.")
  return int(value)


def check_observation_finite(observation, where: str,
                             name: str = "observation") -> None:
  """Rejects NaN/inf in a float observation, naming the lane(s).

  Integer observations (e.g. uint8 frames) cannot hold NaN and pass
  unchecked.

  Args:
    observation: array shaped [B, ...].
    where: the public function, e.g. "GymnaxEnv.step".
    name: the array's name in messages.

  Raises:
    ValueError: some lane's observation holds NaN or inf.
  """
  observation = np.asarray(observation)
  if np.issubdtype(observation.dtype, np.floating) or np.issubdtype(
      observation.dtype, np.complexfloating):
    _checks.check_finite(observation, name, where)
