"""Tests for ngu_jax.envs.noisy_grid (fixed maze, controlled noise)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import envs
from ngu_jax.envs import base
from ngu_jax.envs import disco_maze
from ngu_jax.envs import functional
from ngu_jax.envs import noisy_grid
from tests.envs import conformance
from tests.envs.test_disco_maze import _assert_perfect

FIRST, MID, LAST = (int(base.StepType.FIRST), int(base.StepType.MID),
                    int(base.StepType.LAST))
GREEN = np.array([0, 255, 0], np.uint8)
WHITE = np.array([255, 255, 255], np.uint8)
# (d_row, d_col) of actions 0 up, 1 down, 2 left, 3 right; 4 (tv) stays.
MOVES = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1), 4: (0, 0)}

# A perfect 5x5 maze (n = 2: 4 cells, 3 passages, 7 free cells) and its
# distances from (1, 1), counted by hand along the only path.
_SMALL = np.array([[1, 1, 1, 1, 1],
                   [1, 0, 0, 0, 1],
                   [1, 1, 1, 0, 1],
                   [1, 0, 0, 0, 1],
                   [1, 1, 1, 1, 1]], bool)
_SMALL_DISTANCE = np.array([[-1, -1, -1, -1, -1],
                            [-1, 0, 1, 2, -1],
                            [-1, -1, -1, 3, -1],
                            [-1, 6, 5, 4, -1],
                            [-1, -1, -1, -1, -1]], np.int32)


@functools.lru_cache(maxsize=None)
def _env_and_step(noise, size=15, limit=60, maze_seed=0, goal=False):
  """An environment and its jitted reset / step, shared by the tests."""
  env = noisy_grid.NoisyGrid(noise, size=size, max_episode_steps=limit,
                             maze_seed=maze_seed, goal=goal)
  return env, jax.jit(env.reset), jax.jit(env.step)


def _relaxed_distances(walls, start):
  """Independent of BFS: Bellman-Ford relaxation to a fixed point (numpy)."""
  big = 10 ** 6
  d = np.full(walls.shape, big, np.int64)
  d[start[0], start[1]] = 0
  while True:
    p = np.pad(d, 1, constant_values=big)
    best = np.minimum.reduce([p[:-2, 1:-1], p[2:, 1:-1], p[1:-1, :-2],
                              p[1:-1, 2:]]) + 1
    new = np.where(walls, big, np.minimum(d, best))
    if (new == d).all():
      break
    d = new
  return np.where(d >= big, -1, d)


def _none_frame(walls, position):
  """The "none" render written out: walls white, pathways black, agent
  green."""
  frame = np.where(walls[..., None], WHITE, np.zeros(3, np.uint8))
  frame[position[0], position[1]] = GREEN
  return frame.astype(np.uint8)


class _Reference:
  """The module docstring's rules, in plain Python (one lane)."""

  def __init__(self, walls, start, limit, distance, tv, goal=None):
    self.walls, self.start, self.limit = walls, tuple(start), limit
    self.distance, self.tv, self.goal = distance, tv, goal
    self.reset()

  def reset(self):
    self.pos, self.t, self.last = self.start, 0, False
    self.visited, self.frontier, self.tv_steps = {self.start}, 0, 0
    self.reward, self.discount = 0.0, 1.0
    return FIRST

  def step(self, action):
    if self.last:
      return self.reset()
    dr, dc = MOVES[action]
    r, c = self.pos[0] + dr, self.pos[1] + dc
    if not self.walls[r, c]:
      self.pos = (r, c)
    self.t += 1
    at_goal = self.pos == self.goal
    if not at_goal:  # CoverageTracker skips a terminating LAST's cell.
      self.visited.add(self.pos)
    self.frontier = max(self.frontier, int(self.distance[self.pos]))
    self.tv_steps += int(self.tv and action == noisy_grid.TV_ACTION)
    self.reward, self.discount = (1.0, 0.0) if at_goal else (0.0, 1.0)
    self.last = at_goal or self.t >= self.limit
    return LAST if self.last else MID

  def coverage(self, num_free):
    return np.float32(len(self.visited) / num_free)


