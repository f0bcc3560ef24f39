"""Tests for ngu_jax.envs.xminigrid_env: MiniGrid tasks through xminigrid.

Independent references: a literal numpy port of MiniGrid's `gen_obs`
(minigrid/core/grid.py `slice`, `rotate_left`, `process_vis`, `encode`;
minigrid/minigrid_env.py `get_view_exts`, `gen_obs_grid`) and, where
installed, envpool's MiniGrid (same codes, layout, reward and time limits).
"""

import functools
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

xminigrid = pytest.importorskip("xminigrid")

# pylint: disable=g-import-not-at-top,wrong-import-position
from xminigrid.core import constants as xc
from xminigrid.core import goals as xgoals
from xminigrid.core import grid as xgrid
from xminigrid.core import rules as xrules

from ngu_jax.envs import base
from ngu_jax.envs import functional
from ngu_jax.envs import xminigrid_env as xe
from ngu_jax.envs import xminigrid_levels as xl
from tests.envs import conformance
# pylint: enable=g-import-not-at-top,wrong-import-position

FIRST, MID, LAST = 0, 1, 2
WALL = (2, 5, 0)        # MiniGrid Wall(): grey.
EMPTY = (1, 0, 0)       # MiniGrid's encoding of an empty cell.
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)


# --- numpy port of MiniGrid's partial view (the reference) -----------------

def _see_behind(code):
  obj, _, state = code
  if obj == 2:  # Wall.
    return False
  if obj == 4:  # Door: only an open one.
    return state == 0
  return True


def _process_vis(g, agent_pos):
  """minigrid Grid.process_vis on codes g[x, y]."""
  w, h = g.shape[:2]
  mask = np.zeros((w, h), bool)
  mask[agent_pos] = True
  for j in reversed(range(h)):
    for i in range(w - 1):
      if not mask[i, j] or not _see_behind(g[i, j]):
        continue
      mask[i + 1, j] = True
      if j > 0:
        mask[i + 1, j - 1] = True
        mask[i, j - 1] = True
    for i in reversed(range(1, w)):
      if not mask[i, j] or not _see_behind(g[i, j]):
        continue
      mask[i - 1, j] = True
      if j > 0:
        mask[i - 1, j - 1] = True
        mask[i, j - 1] = True
  return mask


