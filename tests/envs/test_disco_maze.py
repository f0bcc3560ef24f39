"""Tests for ngu_jax.envs.disco_maze (Random Disco Maze, NGU Sec. 4.1)."""

import collections

import numpy as np
import pytest

from ngu_jax import envs
from ngu_jax.envs import base
from ngu_jax.envs import disco_maze
from ngu_jax.envs import disco_maze_jax
from ngu_jax.envs import noisy_grid
from tests.envs import conformance

GREEN = (0, 255, 0)
_MOVES = disco_maze._MOVES  # pylint: disable=protected-access
BLACK = (0, 0, 0)


def _free_neighbours(walls, r, c):
  """{action: (row, col)} of the free neighbours of (r, c)."""
  out = {}
  for a, (dr, dc) in enumerate(_MOVES):
    if not walls[r + dr, c + dc]:
      out[a] = (r + dr, c + dc)
  return out


def _wall_neighbour(walls, r, c):
  """(action, (row, col)) of some wall next to (r, c)."""
  for a, (dr, dc) in enumerate(_MOVES):
    if walls[r + dr, c + dc]:
      return a, (r + dr, c + dc)
  raise AssertionError("no wall next to a cell of a perfect maze?")


def _assert_perfect(walls, start):
  """Independent check: border walls, connected free cells, a spanning tree."""
  s = walls.shape[0]
  assert walls.shape == (s, s) and walls.dtype == np.bool_
  assert walls[0].all() and walls[-1].all()
  assert walls[:, 0].all() and walls[:, -1].all()
  # Lattice structure: cells (odd, odd) free, posts (even, even) walls.
  assert not walls[1::2, 1::2].any()
  assert walls[0::2, 0::2].all()
  free = {(r, c) for r in range(s) for c in range(s) if not walls[r, c]}
  assert len(free) == disco_maze.num_free_cells(s)
  # Edges between 4-adjacent free cells.
  edges = [((r, c), (r + dr, c + dc)) for (r, c) in free
           for dr, dc in ((1, 0), (0, 1)) if (r + dr, c + dc) in free]
  # Union-find: no edge closes a cycle, and everything ends in one set.
  parent = {p: p for p in free}

  def find(p):
    while parent[p] != p:
      parent[p] = parent[parent[p]]
      p = parent[p]
    return p

  for p, q in edges:
    rp, rq = find(p), find(q)
    assert rp != rq, f"cycle through {p}-{q}"
    parent[rp] = rq
  assert len({find(p) for p in free}) == 1, "free cells not connected"
  assert len(edges) == len(free) - 1
  # BFS from the start reaches every free cell.
  start = tuple(int(x) for x in start)
  assert start in free
  seen, queue = {start}, collections.deque([start])
  while queue:
    r, c = queue.popleft()
    for q in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
      if q in free and q not in seen:
        seen.add(q)
        queue.append(q)
  assert seen == free


@pytest.mark.parametrize("size", [21, 7])
def test_generate_mazes_are_perfect(size):
  rng = np.random.default_rng(0)
  walls, start = disco_maze.generate_mazes(rng, 24, size)
  assert walls.shape == (24, size, size) and start.shape == (24, 2)
  assert start.dtype == np.int32
  for k in range(24):
    _assert_perfect(walls[k], start[k])
  if size == 21:  # (A 3x3 lattice has only 192 spanning trees.)
    # Different mazes, and start cells spread over the grid.
    assert len({w.tobytes() for w in walls}) == 24
    assert len({tuple(p) for p in start}) > 12


def test_start_cell_uniform_over_free_cells():
  # 100 of the 199 free cells are lattice cells (odd, odd), 99 passages.
  _, start = disco_maze.generate_mazes(np.random.default_rng(1), 4000)
  on_cell = ((start % 2) == 1).all(axis=1).mean()
  assert abs(on_cell - 100 / 199) < 0.03, on_cell


