"""Random Disco Maze (NGU Sec. 4.1) as a pure-JAX `FunctionalEnv`.

The same rules as the numpy `ngu_jax.envs.disco_maze.DiscoMaze` (read its
module docstring), for ONE lane as pure `reset` / `step` functions that
jit, vmap and scan (`ngu_jax.envs.functional`):

* every episode is a new random perfect maze: a randomised depth-first
  search (recursive backtracker) over the n x n cell lattice (n = 10 for the
  21x21 maze of Sec. 4.1), 2 n^2 - 1 free cells, all connected;
* the agent starts on a uniformly random free cell;
* four actions, 0 up, 1 down, 2 left, 3 right;
* stepping into a wall is LAST with discount 0, and that observation draws
  the agent on the wall cell, which `extras["position"]` reports;
* every wall cell's colour is resampled from `disco_maze.WALL_COLOURS` at
  every step, pathways are black, the agent green; observations are uint8
  [size, size, 3]; the reward is always 0;
* the step that reaches `max_episode_steps` is LAST with discount 1 unless
  it also hits a wall (termination wins);
* after a LAST, the next `step` ignores its action and returns FIRST of a
  fresh maze (reward 0, discount 1), drawn with the key in the state.

Extras: `position`, the agent's (row, col), int32 [2]; `coverage`, the
fraction of the maze's free cells visited so far in this episode, float32 []
(Fig. 2, right), exactly `disco_maze.CoverageTracker`'s number: cleared on
FIRST, the wall cell of a terminating LAST not counted, divided by
`disco_maze.num_free_cells(size)`.

The maze generator is the numpy one's loop (uniform root; carve into a
uniformly random unvisited neighbour of the top of the stack, or pop; 2 n^2
- 1 iterations), not its random stream: the same key gives the same mazes
here, but not numpy's mazes (`reset_with_maze` starts an episode on a given
maze, to compare the two).

Cost under `jax.vmap` (the compiled loop steps B lanes at once): a maze is
drawn inside `step` when a lane restarts. That draw is a `lax.while_loop`
of at most one trip, not a `lax.cond`: vmapped, a cond becomes a select
that would generate a maze on every lane at every step, while the loop runs
only at steps where SOME lane restarts (then for all lanes, vectorised).
With random actions (episodes of ~3 steps) nearly every step of 16+ lanes
has a restart; with longer episodes most steps cost no maze. Measured on a
shared 2-core CPU, jit(vmap(step)) with 64 lanes: ~55k lane-steps/s with
random actions, ~200k when no lane restarts (a cond: ~57k either way).

Uniform draws (root, directions, start cell, wall colours) map uint32 bits
to [0, k) with a bias below k / 2^32.
"""

from typing import NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.envs import base
from ngu_jax.envs import disco_maze
from ngu_jax.envs import functional

NUM_ACTIONS = disco_maze.NUM_ACTIONS
_MOVES = disco_maze._MOVES  # pylint: disable=protected-access
# Palette indexed by the rendered code: 0 pathway, 1..5 walls, 6 agent.
_PALETTE = np.concatenate([disco_maze.PATHWAY_COLOUR[None],
                           disco_maze.WALL_COLOURS,
                           disco_maze.AGENT_COLOUR[None]], axis=0)
_NUM_WALL_COLOURS = len(disco_maze.WALL_COLOURS)
_AGENT_CODE = _NUM_WALL_COLOURS + 1
# A multiple of every possible number of unvisited neighbours (1 to 4), so
# `bits % count` with bits uniform in [0, 12) is uniform in [0, count).
_CHOICES = 12


def _uniform_below(bits: jax.Array, n: int) -> jax.Array:
  """floor(bits * n / 2^32): uniform in [0, n) up to 2^-32 (int32 [...]).

  Args:
    bits: uniform uint32 [...].
    n: a positive int < 2^15.
  """
  hi, lo = bits >> 16, bits & 0xFFFF
  return ((hi * n + ((lo * n) >> 16)) >> 16).astype(jnp.int32)