def _minigrid_obs(world, ax, ay, direction, carrying, see_through, v=7):
  """MiniGrid gen_obs()["image"]: world codes [W, H, 3] indexed [x, y]."""
  w, h = world.shape[:2]
  top = {0: (ax, ay - v // 2), 1: (ax - v // 2, ay),
         2: (ax - v + 1, ay - v // 2), 3: (ax - v // 2, ay - v + 1)}
  tx, ty = top[direction]
  g = np.zeros((v, v, 3), np.uint8)
  for j in range(v):
    for i in range(v):
      x, y = tx + i, ty + j
      g[i, j] = world[x, y] if 0 <= x < w and 0 <= y < h else WALL
  for _ in range(direction + 1):  # Grid.rotate_left.
    new = np.zeros_like(g)
    for i in range(v):
      for j in range(v):
        new[j, v - 1 - i] = g[i, j]
    g = new
  if see_through:
    mask = np.ones((v, v), bool)
  else:
    mask = _process_vis(g, (v // 2, v - 1))
  g[v // 2, v - 1] = EMPTY if carrying is None else carrying
  return np.where(mask[..., None], g, 0).astype(np.uint8)


def _reference_obs(level, see_through):
  """The reference view of an xminigrid level (codes via the table)."""
  grid = np.asarray(level.grid)
  world = xe._CODES[grid[..., 0], grid[..., 1]].transpose(1, 0, 2)
  row, col = np.asarray(level.agent.position)
  pocket = np.asarray(level.agent.pocket)
  carrying = (None if pocket[0] == xc.Tiles.EMPTY
              else xe._CODES[pocket[0], pocket[1]])
  direction = (int(level.agent.direction) + 3) % 4  # MiniGrid's.
  return _minigrid_obs(world, col, row, direction, carrying, see_through)


@functools.lru_cache(maxsize=None)
def _compiled(env_id, limit=None):
  """(env, jit(reset), jit(step), jit(vmap(reset))), shared by the tests."""
  env = xe.XMiniGrid(env_id, max_episode_steps=limit)
  return (env, jax.jit(env.reset), jax.jit(env.step),
          jax.jit(jax.vmap(env.reset)))


# --- tests -------------------------------------------------------------------

def test_ids_and_bad_input():
  ids = xe.xminigrid_ids()
  for env_id in ("MiniGrid-DoorKey-8x8-v0", "MiniGrid-DoorKey-16x16-v0",
                 "MiniGrid-FourRooms-v0", "MiniGrid-Empty-8x8-v0"):
    assert env_id in ids
  with pytest.raises(ValueError, match="known ids: .*MiniGrid-DoorKey-8x8"):
    xe.XMiniGrid("MiniGrid-Nope-v0")
  with pytest.raises(ValueError, match="max_episode_steps"):
    xe.XMiniGrid("MiniGrid-FourRooms-v0", max_episode_steps=0)


def test_specs_and_time_limits():
  limits = {"MiniGrid-DoorKey-8x8-v0": 640, "MiniGrid-DoorKey-16x16-v0": 2560,
            "MiniGrid-FourRooms-v0": 100, "MiniGrid-Empty-8x8-v0": 256,
            "MiniGrid-Empty-Random-5x5-v0": 100}
  for env_id, limit in limits.items():
    env = xe.XMiniGrid(env_id)
    assert env.max_episode_steps == limit, env_id
    assert env.num_actions == 7
    assert env.observation_spec().shape == (7, 7, 3)
    assert env.observation_spec().dtype == np.uint8
    assert env.observation_encoding().num_values == (11, 6, 3)
  assert xe.XMiniGrid("MiniGrid-DoorKey-8x8-v0").grid_shape == (8, 8)
  assert xe.XMiniGrid("MiniGrid-FourRooms-v0").grid_shape == (19, 19)
  assert xe.XMiniGrid("MiniGrid-FourRooms-v0",
                      max_episode_steps=7).max_episode_steps == 7
  assert not xe.XMiniGrid("MiniGrid-DoorKey-8x8-v0").see_through_walls
  assert xe.XMiniGrid("MiniGrid-Empty-8x8-v0").see_through_walls


def test_time_limits_match_envpool():
  envpool = pytest.importorskip("envpool")
  minigrid = pytest.importorskip("ngu_jax.envs.minigrid")
  assert xe.MINIGRID_NUM_VALUES == minigrid.MINIGRID_NUM_VALUES
  for env_id in xe.xminigrid_ids():
    assert (xe.XMiniGrid(env_id).max_episode_steps
            == envpool.make_spec(env_id).config.max_episode_steps), env_id


def test_tasks_are_goal_reaching_without_rules():
  # The step evaluates neither xminigrid's rules nor its goal encoding: the
  # generators of all xminigrid's ids set these module constants (xminigrid
  # envs/minigrid/{doorkey,empty,fourrooms}.py `_generate_problem`); ours
  # (xminigrid_levels) set the same, or KeyCorridor's "hold the ball".
  goal = np.asarray(xgoals.AgentOnTileGoal(
      tile=xc.TILES_REGISTRY[xc.Tiles.GOAL, xc.Colors.GREEN]).encode())
  rule = np.asarray(xrules.EmptyRule().encode())
  for env_id, (xmg_id, _) in xe._TASKS.items():  # pylint: disable=protected-access
    generator, _ = xminigrid.make(xmg_id)
    module = importlib.import_module(type(generator).__module__)
    np.testing.assert_array_equal(module._goal_encoding, goal, err_msg=env_id)
    np.testing.assert_array_equal(module._rule_encoding, rule[None])
  state, _ = _compiled("MiniGrid-DoorKey-8x8-v0")[1](jax.random.PRNGKey(0))
  np.testing.assert_array_equal(state.level.goal_encoding, goal)
  level = xl.multi_room(jax.random.PRNGKey(0), 2, 4)
  np.testing.assert_array_equal(level.goal_encoding, goal)
  np.testing.assert_array_equal(level.rule_encoding, rule[None])
  level = xl.key_corridor(jax.random.PRNGKey(0), 3, 1)
  hold = np.asarray(level.goal_encoding)
  assert hold[0] == 1 and hold[1] == xc.Tiles.BALL  # AgentHoldGoal's id 1.
  np.testing.assert_array_equal(level.rule_encoding, rule[None])


def test_code_table():
  t = xe._CODES
  T, C = xc.Tiles, xc.Colors
  assert tuple(t[T.EMPTY, C.EMPTY]) == (0, 0, 0)
  assert tuple(t[T.FLOOR, C.BLACK]) == EMPTY
  assert tuple(t[T.WALL, C.GREY]) == WALL
  assert tuple(t[T.GOAL, C.GREEN]) == (8, 1, 0)
  assert tuple(t[T.KEY, C.YELLOW]) == (5, 4, 0)
  assert tuple(t[T.DOOR_LOCKED, C.YELLOW]) == (4, 4, 2)
  assert tuple(t[T.DOOR_CLOSED, C.RED]) == (4, 0, 1)
  assert tuple(t[T.DOOR_OPEN, C.PURPLE]) == (4, 3, 0)
  assert tuple(t[T.BALL, C.BLUE]) == (6, 2, 0)
  assert (t < np.array(xe.MINIGRID_NUM_VALUES)).all()


def test_visibility_mask_matches_process_vis():
  rng = np.random.default_rng(0)
  fn = jax.jit(xe.visibility_mask)
  for _ in range(100):
    transparent = rng.random((7, 7)) < 0.7
    transparent[6, 3] = True  # The agent stands on a walkable cell.
    # Reference on codes [x, y]: wall where opaque.
    codes = np.where(transparent.T[..., None], np.array(EMPTY, np.uint8),
                     np.array(WALL, np.uint8))
    expected = _process_vis(codes, (3, 6)).T
    np.testing.assert_array_equal(fn(jnp.asarray(transparent)), expected)


def test_occlusion_hand_layout():
  # 8x8 room, a wall across row 3 with a door at column 5; a red key at
  # (row 1, col 5) and a red ball at (1, 2); the agent at (row 6, col 3)
  # faces up, so the view covers world rows 0-6 and cols 0-6 and obs[x, y]
  # is world cell (row y, col x). A closed door hides rows 0-2; an open one
  # lets MiniGrid's process_vis spread sight along the rows behind it.
  T, C, R = xc.Tiles, xc.Colors, xc.TILES_REGISTRY
  g = xgrid.room(8, 8)
  g = xgrid.horizontal_line(g, 0, 3, 8, R[T.WALL, C.GREY])
  g = g.at[1, 5].set(R[T.KEY, C.RED])
  g = g.at[1, 2].set(R[T.BALL, C.RED])
  pocket = R[T.EMPTY, C.EMPTY]
  jitted = jax.jit(xe.egocentric_view, static_argnames="see_through_walls")
  view = lambda grid, flag: np.asarray(jitted(
      grid, jnp.array([6, 3]), 0, pocket, see_through_walls=flag))
  closed = g.at[3, 5].set(R[T.DOOR_CLOSED, C.BLUE])
  obs = view(closed, False)
  assert tuple(obs[3, 6]) == EMPTY                  # Agent cell.
  assert tuple(obs[3, 3]) == WALL                   # Wall row.
  assert tuple(obs[5, 3]) == (4, 2, 1)              # Closed blue door.
  assert (obs[:, :3] == 0).all()                    # All hidden behind.
  assert (obs[1:, 4:6, 0] == 1).all()               # Floor in front.
  see = view(closed, True)                          # Seeing through walls.
  assert tuple(see[2, 1]) == (6, 0, 0) and tuple(see[5, 1]) == (5, 0, 0)
  opened = g.at[3, 5].set(R[T.DOOR_OPEN, C.BLUE])
  obs_open = view(opened, False)
  assert tuple(obs_open[5, 3]) == (4, 2, 0)         # Open blue door.
  assert tuple(obs_open[5, 1]) == (5, 0, 0)         # Key behind the door.
  assert tuple(obs_open[2, 1]) == (6, 0, 0)         # Sight spreads (MiniGrid).
  # The numpy port of MiniGrid agrees on all three.
  for grid, flag, got in ((closed, False, obs), (closed, True, see),
                          (opened, False, obs_open)):
    world = xe._CODES[np.asarray(grid)[..., 0],
                      np.asarray(grid)[..., 1]].transpose(1, 0, 2)
    np.testing.assert_array_equal(got, _minigrid_obs(world, 3, 6, 3, None,
                                                     flag))


@pytest.mark.parametrize("env_id", [
    "MiniGrid-DoorKey-8x8-v0",
    pytest.param("MiniGrid-FourRooms-v0", marks=pytest.mark.slow)])
def test_view_matches_minigrid_reference(env_id):
  # Random walks (biased to turning and moving) over 8 lanes: every
  # observation equals the numpy port of MiniGrid's gen_obs.
  env, _, _, vreset = _compiled(env_id)
  lanes, steps = 4, 12
  keys = jax.random.split(jax.random.PRNGKey(1), lanes)
  state, ts = vreset(keys)
  actions = np.random.default_rng(0).integers(0, 7, (steps, lanes))

  def body(state, action):
    state, ts = jax.vmap(env.step)(state, action)
    return state, (state.level, ts.observation)
  _, (levels, obs) = jax.jit(lambda s, a: jax.lax.scan(body, s, a))(
      state, jnp.asarray(actions, jnp.int32))
  levels, obs = jax.device_get((levels, obs))
  unseen = 0
  for t in range(steps):
    for lane in range(lanes):
      level = jax.tree_util.tree_map(lambda x: x[t, lane], levels)
      expected = _reference_obs(level, see_through=False)
      np.testing.assert_array_equal(obs[t, lane], expected,
                                    err_msg=f"step {t} lane {lane}")
      unseen += int((expected[..., 0] == 0).sum())
  assert unseen > 0  # Occlusion (or the border) hid something.


def test_matches_envpool_on_empty():
  # Empty-8x8 has a fixed start (agent at x=1, y=1 facing right), so envpool
  # (MiniGrid's C++ port) must give the very same observations, extras and
  # rewards for the same actions, up to its time limit.
  envpool = pytest.importorskip("envpool")
  env = xe.XMiniGrid("MiniGrid-Empty-8x8-v0")
  pool = envpool.make("MiniGrid-Empty-8x8-v0", env_type="gymnasium",
                      num_envs=1)
  obs, _ = pool.reset()
  state, ts = env.reset(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(ts.observation, obs["image"][0])
  step = jax.jit(env.step)
  rng = np.random.default_rng(0)
  for t in range(env.max_episode_steps):
    action = int(rng.choice([LEFT, RIGHT, FORWARD, FORWARD, DONE]))
    state, ts = step(state, action)
    obs, reward, _, _, info = pool.step(np.array([action]))
    np.testing.assert_array_equal(ts.observation, obs["image"][0],
                                  err_msg=f"step {t}")
    assert int(ts.extras["direction"]) == obs["direction"][0]
    np.testing.assert_array_equal(ts.extras["position"][::-1],
                                  info["agent_pos"][0])
    assert float(ts.reward) == pytest.approx(reward[0], abs=1e-6)
    if int(ts.step_type) == LAST:
      break
  assert int(ts.step_type) == LAST


def test_conformance_doorkey():
  make = lambda: functional.FunctionalBatchedEnv(
      xe.XMiniGrid("MiniGrid-DoorKey-8x8-v0"), 4, seed=2)
  env, twin = make(), make()
  conformance.check_batched_env(env, 60, np.random.default_rng(0), twin=twin,
                                max_episode_steps=640)
  conformance.check_rejects_bad_actions(env)


@pytest.mark.slow
def test_conformance_short_limit_ends_episodes():
  make = lambda: functional.FunctionalBatchedEnv(
      xe.XMiniGrid("MiniGrid-Empty-5x5-v0", max_episode_steps=12), 8, seed=0)
  env, twin = make(), make()
  stats = conformance.check_batched_env(env, 40, np.random.default_rng(1),
                                        twin=twin, max_episode_steps=12)
  # (Terminations: test_termination_reward_and_truncation.)
  assert stats.num_truncated > 0


def _run(step, state, actions):
  out = []
  for a in actions:
    state, ts = step(state, jnp.asarray(a, jnp.int32))
    out.append(ts)
  return state, out


def test_termination_reward_and_truncation():
  # Empty-5x5: agent at (row 1, col 1) facing right, goal at (3, 3):
  # forward, forward, right, forward, forward = 5 steps.
  plan = [FORWARD, FORWARD, RIGHT, FORWARD, FORWARD]
  for limit in (20, 5):  # On the limit's own step termination wins.
    _, reset, step, _ = _compiled("MiniGrid-Empty-5x5-v0", limit)
    state, ts = reset(jax.random.PRNGKey(0))
    state, out = _run(step, state, plan)
    assert [int(t.step_type) for t in out] == [MID] * 4 + [LAST]
    assert float(out[-1].reward) == pytest.approx(1 - 0.9 * 5 / limit)
    assert float(out[-1].discount) == 0
    assert all(float(t.reward) == 0 for t in out[:-1])
    np.testing.assert_array_equal(out[-1].extras["position"], [3, 3])
    # Auto-reset: the action is ignored, FIRST with reward 0 and discount 1.
    state, ts = step(state, jnp.asarray(FORWARD))
    assert int(ts.step_type) == FIRST
    assert float(ts.reward) == 0 and float(ts.discount) == 1
    np.testing.assert_array_equal(ts.extras["position"], [1, 1])
  # Truncation: 20 no-op "done" steps -> LAST with discount 1 and reward 0.
  _, reset, step, _ = _compiled("MiniGrid-Empty-5x5-v0", 20)
  state, first = reset(jax.random.PRNGKey(0))
  state, out = _run(step, state, [DONE] * 20)
  assert [int(t.step_type) for t in out] == [MID] * 19 + [LAST]
  assert float(out[-1].discount) == 1 and float(out[-1].reward) == 0
  for t in out:  # "done" changes nothing.
    np.testing.assert_array_equal(t.observation, first.observation)
    np.testing.assert_array_equal(t.extras["position"], [1, 1])
    assert int(t.extras["direction"]) == 0


def test_key_door_dynamics_and_carried_view():
  # Empty-5x5 level edited: a yellow key in front of the agent (row 1,
  # col 2), a locked yellow door below it (row 2, col 1).
  _, reset, step, _ = _compiled("MiniGrid-Empty-5x5-v0", 20)
  state, _ = reset(jax.random.PRNGKey(0))
  T, C, R = xc.Tiles, xc.Colors, xc.TILES_REGISTRY
  grid = state.level.grid.at[1, 2].set(R[T.KEY, C.YELLOW])
  grid = grid.at[2, 1].set(R[T.DOOR_LOCKED, C.YELLOW])
  state = state._replace(level=state.level.replace(grid=grid))
  state, (ts_toggle, ts_pick, ts_right, ts_open, ts_fwd) = _run(
      step, state, [TOGGLE, PICKUP, RIGHT, TOGGLE, FORWARD])
  assert tuple(ts_toggle.observation[3, 5]) == (5, 4, 0)  # Key ahead.
  assert tuple(ts_pick.observation[3, 6]) == (5, 4, 0)    # Carried key.
  assert tuple(ts_pick.observation[3, 5]) == EMPTY        # Picked up.
  assert tuple(ts_right.observation[3, 5]) == (4, 4, 2)   # Locked door.
  assert tuple(ts_open.observation[3, 5]) == (4, 4, 0)    # Unlocked, open.
  np.testing.assert_array_equal(ts_fwd.extras["position"], [2, 1])
  assert int(ts_fwd.extras["direction"]) == 1             # Down.


@pytest.mark.slow
def test_jit_matches_no_jit_and_determinism():
  # Un-jitted steps run op by op (slow): a few steps only.
  env = xe.XMiniGrid("MiniGrid-DoorKey-5x5-v0")
  actions = np.random.default_rng(3).integers(0, 7, 3)

  def rollout(reset, step, key):
    state, ts = reset(key)
    out = [ts]
    for a in actions:
      state, ts = step(state, jnp.asarray(a, jnp.int32))
      out.append(ts)
    return jax.device_get(out)

  key = jax.random.PRNGKey(7)
  plain = rollout(env.reset, env.step, key)
  jitted = rollout(jax.jit(env.reset), jax.jit(env.step), key)
  again = rollout(jax.jit(env.reset), jax.jit(env.step), key)
  for a, b, c in zip(plain, jitted, again):
    for x, y, z in zip(jax.tree_util.tree_leaves(a),
                       jax.tree_util.tree_leaves(b),
                       jax.tree_util.tree_leaves(c)):
      np.testing.assert_array_equal(x, y)
      np.testing.assert_array_equal(y, z)
  # Different keys draw different DoorKey layouts.
  starts = {np.asarray(jax.jit(env.reset)(jax.random.PRNGKey(k))[0]
                       .level.grid).tobytes() for k in range(8)}
  assert len(starts) > 1


def test_vmapped_lanes_equal_single_lanes():
  _, reset, _, vreset = _compiled("MiniGrid-DoorKey-8x8-v0")
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  _, ts = vreset(keys)
  for lane in range(3):
    _, single = reset(keys[lane])
    np.testing.assert_array_equal(ts.observation[lane], single.observation)
  assert ts.observation.shape == (3, 7, 7, 3)
  assert ts.extras["position"].shape == (3, 2)
  assert ts.extras["position"].dtype == jnp.int32
  assert ts.extras["direction"].shape == (3,)
  assert ts.step_type.dtype == jnp.int32
  assert base.TimeStep is type(ts)