def test_reset_renders_maze_agent_and_walls():
  env = disco_maze.DiscoMaze(6, seed=3)
  ts = env.reset()
  walls = env.walls()
  obs = ts.observation
  assert obs.shape == (6, 21, 21, 3) and obs.dtype == np.uint8
  assert (ts.step_type == base.StepType.FIRST).all()
  np.testing.assert_array_equal(ts.extras["episode_step"], 0)
  pos = ts.extras["position"]
  assert pos.shape == (6, 2) and pos.dtype == np.int32
  palette = {tuple(c) for c in disco_maze.WALL_COLOURS}
  assert len(palette) == 5 and GREEN not in palette and BLACK not in palette
  for b in range(6):
    _assert_perfect(walls[b], pos[b])
    r, c = pos[b]
    assert tuple(obs[b, r, c]) == GREEN
    is_green = (obs[b] == GREEN).all(-1)
    assert is_green.sum() == 1
    free = ~walls[b]
    free[r, c] = False
    assert (obs[b][free] == 0).all(), "pathways must be black"
    assert {tuple(p) for p in obs[b][walls[b]]} <= palette


def test_moves_and_wall_colours_resampled_every_step():
  env = disco_maze.DiscoMaze(4, seed=1)
  ts = env.reset()
  walls = env.walls()
  changed, total, counts = 0, 0, collections.Counter()
  for _ in range(6):
    pos = ts.extras["position"]
    actions, targets = [], []
    for b in range(4):
      a, q = sorted(_free_neighbours(walls[b], *pos[b]).items())[0]
      actions.append(a)
      targets.append(q)
    prev = ts.observation
    ts = env.step(np.array(actions, np.int32))
    assert (ts.step_type == base.StepType.MID).all()
    np.testing.assert_array_equal(ts.extras["position"], targets)
    np.testing.assert_array_equal(env.walls(), walls)  # Same maze.
    for b in range(4):
      r, c = targets[b]
      assert tuple(ts.observation[b, r, c]) == GREEN
      free = ~walls[b]
      free[r, c] = False
      assert (ts.observation[b][free] == 0).all()
      now, before = ts.observation[b][walls[b]], prev[b][walls[b]]
      changed += int((now != before).any(-1).sum())
      total += now.shape[0]
      counts.update(map(tuple, now))
  # Independent uniform resampling: a wall keeps its colour w.p. 1/5.
  assert 0.75 < changed / total < 0.85, changed / total
  assert set(counts) == {tuple(c) for c in disco_maze.WALL_COLOURS}
  freq = np.array(list(counts.values())) / total
  np.testing.assert_allclose(freq, 0.2, atol=0.02)


def test_action_directions():
  env = disco_maze.DiscoMaze(1, seed=5, max_episode_steps=50)
  ts = env.reset()
  walls = env.walls()[0]
  deltas = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}  # up down left right
  seen = set()
  for _ in range(40):
    pos = ts.extras["position"][0]
    options = _free_neighbours(walls, *pos)
    a = max(options, key=lambda a: (a not in seen, -a))
    seen.add(a)
    ts = env.step(np.array([a], np.int32))
    np.testing.assert_array_equal(ts.extras["position"][0],
                                  pos + np.array(deltas[a]))
  assert seen == {0, 1, 2, 3}
  assert disco_maze.ACTION_NAMES == ("up", "down", "left", "right")


def test_wall_hit_terminates_then_fresh_maze():
  env = disco_maze.DiscoMaze(5, seed=2)
  ts = env.reset()
  walls = env.walls()
  pos = ts.extras["position"]
  hits = [_wall_neighbour(walls[b], *pos[b]) for b in range(5)]
  # Lanes 0-3 walk into a wall; lane 4 takes a free move.
  actions = [h[0] for h in hits[:4]]
  actions.append(sorted(_free_neighbours(walls[4], *pos[4]))[0])
  ts = env.step(np.array(actions, np.int32))
  np.testing.assert_array_equal(ts.step_type, [2, 2, 2, 2, 1])
  np.testing.assert_array_equal(ts.discount, [0, 0, 0, 0, 1])
  np.testing.assert_array_equal(ts.reward, 0)
  for b in range(4):
    # The agent is drawn on the wall cell it hit.
    np.testing.assert_array_equal(ts.extras["position"][b], hits[b][1])
    assert tuple(ts.observation[b, hits[b][1][0], hits[b][1][1]]) == GREEN
  ts = env.step(np.zeros(5, np.int32))
  np.testing.assert_array_equal(ts.step_type[:4], base.StepType.FIRST)
  np.testing.assert_array_equal(ts.discount[:4], 1)
  np.testing.assert_array_equal(ts.extras["episode_step"][:4], 0)
  new_walls = env.walls()
  for b in range(4):
    assert not (new_walls[b] == walls[b]).all(), "a new maze each episode"
    _assert_perfect(new_walls[b], ts.extras["position"][b])
  np.testing.assert_array_equal(new_walls[4], walls[4])


