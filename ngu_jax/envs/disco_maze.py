"""Random Disco Maze (NGU Sec. 4.1, Fig. 2, Table 7), vectorised over B lanes.

The exploration test of NGU Sec. 4.1, re-implemented in numpy (the paper used
pycolab, which no package ships in this form):

* Every episode is a new random 21x21 *perfect* maze: a randomised
  depth-first search (recursive backtracker) over the 10x10 lattice of cells
  at odd (row, col) coordinates, carving the wall between a cell and the
  neighbour it visits. The outer border is wall. A perfect maze has exactly
  one path between any two free cells: its 100 cells and 99 carved passages
  form a spanning tree, i.e. 199 free cells.
* The agent starts on a uniformly random free cell (cell or passage).
* Four actions, one cell per step: 0 up, 1 down, 2 left, 3 right
  (`ACTION_NAMES`). No action repeat (Table 7: "Num. action repeats 1").
* Stepping into a wall ends the episode: LAST with discount 0 (termination).
  That terminal observation draws the agent on the wall cell it hit, and
  `extras["position"]` reports that cell, so the final move stays visible
  (e.g. to the inverse-dynamics embedding, NGU Sec. 2).
* At every step (FIRST included) the colour of every wall cell is resampled
  uniformly and independently (per cell and lane) from `WALL_COLOURS`;
  pathways are black, the agent green (0, 255, 0).
* The observation is the fully observed grid as RGB uint8, [21, 21, 3] per
  lane. The extrinsic reward is always 0.
* Episodes are capped at `max_episode_steps` agent steps (default 1000):
  the step that reaches the cap is LAST with discount 1 (truncation) unless
  it also hits a wall (then termination wins, discount 0).

Auto-reset and step types follow `ngu_jax.envs.base`: after a lane returns
LAST, its next `step` ignores that lane's action and returns FIRST of a
fresh maze (reward 0, discount 1).

Determinism: one `seed` fixes every maze, start cell and wall colour; the
same seed and the same actions give identical observations. Mazes are drawn
from a pool generated `maze_batch_size` at a time (the DFS is vectorised over
the batch: ~20-60 us per maze on a 2-core CPU), in the order lanes reset, so
with random actions (episodes of ~2 steps) resets do not dominate a step.

Coverage (Fig. 2, right: "percentage of unique states (different positions
in the maze) visited"): `coverage` computes it for one episode and
`CoverageTracker` online over B lanes from the `position` extras.
"""

from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from ngu_jax.envs import base
from ngu_jax.types import ObservationEncoding
from ngu_jax.types import PIXELS

NUM_ACTIONS = 4
ACTION_NAMES = ("up", "down", "left", "right")
# (d_row, d_col) of each action.
_MOVES = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]], np.int32)

# Five wall colours: none black (pathways) nor green (agent). Their luminances
# (ITU-R 601: 76, 105, 179, 226, 255) differ from each other, from black (0)
# and from the agent's green (150), so walls stay distinguishable from
# pathways and the agent even after a grayscale conversion.
WALL_COLOURS = np.array([
    [255, 0, 0],      # red
    [255, 0, 255],    # magenta
    [0, 255, 255],    # cyan
    [255, 255, 0],    # yellow
    [255, 255, 255],  # white
], np.uint8)
PATHWAY_COLOUR = np.array([0, 0, 0], np.uint8)  # black
AGENT_COLOUR = np.array([0, 255, 0], np.uint8)  # green

# Palette indexed by the rendered code: 0 pathway, 1..5 walls, 6 agent.
_PALETTE = np.concatenate(
    [PATHWAY_COLOUR[None], WALL_COLOURS, AGENT_COLOUR[None]], axis=0)
_AGENT_CODE = 6


def num_free_cells(size: int = 21) -> int:
  """Free cells of a perfect `size` x `size` maze: n^2 cells + n^2 - 1 passages.

  Args:
    size: odd grid side, 2n + 1 for an n x n cell lattice (21 in Sec. 4.1).

  Returns:
    2 n^2 - 1 (199 for the 21x21 maze).
  """
  n = _num_cells(size, "num_free_cells")
  return 2 * n * n - 1


def _num_cells(size: int, where: str) -> int:
  if not isinstance(size, (int, np.integer)) or size < 5 or size % 2 == 0:
    raise ValueError(f"{where}: `size` must be an odd integer >= 5, got "
                     f"{size!r}.")
  return (int(size) - 1) // 2