def test_bfs_hand_checked_small_maze():
  np.testing.assert_array_equal(noisy_grid.bfs_distances(_SMALL, (1, 1)),
                                _SMALL_DISTANCE)
  np.testing.assert_array_equal(_relaxed_distances(_SMALL, (1, 1)),
                                _SMALL_DISTANCE)
  # From another start: (3, 1) is the far end.
  np.testing.assert_array_equal(noisy_grid.bfs_distances(_SMALL, (3, 1)),
                                np.where(_SMALL_DISTANCE >= 0,
                                         6 - _SMALL_DISTANCE, -1))


@pytest.mark.parametrize("size,maze_seed", [(15, 0), (21, 3), (5, 1)])
def test_maze_is_perfect_and_the_distance_table_is_right(size, maze_seed):
  env = noisy_grid.NoisyGrid(size=size, maze_seed=maze_seed)
  walls = env.walls
  _assert_perfect(walls, env.start)
  np.testing.assert_array_equal(env.start, [1, 1])
  assert env.num_free_cells == (~walls).sum() == disco_maze.num_free_cells(
      size)
  expected = _relaxed_distances(walls, (1, 1))
  np.testing.assert_array_equal(env.distance_to_start, expected)
  assert env.distance_to_start.dtype == np.int32
  assert (env.distance_to_start[walls] == -1).all()
  assert (env.distance_to_start[~walls] >= 0).all()  # All reachable.
  assert env.max_distance == expected.max()
  with pytest.raises(ValueError):  # Read-only tables.
    env.distance_to_start[1, 1] = 5


def test_maze_fixed_by_seed_other_seeds_other_mazes():
  a = noisy_grid.NoisyGrid(maze_seed=7)
  b = noisy_grid.NoisyGrid("disco", maze_seed=7, max_episode_steps=3)
  np.testing.assert_array_equal(a.walls, b.walls)
  mazes = {noisy_grid.NoisyGrid(maze_seed=s).walls.tobytes()
           for s in range(6)}
  assert len(mazes) == 6


def _walls_seen(obs):
  """Wall mask of a frame: neither black (pathway) nor green (agent)."""
  obs = np.asarray(obs)
  return ~(obs == 0).all(-1) & ~(obs == GREEN).all(-1)


@pytest.mark.parametrize("noise", ["none", "disco"])
def test_same_maze_and_start_in_every_lane_and_episode(noise):
  env, _, _ = _env_and_step(noise, 7, 4)
  keys = jax.random.split(jax.random.key(0), 5)

  @jax.jit
  def run(keys):
    state, ts0 = jax.vmap(env.reset)(keys)
    actions = jnp.tile(jnp.arange(4)[:, None], (2, 5)) % 4  # [8, 5].

    def body(state, a):
      return jax.vmap(env.step)(state, a)

    _, ts = jax.lax.scan(body, state, actions)
    return ts0, ts

  ts0, ts = run(keys)
  frames = np.concatenate([np.asarray(ts0.observation)[None],
                           np.asarray(ts.observation)])  # [9, 5, 7, 7, 3].
  step_type = np.concatenate([np.asarray(ts0.step_type)[None],
                              np.asarray(ts.step_type)])
  position = np.concatenate([np.asarray(ts0.extras["position"])[None],
                             np.asarray(ts.extras["position"])])
  assert (step_type == FIRST).sum() == 10  # Reset and one restart per lane.
  for t, lane in np.ndindex(*frames.shape[:2]):
    r, c = position[t, lane]
    seen = _walls_seen(frames[t, lane])
    seen[r, c] = False
    np.testing.assert_array_equal(seen, env.walls)
    if step_type[t, lane] == FIRST:
      np.testing.assert_array_equal(position[t, lane], env.start)


