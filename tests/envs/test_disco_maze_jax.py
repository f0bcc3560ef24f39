"""Tests for ngu_jax.envs.disco_maze_jax (Random Disco Maze in JAX, Sec. 4.1)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.envs import base
from ngu_jax.envs import disco_maze
from ngu_jax.envs import disco_maze_jax
from tests.envs.test_disco_maze import _assert_perfect

FIRST, MID, LAST = (int(base.StepType.FIRST), int(base.StepType.MID),
                    int(base.StepType.LAST))
GREEN = np.array([0, 255, 0], np.uint8)
_MOVES = disco_maze._MOVES  # pylint: disable=protected-access

# A perfect 5x5 maze (n = 2: 4 cells, 3 passages, 7 free cells).
_SMALL = np.array([[1, 1, 1, 1, 1],
                   [1, 0, 0, 0, 1],
                   [1, 1, 1, 0, 1],
                   [1, 0, 0, 0, 1],
                   [1, 1, 1, 1, 1]], bool)


def _codes(obs):
  """0 pathway (black), 1 wall (any other colour), 2 agent (green)."""
  obs = np.asarray(obs)
  black = (obs == 0).all(-1)
  green = (obs == GREEN).all(-1)
  return np.where(black, 0, np.where(green, 2, 1))


def _assert_colours(obs, walls, position):
  """Walls in WALL_COLOURS, pathways black, the agent green."""
  obs = np.asarray(obs)
  r, c = int(position[0]), int(position[1])
  np.testing.assert_array_equal(obs[r, c], GREEN)
  mask = np.ones(walls.shape, bool)
  mask[r, c] = False
  wall_px = obs[walls & mask]
  assert (wall_px[:, None, :] == disco_maze.WALL_COLOURS[None]).all(-1).any(
      -1).all()
  assert (obs[~walls & mask] == 0).all()


# Mazes per size drawn by the tests (one compilation per size).
_NUM_MAZES = {21: 300, 5: 2100}


@functools.lru_cache(maxsize=None)
def _mazes(size):
  env = disco_maze_jax.DiscoMazeJax(size=size)
  keys = jax.random.split(jax.random.key(size), _NUM_MAZES[size])
  walls, start = jax.jit(jax.vmap(env.generate_maze))(keys)
  return np.asarray(walls), np.asarray(start)


@functools.lru_cache(maxsize=None)
def _env_and_step(size, limit):
  """An environment and its jitted step, shared by the tests."""
  env = disco_maze_jax.DiscoMazeJax(size=size, max_episode_steps=limit)
  return env, jax.jit(env.step)


@pytest.mark.parametrize("size", [21, 5])
def test_every_maze_is_perfect(size):
  walls, start = _mazes(size)
  walls, start = walls[:50], start[:50]
  for w, s in zip(walls, start):
    _assert_perfect(w, s)
  assert len({w.tobytes() for w in walls}) > {21: 45, 5: 1}[size]


def _dead_ends(walls):
  """Free cells with exactly one free neighbour, per maze, int [K]."""
  free = ~walls
  p = np.pad(free, ((0, 0), (1, 1), (1, 1)))
  nbrs = (p[:, :-2, 1:-1].astype(int) + p[:, 2:, 1:-1] + p[:, 1:-1, :-2]
          + p[:, 1:-1, 2:])
  return (free & (nbrs == 1)).sum(axis=(1, 2))


def test_maze_statistics_match_numpy_backtracker():
  # A recursive backtracker makes long corridors with few dead ends (about
  # 10 of 100 cells at 21x21), unlike uniform spanning trees (about 30);
  # the two generators must agree.
  walls, _ = _mazes(21)
  np_walls, _ = disco_maze.generate_mazes(np.random.default_rng(1), 300, 21)
  ours, theirs = _dead_ends(walls), _dead_ends(np_walls)
  # Standard error of each mean is ~0.15.
  assert abs(ours.mean() - theirs.mean()) < 0.8, (ours.mean(), theirs.mean())
  assert abs(ours.std() - theirs.std()) < 0.8, (ours.std(), theirs.std())


def test_start_cell_is_uniform_over_free_cells():
  walls, start = _mazes(5)
  # Rank of the start among its maze's free cells (row-major): uniform over 7.
  flat = start[:, 0] * 5 + start[:, 1]
  free = ~walls.reshape(-1, 25)
  assert free[np.arange(len(flat)), flat].all()
  rank = np.array([f[:i].sum() for f, i in zip(free, flat)])
  counts = np.bincount(rank, minlength=7)
  assert counts.min() > 230 and counts.max() < 370, counts


def test_hand_checked_episode_on_a_given_maze():
  env, step = _env_and_step(5, 9)
  reset_with_maze = jax.jit(env.reset_with_maze)
  state, ts = reset_with_maze(jax.random.key(0), _SMALL, np.array([1, 1]))
  assert int(ts.step_type) == FIRST
  assert float(ts.reward) == 0 and float(ts.discount) == 1
  assert ts.observation.shape == (5, 5, 3) and ts.observation.dtype == np.uint8
  _assert_colours(ts.observation, _SMALL, (1, 1))
  np.testing.assert_array_equal(ts.extras["position"], [1, 1])
  assert ts.extras["position"].dtype == jnp.int32
  assert ts.extras["coverage"].dtype == jnp.float32
  assert float(ts.extras["coverage"]) == np.float32(1 / 7)
  # right, right, down, down, left, left (back to (3, 1)), right, up (wall).
  path = [(3, (1, 2)), (3, (1, 3)), (1, (2, 3)), (1, (3, 3)), (2, (3, 2)),
          (2, (3, 1)), (3, (3, 2))]
  expected_coverage = [2, 3, 4, 5, 6, 7, 7]
  previous = ts.observation
  for (action, pos), cov in zip(path, expected_coverage):
    state, ts = step(state, jnp.int32(action))
    assert int(ts.step_type) == MID and float(ts.discount) == 1
    assert float(ts.reward) == 0
    np.testing.assert_array_equal(ts.extras["position"], pos)
    assert float(ts.extras["coverage"]) == np.float32(cov / 7)
    _assert_colours(ts.observation, _SMALL, pos)
    assert (np.asarray(ts.observation) != np.asarray(previous)).any()
    previous = ts.observation
  state, ts = step(state, jnp.int32(0))  # Up from (3, 2) into (2, 2): wall.
  assert int(ts.step_type) == LAST and float(ts.discount) == 0
  np.testing.assert_array_equal(ts.extras["position"], [2, 2])
  assert _codes(ts.observation)[2, 2] == 2  # The agent drawn on the wall.
  assert float(ts.extras["coverage"]) == 1.0  # The wall cell not counted.
  state, ts = step(state, jnp.int32(0))  # Ignored: a fresh maze.
  assert int(ts.step_type) == FIRST and float(ts.discount) == 1
  walls = np.asarray(state.walls)
  _assert_perfect(walls, ts.extras["position"])
  _assert_colours(ts.observation, walls, ts.extras["position"])
  assert float(ts.extras["coverage"]) == np.float32(1 / 7)


def test_truncation_and_termination_on_the_last_step():
  env, step = _env_and_step(5, 9)
  start = np.array([1, 1])
  state, _ = env.reset_with_maze(jax.random.key(0), _SMALL, start)
  for t in range(1, 10):  # right, left, ..., right.
    state, ts = step(state, jnp.int32(3 if t % 2 else 2))
    assert int(ts.step_type) == (LAST if t == 9 else MID)
  assert float(ts.discount) == 1
  np.testing.assert_array_equal(ts.extras["position"], [1, 2])
  assert float(ts.extras["coverage"]) == np.float32(2 / 7)
  state, ts = step(state, jnp.int32(3))
  assert int(ts.step_type) == FIRST
  # A wall hit on the last allowed step is a termination.
  state, _ = env.reset_with_maze(jax.random.key(0), _SMALL, start)
  for t in range(1, 10):  # right, left, ..., right, up (wall).
    state, ts = step(state, jnp.int32(0 if t == 9 else 3 if t % 2 else 2))
  assert int(ts.step_type) == LAST and float(ts.discount) == 0
  np.testing.assert_array_equal(ts.extras["position"], [0, 1])


def test_unjitted_matches_jitted():
  env, jitted_step = _env_and_step(5, 9)
  key, start = jax.random.key(1), np.array([3, 3])
  outs = []
  for reset_with_maze, step in ((env.reset_with_maze, env.step),
                                (jax.jit(env.reset_with_maze),
                                 jitted_step)):
    state, ts0 = reset_with_maze(key, _SMALL, start)
    _, ts1 = step(state, jnp.int32(2))  # Left: MID on (3, 2).
    outs.append(jax.tree.leaves((ts0, ts1)))
  assert int(outs[0][6]) == MID  # ts1.step_type.
  for x, y in zip(*outs):
    np.testing.assert_array_equal(x, y)


def _inject(np_env, walls, start):
  """Makes `np_env`'s next new episode use this maze and start cell."""
  state = np_env.get_state()
  state["pool_walls"] = np.asarray(walls, bool)[None]
  state["pool_start"] = np.asarray(start, np.int32)[None]
  np_env.set_state(state)


