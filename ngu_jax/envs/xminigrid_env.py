"""MiniGrid tasks as pure-JAX functional environments via xminigrid.

`XMiniGrid(env_id)` is ONE lane of a MiniGrid task (`functional.FunctionalEnv`)
built on xland-minigrid (Nikulin et al. 2024, "XLand-MiniGrid: Scalable
Meta-Reinforcement Learning Environments in JAX"; `pip install xminigrid`),
with the semantics of Farama MiniGrid (minigrid/minigrid_env.py) and of our
envpool adapter (`ngu_jax.envs.minigrid`), so that one network / preset
serves both. Ids are MiniGrid's (`xminigrid_ids()`), e.g.
"MiniGrid-DoorKey-8x8-v0" (-> xminigrid's "MiniGrid-DoorKey-8x8").

xminigrid supplies the level generators of DoorKey / FourRooms / Empty
(same layout distributions as MiniGrid's) and the action dynamics
(`xminigrid.core.actions.take_action`: MiniGrid's move / turn / pickup /
drop / toggle, doors unlocked by a key of their colour). KeyCorridor
(S3R1 ... S6R3) and MultiRoom (N2-S4, N6), which xminigrid lacks, use our
JAX ports of MiniGrid's generators (`ngu_jax.envs.xminigrid_levels`) with
the same dynamics. This module adds:

* Actions: MiniGrid's 7 in MiniGrid's order, `ACTION_NAMES` (0 left, 1 right,
  2 forward, 3 pickup, 4 drop, 5 toggle, 6 done), as envpool's MiniGrid. They
  map to xminigrid's 6 (0 forward, 1 turn clockwise, 2 turn counter-
  clockwise, 3 pick up, 4 put down, 5 toggle); "done" is a no-op step that
  still counts towards the time limit, as in MiniGrid (whose `done` does
  nothing in these tasks).
* Observation: MiniGrid's `gen_obs()["image"]`, uint8 [7, 7, 3] of (object
  type, colour, state) codes, in MiniGrid's / envpool's memory layout
  `obs[x, y]` (x: column of the view, left to right; y: row, far to near):
  the agent is at obs[3, 6] looking towards obs[3, 0]. As MiniGrid's
  `gen_obs_grid`: cells outside the grid are grey walls (`Grid.slice`); the
  view is rotated to face up; unless the task sees through walls, cells
  hidden behind walls and closed / locked doors are unseen (0, 0, 0)
  (`Grid.process_vis`, ported exactly; xminigrid's own default view sees
  through walls); the agent's own cell shows what it carries, or an empty
  cell (1, 0, 0). As in MiniGrid, Empty(-Random) tasks see through walls
  (`see_through_walls=True` in MiniGrid's EmptyEnv; envpool agrees) and
  DoorKey / FourRooms / KeyCorridor / MultiRoom do not.
* Codes: envpool's / MiniGrid's (`MINIGRID_NUM_VALUES` = (11, 6, 3), declared
  as `ObservationEncoding("symbolic", ...)`), translated from xminigrid's
  (tile, colour) ids by a lookup table (`_CODES`):
    tile EMPTY (outside the view mask) -> unseen 0; FLOOR -> empty 1;
    WALL -> wall 2; BALL -> ball 6; SQUARE -> box 7; GOAL -> goal 8;
    KEY -> key 5; DOOR_LOCKED / DOOR_CLOSED / DOOR_OPEN -> door 4 with state
    locked 2 / closed 1 / open 0; colours RED..GREY (1..6) -> red 0 ... grey 5,
    EMPTY / BLACK (floor) -> 0.
  Not mappable (XLand-only; never present in the supported tasks): tiles
  PYRAMID, HEX, STAR -> ball 6; colours ORANGE, WHITE, BROWN, PINK -> grey 5.
  MiniGrid's floor 3, lava 9 and agent 10 never appear (as in envpool's
  partial view).
* Reward: MiniGrid's 1 - 0.9 * (step_count / max_steps) on the step that
  reaches the goal (step_count counts this step), 0 otherwise (xminigrid's
  formula is the same). KeyCorridor's goal is picking up the ball (the
  pickup action that puts it in the agent's hands, MiniGrid's
  `carrying == self.obj`), the others' stepping onto the green goal.
* Episode ends: reaching the goal is LAST with discount 0 (also on the time
  limit's step); `max_episode_steps` agent steps (MiniGrid's max_steps:
  DoorKey 10 * size^2, e.g. 640 for 8x8; FourRooms 100; Empty
  4 * size^2, e.g. 256 for 8x8; KeyCorridor 30 * room_size^2, 270 for
  S3R3; MultiRoom 20 * rooms, 120 for N6) is LAST with discount 1. Overriding
  `max_episode_steps` also changes max_steps in the reward, as in MiniGrid.
* Auto-reset (`functional`): after LAST, `step` ignores the action and
  returns FIRST of a new level drawn with the key carried in the state.
* Extras: "position" int32 [2], the agent's grid cell (row, col);
  "direction" int32 [], MiniGrid's (0 right, 1 down, 2 left, 3 up; envpool's
  `direction`).

Why not xminigrid's occluded view (`core.observation.minigrid_field_of_view`):
it fills cells outside the grid with EMPTY (unseen) where MiniGrid shows
walls, does not show the carried object, and its nested scans compile
slowly; `visibility_mask` vectorises MiniGrid's row sweeps instead.
Speed: the next episode's level is drawn in a `lax.while_loop` of at most
one trip, so vmapped lanes run the generator only at steps where some lane
restarts (a `lax.cond` would become a select that runs it every step).
`experiments.benchmarks.xminigrid_step`, 48 lanes inside lax.scan, 2 CPU
cores shared with two training runs (2026-12-08): DoorKey-8x8 2.26M
lane-steps/s (10.3x the cond's), DoorKey-16x16 2.05M (16.2x), FourRooms
0.50M (4.1x), KeyCorridorS3R3 0.31M (57x), MultiRoom-N6 0.12M (94x).

Deviations from MiniGrid: the random layouts are drawn by JAX's generator
(same distributions, different draws than MiniGrid / envpool for a seed);
no mission string. xminigrid's rules and goal encodings are not evaluated:
every supported task has xminigrid's `EmptyRule` and
`AgentOnTileGoal(GOAL, GREEN)` (checked by the tests), i.e. "forward onto
the green goal".
"""