def test_wall_bump_stays_and_time_limit_truncates():
  env, reset, step = _env_and_step("none")
  assert env.walls[0, 1] and env.walls[1, 0]  # Up and left of (1, 1).
  state, ts = reset(jax.random.key(0))
  np.testing.assert_array_equal(ts.extras["position"], [1, 1])
  for t in range(1, 61):
    state, ts = step(state, jnp.int32(0 if t % 2 else 2))  # Into walls.
    np.testing.assert_array_equal(ts.extras["position"], [1, 1])
    assert float(ts.discount) == 1 and float(ts.reward) == 0
    assert int(ts.step_type) == (LAST if t == 60 else MID), t
    assert int(ts.extras["frontier"]) == 0
    assert float(ts.extras["coverage"]) == np.float32(1 / 97)
  # Down moves: LAST at step 60 with discount 1, then FIRST at the start.
  state, ts = reset(jax.random.key(1))
  for t in range(1, 61):
    state, ts = step(state, jnp.int32(1))
  assert int(ts.step_type) == LAST and float(ts.discount) == 1
  assert tuple(np.asarray(ts.extras["position"])) != (1, 1)
  state, ts = step(state, jnp.int32(1))  # Ignored.
  assert int(ts.step_type) == FIRST and float(ts.discount) == 1
  np.testing.assert_array_equal(ts.extras["position"], [1, 1])
  assert float(ts.extras["coverage"]) == np.float32(1 / 97)
  assert int(ts.extras["frontier"]) == 0
  np.testing.assert_array_equal(ts.observation, _none_frame(env.walls, (1, 1)))
  state, ts = step(state, jnp.int32(1))
  assert int(ts.step_type) == MID
  np.testing.assert_array_equal(ts.extras["position"], [2, 1])


def _farthest(distance):
  """The farthest free cell, the first in row-major order on a tie."""
  best = distance.max()
  return next((r, c) for r, c in np.ndindex(*distance.shape)
              if distance[r, c] == best)


@pytest.mark.parametrize("noise,size,goal", [
    ("none", 15, False), ("disco", 15, False), ("tv", 15, False),
    ("frame", 15, False), ("tv", 5, True), ("none", 7, True)])
def test_random_episodes_match_the_reference(noise, size, goal):
  """Step types, rewards, discounts, positions, coverage, frontier and
  tv_steps along random actions (mostly moves to unvisited free cells, some
  bumps), over 40 steps of episodes of at most 12."""
  env, reset, step = _env_and_step(noise, size, 12, goal=goal)
  num_actions = env.num_actions
  assert num_actions == (5 if noise == "tv" else 4)
  distance = _relaxed_distances(env.walls, (1, 1))
  ref = _Reference(env.walls, env.start, 12, distance, noise == "tv",
                   _farthest(distance) if goal else None)
  num_free = disco_maze.num_free_cells(size)
  tracker = env.make_coverage_tracker(1)
  assert isinstance(tracker, disco_maze.CoverageTracker)
  rng = np.random.default_rng(0)
  state, ts = reset(jax.random.key(2))
  expected_type = FIRST
  frontiers, num_goals = [], 0
  for t in range(40):
    assert int(ts.step_type) == expected_type, t
    assert float(ts.reward) == ref.reward, t
    assert float(ts.discount) == ref.discount, t
    num_goals += int(ref.reward == 1)
    np.testing.assert_array_equal(ts.extras["position"], ref.pos)
    assert float(ts.extras["coverage"]) == ref.coverage(num_free), t
    # The host tracker gives the same number.
    batch = jax.tree.map(lambda x: np.asarray(x)[None], ts)
    np.testing.assert_array_equal(tracker.update(batch),
                                  [ts.extras["coverage"]])
    assert int(ts.extras["frontier"]) == ref.frontier
    assert int(ts.extras["tv_steps"]) == ref.tv_steps
    frontiers.append(ref.frontier)
    # Mostly into unvisited free cells (so episodes go somewhere), else
    # uniform (bumps, back-tracks, TV).
    fresh = [a for a in range(4)
             if not env.walls[ref.pos[0] + MOVES[a][0],
                              ref.pos[1] + MOVES[a][1]]
             and (ref.pos[0] + MOVES[a][0],
                  ref.pos[1] + MOVES[a][1]) not in ref.visited]
    action = int(rng.choice(fresh) if fresh and rng.random() < 0.7
                 else rng.integers(num_actions))
    state, ts = step(state, jnp.int32(action))
    expected_type = ref.step(action)
  # The episodes went somewhere (and found goals).
  assert max(frontiers) >= min(5, env.max_distance)
  assert (num_goals >= 2) if goal else (num_goals == 0)
  for name, dtype in (("position", jnp.int32), ("coverage", jnp.float32),
                      ("frontier", jnp.int32), ("tv_steps", jnp.int32)):
    assert ts.extras[name].dtype == dtype


