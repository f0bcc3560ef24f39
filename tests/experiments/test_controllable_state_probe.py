"""Tests of experiments.probes.controllable_state (NGU Sec. 2, 4.1, Alg. 1)."""

import csv
import dataclasses
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.probes import controllable_state as probe
from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.envs import disco_maze
from ngu_jax.intrinsic import episodic
from ngu_jax.loops.compiled import loop as compiled
from ngu_jax.loops.compiled import runner as compiled_runner

TINY = dict(grid_filters=(4, 8), grid_output_size=16, lstm_size=16,
            head_hidden=16, embedding_dim=8, rnd_output_dim=8,
            inverse_dynamics_hidden=16, trace_length=6, replay_period=3,
            min_replay_size=4, batch_size=4, memory_capacity=64,
            replay_capacity=64)
SIZE = 7


def position_one_hot(obs):
  """f that sees only the agent: one-hot of the green pixel, [N, S*S]."""
  obs = np.asarray(obs)
  return np.all(obs == disco_maze.AGENT_COLOUR, axis=-1).reshape(
      len(obs), -1).astype(np.float32)


def pixel_sum(obs):
  """f that sums every pixel, [N, 1] (scaled to keep distances small)."""
  obs = np.asarray(obs, np.float32)
  return obs.reshape(len(obs), -1).sum(axis=1, keepdims=True) / 1000.


def _mazes(n, size=SIZE, seed=0):
  return disco_maze.generate_mazes(np.random.default_rng(seed), n, size)


def _is_wall_colour(pixels):
  """bool [...]: each RGB pixel [..., 3] is one of WALL_COLOURS."""
  return np.any(np.all(pixels[..., None, :] == disco_maze.WALL_COLOURS,
                       axis=-1), axis=-1)


# -------------------------------------------------------------- render


def test_render_matches_disco_maze():
  seed, b = 3, 5
  env = disco_maze.DiscoMaze(b, seed=seed, size=SIZE)
  ts = env.reset()
  walls, position = env.walls(), ts.extras["position"]
  # Same colour stream as the environment's: identical first observation.
  colour_seq = np.random.SeedSequence(seed).spawn(2)[1]
  ours = probe.render(walls, position, np.random.default_rng(colour_seq))
  assert ours.dtype == np.uint8 and ours.shape == (b, SIZE, SIZE, 3)
  np.testing.assert_array_equal(ours, ts.observation)
  # Rules, under other colours: pathways black, agent green, walls coloured.
  other = probe.render(walls, position, np.random.default_rng(7))
  agent = np.zeros_like(walls)
  agent[np.arange(b), position[:, 0], position[:, 1]] = True
  np.testing.assert_array_equal(other[agent], ts.observation[agent])
  assert np.all(other[agent] == disco_maze.AGENT_COLOUR)
  pathway = ~walls & ~agent
  np.testing.assert_array_equal(other[pathway], ts.observation[pathway])
  assert np.all(other[pathway] == 0)
  assert np.all(_is_wall_colour(other[walls]))
  assert np.any(other[walls] != ts.observation[walls])  # Fresh colours.
  used = {tuple(c) for c in other[walls]}
  assert len(used) == len(disco_maze.WALL_COLOURS)


# ------------------------------------------------------- scripted walks


def _legal(walls, path):
  steps = np.abs(np.diff(path, axis=0)).sum(axis=1)
  return (np.all(steps == 1) and not np.any(walls[path[:, 0], path[:, 1]]))


@pytest.mark.parametrize("size", [7, 11])
def test_explore_is_legal_and_visits_every_free_cell(size):
  walls, starts = _mazes(6, size)
  num_free = disco_maze.num_free_cells(size)
  rng = np.random.default_rng(0)
  for w, s in zip(walls, starts):
    # A depth-first traversal of a tree of V nodes takes 2 (V - 1) moves.
    path = probe.scripted_walk(w, s, "explore", 2 * (num_free - 1) + 1, rng)
    assert _legal(w, path)
    np.testing.assert_array_equal(path[0], s)
    assert len({tuple(p) for p in path}) == num_free
    # Past a full traversal it keeps making legal moves.
    longer = probe.scripted_walk(w, s, "explore", 3 * num_free, rng)
    assert len(longer) == 3 * num_free and _legal(w, longer)


def test_oscillate_visits_two_cells_and_random_stays_off_walls():
  walls, starts = _mazes(8)
  rng = np.random.default_rng(1)
  for w, s in zip(walls, starts):
    path = probe.scripted_walk(w, s, "oscillate", 25, rng)
    assert path.shape == (25, 2) and _legal(w, path)
    assert len({tuple(p) for p in path}) == 2
    np.testing.assert_array_equal(path[::2], np.broadcast_to(s, (13, 2)))
    path = probe.scripted_walk(w, s, "random", 200, rng)
    assert path.shape == (200, 2) and _legal(w, path)


def test_unknown_policy_raises():
  walls, starts = _mazes(1)
  with pytest.raises(ValueError, match="policy"):
    probe.scripted_walk(walls[0], starts[0], "stay", 5,
                        np.random.default_rng(0))