def test_truncation_at_max_episode_steps():
  env = disco_maze.DiscoMaze(3, seed=4, max_episode_steps=5)
  ts = env.reset()
  walls = env.walls()
  home = ts.extras["position"].copy()
  away = {b: sorted(_free_neighbours(walls[b], *home[b]).items())[0]
          for b in range(3)}
  back = {b: _free_neighbours(walls[b], *away[b][1]) for b in range(3)}
  for t in range(1, 6):
    actions = []
    for b in range(3):
      if t % 2:
        actions.append(away[b][0])
      else:
        actions.append([a for a, q in back[b].items()
                        if q == tuple(home[b])][0])
    ts = env.step(np.array(actions, np.int32))
    np.testing.assert_array_equal(ts.extras["episode_step"], t)
    expected = base.StepType.LAST if t == 5 else base.StepType.MID
    np.testing.assert_array_equal(ts.step_type, expected)
    np.testing.assert_array_equal(ts.discount, 1)  # Truncation: discount 1.
  ts = env.step(np.zeros(3, np.int32))
  np.testing.assert_array_equal(ts.step_type, base.StepType.FIRST)


def test_wall_hit_on_the_last_allowed_step_is_a_termination():
  env = disco_maze.DiscoMaze(1, seed=0, max_episode_steps=1)
  ts = env.reset()
  a, _ = _wall_neighbour(env.walls()[0], *ts.extras["position"][0])
  ts = env.step(np.array([a], np.int32))
  assert ts.step_type[0] == base.StepType.LAST and ts.discount[0] == 0


def test_seed_determinism():
  rng = np.random.default_rng(0)
  actions = rng.integers(0, 4, (60, 8)).astype(np.int32)

  def run(seed):
    env = disco_maze.DiscoMaze(8, seed=seed, maze_batch_size=16)
    out = [env.reset()]
    out += [env.step(a) for a in actions]
    return out

  a, b, c = run(7), run(7), run(8)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x.observation, y.observation)
    np.testing.assert_array_equal(x.step_type, y.step_type)
    np.testing.assert_array_equal(x.extras["position"], y.extras["position"])
  assert any((x.observation != y.observation).any() for x, y in zip(a, c))
  # A second reset starts new mazes.
  env = disco_maze.DiscoMaze(2, seed=7)
  env.reset()
  first = env.walls()
  env.reset()
  assert (env.walls() != first).any()


def test_conformance_with_terminations():
  rng = np.random.default_rng(0)
  make = lambda: disco_maze.DiscoMaze(8, seed=11, maze_batch_size=5)
  stats = conformance.check_batched_env(make(), 300, rng, twin=make())
  assert stats.num_terminated > 100 and stats.num_first > 100
  assert stats.reward_sum == 0.0


def test_conformance_with_truncations():
  rng = np.random.default_rng(1)
  make = lambda: envs.make("disco_maze", 4, seed=3, max_episode_steps=2)
  stats = conformance.check_batched_env(make(), 200, rng, twin=make())
  assert stats.num_truncated > 0 and stats.num_terminated > 0


def test_rejects_bad_actions_and_misuse():
  env = disco_maze.DiscoMaze(5)
  with pytest.raises(ValueError, match="reset"):
    env.step(np.zeros(5, np.int32))
  conformance.check_rejects_bad_actions(env)
  with pytest.raises(ValueError, match=r"lane\(s\) \[1, 3\]"):
    env.step(np.array([0, 4, 0, 7, 0], np.int32))
  env.close()
  with pytest.raises(ValueError, match="closed"):
    env.step(np.zeros(5, np.int32))
  for kwargs in ({"num_envs": 0}, {"num_envs": 2, "size": 20},
                 {"num_envs": 2, "max_episode_steps": 0},
                 {"num_envs": 2, "seed": -1}):
    with pytest.raises(ValueError):
      disco_maze.DiscoMaze(**kwargs)


def test_specs():
  env = disco_maze.DiscoMaze(2, size=9)
  obs_spec = env.observation_spec()
  assert obs_spec.shape == (9, 9, 3) and obs_spec.dtype == np.uint8
  assert env.action_spec().num_values == 4
  assert env.num_free_cells == 2 * 4 * 4 - 1 == 31
  assert disco_maze.num_free_cells() == 199