def generate_mazes(rng: np.random.Generator, num_mazes: int,
                   size: int = 21) -> Tuple[np.ndarray, np.ndarray]:
  """Random perfect mazes by randomised depth-first search (NGU Sec. 4.1).

  The recursive backtracker runs on the n x n cell lattice (cell (i, j) at
  grid position (2i + 1, 2j + 1)), from a uniformly random root: while the
  stack is not empty, it carves from the top cell into a uniformly random
  unvisited neighbour and pushes it, or pops the top if it has none. Every
  maze takes exactly 2 n^2 - 1 iterations, so all `num_mazes` run in
  lock-step, vectorised in numpy.

  Args:
    rng: numpy Generator (the only source of randomness).
    num_mazes: K, the number of mazes.
    size: odd grid side 2n + 1 (21 in Sec. 4.1).

  Returns:
    walls: bool, shaped [K, size, size]; True on walls (border included).
    start: a uniformly random free cell of each maze, (row, col) int32,
      shaped [K, 2].
  """
  n = _num_cells(size, "generate_mazes")
  if num_mazes < 1:
    raise ValueError(f"generate_mazes: `num_mazes` must be >= 1, got "
                     f"{num_mazes}.")
  k, num_cells, area = int(num_mazes), n * n, size * size
  ids = np.arange(num_cells)
  row, col = ids // n, ids % n
  # Neighbour of each cell in the four directions; `num_cells` = none (a
  # sentinel that is always "visited").
  nbr = np.stack([np.where(row > 0, ids - n, num_cells),
                  np.where(row < n - 1, ids + n, num_cells),
                  np.where(col > 0, ids - 1, num_cells),
                  np.where(col < n - 1, ids + 1, num_cells)], axis=1)
  cell_flat = (2 * row + 1) * size + 2 * col + 1  # grid index of each cell.
  step_flat = np.array([-size, size, -1, 1])  # grid offset of each direction.

  lanes = np.arange(k)
  # Flat per-maze buffers; the extra column of `free` absorbs no-op writes.
  free = np.zeros((k, area + 1), bool)
  visited = np.zeros((k, num_cells + 1), bool)
  visited[:, num_cells] = True
  stack = np.zeros((k, num_cells + 1), np.int64)
  depth = np.ones(k, np.int64)
  root = rng.integers(0, num_cells, k)
  stack[:, 0] = root
  visited[lanes, root] = True
  free[lanes, cell_flat[root]] = True
  scores = rng.random((2 * num_cells - 1, k, 4))
  no_op = np.full(k, area)
  for t in range(2 * num_cells - 1):
    top = stack[lanes, depth - 1]
    candidates = nbr[top]  # [K, 4]
    open_ = ~visited[lanes[:, None], candidates]
    direction = np.where(open_, scores[t], -1.0).argmax(axis=1)
    carve = open_[lanes, direction]
    child = candidates[lanes, direction]
    visited[lanes, child] = True  # No-op where not carving (already set).
    stack[lanes, depth] = child  # Above the top where popping: harmless.
    passage = cell_flat[top] + step_flat[direction]
    free[lanes, np.where(carve, passage, no_op)] = True
    free[lanes, np.where(carve, cell_flat[np.minimum(child, num_cells - 1)],
                         no_op)] = True
    depth += np.where(carve, 1, -1)
  free = free[:, :area]
  num_free = 2 * num_cells - 1
  free_idx = np.nonzero(free)[1].reshape(k, num_free)  # Row-major per maze.
  pick = free_idx[lanes, rng.integers(0, num_free, k)]
  start = np.stack([pick // size, pick % size], axis=1).astype(np.int32)
  return ~free.reshape(k, size, size), start


class PixelGridSpecs:
  """The specs every square pixel grid world here shares (Disco Maze, the
  noisy grids): S x S cells rendered as uint8 [S, W, 3] RGB (W = S unless
  `_observation_width` says more), pixels encoding, `_num_actions()`
  discrete actions. Subclasses set `_size` and `_max_episode_steps`."""

  _size: int
  _max_episode_steps: int

  @property
  def size(self) -> int:
    """Grid side S."""
    return self._size

  @property
  def grid_shape(self) -> Tuple[int, int]:
    """(S, S): the cells visits and maps are counted on."""
    return (self._size, self._size)

  @property
  def max_episode_steps(self) -> int:
    return self._max_episode_steps

  def _observation_width(self) -> int:
    return self._size

  def _num_actions(self) -> int:
    return NUM_ACTIONS

  def observation_spec(self) -> base.BoundedArray:
    return base.BoundedArray(
        (self._size, self._observation_width(), 3), np.uint8, 0, 255,
        name="observation")

  def observation_encoding(self) -> ObservationEncoding:
    """Pixels: RGB renders (NGU Sec. 4.1), scaled by 1/255 in the networks."""
    return PIXELS

  def action_spec(self) -> base.DiscreteArray:
    return base.DiscreteArray(self._num_actions(), dtype=np.int32,
                              name="action")


class DiscoMaze(PixelGridSpecs, base.BatchedEnv):
  """Random Disco Maze (NGU Sec. 4.1) over B lanes; see the module docstring.

  Observations are uint8 [B, size, size, 3]; actions int [B] in {0..3}
  (up, down, left, right); rewards always 0. Extras: `position`, the agent's
  (row, col) as int32 [B, 2], and `episode_step`, the agent steps taken in
  the current episode as int32 [B] (0 on FIRST).
  """

  def __init__(self, num_envs: int, seed: int = 0, *,
               max_episode_steps: int = 1000, size: int = 21,
               maze_batch_size: int = 512):
    """Builds B lanes.

    Args:
      num_envs: B, the number of lanes.
      seed: non-negative integer; fixes every maze, start and colour.
      max_episode_steps: episode cap in agent steps (truncation, discount 1).
      size: odd grid side (21 in Sec. 4.1).
      maze_batch_size: mazes generated per refill of the maze pool.
    """
    where = "DiscoMaze"
    if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
      raise ValueError(f"{where}: `num_envs` must be a positive integer, got "
                       f"{num_envs!r}.")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
      raise ValueError(f"{where}: `seed` must be a non-negative integer, got "
                       f"{seed!r}.")
    if (not isinstance(max_episode_steps, (int, np.integer))
        or max_episode_steps < 1):
      raise ValueError(f"{where}: `max_episode_steps` must be a positive "
                       f"integer, got {max_episode_steps!r}.")
    if (not isinstance(maze_batch_size, (int, np.integer))
        or maze_batch_size < 1):
      raise ValueError(f"{where}: `maze_batch_size` must be a positive "
                       f"integer, got {maze_batch_size!r}.")
    _num_cells(size, where)
    self._num_envs = int(num_envs)
    self._size = int(size)
    self._max_episode_steps = int(max_episode_steps)
    self._maze_batch_size = int(maze_batch_size)
    maze_seq, colour_seq = np.random.SeedSequence(int(seed)).spawn(2)
    self._maze_rng = np.random.default_rng(maze_seq)
    self._colour_rng = np.random.default_rng(colour_seq)
    self._lanes = np.arange(self._num_envs)
    # Maze pool: walls [P, S, S], starts [P, 2]; entries from `_pool_next` on
    # are unused.
    self._pool_walls = np.zeros((0, size, size), bool)
    self._pool_start = np.zeros((0, 2), np.int32)
    self._pool_next = 0
    # Lane state (set by reset()).
    self._walls = None  # bool [B, S, S]
    self._walls_u8 = None  # uint8 view of `_walls`, for rendering.
    self._position = None  # int32 [B, 2]
    self._episode_step = None  # int32 [B]
    self._last = None  # bool [B]: the lane returned LAST on the last step.
    self._closed = False

  @property
  def num_free_cells(self) -> int:
    """Free cells of every maze (199 for 21x21)."""
    return num_free_cells(self._size)

  def make_coverage_tracker(self) -> "CoverageTracker":
    """Coverage of the B lanes' episodes (Sec. 4.1): a `CoverageTracker`."""
    return CoverageTracker(self._num_envs, size=self._size)

  def visit_grid_shape(self) -> Tuple[int, int]:
    """The size x size maze (`base.BatchedEnv.visit_grid_shape`)."""
    return (self._size, self._size)

  def walls(self) -> np.ndarray:
    """Every lane's current maze: bool [B, S, S], True on walls (a copy)."""
    self._require_reset("DiscoMaze.walls")
    return self._walls.copy()

  def reset(self) -> base.TimeStep:
    """Starts a fresh maze in every lane: all FIRST, reward 0, discount 1."""
    if self._closed:
      raise ValueError("DiscoMaze.reset: the environment is closed.")
    b = self._num_envs
    self._walls = np.zeros((b, self._size, self._size), bool)
    self._walls_u8 = self._walls.view(np.uint8)
    self._position = np.zeros((b, 2), np.int32)
    self._episode_step = np.zeros(b, np.int32)
    self._new_episodes(self._lanes)
    self._last = np.zeros(b, bool)
    return self._timestep(np.full(b, base.StepType.FIRST, np.int32),
                          np.ones(b, np.float32))

  def step(self, actions) -> base.TimeStep:
    """Advances every lane by one agent step (see the module docstring).

    Args:
      actions: integer actions in [0, 4), shaped [B]; ignored for lanes that
        returned LAST on the previous step.

    Returns:
      TimeStep with observation uint8 [B, S, S, 3], reward/discount float32
      [B] and extras `position` int32 [B, 2], `episode_step` int32 [B].

    Raises:
      ValueError: actions of the wrong shape or dtype, or out of range (the
        message names the lanes).
      ValueError: called before `reset()` or after `close()`.
    """
    actions = base.validate_actions(actions, self._num_envs, NUM_ACTIONS,
                                    "DiscoMaze.step")
    self._require_reset("DiscoMaze.step")
    restart = self._last
    # Lanes that restart do not move (their agent may sit on a border wall).
    moves = np.where(restart[:, None], 0, _MOVES[actions])
    position = self._position + moves
    hit = self._walls[self._lanes, position[:, 0], position[:, 1]]
    self._position = position
    self._episode_step += 1
    truncated = self._episode_step >= self._max_episode_steps
    last = hit | truncated
    step_type = np.where(last, base.StepType.LAST,
                         base.StepType.MID).astype(np.int32)
    discount = np.where(hit, 0.0, 1.0).astype(np.float32)
    if restart.any():
      lanes = np.flatnonzero(restart)
      self._new_episodes(lanes)
      step_type[lanes] = base.StepType.FIRST
      discount[lanes] = 1.0
      last[lanes] = False
    self._last = last
    return self._timestep(step_type, discount)

  def _require_reset(self, where: str) -> None:
    if self._closed:
      raise ValueError(f"{where}: the environment is closed.")
    if self._walls is None:
      raise ValueError(f"{where}: call reset() before the first step().")

  def close(self) -> None:
    self._closed = True

  def get_state(self) -> Dict[str, Any]:
    """Everything that determines the future of the lanes (for checkpoints).

    Returns:
      A dict of numpy arrays (copies) and JSON-able values: the unused part
      of the maze pool ("pool_walls" bool [P, S, S], "pool_start" int32
      [P, 2]), the lanes' "walls" bool [B, S, S], "position" int32 [B, 2],
      "episode_step" int32 [B] and "last" bool [B] (absent before the first
      `reset()`), and "maze_rng" / "colour_rng", the
      `bit_generator.state` dicts of the two numpy generators. `set_state`
      on a DiscoMaze built with the same arguments (any seed) continues
      exactly as this one would.
    """
    state = {
        "pool_walls": self._pool_walls[self._pool_next:].copy(),
        "pool_start": self._pool_start[self._pool_next:].copy(),
        "maze_rng": self._maze_rng.bit_generator.state,
        "colour_rng": self._colour_rng.bit_generator.state,
    }
    if self._walls is not None:
      state.update(walls=self._walls.copy(), position=self._position.copy(),
                   episode_step=self._episode_step.copy(),
                   last=self._last.copy())
    return state

  def set_state(self, state: Dict[str, Any]) -> None:
    """Restores a `get_state` dict (arrays may be any array-likes).

    Raises:
      ValueError: arrays of another shape or dtype than this environment's
        (another number of lanes or grid size), or a missing entry.
    """
    where = "DiscoMaze.set_state"
    b, s = self._num_envs, self._size

    def get(name, shape, dtype):
      if name not in state:
        raise ValueError(f"{where}: missing entry {name!r}.")
      x = np.array(state[name])
      if x.dtype != dtype or x.shape != shape:
        raise ValueError(f"{where}: {name!r} has shape {x.shape} and dtype "
                         f"{x.dtype}; expected {shape} and {np.dtype(dtype)}.")
      return x

    num_pool = np.shape(state.get("pool_walls", ()))[:1]
    pool_walls = get("pool_walls", num_pool + (s, s), np.bool_)
    pool_start = get("pool_start", (pool_walls.shape[0], 2), np.int32)
    lanes = None
    if "walls" in state:
      lanes = (get("walls", (b, s, s), np.bool_),
               get("position", (b, 2), np.int32),
               get("episode_step", (b,), np.int32),
               get("last", (b,), np.bool_))
    maze_rng = np.random.default_rng()
    colour_rng = np.random.default_rng()
    try:
      maze_rng.bit_generator.state = state["maze_rng"]
      colour_rng.bit_generator.state = state["colour_rng"]
    except (KeyError, TypeError, ValueError) as e:
      raise ValueError(f"{where}: bad generator state: {e!r}.") from e
    self._pool_walls, self._pool_start, self._pool_next = (pool_walls,
                                                           pool_start, 0)
    self._maze_rng, self._colour_rng = maze_rng, colour_rng
    if lanes is None:
      self._walls = self._walls_u8 = self._position = None
      self._episode_step = self._last = None
    else:
      self._walls, self._position, self._episode_step, self._last = lanes
      self._walls_u8 = self._walls.view(np.uint8)

  def _new_episodes(self, lanes: np.ndarray) -> None:
    """Gives `lanes` (int [L]) fresh mazes and starts from the pool."""
    count = lanes.size
    if self._pool_next + count > self._pool_walls.shape[0]:
      walls, start = generate_mazes(
          self._maze_rng, max(self._maze_batch_size, count), self._size)
      self._pool_walls = np.concatenate(
          [self._pool_walls[self._pool_next:], walls])
      self._pool_start = np.concatenate(
          [self._pool_start[self._pool_next:], start])
      self._pool_next = 0
    taken = slice(self._pool_next, self._pool_next + count)
    self._walls[lanes] = self._pool_walls[taken]
    self._position[lanes] = self._pool_start[taken]
    self._episode_step[lanes] = 0
    self._pool_next += count

  def _render(self) -> np.ndarray:
    """RGB observation uint8 [B, S, S, 3] with freshly sampled wall colours."""
    b, s = self._num_envs, self._size
    code = self._colour_rng.integers(1, 1 + len(WALL_COLOURS), (b, s, s),
                                     dtype=np.uint8)
    code *= self._walls_u8  # Pathways -> 0.
    code[self._lanes, self._position[:, 0], self._position[:, 1]] = _AGENT_CODE
    return np.take(_PALETTE, code, axis=0)

  def _timestep(self, step_type: np.ndarray,
                discount: np.ndarray) -> base.TimeStep:
    return base.TimeStep(
        step_type=step_type,
        reward=np.zeros(self._num_envs, np.float32),
        discount=discount,
        observation=self._render(),
        extras={"position": self._position.copy(),
                "episode_step": self._episode_step.copy()})


def coverage(visited, maze: Union[np.ndarray, int]) -> float:
  """Fraction of a maze's free cells visited in one episode (Sec. 4.1, Fig. 2).

  Fig. 2 (right) reports "the percentage of unique states (different
  positions in the maze) visited"; this is that fraction in [0, 1].

  Args:
    visited: either the agent's positions over the episode, (row, col)
      integers shaped [T, 2] (e.g. the stacked `extras["position"]` of one
      lane), or a visited mask, bool shaped [S, S].
    maze: either the episode's wall mask, bool [S, S] (True on walls, as from
      `DiscoMaze.walls()` or `generate_mazes`): positions on walls (the
      terminal wall hit) are not counted; or the number of free cells as a
      positive int (199 for 21x21): then every position counts as free.

  Returns:
    (distinct free cells visited) / (free cells), a Python float.

  Raises:
    ValueError: bad shapes or dtypes, or positions outside the grid.
  """
  where = "coverage"
  visited = np.asarray(visited)
  if isinstance(maze, (int, np.integer)) and not isinstance(maze, bool):
    if maze < 1:
      raise ValueError(f"{where}: the free-cell count must be >= 1, got "
                       f"{maze}.")
    walls, num_free = None, int(maze)
  else:
    walls = np.asarray(maze)
    if walls.ndim != 2 or walls.dtype != np.bool_:
      raise ValueError(f"{where}: `maze` must be a bool wall mask [S, S] or "
                       f"an int free-cell count, got {walls.dtype} shaped "
                       f"{walls.shape}.")
    num_free = int((~walls).sum())
    if num_free == 0:
      raise ValueError(f"{where}: `maze` has no free cell.")
  if visited.dtype == np.bool_:
    if visited.ndim != 2 or (walls is not None
                             and visited.shape != walls.shape):
      raise ValueError(f"{where}: a visited mask must be bool [S, S] matching "
                       f"the maze, got shape {visited.shape}.")
    if walls is not None:
      visited = visited & ~walls
    return float(visited.sum()) / num_free
  if visited.ndim != 2 or visited.shape[1] != 2 or not np.issubdtype(
      visited.dtype, np.integer):
    raise ValueError(f"{where}: positions must be integers shaped [T, 2], got "
                     f"{visited.dtype} shaped {visited.shape}.")
  if walls is not None:
    inside = ((visited >= 0) & (visited < np.array(walls.shape))).all(axis=1)
    if not inside.all():
      raise ValueError(f"{where}: positions outside the {walls.shape} grid at "
                       f"time step(s) {np.flatnonzero(~inside)[:16].tolist()}.")
    visited = visited[~walls[visited[:, 0], visited[:, 1]]]
  distinct = np.unique(visited, axis=0).shape[0] if visited.size else 0
  return distinct / num_free


class CoverageTracker:
  """Online per-episode coverage over B lanes of `DiscoMaze` (Sec. 4.1).

  Feed every TimeStep (from `reset()` and each `step()`) to `update`. A lane's
  visited set is cleared on FIRST; the position of a terminating LAST
  (discount 0: the agent is inside the wall it hit) is not counted.

  Example:
    tracker = CoverageTracker(env.num_envs)
    cov = tracker.update(ts)              # after reset() and each step()
    finished = cov[ts.last()]             # coverage of episodes that ended
  """

  def __init__(self, num_envs: int, size: int = 21,
               num_free: Optional[int] = None):
    """Builds the tracker.

    Args:
      num_envs: B, the number of lanes.
      size: grid side S of the maze (21 in Sec. 4.1).
      num_free: free cells per maze; default the perfect-maze count
        `num_free_cells(size)` (199 for 21x21).
    """
    self._num_envs = int(num_envs)
    self._size = int(size)
    self._num_free = num_free_cells(size) if num_free is None else int(num_free)
    self._lanes = np.arange(self._num_envs)
    self._visited = np.zeros((self._num_envs, size, size), bool)
    self._count = np.zeros(self._num_envs, np.int64)

  @property
  def size(self) -> int:
    """Grid side S of the maze."""
    return self._size

  def get_state(self) -> Dict[str, np.ndarray]:
    """The lanes' current episodes, for checkpoints.

    Returns:
      Copies: "visited" bool [B, S, S], the cells visited, and "count"
      int64 [B], the distinct free cells among them.
    """
    return {"visited": self._visited.copy(), "count": self._count.copy()}

  def set_state(self, state: Dict[str, Any]) -> None:
    """Restores a `get_state` dict.

    Raises:
      ValueError: arrays of another shape or dtype than this tracker's.
    """
    visited = np.array(state["visited"])
    count = np.array(state["count"])
    if (visited.shape != self._visited.shape or visited.dtype != np.bool_
        or count.shape != self._count.shape or count.dtype != np.int64):
      raise ValueError(
          "CoverageTracker.set_state: expected visited bool "
          f"{self._visited.shape} and count int64 {self._count.shape}, got "
          f"{visited.dtype} {visited.shape} and {count.dtype} {count.shape}.")
    self._visited, self._count = visited, count

  def update(self, timestep: base.TimeStep) -> np.ndarray:
    """Adds the current positions and returns each lane's coverage so far.

    Args:
      timestep: a `DiscoMaze` TimeStep with `extras["position"]` int [B, 2].

    Returns:
      float32 [B]: for each lane, the fraction of free cells visited in its
      current episode up to and including this step; on a LAST lane, the
      final coverage of the episode that just ended.
    """
    where = "CoverageTracker.update"
    position = np.asarray(timestep.extras["position"])
    if position.shape != (self._num_envs, 2):
      raise ValueError(f"{where}: `extras['position']` must have shape "
                       f"[{self._num_envs}, 2], got {position.shape}.")
    step_type = np.asarray(timestep.step_type)
    first = step_type == base.StepType.FIRST
    if first.any():
      self._visited[first] = False
      self._count[first] = 0
    count = ~((step_type == base.StepType.LAST)
              & (np.asarray(timestep.discount) == 0))
    row, col = position[:, 0], position[:, 1]
    new = count & ~self._visited[self._lanes, row, col]
    self._visited[self._lanes, row, col] |= count
    self._count += new
    return (self._count / self._num_free).astype(np.float32)