# --------------------------------------------------- colour invariance


def test_invariance_position_one_hot_ignores_colours():
  walls, _ = _mazes(16)
  out = probe.measure_invariance(position_one_hot, walls,
                                 np.random.default_rng(0))
  assert out["d_colour"] == 0.0
  assert out["d_move"] == pytest.approx(2.0)  # Two one-hots apart.
  assert out["ratio"] == math.inf


def test_invariance_pixel_sum_sees_only_colours():
  walls, _ = _mazes(32)
  out = probe.measure_invariance(pixel_sum, walls, np.random.default_rng(0))
  assert out["d_colour"] > 0
  # Moving the agent does not change the pixel sum: only colours do.
  assert out["ratio"] < 1.5


def test_invariance_network_f_is_finite():
  config = config_lib.disco_maze(**TINY)
  networks = probe.make_networks(config, SIZE)
  params = networks.embedding.init(jax.random.PRNGKey(0))
  walls, _ = _mazes(4)
  out = probe.measure_invariance(probe.network_embed_fn(config, SIZE, params),
                                 walls, np.random.default_rng(0), repeats=2)
  assert all(np.isfinite(v) and v > 0 for v in out.values())


# ------------------------------------------------------ episodic rewards


MEMORY = episodic.EpisodicMemoryConfig(
    capacity=100, num_neighbors=10, kernel_epsilon=1e-2,
    cluster_distance=0.008, pseudo_count_constant=1e-3, max_similarity=8.,
    distance_horizon=0)


def test_oscillate_rewards_match_hand_computation():
  walls, starts = _mazes(3)
  rewards = probe.scripted_rewards(
      position_one_hot, MEMORY, walls[None], starts[None], "oscillate", 3,
      np.random.default_rng(0))
  assert rewards.shape == (1, 3, 3)
  eps, xi, c = 1e-2, 0.008, 1e-3
  # t = 1 at q, memory {p}: d^2 = [2], d_m^2 = 2, normalised 1.
  r1 = 1. / (math.sqrt(eps / (1. - xi + eps)) + c)
  # t = 2 at p, memory {p, q}: d^2 = [0, 2], d_m^2 = (2 + 0 + 2) / 3;
  # normalised 0 (kernel 1) and 1.5.
  r2 = 1. / (math.sqrt(1. + eps / (1.5 - xi + eps)) + c)
  np.testing.assert_allclose(rewards[0], np.array([[0., r1, r2]] * 3).T,
                             rtol=1e-5)


def test_memory_wiped_per_episode_but_statistic_kept():
  """Episode 2 of `oscillate` starts again from an empty memory (reward 0)
  with d_m^2 carried over: its t = 1 reward differs from episode 1's."""
  walls, starts = _mazes(4)
  walls = np.stack([walls[:2], walls[2:]])
  starts = np.stack([starts[:2], starts[2:]])
  rewards = probe.scripted_rewards(
      position_one_hot, MEMORY, walls, starts, "oscillate", 6,
      np.random.default_rng(0))
  assert rewards.shape == (2, 6, 2)
  np.testing.assert_array_equal(rewards[:, 0], 0.)
  # Episode 1 (p q p q p q) ends with d_m^2 = mean of
  # [2, 0,2, 2,0,2, 0,2,0,2, 2,0,2,0,2] = 18 / 15; at t = 1 of episode 2
  # the single distance 2 joins it.
  eps, xi, c = 1e-2, 0.008, 1e-3
  dm2 = (18. + 2.) / 16.
  r1 = 1. / (math.sqrt(eps / (2. / dm2 - xi + eps)) + c)
  np.testing.assert_allclose(rewards[1, 1], r1, rtol=1e-5)
  assert not np.allclose(rewards[1, 1], rewards[0, 1])


def test_explore_beats_oscillate_for_position_one_hot():
  out = probe.policy_rewards(position_one_hot, MEMORY, SIZE, num_mazes=4,
                             num_episodes=3, num_steps=20, seed=0)
  assert out["reward_explore"] > 2 * out["reward_oscillate"]
  assert out["explore_over_oscillate"] > 2
  assert out["reward_explore"] >= out["reward_random"]


def colour_noisy(obs, scale=0.12):
  """f = the agent's position one-hot plus a little of every pixel, so
  re-coloured walls move f by about a quarter of one step (ratio ~4)."""
  obs = np.asarray(obs)
  pixels = obs.reshape(len(obs), -1).astype(np.float32) / 255.
  return np.concatenate([position_one_hot(obs), scale * pixels], axis=1)