import functools
from typing import Any, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.envs import base
from ngu_jax.envs import functional
from ngu_jax.envs import xminigrid_levels
from ngu_jax.types import ObservationEncoding

# pylint: disable=g-import-not-at-top
try:
  import xminigrid
  from xminigrid.core import actions as xmg_actions
  from xminigrid.core import constants as xmg_constants
  _IMPORT_ERROR = None
except ImportError as e:  # pragma: no cover - depends on the environment.
  xminigrid = None
  xmg_actions = None
  xmg_constants = None
  _IMPORT_ERROR = e
# pylint: enable=g-import-not-at-top

# Codes per channel of the observation: object type, colour, state (the same
# as `ngu_jax.envs.minigrid.MINIGRID_NUM_VALUES`, envpool's MiniGrid).
MINIGRID_NUM_VALUES = (11, 6, 3)
VIEW_SIZE = 7  # MiniGrid's agent_view_size.
ACTION_NAMES = ("left", "right", "forward", "pickup", "drop", "toggle", "done")
_DONE = 6
# xminigrid action of each MiniGrid action; "done" -> turn clockwise, whose
# result is discarded (a no-op step).
_XMG_ACTION = np.array([2, 1, 0, 3, 4, 5, 1], np.int32)

# MiniGrid id -> (xminigrid id, MiniGrid's see_through_walls) for the tasks
# xminigrid registers; `_OWN_TASKS` for those whose generator is ours.
_TASKS = {}
for _size in (5, 6, 8, 16):
  _TASKS[f"MiniGrid-DoorKey-{_size}x{_size}-v0"] = (
      f"MiniGrid-DoorKey-{_size}x{_size}", False)
  _TASKS[f"MiniGrid-Empty-{_size}x{_size}-v0"] = (
      f"MiniGrid-Empty-{_size}x{_size}", True)