# A hand-made 5x5 maze (2x2 cells): free cells are the 7 marked '.'.
_WALLS_5 = np.array([[c == "#" for c in row] for row in (
    "#####",
    "#...#",
    "###.#",
    "#...#",
    "#####")])


def test_coverage_hand_checked():
  assert (~_WALLS_5).sum() == 7
  positions = np.array([[1, 1], [1, 2], [1, 1], [1, 2], [1, 3], [2, 3],
                        [2, 4]])  # Last one: the wall hit, not counted.
  # Distinct free cells: (1,1) (1,2) (1,3) (2,3) = 4 of 7.
  assert disco_maze.coverage(positions, _WALLS_5) == pytest.approx(4 / 7)
  # With a count, every distinct position counts (the wall too): 5 / 7.
  assert disco_maze.coverage(positions, 7) == pytest.approx(5 / 7)
  assert disco_maze.coverage(positions[:1], 199) == pytest.approx(1 / 199)
  mask = np.zeros((5, 5), bool)
  mask[1, 1:4] = True
  mask[0, 0] = True  # A wall: ignored given the maze.
  assert disco_maze.coverage(mask, _WALLS_5) == pytest.approx(3 / 7)
  assert disco_maze.coverage(np.zeros((0, 2), np.int32), 7) == 0.0
  with pytest.raises(ValueError, match="time step"):
    disco_maze.coverage(np.array([[5, 0]]), _WALLS_5)
  with pytest.raises(ValueError, match="integers"):
    disco_maze.coverage(np.array([[1.0, 1.0]]), _WALLS_5)
  with pytest.raises(ValueError, match="wall mask"):
    disco_maze.coverage(positions, np.zeros((5, 5)))


def test_coverage_tracker_hand_checked():
  tracker = disco_maze.CoverageTracker(2, size=5, num_free=7)

  def ts(step_type, discount, pos):
    return base.TimeStep(np.array(step_type, np.int32), np.zeros(2, np.float32),
                         np.array(discount, np.float32), None,
                         {"position": np.array(pos, np.int32)})

  np.testing.assert_allclose(
      tracker.update(ts([0, 0], [1, 1], [[1, 1], [3, 3]])), [1 / 7, 1 / 7])
  np.testing.assert_allclose(
      tracker.update(ts([1, 1], [1, 1], [[1, 2], [3, 2]])), [2 / 7, 2 / 7])
  np.testing.assert_allclose(
      tracker.update(ts([1, 1], [1, 1], [[1, 1], [3, 1]])), [2 / 7, 3 / 7])
  # Lane 0 hits a wall (not counted); lane 1 is truncated (counted).
  np.testing.assert_allclose(
      tracker.update(ts([2, 2], [0, 1], [[0, 1], [2, 3]])), [2 / 7, 4 / 7])
  np.testing.assert_allclose(
      tracker.update(ts([0, 0], [1, 1], [[1, 3], [1, 3]])), [1 / 7, 1 / 7])


def test_coverage_tracker_matches_coverage_on_env():
  env = disco_maze.DiscoMaze(6, seed=9, max_episode_steps=30)
  tracker = disco_maze.CoverageTracker(6)
  rng = np.random.default_rng(0)
  ts = env.reset()
  maze = env.walls()
  paths = [[p] for p in ts.extras["position"]]
  tracker.update(ts)
  checked = 0
  for _ in range(200):
    # A policy that mostly avoids walls, to get long episodes.
    pos = ts.extras["position"]
    actions = np.array([
        rng.choice(sorted(_free_neighbours(maze[b], *pos[b])))
        if rng.random() < 0.95 and not ts.last()[b] else rng.integers(4)
        for b in range(6)], np.int32)
    ts = env.step(actions)
    cov = tracker.update(ts)
    for b in range(6):
      if ts.first()[b]:
        maze[b] = env.walls()[b]
        paths[b] = []
      paths[b].append(ts.extras["position"][b])
      if ts.last()[b]:
        expected = disco_maze.coverage(np.array(paths[b]), maze[b])
        assert cov[b] == pytest.approx(expected)
        checked += 1
  assert checked > 10


def _assert_timesteps_equal(a, b):
  for field in ("step_type", "reward", "discount", "observation"):
    np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
  assert sorted(a.extras) == sorted(b.extras)
  for k in a.extras:
    np.testing.assert_array_equal(a.extras[k], b.extras[k])


