"""Tests of ngu_jax.envs.xminigrid_levels (KeyCorridor, MultiRoom in JAX).

References: Farama MiniGrid itself (`minigrid`, in the test extra). Its
levels are converted to xminigrid states and stepped by both with the same
actions (observations, rewards, ends must be equal), and its generator's
layout statistics are compared with ours by two-sample tests.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("xminigrid")
minigrid_envs = pytest.importorskip("minigrid.envs")
scipy_stats = pytest.importorskip("scipy.stats")

# pylint: disable=g-import-not-at-top,wrong-import-position
from minigrid.core import constants as mg_constants
from minigrid.core import world_object as mg_objects
from xminigrid.core import constants as xc
from xminigrid.core import goals as xgoals

from ngu_jax.envs import base
from ngu_jax.envs import functional
from ngu_jax.envs import xminigrid_env as xe
from ngu_jax.envs import xminigrid_levels as xl
from tests.envs import conformance
# pylint: enable=g-import-not-at-top,wrong-import-position

FIRST, MID, LAST = 0, 1, 2
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
KC, MR = "MiniGrid-KeyCorridorS3R3-v0", "MiniGrid-MultiRoom-N6-v0"


def _farama(env_id):
  if env_id.startswith("MiniGrid-KeyCorridor"):
    s, r = int(env_id[len("MiniGrid-KeyCorridorS")]), int(env_id[-4])
    return minigrid_envs.KeyCorridorEnv(room_size=s, num_rows=r)
  if env_id == MR:
    return minigrid_envs.MultiRoomEnv(minNumRooms=6, maxNumRooms=6)
  return minigrid_envs.MultiRoomEnv(minNumRooms=2, maxNumRooms=2,
                                    maxRoomSize=4)


def _xmg_cell(obj):
  """xminigrid (tile, colour) of a MiniGrid world object (None: floor)."""
  if obj is None:
    return xc.Tiles.FLOOR, xc.Colors.BLACK
  colour = mg_constants.COLOR_TO_IDX[obj.color] + 1
  if obj.type == "wall":
    return xc.Tiles.WALL, colour
  if obj.type == "door":
    tile = (xc.Tiles.DOOR_LOCKED if obj.is_locked else
            xc.Tiles.DOOR_OPEN if obj.is_open else xc.Tiles.DOOR_CLOSED)
    return tile, colour
  tile = {"key": xc.Tiles.KEY, "ball": xc.Tiles.BALL, "box": xc.Tiles.SQUARE,
          "goal": xc.Tiles.GOAL}[obj.type]
  return tile, colour


def _level_of(env, template):
  """MiniGrid's current level as an xminigrid State (shaped as template)."""
  env = env.unwrapped
  grid = np.array([[_xmg_cell(env.grid.get(x, y)) for x in range(env.width)]
                   for y in range(env.height)], np.uint8)
  x, y = (int(v) for v in env.agent_pos)
  if getattr(env, "obj", None) is not None:  # KeyCorridor: hold the ball.
    goal = xgoals.AgentHoldGoal(tile=jnp.asarray(
        _xmg_cell(env.obj), jnp.uint8)).encode()
  else:
    goal = template.goal_encoding
  agent = template.agent.replace(
      position=jnp.asarray([y, x], jnp.int32),
      direction=jnp.asarray((env.agent_dir + 1) % 4, jnp.int32))
  return template.replace(grid=jnp.asarray(grid), agent=agent,
                          goal_encoding=jnp.asarray(goal, jnp.uint8),
                          step_num=jnp.asarray(0, jnp.int32))


@functools.lru_cache(maxsize=None)
def _compiled(env_id):
  env = xe.XMiniGrid(env_id)
  return env, jax.jit(env.reset), jax.jit(env.step)


def _step_both(env_id, farama, state, step, actions):
  """Steps MiniGrid and ours with `actions`; asserts they agree."""
  for t, action in enumerate(actions):
    obs, reward, terminated, truncated, _ = farama.step(action)
    state, ts = step(state, action)
    np.testing.assert_array_equal(ts.observation, obs["image"],
                                  err_msg=f"{env_id} step {t}")
    assert float(ts.reward) == pytest.approx(reward, abs=1e-6), t
    ended = terminated or truncated
    assert (int(ts.step_type) == LAST) == ended, t
    if ended:
      assert float(ts.discount) == (0.0 if terminated else 1.0)
      return t + 1, terminated
  return len(actions), False


