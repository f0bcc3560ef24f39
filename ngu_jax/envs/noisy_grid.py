"""Noisy-TV grid worlds: one fixed maze, noise switched on in controlled ways.

A pure-JAX `functional.FunctionalEnv` (one lane; jit / vmap / scan;
auto-reset) built to separate "explores" from "is attracted by noise" in
few steps: NGU's claim that its controllable-state embedding ignores the
Disco Maze's random wall colours (NGU Sec. 4.1) and RECODE's claim that
action-prediction embeddings alias states that differ only in
uncontrollable noise (RECODE Sec. 5.2, "Noisy Montezuma's Revenge").

Unlike the Random Disco Maze (`disco_maze_jax`), whose new maze every
episode and wall-ends-the-episode rule keep short runs at "learn not to
walk into walls", the rules are:

* ONE perfect maze fixed by `maze_seed` (the same in every episode and
  every lane), drawn once at construction by `disco_maze.generate_mazes`
  (the recursive backtracker of Sec. 4.1) with
  `numpy.random.default_rng(maze_seed)`; default 15x15 (a 7x7 cell lattice,
  97 free cells);
* a fixed start cell, by default (1, 1), the top-left free cell;
* actions 0 up, 1 down, 2 left, 3 right (as Disco Maze); a move into a wall
  leaves the agent in place and does NOT end the episode;
* no termination (see `goal`): the step that reaches `max_episode_steps`
  (default 60) is LAST with discount 1 (truncation); after it the next
  `step` ignores its action and returns FIRST at the start cell (reward 0,
  discount 1);
* the extrinsic reward is always 0, unless `goal=True` (default False):
  then the step that enters `goal_cell`, the free cell farthest from the
  start (the first in row-major order on a tie), has reward 1 and ends the
  episode, LAST with discount 0 (termination wins over the time limit). The
  goal is not drawn: frames are the same with and without it;
* observations are uint8 RGB renders as in Disco Maze (pathways black,
  walls from `disco_maze.WALL_COLOURS`, the agent green), PIXELS encoding.

The `noise` condition (`NOISES`):

* "none": every wall is `FIXED_WALL_COLOUR` (white); a frame is a
  deterministic function of the agent's position. [S, S, 3].
* "disco": every wall cell's colour is resampled uniformly from
  `disco_maze.WALL_COLOURS` at every step, FIRST included (NGU Sec. 4.1).
  [S, S, 3].
* "tv": walls fixed as in "none", plus a fifth action, 4 "tv": the agent
  stays in place and, FOR THAT STEP ONLY, the TV screen shows noise. The
  screen is the bottom border row of the frame (row S - 1, all S columns):
  it is always wall, so the TV never hides the maze or the agent. Each of
  its S x 3 channel values is uniform in [0, 255]. At every other step the
  row shows the wall colour, so the frame equals the "none" frame.
  [S, S, 3].
* "frame": RECODE Sec. 5.2's Noisy Montezuma construction at grid scale:
  the "none" frame concatenated along the width with a noise frame of the
  same shape whose every channel value is uniform in [0, 255], drawn afresh
  at every step (the paper's frames are greyscale; here each RGB channel is
  drawn independently). Observation [S, 2 S, 3]: columns [0, S) the maze,
  [S, 2 S) the noise.

Extras (the same structure at every call):
* `position`: the agent's (row, col), int32 [2];
* `coverage`: the fraction of the maze's free cells visited so far in this
  episode, float32 [] (Fig. 2, right), exactly `disco_maze.CoverageTracker`'s
  number (`make_coverage_tracker`), cleared on FIRST; as there, the cell of
  a terminating LAST (the goal) is not counted;
* `frontier`: the largest maze (BFS) distance from the start cell over the
  cells visited so far in this episode, int32 [] (0 on FIRST;
  `distance_to_start`, `max_distance`; the goal counts: reaching it makes
  the frontier `max_distance`);
* `tv_steps`: TV actions taken so far in this episode, int32 [] (always 0
  unless noise="tv"; 0 on FIRST).

Uniform draws of wall colours map uint32 bits to [0, 5) with a bias below
5 / 2^32 (`disco_maze_jax`).

Cost: the maze and its BFS table are host constants, so a step is a few
gathers plus the render; the noise draws dominate. Measured on a shared,
overloaded 2-core CPU (load ~8), 15x15, jit(vmap(step)) over 64 lanes, one
call per step: ~130-180k lane-steps/s ("none"), ~80-90k ("disco"),
~95-110k ("tv", random actions), ~35-45k ("frame": 675 random bytes per
lane-step).
"""