for _size in (5, 6):
  _TASKS[f"MiniGrid-Empty-Random-{_size}x{_size}-v0"] = (
      f"MiniGrid-EmptyRandom-{_size}x{_size}", True)
_TASKS["MiniGrid-FourRooms-v0"] = ("MiniGrid-FourRooms", False)
del _size


class _OwnTask(NamedTuple):
  """A task on `xminigrid_levels`' generators (module docstring)."""
  generator: Any          # key -> xminigrid State (of one level).
  grid_shape: Tuple[int, int]
  max_steps: int          # MiniGrid's max_steps.
  pickup_goal: bool       # Success: picking up the goal's object (else
                          # stepping onto the green goal).


def _key_corridor_task(room_size: int, num_rows: int) -> _OwnTask:
  return _OwnTask(
      lambda key: xminigrid_levels.key_corridor(key, room_size, num_rows),
      xminigrid_levels.key_corridor_shape(room_size, num_rows),
      30 * room_size ** 2, True)


def _multi_room_task(num_rooms: int, max_room_size: int) -> _OwnTask:
  return _OwnTask(
      lambda key: xminigrid_levels.multi_room(key, num_rooms, max_room_size),
      (25, 25), 20 * num_rooms, False)


_OWN_TASKS = {
    **{f"MiniGrid-KeyCorridorS{s}R{r}-v0": _key_corridor_task(s, r)
       for s, r in ((3, 1), (3, 2), (3, 3), (4, 3), (5, 3), (6, 3))},
    # MiniGrid-MultiRoom-N4-S5-v0 is left out: MiniGrid 3.x registers it
    # with 6 rooms (a legacy id), older releases and envpool with 4.
    "MiniGrid-MultiRoom-N2-S4-v0": _multi_room_task(2, 4),
    "MiniGrid-MultiRoom-N6-v0": _multi_room_task(6, 10),
}


def _code_table() -> np.ndarray:
  """(MiniGrid object, colour, state) of every xminigrid (tile, colour).

  Returns:
    uint8, shaped [13, 12, 3] (xminigrid's NUM_TILES, NUM_COLORS); module
    docstring for the mapping.
  """
  # xminigrid colour id -> MiniGrid colour (red 0, green 1, blue 2,
  # purple 3, yellow 4, grey 5); EMPTY / BLACK -> 0, XLand-only -> grey.
  colour = np.array([0, 0, 1, 2, 3, 4, 5, 0, 5, 5, 5, 5], np.uint8)
  # xminigrid tile id -> (MiniGrid object, state).
  tiles = {
      0: (0, 0),   # EMPTY: outside the view mask -> unseen.
      1: (1, 0),   # FLOOR -> empty.
      2: (2, 0),   # WALL.
      3: (6, 0),   # BALL.
      4: (7, 0),   # SQUARE -> box.
      5: (6, 0),   # PYRAMID: no MiniGrid object -> ball.
      6: (8, 0),   # GOAL.
      7: (5, 0),   # KEY.
      8: (4, 2),   # DOOR_LOCKED.
      9: (4, 1),   # DOOR_CLOSED.
      10: (4, 0),  # DOOR_OPEN.
      11: (6, 0),  # HEX: no MiniGrid object -> ball.
      12: (6, 0),  # STAR: no MiniGrid object -> ball.
  }
  table = np.zeros((len(tiles), colour.size, 3), np.uint8)
  for tile, (obj, state) in tiles.items():
    table[tile, :, 0] = obj
    table[tile, :, 1] = 0 if obj in (0, 1) else colour
    table[tile, :, 2] = state
  return table


