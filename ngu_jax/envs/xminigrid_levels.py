"""Pure-JAX level generators for MiniGrid tasks xminigrid does not ship.

xland-minigrid registers MiniGrid's DoorKey, Empty and FourRooms, not the
two hard-exploration families that exploration papers report on:
KeyCorridor (MiniGrid `envs/keycorridor.py`, on `core/roomgrid.py`) and
MultiRoom (MiniGrid `envs/multiroom.py`). This module ports their
`_gen_grid` to JAX, so that `xminigrid_env.XMiniGrid` runs them in the
compiled loop with xminigrid's action dynamics (the same as for DoorKey).

Each generator returns an xminigrid `State` (grid uint8 [H, W, 2] of
(tile, colour) ids, indexed [y, x]; the agent's (row, col) position and
xminigrid direction) of one fresh level. Same distributions as MiniGrid
(Farama `minigrid` 3.2.0), drawn with JAX's generator: MiniGrid's rejection
loops become masked uniform draws over the cells (or (cell, direction)
pairs) they accept, and its recursive room placement a `lax.while_loop`
with the same tries. The tests compare layouts' statistics with MiniGrid's
own generator and step both on MiniGrid's levels
(tests/envs/test_xminigrid_levels.py).

Coordinates below are MiniGrid's (x column, y row); MiniGrid colour c is
xminigrid colour c + 1 (red 0 ... grey 5 -> RED 1 ... GREY 6).
"""

from typing import NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np

# pylint: disable=g-import-not-at-top
try:
  from xminigrid import types as xmg_types
  from xminigrid.core import constants as xmg_constants
  from xminigrid.core import goals as xmg_goals
  from xminigrid.core import rules as xmg_rules
except ImportError:  # pragma: no cover - depends on the environment.
  xmg_types = xmg_constants = xmg_goals = xmg_rules = None
# pylint: enable=g-import-not-at-top

NUM_COLORS = 6  # MiniGrid's COLOR_NAMES.
# MiniGrid directions: 0 right (+x), 1 down (+y), 2 left (-x), 3 up (-y).
_DX = np.array([1, 0, -1, 0], np.int32)
_DY = np.array([0, 1, 0, -1], np.int32)
_CONNECT_MAX_ITERS = 5000  # MiniGrid's connect_all(max_itrs).


def _tile(tile: int, colour) -> jax.Array:
  return jnp.stack([jnp.asarray(tile, jnp.uint8),
                    jnp.asarray(colour, jnp.uint8)])


def _uniform_index(key: jax.Array, mask: jax.Array) -> jax.Array:
  """A uniform draw among the True entries of `mask` (flat index).

  MiniGrid's rejection sampling (`place_obj`) accepts each allowed cell
  with the same probability, so its result is this draw.
  """
  logits = jnp.where(mask.ravel(), 0.0, -jnp.inf)
  return jax.random.categorical(key, logits)


def _state(key, grid, x, y, direction, goal_encoding):
  """An xminigrid `State` with the agent at MiniGrid's (x, y, direction)."""
  agent = xmg_types.AgentState(
      position=jnp.stack([y, x]).astype(jnp.int32),
      direction=((direction + 1) % 4).astype(jnp.int32),
      pocket=_tile(xmg_constants.Tiles.EMPTY, xmg_constants.Colors.EMPTY))
  return xmg_types.State(
      key=key, step_num=jnp.asarray(0, jnp.int32), grid=grid, agent=agent,
      goal_encoding=goal_encoding,
      rule_encoding=xmg_rules.EmptyRule().encode()[None, ...],
      carry=xmg_types.EnvCarry())


def key_corridor_shape(room_size: int, num_rows: int) -> Tuple[int, int]:
  """(height, width) of KeyCorridorS{room_size}R{num_rows}: RoomGrid's."""
  return (room_size - 1) * num_rows + 1, (room_size - 1) * 3 + 1