class DiscoMazeState(NamedTuple):
  """One lane's state (a pytree of arrays; S = size)."""
  walls: jax.Array  # bool [S, S]: True on walls, the current maze.
  position: jax.Array  # int32 [2]: the agent's (row, col).
  episode_step: jax.Array  # int32 []: agent steps in this episode.
  last: jax.Array  # bool []: the previous step returned LAST.
  visited: jax.Array  # bool [S, S]: cells counted for coverage.
  num_visited: jax.Array  # int32 []: distinct free cells visited.
  key: jax.Array  # PRNG key for the next step.


class DiscoMazeJax(disco_maze.PixelGridSpecs, functional.FunctionalEnv):
  """Random Disco Maze (NGU Sec. 4.1), one lane; see the module docstring.

  Observations are uint8 [size, size, 3]; actions int32 [] in {0..3} (up,
  down, left, right); rewards always 0. Extras: `position` int32 [2] and
  `coverage` float32 [].
  """

  def __init__(self, *, max_episode_steps: int = 1000, size: int = 21):
    """Builds the environment (static configuration only).

    Args:
      max_episode_steps: episode cap in agent steps (truncation, discount 1).
      size: odd grid side 2n + 1 >= 5 (21 in Sec. 4.1).

    Raises:
      ValueError: a bad `size` or `max_episode_steps`.
    """
    where = "DiscoMazeJax"
    self._max_episode_steps = base.check_positive_int(
        max_episode_steps, "max_episode_steps", where)
    self._num_free = disco_maze.num_free_cells(size)  # Checks `size`.
    self._size = int(size)
    n = (self._size - 1) // 2
    self._n = n
    ids = np.arange(n * n)
    row, col = ids // n, ids % n
    # Neighbour of each cell per direction; n^2 (always visited) = none.
    self._nbr = np.stack([np.where(row > 0, ids - n, n * n),
                          np.where(row < n - 1, ids + n, n * n),
                          np.where(col > 0, ids - 1, n * n),
                          np.where(col < n - 1, ids + 1, n * n)],
                         axis=1).astype(np.int32)
    self._cell_flat = ((2 * row + 1) * self._size + 2 * col + 1).astype(
        np.int32)
    self._step_flat = np.array([-self._size, self._size, -1, 1], np.int32)

  @property
  def num_free_cells(self) -> int:
    """Free cells of every maze (199 for 21x21)."""
    return self._num_free

  def make_coverage_tracker(self, num_envs: int
                            ) -> disco_maze.CoverageTracker:
    """Host coverage of `num_envs` lanes (Sec. 4.1): a `CoverageTracker`,
    the number `extras["coverage"]` carries."""
    return disco_maze.CoverageTracker(num_envs, size=self._size)

  # Maze generation.
  def _carve(self, bits: jax.Array) -> jax.Array:
    """Randomised DFS (recursive backtracker) over the n x n cell lattice.

    `disco_maze.generate_mazes`'s loop for one maze: from a uniformly random
    root, while the stack is not empty, carve from the top cell into a
    uniformly random unvisited neighbour and push it, or pop the top if it
    has none; exactly 2 n^2 - 1 iterations, each O(1) (single-element
    gathers and scatters: vmapped on CPU, cheaper than fewer iterations
    over dense [n^2] masks, measured).

    Args:
      bits: uniform uint32 [2 n^2], the randomness.

    Returns:
      into: int32 [n^2], the direction (0 up, 1 down, 2 left, 3 right) from
        each cell's parent into it; -1 for the root.
    """
    num_cells = self._n * self._n
    nbr = jnp.asarray(self._nbr)
    root = _uniform_below(bits[0], num_cells)
    choices = (bits[1:] % _CHOICES).astype(jnp.int32)
    # Index `num_cells` is a sentinel: "no neighbour", always visited; the
    # writes of a pop go there.
    visited = jnp.zeros(num_cells + 1, bool).at[num_cells].set(True)
    visited = visited.at[root].set(True)
    stack = jnp.zeros(num_cells + 1, jnp.int32).at[0].set(root)
    into = jnp.zeros(num_cells + 1, jnp.int32).at[root].set(-1)

    def body(t, carry):
      depth, visited, stack, into = carry
      top = stack[depth - 1]
      candidates = nbr[top]  # [4]
      is_open = (~visited[candidates]).astype(jnp.int32)
      # Prefix counts of open directions; the pick-th open direction is the
      # number of prefix counts <= pick (written out: cumsum and argmax are
      # slow when vmapped on CPU).
      c0 = is_open[0]
      c1 = c0 + is_open[1]
      c2 = c1 + is_open[2]
      count = c2 + is_open[3]
      pick = choices[t] % jnp.maximum(count, 1)  # Uniform in [0, count).
      direction = ((c0 <= pick).astype(jnp.int32) + (c1 <= pick)
                   + (c2 <= pick))
      carve = count > 0
      child = jnp.where(carve, candidates[direction], num_cells)
      visited = visited.at[child].set(True)
      into = into.at[child].set(direction)
      stack = stack.at[depth].set(child)  # Above the top on a pop: unused.
      return depth + jnp.where(carve, 1, -1), visited, stack, into

    carry = (jnp.int32(1), visited, stack, into)
    into = jax.lax.fori_loop(0, 2 * num_cells - 1, body, carry)[3]
    return into[:num_cells]

  def generate_maze(self, key: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """A maze as drawn at each reset (NGU Sec. 4.1), pure.

    Args:
      key: PRNG key.

    Returns:
      walls: bool [S, S], True on walls (border included); a perfect maze
        (2 n^2 - 1 free cells, one path between any two).
      start: int32 [2], a uniformly random free (row, col).
    """
    s = self._size
    # One draw for everything (each random call compiles its own hash).
    bits = jax.random.bits(key, (2 * self._n * self._n + 1,), jnp.uint32)
    into = self._carve(bits[:-1])
    cell_flat = jnp.asarray(self._cell_flat)
    # The passage into each non-root cell, next to it towards its parent.
    passage = cell_flat - jnp.asarray(self._step_flat)[jnp.maximum(into, 0)]
    passage = jnp.where(into >= 0, passage, s * s)  # s*s: dropped.
    free = jnp.zeros(s * s, bool).at[cell_flat].set(True)
    free = free.at[passage].set(True, mode="drop")
    pick = _uniform_below(bits[-1], self._num_free)
    flat = jnp.argmax(jnp.cumsum(free, dtype=jnp.int32) > pick)
    start = jnp.stack([flat // s, flat % s]).astype(jnp.int32)
    return ~free.reshape(s, s), start

  def _maybe_generate(self, key: jax.Array, active: jax.Array,
                      walls: jax.Array, position: jax.Array
                      ) -> Tuple[jax.Array, jax.Array]:
    """`generate_maze(key)` where `active`, else (walls, position).

    NOTE: a `lax.while_loop` of at most one trip rather than a `lax.cond`:
    vmapped over lanes, a cond becomes a select that generates a maze on
    every lane at every step; this loop generates only when some lane is
    active (then on every lane, keeping the active lanes' mazes).
    """
    def body(carry):
      # The key travels in the carry and changes: a body computed from
      # loop-invariant values only is hoisted out of the loop by XLA, and
      # would run at every step (measured).
      _, key, _, _ = carry
      return (jnp.bool_(False), jax.random.fold_in(key, 1)) + (
          self.generate_maze(key))

    _, _, walls, position = jax.lax.while_loop(
        lambda carry: carry[0], body, (active, key, walls, position))
    return walls, position

  # Episodes.
  def _render(self, key: jax.Array, walls: jax.Array,
              position: jax.Array) -> jax.Array:
    """uint8 [S, S, 3] with freshly sampled wall colours."""
    s = self._size
    colour = 1 + _uniform_below(jax.random.bits(key, (s, s), jnp.uint32),
                                _NUM_WALL_COLOURS)
    code = jnp.where(walls, colour, 0)
    code = code.at[position[0], position[1]].set(_AGENT_CODE)
    return jnp.asarray(_PALETTE)[code]

  def _extras(self, position, num_visited):
    # A table of CoverageTracker's exact float32 values (compiled, x / 199
    # may become x * (1 / 199), off by an ulp).
    table = (np.arange(self._num_free + 1) / self._num_free).astype(
        np.float32)
    return {"position": position, "coverage": jnp.asarray(table)[num_visited]}

  def reset_with_maze(self, key: jax.Array, walls: jax.Array,
                      start: jax.Array
                      ) -> Tuple[DiscoMazeState, base.TimeStep]:
    """A FIRST timestep on a given maze (to test against `DiscoMaze`).

    Args:
      key: PRNG key (wall colours and later episodes).
      walls: bool [S, S], True on walls.
      start: int32 [2], a free (row, col).

    Returns:
      (state, FIRST timestep with reward 0, discount 1).
    """
    s = self._size
    walls = jnp.asarray(walls, bool)
    start = jnp.asarray(start, jnp.int32)
    key, k_colour = jax.random.split(key)
    visited = jnp.zeros((s, s), bool).at[start[0], start[1]].set(True)
    state = DiscoMazeState(walls=walls, position=start,
                           episode_step=jnp.int32(0), last=jnp.bool_(False),
                           visited=visited, num_visited=jnp.int32(1),
                           key=key)
    timestep = base.TimeStep(
        step_type=jnp.int32(base.StepType.FIRST), reward=jnp.float32(0),
        discount=jnp.float32(1),
        observation=self._render(k_colour, walls, start),
        extras=self._extras(start, state.num_visited))
    return state, timestep

  def reset(self, key: jax.Array) -> Tuple[DiscoMazeState, base.TimeStep]:
    key, k_maze = jax.random.split(key)
    walls, start = self.generate_maze(k_maze)
    return self.reset_with_maze(key, walls, start)

  def step(self, state: DiscoMazeState, action: jax.Array
           ) -> Tuple[DiscoMazeState, base.TimeStep]:
    """One agent step; see the module docstring.

    Args:
      state: `DiscoMazeState`.
      action: int []: 0 up, 1 down, 2 left, 3 right (ignored after LAST).

    Returns:
      (state, TimeStep): step_type int32 [], reward / discount float32 [],
      observation uint8 [S, S, 3], extras `position` int32 [2] and
      `coverage` float32 [].
    """
    restart = state.last
    key, k_maze, k_colour = jax.random.split(state.key, 3)
    move = jnp.asarray(_MOVES)[action]
    # A restarting lane does not move (its agent may sit on a border wall).
    moved = state.position + jnp.where(restart, 0, move)
    hit = state.walls[moved[0], moved[1]]
    episode_step = state.episode_step + 1
    last = hit | (episode_step >= self._max_episode_steps)
    walls, position = self._maybe_generate(k_maze, restart, state.walls,
                                           moved)
    episode_step = jnp.where(restart, 0, episode_step)
    step_type = jnp.where(
        restart, base.StepType.FIRST,
        jnp.where(last, base.StepType.LAST, base.StepType.MID)).astype(
            jnp.int32)
    terminated = hit & ~restart
    discount = jnp.where(terminated, 0.0, 1.0).astype(jnp.float32)
    # Coverage (`disco_maze.CoverageTracker`): cleared on FIRST; the wall
    # cell of a terminating LAST does not count.
    visited = state.visited & ~restart
    num_visited = jnp.where(restart, 0, state.num_visited)
    here = visited[position[0], position[1]]
    count = ~terminated
    visited = visited.at[position[0], position[1]].set(here | count)
    num_visited = num_visited + (count & ~here).astype(jnp.int32)
    new_state = DiscoMazeState(walls=walls, position=position,
                               episode_step=episode_step,
                               last=last & ~restart, visited=visited,
                               num_visited=num_visited, key=key)
    timestep = base.TimeStep(
        step_type=step_type, reward=jnp.float32(0), discount=discount,
        observation=self._render(k_colour, walls, position),
        extras=self._extras(position, num_visited))
    return new_state, timestep