_CODES = _code_table()
_EMPTY_CELL = np.array([1, 0, 0], np.uint8)  # MiniGrid's encoding of None.


def xminigrid_ids() -> Tuple[str, ...]:
  """The MiniGrid ids `XMiniGrid` accepts, e.g. "MiniGrid-DoorKey-8x8-v0"."""
  return tuple(_TASKS) + tuple(_OWN_TASKS)


def _require_xminigrid(where: str) -> None:
  if xminigrid is None:
    raise ImportError(
        f"{where}: xminigrid is not installed ({_IMPORT_ERROR}); install it "
        "with `pip install xminigrid`.")


def _row_visibility(seen: jax.Array, transparent: jax.Array
                    ) -> Tuple[jax.Array, jax.Array]:
  """One row of `process_vis`: its sweeps, vectorised over the row.

  The left-to-right sweep makes cell i visible if some seen cell k <= i has
  no opaque cell in [k, i); the right-to-left sweep then if some visible
  cell k >= i has none in (i, k]. Each sweep's visible transparent cells
  also light the row beyond (ahead): the forward sweep (cells 0..V-2) cells
  i and i + 1, the backward sweep (cells 1..V-1) cells i - 1 and i.

  Args:
    seen: bool [V], the row's cells lit before its sweeps.
    transparent: bool [V], the row's `see_behind`.

  Returns:
    (visible, ahead): bool [V] each; the row's final mask and the cells it
    lights in the next row.
  """
  v = seen.shape[0]
  idx = np.arange(v)
  src, dst = idx[:, None], idx[None, :]
  # opaque_before[i]: opaque cells among [0, i), i in [0, V].
  opaque_before = jnp.concatenate([
      jnp.zeros((1,), jnp.int32), jnp.cumsum((~transparent).astype(jnp.int32))])
  count = opaque_before[:, None]  # [V + 1, 1]
  flat = opaque_before[None, :]   # [1, V + 1]
  forward_reach = (src <= dst) & (flat[:, :v] - count[:v] == 0)
  forward = jnp.any(seen[:, None] & forward_reach, axis=0)
  backward_reach = (src >= dst) & (count[1:] - flat[:, 1:] == 0)
  visible = jnp.any(forward[:, None] & backward_reach, axis=0)
  lit_forward = forward & transparent & (idx < v - 1)
  lit_backward = visible & transparent & (idx > 0)
  false = jnp.zeros((1,), bool)
  ahead = (lit_forward | lit_backward
           | jnp.concatenate([false, lit_forward[:-1]])
           | jnp.concatenate([lit_backward[1:], false]))
  return visible, ahead