def key_corridor(key: jax.Array, room_size: int, num_rows: int):
  """One KeyCorridorS{room_size}R{num_rows} level (MiniGrid's `_gen_grid`).

  RoomGrid of num_rows x 3 rooms of room_size x room_size cells (walls
  shared). Each wall between neighbouring rooms gets a door position drawn
  uniformly along it. The middle column's rooms are joined into a
  corridor (their walls' inner cells removed); a locked door of a random
  colour is put on the left wall of a random room of the right column,
  a ball of a random colour inside that room, and a key of the door's
  colour in a random room of the left column (objects uniformly on the
  room's free cells, not within Manhattan distance 1 of the middle cell,
  `reject_next_to`). The agent is placed uniformly on a free cell of the
  middle room (the corridor's removed wall cells included) with a
  uniform direction, redrawn while the cell in front of it is not empty
  or a wall (RoomGrid.place_agent). Then `connect_all`: closed doors of
  random colours are added at random (room, wall) pairs whose wall has no
  door yet and whose rooms are not the locked one, until every room is
  reachable through doors.

  The episode's goal (xminigrid's `AgentHoldGoal`): pick up the ball.

  Args:
    key: PRNG key.
    room_size: MiniGrid's room_size (>= 3; 3 for S3R3).
    num_rows: MiniGrid's num_rows (>= 1; 3 for S3R3).

  Returns:
    xminigrid `State` of the level; goal_encoding holds the ball's
    (tile, colour).
  """
  s, rows, cols = room_size, num_rows, 3
  step = s - 1
  height, width = key_corridor_shape(s, rows)
  ys, xs = np.mgrid[0:height, 0:width]
  tiles = xmg_constants.Tiles
  # keys[11] is unused; 12 keeps each seed's levels those of the published
  # runs.
  keys = jax.random.split(key, 12)

  # Room walls (Grid.wall_rect of every room) and the corridor's removed
  # walls: the inner cells of the walls between the middle column's rooms.
  wall = (ys % step == 0) | (xs % step == 0)
  corridor = ((ys % step == 0) & (ys > 0) & (ys < height - 1)
              & (xs > step) & (xs < 2 * step))
  wall = wall & ~corridor
  grid = jnp.where(jnp.asarray(wall)[..., None],
                   _tile(tiles.WALL, xmg_constants.Colors.GREY),
                   _tile(tiles.FLOOR, xmg_constants.Colors.BLACK))

  # Door positions: offsets along each room's right and bottom walls.
  right_off = jax.random.randint(keys[0], (rows, cols), 1, s - 1)
  down_off = jax.random.randint(keys[1], (rows, cols), 1, s - 1)

  def door_xy(i, j, k):
    """MiniGrid's room.door_pos[k] of room (i, j)."""
    x = jnp.select([k == 0, k == 1, k == 2, k == 3], [
        (i + 1) * step, i * step + down_off[j, i], i * step,
        i * step + down_off[jnp.maximum(j - 1, 0), i]])
    y = jnp.select([k == 0, k == 1, k == 2, k == 3], [
        j * step + right_off[j, i], (j + 1) * step,
        j * step + right_off[j, jnp.maximum(i - 1, 0)], j * step])
    return x, y

  # doors[j, i, k]: room (i, j) is joined through its wall k (RoomGrid's
  # room.doors[k], True for a door or a removed wall).
  doors = np.zeros((rows, cols, 4), bool)
  doors[1:, 1, 3] = True
  doors[:-1, 1, 1] = True
  doors = jnp.asarray(doors)

  # The locked room: a random row of the right column, its left wall.
  room_idx = jax.random.randint(keys[2], (), 0, rows)
  lock_colour = jax.random.randint(keys[3], (), 0, NUM_COLORS)
  lx, ly = door_xy(2, room_idx, 2)
  grid = grid.at[ly, lx].set(_tile(tiles.DOOR_LOCKED, lock_colour + 1))
  doors = doors.at[room_idx, 2, 2].set(True).at[room_idx, 1, 0].set(True)
  locked = jnp.zeros((rows, cols), bool).at[room_idx, 2].set(True)

  # RoomGrid._gen_grid leaves the agent at the middle cell while objects
  # are placed (place_obj avoids it; reject_next_to its neighbours).
  mx, my = (cols // 2) * step + s // 2, (rows // 2) * step + s // 2
  near_middle = np.abs(xs - mx) + np.abs(ys - my) < 2

  def place(key, grid, i, j, tile):
    top_x, top_y = i * step, j * step
    in_room = ((xs >= top_x) & (xs < top_x + s) & (ys >= top_y)
               & (ys < top_y + s))
    free = (grid[..., 0] == tiles.FLOOR) & in_room & ~near_middle
    index = _uniform_index(key, free)
    return grid.at[index // width, index % width].set(tile)

  ball_colour = jax.random.randint(keys[4], (), 0, NUM_COLORS)
  ball = _tile(tiles.BALL, ball_colour + 1)
  grid = place(keys[5], grid, 2, room_idx, ball)
  key_row = jax.random.randint(keys[6], (), 0, rows)
  grid = place(keys[7], grid, 0, key_row, _tile(tiles.KEY, lock_colour + 1))

  # The agent: a free cell of room (1, rows // 2), with a direction whose
  # front cell is empty or a wall (RoomGrid.place_agent's loop).
  top_x, top_y = step, (rows // 2) * step
  in_room = ((xs >= top_x) & (xs < top_x + s) & (ys >= top_y)
             & (ys < top_y + s))
  free = (grid[..., 0] == tiles.FLOOR) & in_room
  fx = np.clip(xs[..., None] + _DX, 0, width - 1)   # [H, W, 4]
  fy = np.clip(ys[..., None] + _DY, 0, height - 1)
  front = grid[fy, fx, 0]
  ok = free[..., None] & ((front == tiles.FLOOR) | (front == tiles.WALL))
  index = _uniform_index(keys[8], ok)
  agent_dir = index % 4
  agent_x = (index // 4) % width
  agent_y = index // (4 * width)

  # connect_all: add closed doors until every room is reachable.
  start = jnp.zeros((rows, cols), bool).at[rows // 2, 1].set(True)

  def reachable(doors):
    def spread(_, reach):
      pad = jnp.pad(reach, 1)
      from_nbr = jnp.stack([pad[1:-1, 2:], pad[2:, 1:-1], pad[1:-1, :-2],
                            pad[:-2, 1:-1]], axis=-1)  # right, down, left, up
      return reach | jnp.any(doors & from_nbr, axis=-1)
    return jax.lax.fori_loop(0, rows * cols, spread, start)

  def not_connected(carry):
    it, doors, _, _ = carry
    return (~jnp.all(reachable(doors))) & (it < _CONNECT_MAX_ITERS)

  def add_door(carry):
    it, doors, grid, key = carry
    key, ki, kj, kk, kc = jax.random.split(key, 5)
    i = jax.random.randint(ki, (), 0, cols)
    j = jax.random.randint(kj, (), 0, rows)
    k = jax.random.randint(kk, (), 0, 4)
    has_nbr = jnp.select([k == 0, k == 1, k == 2, k == 3],
                         [i < cols - 1, j < rows - 1, i > 0, j > 0],
                         default=False)
    ni = jnp.clip(i + jnp.asarray(_DX)[k], 0, cols - 1)
    nj = jnp.clip(j + jnp.asarray(_DY)[k], 0, rows - 1)
    valid = has_nbr & ~doors[j, i, k] & ~locked[j, i] & ~locked[nj, ni]
    colour = jax.random.randint(kc, (), 0, NUM_COLORS)
    x, y = door_xy(i, j, k)
    grid = jnp.where(valid, grid.at[y, x].set(
        _tile(tiles.DOOR_CLOSED, colour + 1)), grid)
    doors = doors.at[j, i, k].set(doors[j, i, k] | valid)
    doors = doors.at[nj, ni, (k + 2) % 4].set(doors[nj, ni, (k + 2) % 4]
                                              | valid)
    return it + 1, doors, grid, key

  _, _, grid, _ = jax.lax.while_loop(
      not_connected, add_door, (jnp.asarray(0), doors, grid, keys[9]))

  goal = xmg_goals.AgentHoldGoal(tile=ball).encode()
  return _state(keys[10], grid, agent_x, agent_y, agent_dir, goal)


class Rooms(NamedTuple):
  """A MultiRoom chain in MiniGrid's coordinates (x, y), room r at [r]."""
  tops: jax.Array     # int32 [n, 2], top-left wall corner.
  sizes: jax.Array    # int32 [n, 2], (width, height) walls included.
  entries: jax.Array  # int32 [n, 2], entry door (room 0: its first draw).


def multi_room_layout(key: jax.Array, num_rooms: int, max_room_size: int,
                      width: int = 25, height: int = 25) -> Rooms:
  """The rooms of one MultiRoom level (`multi_room`'s `_placeRoom` port)."""
  n, max_size = num_rooms, max_room_size
  if n < 2 or max_size < 4:
    raise ValueError(f"multi_room: num_rooms >= 2 and max_room_size >= 4 "
                     f"needed, got {num_rooms} and {max_room_size}.")

  def draw_chain(key):
    """One `_placeRoom` recursion: (rooms placed, tops, sizes, doors)."""
    key, k1, k2, k3, k4 = jax.random.split(key, 5)
    entry = jnp.stack([jax.random.randint(k1, (), 0, width - 2),
                       jax.random.randint(k2, (), 0, width - 2)])
    size = jnp.stack([jax.random.randint(k3, (), 4, max_size + 1),
                      jax.random.randint(k4, (), 4, max_size + 1)])
    fits = (entry[0] + size[0] <= width) & (entry[1] + size[1] < height)
    tops = jnp.zeros((n, 2), jnp.int32).at[0].set(entry)
    sizes = jnp.zeros((n, 2), jnp.int32).at[0].set(size)
    entries = jnp.zeros((n, 2), jnp.int32).at[0].set(entry)
    walls = jnp.full((n,), 2, jnp.int32)
    count = jnp.where(fits, 1, 0)

    def going(carry):
      count, tries = carry[0], carry[1]
      return (count > 0) & (count < n) & (tries < 8)

    def try_next(carry):
      count, tries, tops, sizes, entries, walls, key = carry
      key, kw, ko, kx, ky, kt = jax.random.split(key, 6)
      c = count - 1
      (tx, ty), (sx, sy) = tops[c], sizes[c]
      r = jax.random.randint(kw, (), 0, 3)
      exit_wall = r + (r >= walls[c])  # sorted({0..3} - {entry wall}).
      along = jnp.where((exit_wall == 0) | (exit_wall == 2), sy, sx)
      off = jax.random.randint(ko, (), 1, along - 1)
      ex = jnp.select([exit_wall == 0, exit_wall == 1, exit_wall == 2],
                      [tx + sx - 1, tx + off, tx], tx + off)
      ey = jnp.select([exit_wall == 0, exit_wall == 1, exit_wall == 2],
                      [ty + off, ty + sy - 1, ty + off], ty)
      entry_wall = (exit_wall + 2) % 4
      nsx = jax.random.randint(kx, (), 4, max_size + 1)
      nsy = jax.random.randint(ky, (), 4, max_size + 1)
      kt1, kt2 = jax.random.split(kt)
      slide_x = jax.random.randint(kt1, (), ex - nsx + 2, ex)
      slide_y = jax.random.randint(kt2, (), ey - nsy + 2, ey)
      ntx = jnp.select([entry_wall == 0, entry_wall == 2],
                       [ex - nsx + 1, ex], slide_x)
      nty = jnp.select([entry_wall == 1, entry_wall == 3],
                       [ey - nsy + 1, ey], slide_y)
      ok = ((ntx >= 0) & (nty >= 0) & (ntx + nsx <= width)
            & (nty + nsy < height))
      apart = ((ntx + nsx < tops[:, 0]) | (tops[:, 0] + sizes[:, 0] <= ntx)
               | (nty + nsy < tops[:, 1])
               | (tops[:, 1] + sizes[:, 1] <= nty))
      ok &= jnp.all(apart | (jnp.arange(n) >= c))
      tops = jnp.where(ok, tops.at[count].set(jnp.stack([ntx, nty])), tops)
      sizes = jnp.where(ok, sizes.at[count].set(jnp.stack([nsx, nsy])), sizes)
      entries = jnp.where(ok, entries.at[count].set(jnp.stack([ex, ey])),
                          entries)
      walls = jnp.where(ok, walls.at[count].set(entry_wall), walls)
      return (count + ok, jnp.where(ok, 0, tries + 1), tops, sizes, entries,
              walls, key)

    count, _, tops, sizes, entries, _, _ = jax.lax.while_loop(
        going, try_next, (count, jnp.asarray(0), tops, sizes, entries,
                          walls, key))
    return count, tops, sizes, entries

  def short(carry):
    return carry[0] < n

  def redraw(carry):
    key = carry[-1]
    key, sub = jax.random.split(key)
    return (*draw_chain(sub), key)

  zeros = jnp.zeros((n, 2), jnp.int32)
  _, tops, sizes, entries, _ = jax.lax.while_loop(
      short, redraw, (jnp.asarray(0), zeros, zeros, zeros, key))
  return Rooms(tops, sizes, entries)


def multi_room(key: jax.Array, num_rooms: int, max_room_size: int,
               width: int = 25, height: int = 25):
  """One MultiRoom level (MiniGrid's `MultiRoomEnv._gen_grid`).

  A chain of `num_rooms` rectangular rooms (sides uniform in
  [4, max_room_size]), each entered from the previous one through a closed
  door on their shared wall. MiniGrid's `_placeRoom` recursion, ported as
  a loop: the first room's top-left corner is uniform in
  [0, width - 2)^2; each next room is tried up to 8 times (exit wall
  uniform among the current room's other three walls, door uniformly off
  the wall's corners, the next room's size and offset uniform so that the
  door is off its corners too), and kept if it lies inside the grid
  (MiniGrid's checks, `topY + sizeY >= height` included) and does not
  overlap any earlier room but the current one (MiniGrid's asymmetric
  test); a chain that ends short is drawn again. Door colours are uniform,
  each different from the previous door's. The agent is placed uniformly
  in the first room's interior with a uniform direction, the green goal
  uniformly in the last room's. Cells outside the rooms are empty floor,
  as MiniGrid's None.

  Args:
    key: PRNG key.
    num_rooms: MiniGrid's min = max NumRooms (6 for MultiRoom-N6).
    max_room_size: MiniGrid's maxRoomSize (10 for N6, 4 for N2-S4).
    width: grid width (MiniGrid's 25).
    height: grid height (MiniGrid's 25).

  Returns:
    xminigrid `State` of the level (goal: the agent on the green goal).
  """
  n = num_rooms
  tiles = xmg_constants.Tiles
  chain_key, colour_key, agent_key, goal_key, state_key = (
      jax.random.split(key, 5))
  tops, sizes, entries = multi_room_layout(chain_key, num_rooms,
                                           max_room_size, width, height)
  ys, xs = np.mgrid[0:height, 0:width]
  x0, y0 = tops[:, 0, None, None], tops[:, 1, None, None]
  x1, y1 = x0 + sizes[:, 0, None, None] - 1, y0 + sizes[:, 1, None, None] - 1
  in_rect = (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)  # [n, H, W]
  border = in_rect & ((xs == x0) | (xs == x1) | (ys == y0) | (ys == y1))
  grid = jnp.where(jnp.any(border, axis=0)[..., None],
                   _tile(tiles.WALL, xmg_constants.Colors.GREY),
                   _tile(tiles.FLOOR, xmg_constants.Colors.BLACK))
  # Entry doors of rooms 1..n-1; each colour uniform among the five that
  # differ from the previous door's.
  k_first, k_rest = jax.random.split(colour_key)
  first = jax.random.randint(k_first, (), 0, NUM_COLORS)
  shifts = jax.random.randint(k_rest, (n - 2,), 0, NUM_COLORS - 1)
  colours = (first + jnp.concatenate([jnp.zeros((1,), shifts.dtype),
                                      jnp.cumsum(1 + shifts)])) % NUM_COLORS
  doors = jnp.stack([jnp.full((n - 1,), tiles.DOOR_CLOSED, jnp.uint8),
                     (colours + 1).astype(jnp.uint8)], axis=-1)  # [n - 1, 2]
  grid = grid.at[entries[1:, 1], entries[1:, 0]].set(doors)

  interior = in_rect & ~border
  floor = grid[..., 0] == tiles.FLOOR
  k_pos, k_dir = jax.random.split(agent_key)
  index = _uniform_index(k_pos, interior[0] & floor)
  agent_x, agent_y = index % width, index // width
  agent_dir = jax.random.randint(k_dir, (), 0, 4)
  not_agent = ~((xs == agent_x) & (ys == agent_y))
  index = _uniform_index(goal_key, interior[-1] & floor & not_agent)
  goal_tile = _tile(tiles.GOAL, xmg_constants.Colors.GREEN)
  grid = grid.at[index // width, index % width].set(goal_tile)
  goal = xmg_goals.AgentOnTileGoal(tile=goal_tile).encode()
  return _state(state_key, grid, agent_x, agent_y, agent_dir, goal)


__all__ = ("key_corridor", "key_corridor_shape", "multi_room",
           "multi_room_layout", "NUM_COLORS", "Rooms")