def test_scripted_frontier_coverage_tv_steps():
  """A route written out on the default 15x15 maze (maze_seed=0):
  (1,1) down to (3,1), right to (3,3), up to (1,3), right to (1,5); a TV
  action and a bump on the way; then back left (frontier does not grow)."""
  env, reset, step = _env_and_step("tv")
  w = env.walls
  route = [1, 1, 3, 3, 4, 0, 0, 2, 3, 3, 4, 4, 2, 2]
  # Expected positions, by the maze's layout (checked here first).
  assert not w[2, 1] and not w[3, 1] and not w[3, 2] and not w[3, 3]
  assert not w[2, 3] and not w[1, 3] and w[1, 2] and not w[1, 4]
  positions = [(2, 1), (3, 1), (3, 2), (3, 3), (3, 3), (2, 3), (1, 3),
               (1, 3), (1, 4), (1, 5), (1, 5), (1, 5), (1, 4), (1, 3)]
  # BFS distances along the route (1,1)->(3,1)->(3,3)->(1,3): 1 2 3 4 4 5 6
  # 6 7 8 8 8 7 6; running max below.
  frontier = [1, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 8, 8, 8]
  distinct = [2, 3, 4, 5, 5, 6, 7, 7, 8, 9, 9, 9, 9, 9]
  tv_steps = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 3, 3, 3]
  for p, d in zip(positions, [1, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 8, 7, 6]):
    assert env.distance_to_start[p] == d, p
  state, _ = reset(jax.random.key(0))
  for i, action in enumerate(route):
    state, ts = step(state, jnp.int32(action))
    np.testing.assert_array_equal(ts.extras["position"], positions[i])
    assert int(ts.extras["frontier"]) == frontier[i], i
    assert float(ts.extras["coverage"]) == np.float32(distinct[i] / 97), i
    assert int(ts.extras["tv_steps"]) == tv_steps[i], i


def _shortest_path_actions(walls, start, target):
  """Actions along the only path from `start` to `target` (from the test's
  own distance table: step back from `target` to ever smaller distances)."""
  distance = _relaxed_distances(walls, start)
  cells = [tuple(target)]
  while distance[cells[-1]] > 0:
    r, c = cells[-1]
    cells.append(next((r + dr, c + dc) for dr, dc in list(MOVES.values())[:4]
                      if distance[r + dr, c + dc] == distance[r, c] - 1))
  cells = cells[::-1]
  return [next(a for a in range(4)
               if (p[0] + MOVES[a][0], p[1] + MOVES[a][1]) == q)
          for p, q in zip(cells, cells[1:])]