def visibility_mask(transparent: jax.Array) -> jax.Array:
  """MiniGrid's `Grid.process_vis` for a view rotated to face up.

  A port of minigrid/core/grid.py `process_vis` (agent at the bottom centre;
  rows swept from near to far, each left-to-right then right-to-left), with
  each row's sweeps vectorised (`_row_visibility`; equal to the loops, see
  the tests) and the rows unrolled over the static view size.

  Args:
    transparent: bool, shaped [V, V], row-major (row 0 farthest, the agent
      at [V - 1, V // 2]); True where a cell can be seen behind (MiniGrid's
      `see_behind`: not a wall, closed or locked door).

  Returns:
    bool, shaped [V, V] (same layout): True on cells the agent sees.
  """
  v = transparent.shape[0]
  seen = jnp.asarray(np.arange(v) == v // 2)
  rows = [None] * v
  for j in reversed(range(v)):
    rows[j], seen = _row_visibility(seen, transparent[j])
  return jnp.stack(rows)


def egocentric_view(grid: jax.Array, position: jax.Array,
                    direction: jax.Array, pocket: jax.Array,
                    see_through_walls: bool,
                    view_size: int = VIEW_SIZE) -> jax.Array:
  """MiniGrid's partial view (`gen_obs()["image"]`) of an xminigrid grid.

  Args:
    grid: xminigrid grid, uint8 [H, W, 2] of (tile, colour) ids.
    position: the agent's cell (row, col), int [2].
    direction: xminigrid's direction (0 up, 1 right, 2 down, 3 left), int [].
    pocket: the carried (tile, colour), uint8 [2]; tile EMPTY when none.
    see_through_walls: MiniGrid's flag (False: occluded view).
    view_size: V, MiniGrid's agent_view_size (odd).

  Returns:
    uint8, shaped [V, V, 3]: MiniGrid codes in MiniGrid's layout obs[x, y],
    the agent at [V // 2, V - 1] (module docstring).
  """
  v = view_size
  wall = np.array([xmg_constants.Tiles.WALL, xmg_constants.Colors.GREY],
                  np.uint8)
  padded = jnp.pad(grid, ((v, v), (v, v), (0, 0)))
  outside = jnp.pad(jnp.zeros(grid.shape[:2], bool), v, constant_values=True)
  padded = jnp.where(outside[..., None], jnp.asarray(wall), padded)
  y, x = position[0] + v, position[1] + v
  # Top-left corner of the view (MiniGrid's get_view_exts) per direction.
  corners = jnp.array([[y - v + 1, x - v // 2],   # up
                       [y - v // 2, x],           # right
                       [y, x - v // 2],           # down
                       [y - v // 2, x - v + 1]])  # left
  top_left = corners[direction]
  crop = jax.lax.dynamic_slice(padded, (top_left[0], top_left[1], 0),
                               (v, v, 2))
  # Rotate counter-clockwise so that the agent faces up (row 0 farthest).
  crop = jax.lax.switch(direction, [
      lambda g: g, lambda g: jnp.rot90(g, 1), lambda g: jnp.rot90(g, 2),
      lambda g: jnp.rot90(g, 3)], crop)
  codes = jnp.asarray(_CODES)[crop[..., 0], crop[..., 1]]  # [V, V, 3]
  if see_through_walls:
    visible = jnp.ones((v, v), bool)
  else:
    transparent = ~jnp.isin(crop[..., 0], jnp.asarray(
        [xmg_constants.Tiles.WALL, xmg_constants.Tiles.DOOR_LOCKED,
         xmg_constants.Tiles.DOOR_CLOSED]))
    visible = visibility_mask(transparent)
  codes = jnp.where(visible[..., None], codes, jnp.zeros((), jnp.uint8))
  # The agent sees what it carries in its own cell (else an empty cell).
  carried = jnp.where(pocket[0] == xmg_constants.Tiles.EMPTY,
                      jnp.asarray(_EMPTY_CELL),
                      jnp.asarray(_CODES)[pocket[0], pocket[1]])
  codes = codes.at[v - 1, v // 2].set(carried)
  return jnp.transpose(codes, (1, 0, 2))  # MiniGrid's obs[x, y].


class XMiniGridState(NamedTuple):
  """One lane's state (a pytree)."""
  level: Any        # xminigrid `State` of the current episode.
  key: jax.Array    # PRNG key of the next auto-reset.
  done: jax.Array   # bool []: the last timestep was LAST.


class XMiniGrid(functional.FunctionalEnv):
  """A MiniGrid task through xminigrid, one lane (module docstring).

  Observation uint8 [7, 7, 3] (MiniGrid codes), 7 actions (`ACTION_NAMES`),
  extras {"position": int32 [2] (row, col), "direction": int32 []}.
  """

  def __init__(self, env_id: str, *,
               max_episode_steps: Optional[int] = None,
               see_through_walls: Optional[bool] = None):
    """Builds the task.

    Args:
      env_id: a MiniGrid id from `xminigrid_ids()`, e.g.
        "MiniGrid-DoorKey-8x8-v0".
      max_episode_steps: time limit in agent steps (MiniGrid's max_steps,
        also in the reward); None keeps MiniGrid's default for `env_id`.
      see_through_walls: None keeps MiniGrid's choice for `env_id` (True
        for Empty, False for DoorKey / FourRooms).

    Raises:
      ValueError: unknown id or invalid setting.
      ImportError: xminigrid is not installed.
    """
    where = f"XMiniGrid({env_id!r})"
    if env_id not in _TASKS and env_id not in _OWN_TASKS:
      raise ValueError(
          f"XMiniGrid: unknown MiniGrid id {env_id!r}; known ids: "
          + ", ".join(xminigrid_ids()) + ".")
    _require_xminigrid(where)
    self.env_id = env_id
    if env_id in _TASKS:
      xmg_id, default_see = _TASKS[env_id]
      env, params = xminigrid.make(xmg_id)
      # pylint: disable-next=protected-access
      self._generate = functools.partial(env._generate_problem, params)
      self._grid_shape = (int(params.height), int(params.width))
      max_steps = int(params.max_steps)
      self._pickup_goal = False
    else:
      task = _OWN_TASKS[env_id]
      default_see = False  # KeyCorridor's and MultiRoom's occluded view.
      self._generate = task.generator
      self._grid_shape = task.grid_shape
      max_steps = task.max_steps
      self._pickup_goal = task.pickup_goal
    if max_episode_steps is not None:
      max_steps = base.check_positive_int(
          max_episode_steps, "max_episode_steps", where)
    self._max_steps = max_steps
    self._see_through_walls = bool(default_see if see_through_walls is None
                                   else see_through_walls)

  @property
  def see_through_walls(self) -> bool:
    """MiniGrid's flag: False for an occluded view."""
    return self._see_through_walls

  @property
  def grid_shape(self) -> Tuple[int, int]:
    return self._grid_shape

  @property
  def max_episode_steps(self) -> int:
    return self._max_steps

  def observation_spec(self) -> base.BoundedArray:
    return base.BoundedArray((VIEW_SIZE, VIEW_SIZE, 3), np.uint8, minimum=0,
                             maximum=255, name="observation")

  def observation_encoding(self) -> ObservationEncoding:
    """Symbolic (object, colour, state) codes: counts (11, 6, 3)."""
    return ObservationEncoding("symbolic", MINIGRID_NUM_VALUES)

  def action_spec(self) -> base.DiscreteArray:
    return base.DiscreteArray(len(ACTION_NAMES), name="action")

  def _timestep(self, level, step_type, reward, discount) -> base.TimeStep:
    agent = level.agent
    obs = egocentric_view(level.grid, agent.position, agent.direction,
                          agent.pocket, self._see_through_walls)
    extras = {
        "position": jnp.asarray(agent.position, jnp.int32),
        "direction": ((jnp.asarray(agent.direction, jnp.int32) + 3) % 4),
    }
    return base.TimeStep(
        step_type=jnp.asarray(step_type, jnp.int32),
        reward=jnp.asarray(reward, jnp.float32),
        discount=jnp.asarray(discount, jnp.float32),
        observation=obs, extras=extras)

  def _fresh_level(self, key: jax.Array) -> Tuple[jax.Array, Any]:
    """(next key, level) of a new episode from `key`, as `reset` draws it."""
    key, level_key = jax.random.split(key)
    level = self._generate(level_key)
    return key, level.replace(step_num=jnp.asarray(0, jnp.int32))

  def reset(self, key: jax.Array) -> Tuple[XMiniGridState, base.TimeStep]:
    """A fresh level: (state, FIRST timestep with reward 0, discount 1)."""
    key, level = self._fresh_level(key)
    state = XMiniGridState(level=level, key=key,
                           done=jnp.zeros((), bool))
    return state, self._timestep(level, int(base.StepType.FIRST), 0.0, 1.0)

  def _advance(self, level: Any, action: jax.Array):
    """One step of the level: (level, step type, reward, discount, last)."""
    action = jnp.asarray(action, jnp.int32)
    grid, agent, _ = xmg_actions.take_action(
        level.grid, level.agent, jnp.asarray(_XMG_ACTION)[action])
    no_op = action == _DONE
    grid = jnp.where(no_op, level.grid, grid)
    agent = jax.tree_util.tree_map(lambda old, new: jnp.where(no_op, old, new),
                                   level.agent, agent)
    step_num = level.step_num + 1
    level = level.replace(grid=grid, agent=agent, step_num=step_num)
    if self._pickup_goal:
      # KeyCorridor: picking up the goal's object terminates (MiniGrid's
      # `carrying == self.obj`; xminigrid's AgentHoldGoal encoding).
      terminated = ((action == 3)
                    & jnp.all(agent.pocket == level.goal_encoding[1:3]))
    else:
      # MiniGrid: moving forward onto the goal terminates (AgentOnTileGoal).
      cell = grid[agent.position[0], agent.position[1]]
      terminated = ((action == 2) & (cell[0] == xmg_constants.Tiles.GOAL)
                    & (cell[1] == xmg_constants.Colors.GREEN))
    truncated = step_num >= self._max_steps
    reward = jnp.where(
        terminated, 1.0 - 0.9 * (step_num.astype(jnp.float32)
                                 / self._max_steps), 0.0)
    last = terminated | truncated
    step_type = jnp.where(last, int(base.StepType.LAST),
                          int(base.StepType.MID))
    discount = jnp.where(terminated, 0.0, 1.0)
    return level, step_type, reward, discount, last

  def _maybe_fresh_level(self, done: jax.Array, key: jax.Array, level: Any):
    """`_fresh_level(key)` where `done`, else (key, level).

    NOTE: a `lax.while_loop` of at most one trip rather than a `lax.cond`
    (as `disco_maze_jax`): vmapped over lanes, a cond becomes a select that
    would run the level generator on every lane at every step (KeyCorridor's
    `connect_all` and MultiRoom's room placement are loops); this loop runs
    it only at steps where some lane restarts. The key changes in the carry,
    so XLA cannot hoist the generator out of the loop.
    """
    def body(carry):
      _, key, _ = carry
      return (jnp.zeros((), bool),) + self._fresh_level(key)

    _, key, level = jax.lax.while_loop(lambda carry: carry[0], body,
                                       (done, key, level))
    return key, level

  def step(self, state: XMiniGridState, action: jax.Array
           ) -> Tuple[XMiniGridState, base.TimeStep]:
    """One agent step; after LAST, a new level (FIRST) whatever `action`.

    Args:
      state: `XMiniGridState` from `reset` / `step`.
      action: int [] in [0, 7) (`ACTION_NAMES`); trusted (not checked).

    Returns:
      (state, timestep) of one lane; after LAST the same as
      `reset(state.key)`.
    """
    done = state.done
    level, step_type, reward, discount, last = self._advance(state.level,
                                                             action)
    key, fresh = self._maybe_fresh_level(done, state.key, state.level)
    level = jax.tree_util.tree_map(lambda new, old: jnp.where(done, new, old),
                                   fresh, level)
    step_type = jnp.where(done, int(base.StepType.FIRST), step_type)
    reward = jnp.where(done, 0.0, reward)
    discount = jnp.where(done, 1.0, discount)
    new_state = XMiniGridState(level=level, key=key, done=~done & last)
    return new_state, self._timestep(level, step_type, reward, discount)


__all__ = (
    "ACTION_NAMES",
    "egocentric_view",
    "MINIGRID_NUM_VALUES",
    "visibility_mask",
    "XMiniGrid",
    "XMiniGridState",
    "xminigrid_ids",
)