import collections
from typing import NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.envs import base
from ngu_jax.envs import disco_maze
from ngu_jax.envs import disco_maze_jax
from ngu_jax.envs import functional

NOISES = ("none", "disco", "tv", "frame")
TV_ACTION = 4
ACTION_NAMES = disco_maze.ACTION_NAMES + ("tv",)
FIXED_WALL_COLOUR = disco_maze.WALL_COLOURS[-1]  # white
# Palette indexed by the rendered code: 0 pathway, 1..5 walls, 6 agent.
_PALETTE = disco_maze_jax._PALETTE  # pylint: disable=protected-access
_NUM_WALL_COLOURS = len(disco_maze.WALL_COLOURS)
_AGENT_CODE = _NUM_WALL_COLOURS + 1
# pylint: disable=protected-access
# (d_row, d_col) per action; the TV action does not move.
_MOVES = np.concatenate([disco_maze._MOVES, np.zeros((1, 2), np.int32)])
_uniform_below = disco_maze_jax._uniform_below
# pylint: enable=protected-access


def bfs_distances(walls: np.ndarray, start: Sequence[int]) -> np.ndarray:
  """Maze distances from `start` by breadth-first search (host, numpy).

  Args:
    walls: bool [S, S], True on walls; the border must be wall.
    start: a free (row, col).

  Returns:
    int32 [S, S]: the number of moves on the shortest path from `start` to
    each free cell reachable from it; -1 on walls and unreachable cells.
  """
  walls = np.asarray(walls, bool)
  distance = np.full(walls.shape, -1, np.int32)
  r0, c0 = int(start[0]), int(start[1])
  distance[r0, c0] = 0
  queue = collections.deque([(r0, c0)])
  while queue:
    r, c = queue.popleft()
    for dr, dc in disco_maze._MOVES:  # pylint: disable=protected-access
      nr, nc = r + int(dr), c + int(dc)
      if not walls[nr, nc] and distance[nr, nc] < 0:
        distance[nr, nc] = distance[r, c] + 1
        queue.append((nr, nc))
  return distance


class NoisyGridState(NamedTuple):
  """One lane's state (a pytree of arrays; S = size). The maze is not in it:
  it is the environment's constant."""
  position: jax.Array  # int32 [2]: the agent's (row, col).
  episode_step: jax.Array  # int32 []: agent steps in this episode.
  last: jax.Array  # bool []: the previous step returned LAST.
  visited: jax.Array  # bool [S, S]: cells visited in this episode.
  num_visited: jax.Array  # int32 []: distinct free cells visited.
  frontier: jax.Array  # int32 []: max BFS distance over visited cells.
  tv_steps: jax.Array  # int32 []: TV actions in this episode.
  key: jax.Array  # PRNG key for the next step.