@pytest.mark.parametrize("goal", [True, False])
def test_goal_at_the_farthest_cell(goal):
  env, reset, step = _env_and_step("none", goal=goal)
  distance = _relaxed_distances(env.walls, (1, 1))
  assert tuple(env.goal_cell) == _farthest(distance) and env.goal == goal
  assert env.distance_to_start[tuple(env.goal_cell)] == env.max_distance
  actions = _shortest_path_actions(env.walls, (1, 1), env.goal_cell)
  assert len(actions) == env.max_distance == 58 < env.max_episode_steps
  tracker = env.make_coverage_tracker(1)
  state, ts = reset(jax.random.key(0))
  tracker.update(jax.tree.map(lambda x: np.asarray(x)[None], ts))
  for i, action in enumerate(actions):
    state, ts = step(state, jnp.int32(action))
    np.testing.assert_array_equal(
        tracker.update(jax.tree.map(lambda x: np.asarray(x)[None], ts)),
        [ts.extras["coverage"]])
    assert int(ts.extras["frontier"]) == i + 1
    if i + 1 < len(actions):
      assert int(ts.step_type) == MID and float(ts.reward) == 0
  np.testing.assert_array_equal(ts.extras["position"], env.goal_cell)
  np.testing.assert_array_equal(ts.observation,
                                _none_frame(env.walls, env.goal_cell))
  if goal:
    assert int(ts.step_type) == LAST
    assert float(ts.reward) == 1 and float(ts.discount) == 0
    # 59 cells on the path; the goal cell of the terminating LAST is not
    # counted (CoverageTracker).
    assert float(ts.extras["coverage"]) == np.float32(58 / 97)
    state, ts = step(state, jnp.int32(0))
    assert int(ts.step_type) == FIRST and float(ts.reward) == 0
    assert float(ts.discount) == 1
    np.testing.assert_array_equal(ts.extras["position"], env.start)
    assert float(ts.extras["coverage"]) == np.float32(1 / 97)
  else:
    assert int(ts.step_type) == MID
    assert float(ts.reward) == 0 and float(ts.discount) == 1
    assert float(ts.extras["coverage"]) == np.float32(59 / 97)


def test_goal_on_the_last_step_is_a_termination():
  env, reset, step = _env_and_step("none", limit=58, goal=True)
  state, ts = reset(jax.random.key(0))
  for action in _shortest_path_actions(env.walls, (1, 1), env.goal_cell):
    state, ts = step(state, jnp.int32(action))
  assert int(ts.step_type) == LAST and float(ts.discount) == 0
  assert float(ts.reward) == 1


def test_none_frames_are_a_function_of_the_position():
  env, reset, step = _env_and_step("none", 15, 12)
  rng = np.random.default_rng(1)
  for seed in (0, 1):
    state, ts = reset(jax.random.key(seed))
    for _ in range(15):
      np.testing.assert_array_equal(
          ts.observation, _none_frame(env.walls, ts.extras["position"]))
      state, ts = step(state, jnp.int32(rng.integers(4)))


def test_disco_walls_change_paths_and_agent_do_not():
  env, reset, step = _env_and_step("disco")
  state, ts = reset(jax.random.key(0))
  previous = None
  walls = env.walls
  for action in (1, 1, 0, 0, 3):  # Includes a stay-in-place bump (0 at 1,1).
    obs = np.asarray(ts.observation)
    pos = tuple(np.asarray(ts.extras["position"]))
    none = _none_frame(walls, pos)
    np.testing.assert_array_equal(obs[~walls], none[~walls])  # Paths, agent.
    wall_px = obs[walls]
    assert (wall_px[:, None] == disco_maze.WALL_COLOURS[None]).all(-1).any(
        -1).all()
    # Every colour is used (128 wall cells, 5 colours).
    assert len(np.unique(wall_px, axis=0)) == 5
    if previous is not None:
      # A fresh draw: most wall cells change (each keeps its colour w.p.
      # 1/5).
      changed = (wall_px != previous).any(-1).mean()
      assert 0.6 < changed < 0.95, changed
    previous = wall_px
    state, ts = step(state, jnp.int32(action))


def test_tv_action_changes_only_the_screen_for_one_step():
  env, reset, step = _env_and_step("tv")
  s = env.size
  state, ts = reset(jax.random.key(0))
  np.testing.assert_array_equal(ts.observation, _none_frame(env.walls, (1, 1)))
  state, ts = step(state, jnp.int32(1))  # (2, 1).
  screens = []
  for action in (4, 4, 1, 4, 0, 2):
    state, ts = step(state, jnp.int32(action))
    pos = tuple(np.asarray(ts.extras["position"]))
    obs, none = np.asarray(ts.observation), _none_frame(env.walls, pos)
    if action == 4:
      assert pos == ((2, 1) if len(screens) < 2 else (3, 1))
      np.testing.assert_array_equal(obs[:s - 1], none[:s - 1])
      assert (obs[s - 1] != none[s - 1]).any()
      screens.append(obs[s - 1])
    else:
      np.testing.assert_array_equal(obs, none)
  assert (screens[0] != screens[1]).any() and (screens[1] != screens[2]).any()
  # Uniform noise: many distinct values (45 channel values).
  assert len(np.unique(np.stack(screens))) > 30
  assert int(ts.extras["tv_steps"]) == 3