@pytest.mark.parametrize("env_id", [KC, MR])
def test_steps_match_minigrid_on_its_levels(env_id):
  # MiniGrid's own levels, stepped by both: random actions biased towards
  # moving, opening doors and picking up, until the time limit.
  env, reset, step = _compiled(env_id)
  template, _ = reset(jax.random.PRNGKey(0))
  rng = np.random.default_rng(0)
  farama = _farama(env_id)
  steps = 0
  for seed in range(4):
    obs, _ = farama.reset(seed=seed)
    state = template._replace(level=_level_of(farama, template.level))
    ts_obs = xe.egocentric_view(
        state.level.grid, state.level.agent.position,
        state.level.agent.direction, state.level.agent.pocket, False)
    np.testing.assert_array_equal(ts_obs, obs["image"])
    actions = rng.choice([LEFT, RIGHT, FORWARD, FORWARD, FORWARD, PICKUP,
                          DROP, TOGGLE, DONE], size=env.max_episode_steps)
    n, _ = _step_both(env_id, farama, state, step, actions)
    steps += n
  assert steps > 4 * 100


def _at_the_ball(farama, seed, carrying=None):
  """MiniGrid's level `seed`, its agent in the opened doorway facing the ball.

  In KeyCorridorS3R3 the ball's room is one cell; the locked door left of
  it is unlocked and opened, the agent put on it, facing right.
  """
  farama.reset(seed=seed)
  u = farama.unwrapped
  ball = tuple(int(v) for v in u.obj.cur_pos)
  door = u.grid.get(ball[0] - 1, ball[1])
  assert door.type == "door" and door.is_locked
  door.is_locked, door.is_open = False, True
  u.agent_pos, u.agent_dir = (ball[0] - 1, ball[1]), 0
  u.carrying = carrying
  return u


def test_key_corridor_pickup_terminates_as_minigrid():
  # Picking up the ball ends the episode with MiniGrid's reward; carrying
  # the key forbids it until the key is dropped.
  env, reset, step = _compiled(KC)
  template, _ = reset(jax.random.PRNGKey(0))
  farama = _farama(KC)
  for seed in range(3):
    _at_the_ball(farama, seed)
    state = template._replace(level=_level_of(farama, template.level))
    n, terminated = _step_both(KC, farama, state, step,
                               [LEFT, RIGHT, DONE, PICKUP])
    assert terminated and n == 4
  u = _at_the_ball(farama, 5)
  colour = mg_constants.COLOR_TO_IDX[u.grid.get(*u.agent_pos).color]
  u.carrying = mg_objects.Key(u.grid.get(*u.agent_pos).color)
  level = _level_of(farama, template.level)
  level = level.replace(agent=level.agent.replace(pocket=jnp.asarray(
      [xc.Tiles.KEY, colour + 1], jnp.uint8)))
  state = template._replace(level=level)
  n, terminated = _step_both(
      KC, farama, state, step,
      [PICKUP, LEFT, LEFT, DROP, RIGHT, RIGHT, PICKUP])
  assert terminated and n == 7  # Dropped the key in the corridor first.
  assert env.max_episode_steps == 270


def _key_corridor_features(grid, x, y, direction):
  """Layout statistics of a KeyCorridorS3R3 level (MiniGrid codes)."""
  tiles = grid[..., 0]
  ball_y = int(np.argwhere(tiles == xc.Tiles.BALL)[0][0])
  key_y = int(np.argwhere(tiles == xc.Tiles.KEY)[0][0])
  doors = int((tiles == xc.Tiles.DOOR_CLOSED).sum())
  return {"ball_row": ball_y, "key_row": key_y, "doors": doors,
          "agent": (x, y, direction)}


def _multi_room_features(grid, x, y, direction):
  tiles = grid[..., 0]
  walls = np.argwhere(tiles == xc.Tiles.WALL)
  goal = np.argwhere(tiles == xc.Tiles.GOAL)[0]
  return {"walls": len(walls), "min_x": walls[:, 1].min(),
          "max_y": walls[:, 0].max(), "span_x": np.ptp(walls[:, 1]),
          "goal_distance": abs(goal[0] - y) + abs(goal[1] - x),
          "doors": int((tiles == xc.Tiles.DOOR_CLOSED).sum()),
          "direction": direction}


def _samples(env_id, features, n):
  """n levels' features from MiniGrid's generator and from ours."""
  farama = _farama(env_id)
  ours_env = xe.XMiniGrid(env_id)
  theirs = []
  for seed in range(n):
    farama.reset(seed=seed)
    u = farama.unwrapped
    grid = np.array([[_xmg_cell(u.grid.get(i, j)) for i in range(u.width)]
                     for j in range(u.height)])
    theirs.append(features(grid, int(u.agent_pos[0]), int(u.agent_pos[1]),
                           int(u.agent_dir)))
  keys = jax.random.split(jax.random.PRNGKey(7), n)
  states, _ = jax.jit(jax.vmap(ours_env.reset))(keys)
  levels = jax.device_get(states.level)
  ours = []
  for k in range(n):
    y, x = levels.agent.position[k]
    ours.append(features(levels.grid[k], int(x), int(y),
                         (int(levels.agent.direction[k]) + 3) % 4))
  return theirs, ours