def test_own_statistics_hide_oscillation_a_shared_scale_reveals_it():
  """The trap of a d_m^2 that follows behaviour: scored under its own
  k-NN distances, oscillating pays about as much as exploring; after
  behaviour-neutral random walks set d_m^2 (lifetime average), exploring
  pays clearly more."""
  walls, _ = _mazes(8)
  ratio = probe.measure_invariance(colour_noisy, walls,
                                   np.random.default_rng(1))["ratio"]
  assert 2 < ratio < 10
  lifetime = dataclasses.replace(MEMORY, distance_horizon=0)
  own = probe.policy_rewards(colour_noisy, lifetime, SIZE, num_mazes=8,
                             num_episodes=4, num_steps=30, seed=0)
  warm = probe.policy_rewards(colour_noisy, lifetime, SIZE, num_mazes=8,
                              num_episodes=4, num_steps=30, seed=0,
                              warmup_episodes=12, prefix="warm_")
  assert own["explore_over_oscillate"] < 1.15
  assert warm["warm_explore_over_oscillate"] > 1.3
  assert warm["warm_reward_oscillate"] < own["reward_oscillate"]


# ---------------------------------------------------------- end to end


def _fresh_run(learn_embedding=True):
  config = config_lib.disco_maze(**TINY, learn_embedding=learn_embedding)
  params = probe.make_networks(config, SIZE).embedding.init(
      jax.random.PRNGKey(1))
  return probe.RunParams(variant="tiny", seed="seed0", config=config,
                         size=SIZE, params=params)


def test_probe_run_end_to_end_on_fresh_params():
  rows = probe.probe_run(_fresh_run(), fresh_f=True, seed=0, num_mazes=3,
                         num_episodes=2, num_steps=6, warmup_episodes=1,
                         distance_horizon=7)
  assert [r["f"] for r in rows] == ["learned", "fresh init"]
  for r in rows:
    assert set(r) == set(probe.COLUMNS)
    assert r["horizon"] == 7
    for name in probe.COLUMNS[5:]:
      assert np.isfinite(r[name]), name
  rows = probe.probe_run(_fresh_run(False), fresh_f=True, num_mazes=3,
                         num_episodes=2, num_steps=6)
  assert [r["f"] for r in rows] == ["fixed random"]


@pytest.mark.slow
def test_main_reads_a_checkpoint(tmp_path, capsys):
  """A compiled-loop checkpoint (initial state) through `main`."""
  config = config_lib.disco_maze(**TINY)
  env_kwargs = {"size": SIZE, "max_episode_steps": 20}
  env = envs.make_functional("disco_maze", **env_kwargs)
  loop = compiled.make_compiled_loop(config, env, 2, 1)
  state = jax.jit(jax.vmap(loop.init))(jnp.stack([jax.random.PRNGKey(0)]))
  run_dir = tmp_path / "variant_a" / "seed0"
  ckpt = run_dir / "checkpoint"
  os.makedirs(ckpt)
  ckpt_lib.save_pytree(str(ckpt / "train_state.npz"), state)
  ckpt_lib.write_json(
      str(ckpt / "config.json"), compiled_runner.compiled_config(
          config, "disco_maze", 2, [0], env_kwargs, 100, 0))
  out_dir = tmp_path / "out"
  rows = probe.main([str(run_dir), "--output", str(out_dir), "--mazes", "2",
                     "--episodes", "2", "--steps", "5", "--fresh-f"])
  assert [(r["variant"], r["seed"], r["f"]) for r in rows] == [
      ("variant_a", "seed0", "learned"), ("variant_a", "seed0", "fresh init")]
  # The loaded parameters are the learner's.
  loaded = probe.load_run(str(run_dir))
  expected = jax.tree_util.tree_map(lambda x: x[0],
                                    state.learner.params.embedding)
  jax.tree_util.tree_map(np.testing.assert_array_equal, loaded.params,
                         expected)
  assert loaded.size == SIZE
  with open(out_dir / "probe.csv") as f:
    written = list(csv.DictReader(f))
  assert len(written) == 2 and list(written[0]) == list(probe.COLUMNS)
  assert "variant_a" in (out_dir / "probe.md").read_text()
  assert "explore_over_oscillate" in capsys.readouterr().out


def test_random_transitions_are_legal_moves():
  walls, _ = _mazes(4)
  x_t, x_tp1, a_t = probe.random_transitions(walls, 32,
                                             np.random.default_rng(0))
  assert x_t.shape == x_tp1.shape == (32, SIZE, SIZE, 3)
  green = lambda x: np.argwhere(np.all(x == disco_maze.AGENT_COLOUR, -1))
  for i in range(32):
    (p,), (q,) = green(x_t[i]), green(x_tp1[i])
    np.testing.assert_array_equal(
        q - p, disco_maze._MOVES[a_t[i]])  # pylint: disable=protected-access


@pytest.mark.slow  # A learning claim: 400 updates, 18 s.
def test_train_offline_learns_the_action():
  config = config_lib.disco_maze(**{
      **TINY, "grid_filters": (8, 16), "embedding_dim": 16,
      "action_prediction_learning_rate": 3e-3})
  _, accuracy = probe.train_offline(config, SIZE, num_updates=400,
                                    batch_size=64, seed=0)
  # Chance is 0.25-0.5 (2-4 legal moves); measured 1.0 (0.67 at 200).
  assert accuracy > 0.9