def test_frame_noise_concatenated():
  env, reset, step = _env_and_step("frame")
  s = env.size
  assert env.observation_spec().shape == (s, 2 * s, 3)
  state, ts = reset(jax.random.key(0))
  previous = None
  for action in (1, 1, 0, 2, 3):
    obs = np.asarray(ts.observation)
    assert obs.shape == (s, 2 * s, 3) and obs.dtype == np.uint8
    np.testing.assert_array_equal(
        obs[:, :s], _none_frame(env.walls, ts.extras["position"]))
    noise = obs[:, s:]
    if previous is not None:
      assert (noise != previous).mean() > 0.9  # P(equal) = 1/256 each.
    # Roughly uniform over [0, 255]: mean 127.5, sd 73.9 / sqrt(675) ~ 2.8.
    assert abs(noise.mean() - 127.5) < 15, noise.mean()
    previous = noise
    state, ts = step(state, jnp.int32(action))


@pytest.mark.parametrize("noise", noisy_grid.NOISES)
def test_vmapped_jitted_matches_unjitted_single_lane(noise):
  env = noisy_grid.NoisyGrid(noise, size=7, max_episode_steps=4)
  num_lanes, num_steps = 3, 6
  keys = jax.random.split(jax.random.key(3), num_lanes)
  actions = jax.random.randint(jax.random.key(4), (num_steps, num_lanes), 0,
                               env.num_actions)
  reset = jax.jit(jax.vmap(env.reset))
  step = jax.jit(jax.vmap(env.step))
  state, ts = reset(keys)
  batched = [ts]
  for t in range(num_steps):
    state, ts = step(state, actions[t])
    batched.append(ts)
  assert (np.asarray(batched[5].step_type) == FIRST).all()  # A restart.
  for lane in (0, num_lanes - 1):
    state, ts = env.reset(keys[lane])  # Un-jitted.
    for t in range(num_steps + 1):
      if t:
        state, ts = env.step(state, actions[t - 1, lane])
      for x, y in zip(jax.tree.leaves(ts),
                      jax.tree.leaves(jax.tree.map(lambda v: v[lane],
                                                   batched[t]))):
        np.testing.assert_array_equal(x, y)
  # Each lane draws its own noise. Disco and frame noise show at every
  # step; the TV only when pressed, so press it in every lane (all at the
  # start cell: the frames differ only by the noise). Random actions would
  # make this depend on JAX's random stream (it differs on jax 0.4.30).
  if noise in ("disco", "frame"):
    assert (np.asarray(batched[1].observation[0])
            != np.asarray(batched[1].observation[1])).any()
  elif noise == "tv":
    state, _ = reset(keys)
    _, ts = step(state, jnp.full((num_lanes,), noisy_grid.TV_ACTION,
                                 jnp.int32))
    assert (np.asarray(ts.observation[0])
            != np.asarray(ts.observation[1])).any()


@pytest.mark.parametrize("noise,goal", [
    ("none", False), ("disco", False), ("tv", False), ("frame", False),
    ("tv", True)])
def test_conformance_in_lanes(noise, goal):
  # Random actions find the goal of a 5x5 maze (4 moves away) in time.
  size, limit = (5, 30) if goal else (7, 9)

  def make():
    return functional.FunctionalBatchedEnv(
        noisy_grid.NoisyGrid(noise, size=size, max_episode_steps=limit,
                             goal=goal), 3, seed=1)

  env = make()
  stats = conformance.check_batched_env(
      env, 60 if goal else 30, np.random.default_rng(0), twin=make(),
      max_episode_steps=limit)
  if goal:
    assert stats.num_terminated >= 2
    assert stats.reward_sum == stats.num_terminated
  else:
    assert stats.num_truncated == 9 and stats.num_terminated == 0
    assert stats.reward_sum == 0
  conformance.check_rejects_bad_actions(env)
  assert env.visit_grid_shape() == (size, size)
  # The declared tracker reproduces the `coverage` extra every step.
  tracker = env.make_coverage_tracker()
  timestep = env.reset()
  rng = np.random.default_rng(1)
  for _ in range(20):
    np.testing.assert_array_equal(tracker.update(timestep),
                                  timestep.extras["coverage"])
    timestep = env.step(rng.integers(0, env.action_spec().num_values, 3))