def _same_categorical(a, b, name):
  values = sorted(set(a) | set(b))
  table = np.array([[a.count(v) for v in values],
                    [b.count(v) for v in values]])
  table = table[:, table.sum(0) > 0]
  if table.shape[1] < 2:
    assert a == b, name
    return
  p = scipy_stats.chi2_contingency(table).pvalue
  assert p > 1e-3, (name, table)


def test_key_corridor_layouts_match_minigrid():
  theirs, ours = _samples(KC, _key_corridor_features, 400)
  for name in ("ball_row", "key_row", "doors", "agent"):
    _same_categorical([t[name] for t in theirs], [o[name] for o in ours],
                      name)
  # The agent starts on one of the corridor's three middle cells, never
  # facing the locked door (MiniGrid's place_agent runs before the other
  # doors are added).
  assert {o["agent"][:2] for o in ours} == {(3, 2), (3, 3), (3, 4)}
  faced = [o for o in ours if o["agent"] == (3, 3, 0) and o["ball_row"] == 3]
  assert not faced
  assert any(o["ball_row"] == 3 for o in ours)


def _walls_of(top, size):
  """(wall index, (x, y)) of the cells off the corners of a room's walls."""
  (x0, y0), (w, h) = top, size
  x1, y1 = x0 + w - 1, y0 + h - 1
  cells = {}
  for y in range(y0 + 1, y1):
    cells[(x1, y)], cells[(x0, y)] = 0, 2
  for x in range(x0 + 1, x1):
    cells[(x, y1)], cells[(x, y0)] = 1, 3
  return cells


def _check_chain(tops, sizes, entries, max_size, width=25, height=25):
  """MiniGrid's `_placeRoom` rules on one chain; returns its exit walls."""
  n = len(tops)
  assert tuple(tops[0]) == tuple(entries[0])
  assert 0 <= tops[0][0] < width - 2 and 0 <= tops[0][1] < width - 2
  exits, entry_wall = [], 2
  for r in range(n):
    (x, y), (w, h) = tops[r], sizes[r]
    assert 4 <= w <= max_size and 4 <= h <= max_size
    assert x >= 0 and y >= 0 and x + w <= width and y + h < height
    for q in range(r - 1):  # Every earlier room but the previous one.
      (qx, qy), (qw, qh) = tops[q], sizes[q]
      assert (x + w < qx or qx + qw <= x or y + h < qy or qy + qh <= y), (
          r, q)
    if r == 0:
      continue
    door = tuple(entries[r])
    exit_wall = _walls_of(tops[r - 1], sizes[r - 1]).get(door)
    assert exit_wall is not None and exit_wall != entry_wall, r
    entry_wall = _walls_of(tops[r], sizes[r]).get(door)
    assert entry_wall == (exit_wall + 2) % 4, r
    exits.append(exit_wall)
  return exits


def test_multi_room_chains_follow_minigrid_rules():
  # Our chains (MiniGrid's checks written out) and MiniGrid's own, whose
  # room statistics must match ours.
  n = 300
  rooms = jax.device_get(jax.jit(jax.vmap(
      lambda k: xl.multi_room_layout(k, 6, 10)))(
          jax.random.split(jax.random.PRNGKey(5), n)))
  farama = _farama(MR)
  theirs = {"exit": [], "w": [], "h": [], "x0": [], "y0": []}
  ours = {"exit": [], "w": [], "h": [], "x0": [], "y0": []}
  for seed in range(n):
    farama.reset(seed=seed)
    chain = farama.unwrapped.rooms
    tops = [tuple(int(v) for v in c.top) for c in chain]
    sizes = [tuple(int(v) for v in c.size) for c in chain]
    entries = [tuple(int(v) for v in c.entryDoorPos) for c in chain]
    for stats, (t, s, e) in ((theirs, (tops, sizes, entries)),
                             (ours, (rooms.tops[seed], rooms.sizes[seed],
                                     rooms.entries[seed]))):
      stats["exit"] += _check_chain(t, s, e, 10)
      stats["w"] += [int(v[0]) for v in s]
      stats["h"] += [int(v[1]) for v in s]
      stats["x0"].append(int(t[0][0]))
      stats["y0"].append(int(t[0][1]))
  _same_categorical(theirs["exit"], ours["exit"], "exit walls")
  for name in ("w", "h", "x0", "y0"):
    p = scipy_stats.ks_2samp(theirs[name], ours[name]).pvalue
    assert p > 1e-3, (name, p)