@pytest.mark.parametrize("size,limit,seed", [(21, 12, 0), (7, 5, 1)])
def test_matches_numpy_disco_maze(size, limit, seed):
  """Same mazes (the JAX env's, injected into numpy's): same timesteps."""
  env, step = _env_and_step(size, limit)
  np_env = disco_maze.DiscoMaze(1, seed=seed, max_episode_steps=limit,
                                size=size)
  tracker = disco_maze.CoverageTracker(1, size)
  rng = np.random.default_rng(seed)
  state, ts = jax.jit(env.reset)(jax.random.key(seed))
  _inject(np_env, state.walls, state.position)
  nts = np_env.reset()
  counts = {"terminated": 0, "truncated": 0}
  for t in range(300):
    np.testing.assert_array_equal(nts.step_type, [int(ts.step_type)])
    np.testing.assert_array_equal(nts.reward, [float(ts.reward)])
    np.testing.assert_array_equal(nts.discount, [float(ts.discount)])
    np.testing.assert_array_equal(nts.extras["position"],
                                  [np.asarray(ts.extras["position"])])
    np.testing.assert_array_equal(_codes(nts.observation[0]),
                                  _codes(ts.observation), err_msg=f"{t}")
    np.testing.assert_array_equal(np_env.walls()[0], state.walls)
    np.testing.assert_array_equal(tracker.update(nts),
                                  [np.asarray(ts.extras["coverage"])])
    _assert_colours(ts.observation, np.asarray(state.walls),
                    ts.extras["position"])
    if int(ts.step_type) == LAST:
      counts["terminated" if float(ts.discount) == 0 else "truncated"] += 1
    # Mostly moves to free cells (long episodes reach the time limit).
    walls, (r, c) = np.asarray(state.walls), np.asarray(state.position)
    free = [a for a, (dr, dc) in enumerate(_MOVES)
            if 0 <= r + dr < size and 0 <= c + dc < size
            and not walls[r + dr, c + dc]]
    action = (rng.choice(free) if free and rng.random() < 0.85
              else rng.integers(4))
    restart = bool(state.last)
    state, ts = step(state, jnp.int32(action))
    if restart:
      _inject(np_env, state.walls, state.position)
    nts = np_env.step(np.array([action], np.int32))
  assert counts["terminated"] >= 5 and counts["truncated"] >= 5, counts