class NoisyGrid(disco_maze.PixelGridSpecs, functional.FunctionalEnv):
  """A fixed maze with controlled noise, one lane; see the module docstring.

  Observations are uint8 [S, S, 3] ([S, 2 S, 3] for noise="frame"); actions
  int32 [] in {0..3} (up, down, left, right), plus 4 (tv) for noise="tv";
  rewards 0 (1 on entering the goal with `goal=True`). Extras: `position`
  int32 [2], `coverage` float32 [], `frontier` int32 [], `tv_steps` int32
  [].
  """

  def __init__(self, noise: str = "none", *, size: int = 15,
               max_episode_steps: int = 60, maze_seed: int = 0,
               start: Optional[Sequence[int]] = None, goal: bool = False):
    """Builds the environment: draws the maze and its BFS table (host).

    Args:
      noise: one of `NOISES`: "none", "disco", "tv" or "frame".
      size: odd grid side 2n + 1 >= 5 (an n x n cell lattice).
      max_episode_steps: episode length in agent steps (truncation,
        discount 1).
      maze_seed: non-negative int; fixes the maze.
      start: the start (row, col), a free cell; default (1, 1).
      goal: reward 1 and terminate on entering `goal_cell` (the free cell
        farthest from the start); False: no reward, no termination.

    Raises:
      ValueError: an unknown `noise`, a bad `size`, `max_episode_steps`,
        `maze_seed` or `goal`, or a `start` that is not a free cell.
    """
    where = "NoisyGrid"
    if not isinstance(noise, str) or noise not in NOISES:
      raise ValueError(f"{where}: unknown noise {noise!r}; expected one of "
                       f"{NOISES}.")
    self._noise = noise
    self._max_episode_steps = base.check_positive_int(
        max_episode_steps, "max_episode_steps", where)
    if (isinstance(maze_seed, bool)
        or not isinstance(maze_seed, (int, np.integer)) or maze_seed < 0):
      raise ValueError(f"{where}: `maze_seed` must be a non-negative "
                       f"integer, got {maze_seed!r}.")
    self._num_free = disco_maze.num_free_cells(size)  # Checks `size`.
    self._size = s = int(size)
    self._maze_seed = int(maze_seed)
    walls, _ = disco_maze.generate_mazes(
        np.random.default_rng(self._maze_seed), 1, s)
    self._walls = walls[0]
    self._walls.flags.writeable = False
    if start is None:
      start = (1, 1)
    start = np.asarray(start)
    if (start.shape != (2,) or not np.issubdtype(start.dtype, np.integer)
        or not ((start >= 0) & (start < s)).all()
        or self._walls[start[0], start[1]]):
      raise ValueError(f"{where}: `start` must be a free (row, col) of the "
                       f"{s}x{s} maze, got {start.tolist()}.")
    self._start = start.astype(np.int32)
    self._start.flags.writeable = False
    self._distance = bfs_distances(self._walls, self._start)
    self._distance.flags.writeable = False
    self._max_distance = int(self._distance.max())
    if not isinstance(goal, (bool, np.bool_)):
      raise ValueError(f"{where}: `goal` must be a bool, got {goal!r}.")
    self._goal = bool(goal)
    flat = int(np.argmax(self._distance))  # The first maximum, row-major.
    self._goal_cell = np.array([flat // s, flat % s], np.int32)
    self._goal_cell.flags.writeable = False
    # Static renders: walls in the fixed colour, pathways black; codes for
    # the disco colours.
    frame = np.zeros((s, s, 3), np.uint8)
    frame[self._walls] = FIXED_WALL_COLOUR
    self._fixed_frame = frame
    # CoverageTracker's exact float32 values (compiled, x / 97 may become
    # x * (1 / 97), off by an ulp).
    self._coverage_table = (np.arange(self._num_free + 1)
                            / self._num_free).astype(np.float32)

  # Configuration.
  @property
  def noise(self) -> str:
    """The noise condition, one of `NOISES`."""
    return self._noise

  @property
  def maze_seed(self) -> int:
    """The seed of the maze."""
    return self._maze_seed

  @property
  def walls(self) -> np.ndarray:
    """The maze: bool [S, S], True on walls (read-only)."""
    return self._walls

  @property
  def start(self) -> np.ndarray:
    """The start (row, col), int32 [2] (read-only)."""
    return self._start

  @property
  def goal(self) -> bool:
    """Whether entering `goal_cell` gives reward 1 and terminates."""
    return self._goal

  @property
  def goal_cell(self) -> np.ndarray:
    """The free cell farthest from the start (the first in row-major order
    on a tie), (row, col) int32 [2] (read-only); the goal when `goal`."""
    return self._goal_cell

  @property
  def num_free_cells(self) -> int:
    """Free cells of the maze, 2 n^2 - 1 (97 for 15x15)."""
    return self._num_free

  @property
  def distance_to_start(self) -> np.ndarray:
    """BFS distance from the start cell: int32 [S, S], -1 on walls
    (read-only)."""
    return self._distance

  @property
  def max_distance(self) -> int:
    """The largest `distance_to_start`: `extras["frontier"]`'s maximum."""
    return self._max_distance

  def _observation_width(self) -> int:
    return 2 * self._size if self._noise == "frame" else self._size

  def _num_actions(self) -> int:
    return len(ACTION_NAMES) if self._noise == "tv" else (
        disco_maze.NUM_ACTIONS)

  def make_coverage_tracker(self, num_envs: int
                            ) -> disco_maze.CoverageTracker:
    """Host coverage of `num_envs` lanes (Sec. 4.1): a `CoverageTracker`,
    the number `extras["coverage"]` carries (both skip the goal cell of a
    terminating LAST)."""
    return disco_maze.CoverageTracker(num_envs, size=self._size,
                                      num_free=self._num_free)

  # Episodes.
  def _render(self, key: jax.Array, position: jax.Array,
              tv: jax.Array) -> jax.Array:
    """The observation for the agent at `position` (module docstring).

    Args:
      key: PRNG key for this frame's noise.
      position: int32 [2], the agent's (row, col).
      tv: bool [], the TV shows noise (noise="tv" only).

    Returns:
      uint8 [S, S, 3], or [S, 2 S, 3] for noise="frame".
    """
    s = self._size
    if self._noise == "disco":
      colour = 1 + _uniform_below(jax.random.bits(key, (s, s), jnp.uint32),
                                  _NUM_WALL_COLOURS)
      code = jnp.where(jnp.asarray(self._walls), colour, 0)
      code = code.at[position[0], position[1]].set(_AGENT_CODE)
      return jnp.asarray(_PALETTE)[code]
    frame = jnp.asarray(self._fixed_frame).at[position[0], position[1]].set(
        jnp.asarray(disco_maze.AGENT_COLOUR))
    if self._noise == "tv":
      screen = jax.random.bits(key, (s, 3), jnp.uint8)
      frame = frame.at[s - 1].set(jnp.where(tv, screen, frame[s - 1]))
    elif self._noise == "frame":
      frame = jnp.concatenate(
          [frame, jax.random.bits(key, (s, s, 3), jnp.uint8)], axis=1)
    return frame

  def _extras(self, state: NoisyGridState):
    return {"position": state.position,
            "coverage": jnp.asarray(self._coverage_table)[state.num_visited],
            "frontier": state.frontier, "tv_steps": state.tv_steps}

  def reset(self, key: jax.Array) -> Tuple[NoisyGridState, base.TimeStep]:
    """A fresh episode at the start cell.

    Args:
      key: PRNG key (this frame's noise and later steps').

    Returns:
      (state, FIRST timestep with reward 0, discount 1).
    """
    s = self._size
    key, k_obs = jax.random.split(key)
    start = jnp.asarray(self._start)
    state = NoisyGridState(
        position=start, episode_step=jnp.int32(0), last=jnp.bool_(False),
        visited=jnp.zeros((s, s), bool).at[start[0], start[1]].set(True),
        num_visited=jnp.int32(1), frontier=jnp.int32(0),
        tv_steps=jnp.int32(0), key=key)
    timestep = base.TimeStep(
        step_type=jnp.int32(base.StepType.FIRST), reward=jnp.float32(0),
        discount=jnp.float32(1),
        observation=self._render(k_obs, start, jnp.bool_(False)),
        extras=self._extras(state))
    return state, timestep

  def step(self, state: NoisyGridState, action: jax.Array
           ) -> Tuple[NoisyGridState, base.TimeStep]:
    """One agent step; see the module docstring.

    Args:
      state: `NoisyGridState`.
      action: int []: 0 up, 1 down, 2 left, 3 right, 4 tv (noise="tv"
        only); ignored after LAST. Trusted (`functional`).

    Returns:
      (state, TimeStep): step_type int32 [], reward / discount float32 [],
      observation uint8 `observation_spec().shape`, extras `position` int32
      [2], `coverage` float32 [], `frontier` int32 [], `tv_steps` int32 [].
    """
    restart = state.last
    key, k_obs = jax.random.split(state.key)
    action = jnp.asarray(action, jnp.int32)
    moved = state.position + jnp.asarray(_MOVES)[action]
    # The border is wall, so `moved` stays on the grid.
    blocked = jnp.asarray(self._walls)[moved[0], moved[1]]
    position = jnp.where(blocked, state.position, moved)
    position = jnp.where(restart, jnp.asarray(self._start), position)
    episode_step = jnp.where(restart, 0, state.episode_step + 1)
    if self._goal:
      terminated = ~restart & (position == jnp.asarray(self._goal_cell)).all()
    else:
      terminated = jnp.bool_(False)
    last = ~restart & (terminated
                       | (episode_step >= self._max_episode_steps))
    step_type = jnp.where(
        restart, base.StepType.FIRST,
        jnp.where(last, base.StepType.LAST, base.StepType.MID)).astype(
            jnp.int32)
    tv = ~restart & (action == TV_ACTION) if self._noise == "tv" else (
        jnp.bool_(False))
    # Per-episode statistics, cleared on FIRST; coverage does not count the
    # cell of a terminating LAST (`disco_maze.CoverageTracker`).
    visited = state.visited & ~restart
    here = visited[position[0], position[1]]
    count = ~terminated
    visited = visited.at[position[0], position[1]].set(here | count)
    num_visited = (jnp.where(restart, 0, state.num_visited)
                   + (count & ~here).astype(jnp.int32))
    frontier = jnp.maximum(
        jnp.where(restart, 0, state.frontier),
        jnp.asarray(self._distance)[position[0], position[1]])
    tv_steps = (jnp.where(restart, 0, state.tv_steps)
                + tv.astype(jnp.int32))
    new_state = NoisyGridState(
        position=position, episode_step=episode_step, last=last,
        visited=visited, num_visited=num_visited, frontier=frontier,
        tv_steps=tv_steps, key=key)
    timestep = base.TimeStep(
        step_type=step_type, reward=terminated.astype(jnp.float32),
        discount=(~terminated).astype(jnp.float32),
        observation=self._render(k_obs, position, tv),
        extras=self._extras(new_state))
    return new_state, timestep