def test_multi_room_layouts_match_minigrid():
  theirs, ours = _samples(MR, _multi_room_features, 300)
  assert all(o["doors"] == 5 for o in ours + theirs)
  for name in ("walls", "min_x", "max_y", "span_x", "goal_distance"):
    p = scipy_stats.ks_2samp([t[name] for t in theirs],
                             [o[name] for o in ours]).pvalue
    assert p > 1e-3, (name, p)
  _same_categorical([t["direction"] for t in theirs],
                    [o["direction"] for o in ours], "direction")


def _reachable(tiles, start, passable):
  """Cells reachable from start (row, col) through `passable` tiles."""
  seen, stack = {start}, [start]
  while stack:
    r, c = stack.pop()
    for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0)):
      n = (r + dr, c + dc)
      if (0 <= n[0] < tiles.shape[0] and 0 <= n[1] < tiles.shape[1]
          and n not in seen and tiles[n] in passable):
        seen.add(n)
        stack.append(n)
  return seen


@pytest.mark.parametrize("env_id", [
    KC, pytest.param("MiniGrid-KeyCorridorS4R3-v0", marks=pytest.mark.slow),
    MR, pytest.param("MiniGrid-MultiRoom-N2-S4-v0", marks=pytest.mark.slow)])
def test_levels_are_solvable(env_id):
  # Every level: the key is reachable without crossing the locked door and
  # the ball behind it (KeyCorridor); the goal through the doors
  # (MultiRoom); closed doors only where rooms meet.
  env = xe.XMiniGrid(env_id)
  states, _ = jax.jit(jax.vmap(env.reset))(
      jax.random.split(jax.random.PRNGKey(3), 64))
  levels = jax.device_get(states.level)
  t = xc.Tiles
  for k in range(64):
    tiles = levels.grid[k][..., 0]
    start = tuple(int(v) for v in levels.agent.position[k])
    assert tiles[start] == t.FLOOR
    floor = {t.FLOOR, t.DOOR_CLOSED}
    if env_id.startswith("MiniGrid-KeyCorridor"):
      before = _reachable(tiles, start, floor | {t.KEY})
      key = tuple(np.argwhere(tiles == t.KEY)[0])
      ball = tuple(np.argwhere(tiles == t.BALL)[0])
      assert key in before and ball not in before
      after = _reachable(tiles, start, floor | {t.KEY, t.DOOR_LOCKED, t.BALL})
      assert ball in after
      assert (tiles == t.DOOR_LOCKED).sum() == 1
      assert len(after) == (tiles != t.WALL).sum()  # Every room connected.
    else:
      goal = tuple(np.argwhere(tiles == t.GOAL)[0])
      assert goal in _reachable(tiles, start, floor | {t.GOAL})


def test_specs_time_limits_and_ids():
  for env_id, limit, shape in ((KC, 270, (7, 7)), (MR, 120, (25, 25)),
                               ("MiniGrid-KeyCorridorS6R3-v0", 1080,
                                (16, 16))):
    env = xe.XMiniGrid(env_id)
    assert env.env_id in xe.xminigrid_ids()
    assert env.max_episode_steps == limit
    assert env.grid_shape == shape
    assert not env.see_through_walls
  envpool = pytest.importorskip("envpool")
  for env_id in (KC, MR, "MiniGrid-MultiRoom-N2-S4-v0"):
    assert (xe.XMiniGrid(env_id).max_episode_steps
            == envpool.make_spec(env_id).config.max_episode_steps)
  with pytest.raises(ValueError, match="MultiRoom-N6"):
    xe.XMiniGrid("MiniGrid-MultiRoom-N4-S5-v0")


@pytest.mark.parametrize("jit", [pytest.param(False, marks=pytest.mark.slow),
                                 True])
def test_generators_jit_and_keys(jit):
  gen = functools.partial(xl.key_corridor, room_size=3, num_rows=3)
  gen = jax.jit(gen) if jit else gen
  a, b = gen(jax.random.PRNGKey(0)), gen(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(a.grid, b.grid)
  grids = {np.asarray(gen(jax.random.PRNGKey(i)).grid).tobytes()
           for i in range(6)}
  assert len(grids) > 1
  mr = jax.jit(functools.partial(xl.multi_room, num_rooms=2,
                                 max_room_size=4)) if jit else (
      functools.partial(xl.multi_room, num_rooms=2, max_room_size=4))
  level = mr(jax.random.PRNGKey(1))
  assert level.grid.shape == (25, 25, 2) and level.grid.dtype == jnp.uint8


def test_conformance_key_corridor():
  make = lambda: functional.FunctionalBatchedEnv(xe.XMiniGrid(KC), 4, seed=2)
  env, twin = make(), make()
  conformance.check_batched_env(env, 30, np.random.default_rng(0), twin=twin,
                                max_episode_steps=270)
  conformance.check_rejects_bad_actions(env)
  assert isinstance(env.observation_spec(), base.BoundedArray)