def test_vmapped_scan_matches_lane_by_lane_and_is_deterministic():
  env, step = _env_and_step(7, 5)
  num_lanes, num_steps = 6, 20
  keys = jax.random.split(jax.random.key(3), num_lanes)
  actions = jax.random.randint(jax.random.key(4), (num_steps, num_lanes), 0,
                               4)

  @jax.jit
  def run(keys, actions):
    state, ts0 = jax.vmap(env.reset)(keys)

    def body(state, a):
      state, ts = jax.vmap(env.step)(state, a)
      return state, ts

    _, ts = jax.lax.scan(body, state, actions)
    return ts0, ts

  ts0, ts = run(keys, actions)
  ts0_again, ts_again = run(keys, actions)
  for x, y in zip(jax.tree.leaves((ts0, ts)),
                  jax.tree.leaves((ts0_again, ts_again))):
    np.testing.assert_array_equal(x, y)
  assert (np.asarray(ts.step_type) == FIRST).sum() > 10  # Many restarts.
  reset = jax.jit(env.reset)
  for lane in (0, num_lanes - 1):
    state, t0 = reset(keys[lane])
    np.testing.assert_array_equal(t0.observation, ts0.observation[lane])
    for t in range(num_steps):
      state, one = step(state, actions[t, lane])
      for x, y in zip(jax.tree.leaves(one),
                      jax.tree.leaves(jax.tree.map(lambda v: v[t, lane],
                                                   ts))):
        np.testing.assert_array_equal(x, y)
  # Another key, other mazes.
  other0, _ = run(jax.random.split(jax.random.key(5), num_lanes), actions)
  assert (np.asarray(other0.observation) != np.asarray(ts0.observation)).any()


def test_specs_and_constructor_checks():
  env = disco_maze_jax.DiscoMazeJax()
  assert env.grid_shape == (21, 21) and env.max_episode_steps == 1000
  assert env.num_actions == 4 and env.num_free_cells == 199
  spec = env.observation_spec()
  assert spec.shape == (21, 21, 3) and spec.dtype == np.uint8
  assert env.observation_encoding() == disco_maze.DiscoMaze(
      1).observation_encoding()
  state, ts = jax.eval_shape(env.reset, jax.random.key(0))
  _, ts2 = jax.eval_shape(env.step, state, jnp.int32(0))
  assert jax.tree.structure(ts) == jax.tree.structure(ts2)
  for x, y in zip(jax.tree.leaves(ts), jax.tree.leaves(ts2)):
    assert x.shape == y.shape and x.dtype == y.dtype
  assert ts.step_type.dtype == jnp.int32 and ts.reward.dtype == jnp.float32
  assert sorted(ts.extras) == ["coverage", "position"]
  with pytest.raises(ValueError, match="size"):
    disco_maze_jax.DiscoMazeJax(size=8)
  with pytest.raises(ValueError, match="max_episode_steps"):
    disco_maze_jax.DiscoMazeJax(max_episode_steps=0)


def test_lanes_declare_a_host_coverage_tracker():
  """B lanes of the functional maze (`FunctionalBatchedEnv`) declare the
  host `CoverageTracker`; it reproduces the `coverage` extra every step."""
  from ngu_jax.envs import functional  # pylint: disable=g-import-not-at-top
  env = functional.FunctionalBatchedEnv(
      disco_maze_jax.DiscoMazeJax(size=7, max_episode_steps=6), 3, seed=1)
  tracker = env.make_coverage_tracker()
  assert isinstance(tracker, disco_maze.CoverageTracker)
  assert tracker.size == 7
  timestep = env.reset()
  rng = np.random.default_rng(0)
  for _ in range(15):
    np.testing.assert_array_equal(tracker.update(timestep),
                                  timestep.extras["coverage"])
    timestep = env.step(rng.integers(0, 4, 3))