@pytest.mark.parametrize("reset_first", [True, False])
def test_get_state_set_state_continues_exactly(reset_first):
  """A copy restored from get_state (other seed) steps exactly as the env."""
  env = disco_maze.DiscoMaze(3, seed=5, max_episode_steps=7,
                             maze_batch_size=4)
  rng = np.random.default_rng(0)
  if reset_first:
    env.reset()
    for _ in range(9):  # Resets consume the maze pool: refills included.
      env.step(rng.integers(0, 4, 3))
  state = env.get_state()
  twin = disco_maze.DiscoMaze(3, seed=99, max_episode_steps=7,
                              maze_batch_size=4)
  twin.set_state(state)
  if not reset_first:
    _assert_timesteps_equal(env.reset(), twin.reset())
  for _ in range(30):
    actions = rng.integers(0, 4, 3)
    _assert_timesteps_equal(env.step(actions), twin.step(actions))
  # The state is a copy: stepping did not change it, and it restores again.
  twin.set_state(state)
  assert twin.get_state()["maze_rng"] == state["maze_rng"]


def test_set_state_rejects_other_layouts():
  env = disco_maze.DiscoMaze(3, seed=1)
  env.reset()
  state = env.get_state()
  with pytest.raises(ValueError, match="'walls' has shape"):
    disco_maze.DiscoMaze(2, seed=1).set_state(state)
  with pytest.raises(ValueError, match="missing entry 'position'"):
    env.set_state({k: v for k, v in state.items() if k != "position"})


def test_coverage_tracker_state_round_trip():
  env = disco_maze.DiscoMaze(2, seed=3)
  tracker = disco_maze.CoverageTracker(2)
  ts = env.reset()
  tracker.update(ts)
  rng = np.random.default_rng(1)
  for _ in range(3):
    ts = env.step(rng.integers(0, 4, 2))
    tracker.update(ts)
  twin = disco_maze.CoverageTracker(2)
  twin.set_state(tracker.get_state())
  for _ in range(10):
    ts = env.step(rng.integers(0, 4, 2))
    np.testing.assert_array_equal(tracker.update(ts), twin.update(ts))
  with pytest.raises(ValueError, match="expected visited"):
    disco_maze.CoverageTracker(3).set_state(tracker.get_state())


def test_declares_its_coverage_tracker():
  """`make_coverage_tracker` (what the loops ask for): a `CoverageTracker`
  over the env's lanes and maze size, fresh at every call."""
  env = envs.make("disco_maze", 3, seed=0, size=9, max_episode_steps=5)
  tracker = env.make_coverage_tracker()
  assert isinstance(tracker, disco_maze.CoverageTracker)
  assert tracker.size == 9
  assert env.make_coverage_tracker() is not tracker
  twin = disco_maze.CoverageTracker(3, size=9)
  timestep = env.reset()
  rng = np.random.default_rng(0)
  for _ in range(12):
    np.testing.assert_array_equal(tracker.update(timestep),
                                  twin.update(timestep))
    timestep = env.step(rng.integers(0, 4, 3))


def test_other_environments_declare_no_coverage():
  assert base.BatchedEnv.make_coverage_tracker(None) is None


def test_the_pixel_grids_share_their_specs():
  """`PixelGridSpecs`: the batched and pure-JAX Disco Mazes declare the same
  specs; the noisy grid widens the image for "frame" and adds the TV action
  for "tv"."""
  batched = disco_maze.DiscoMaze(2, size=7, max_episode_steps=9)
  lane = disco_maze_jax.DiscoMazeJax(size=7, max_episode_steps=9)
  for env in (batched, lane):
    assert env.observation_spec().shape == (7, 7, 3)
    assert env.observation_spec().dtype == np.uint8
    assert env.action_spec().num_values == disco_maze.NUM_ACTIONS
    assert (env.size, env.grid_shape, env.max_episode_steps) == (7, (7, 7), 9)
    assert env.observation_encoding() == batched.observation_encoding()
  frame = noisy_grid.NoisyGrid("frame", size=7)
  assert frame.observation_spec().shape == (7, 14, 3)
  assert noisy_grid.NoisyGrid("tv", size=7).action_spec().num_values == len(
      noisy_grid.ACTION_NAMES)