def test_specs_and_structure():
  for noise in noisy_grid.NOISES:
    env = noisy_grid.NoisyGrid(noise)
    assert env.grid_shape == (15, 15) and env.max_episode_steps == 60
    assert env.noise == noise and env.maze_seed == 0 and env.size == 15
    assert env.num_free_cells == 97
    assert env.observation_encoding() == disco_maze.DiscoMaze(
        1).observation_encoding()
    spec = env.observation_spec()
    assert spec.dtype == np.uint8
    assert spec.shape == ((15, 30, 3) if noise == "frame" else (15, 15, 3))
    state, ts = jax.eval_shape(env.reset, jax.random.key(0))
    _, ts2 = jax.eval_shape(env.step, state, jnp.int32(0))
    assert jax.tree.structure(ts) == jax.tree.structure(ts2)
    for x, y in zip(jax.tree.leaves(ts), jax.tree.leaves(ts2)):
      assert x.shape == y.shape and x.dtype == y.dtype
    assert ts.observation.shape == spec.shape
    assert sorted(ts.extras) == ["coverage", "frontier", "position",
                                 "tv_steps"]


@pytest.mark.parametrize("kwargs,match", [
    (dict(noise="static"), "noise"),
    (dict(noise=None), "noise"),
    (dict(size=8), "size"),
    (dict(size=3), "size"),
    (dict(max_episode_steps=0), "max_episode_steps"),
    (dict(maze_seed=-1), "maze_seed"),
    (dict(maze_seed=1.5), "maze_seed"),
    (dict(start=(0, 0)), "start"),
    (dict(start=(1, 15)), "start"),
    (dict(start=(1,)), "start"),
    (dict(goal="yes"), "goal"),
])
def test_constructor_checks(kwargs, match):
  with pytest.raises(ValueError, match=match):
    noisy_grid.NoisyGrid(**kwargs)


def test_custom_start():
  env = noisy_grid.NoisyGrid(start=(13, 13))
  assert not env.walls[13, 13] and env.distance_to_start[13, 13] == 0
  np.testing.assert_array_equal(env.distance_to_start,
                                _relaxed_distances(env.walls, (13, 13)))
  _, ts = env.reset(jax.random.key(0))
  np.testing.assert_array_equal(ts.extras["position"], [13, 13])


def test_registration():
  assert "noisy_grid" in envs.FAMILIES
  names = envs.available("noisy_grid")
  assert names == tuple(f"noisy_grid/{n}" for n in noisy_grid.NOISES)
  for noise in noisy_grid.NOISES:
    env = envs.make_functional(f"noisy_grid/{noise}", size=7,
                               max_episode_steps=5, maze_seed=2)
    assert isinstance(env, noisy_grid.NoisyGrid) and env.noise == noise
    assert env.max_episode_steps == 5 and env.maze_seed == 2
    assert not env.goal
  assert envs.make_functional("noisy_grid/tv", goal=True).goal
  # Pure JAX: the Python loop runs it in lanes, under the plain name and as
  # "jax/<name>" alike.
  for name in ("noisy_grid/frame", "jax/noisy_grid/frame"):
    with envs.make(name, 2, seed=0, size=7) as lanes:
      assert isinstance(lanes, functional.FunctionalBatchedEnv)
      assert lanes.reset().observation.shape == (2, 7, 14, 3)
  with pytest.raises(ValueError, match="noise"):
    envs.make_functional("noisy_grid/loud")
  with pytest.raises(ValueError, match="make_functional"):
    envs.make_functional("noisy_grid")
  with pytest.raises(ValueError, match="noisy_grid/<noise>"):
    envs.make_functional("noisy")  # The message lists the pattern.
