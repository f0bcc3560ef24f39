"""Tests for ngu_jax.envs.make: one entry point for every environment."""

import importlib.util

import numpy as np
import pytest

from ngu_jax import envs
from ngu_jax.envs import atari
from ngu_jax.envs import minigrid
from ngu_jax.types import ObservationEncoding
from tests.envs import conformance


def _has_module(name):
  try:
    return importlib.util.find_spec(name) is not None
  except ImportError:
    return False


def test_reexports():
  for name in ("BatchedEnv", "TimeStep", "StepType", "Array", "BoundedArray",
               "DiscreteArray", "validate_actions", "check_observation_finite",
               "make", "known_names"):
    assert hasattr(envs, name) and name in envs.__all__


def test_atari():
  with envs.make("atari/MontezumaRevenge", 2, seed=4) as env:
    assert isinstance(env, atari.AtariEnv) and env.game == "MontezumaRevenge"
    assert env.num_envs == 2 and env.envpool_config["seed"] == 4
    assert env.envpool_config["max_episode_steps"] == 27000
  with envs.make("atari/Pong", 1, noop_max=1, max_episode_steps=99) as env:
    assert env.envpool_config["noop_max"] == 1
    assert env.envpool_config["max_episode_steps"] == 99


def test_minigrid():
  with envs.make("minigrid/MiniGrid-FourRooms-v0", 3, seed=1,
                 max_episode_steps=50) as env:
    assert isinstance(env, minigrid.MiniGridEnv)
    assert env.num_envs == 3 and env.envpool_config["max_episode_steps"] == 50
    ts = env.reset()
    assert ts.observation.shape == (3, 7, 7, 3)


@pytest.mark.skipif(not _has_module("ngu_jax.envs.disco_maze"),
                    reason="ngu_jax.envs.disco_maze not available")
def test_disco_maze():
  from ngu_jax.envs import disco_maze  # pylint: disable=g-import-not-at-top
  with envs.make("disco_maze", 2, seed=3, max_episode_steps=50) as env:
    assert isinstance(env, disco_maze.DiscoMaze) and env.num_envs == 2
    ts = env.reset()
    assert ts.observation.shape == (2, 21, 21, 3)


@pytest.mark.skipif(not (_has_module("ngu_jax.envs.gymnax_adapter")
                         and _has_module("gymnax")),
                    reason="gymnax or ngu_jax.envs.gymnax_adapter missing")
def test_gymnax():
  from ngu_jax.envs import gymnax_adapter  # pylint: disable=g-import-not-at-top
  with envs.make("gymnax/DeepSea-bsuite", 2, seed=0) as env:
    assert isinstance(env, gymnax_adapter.GymnaxEnv) and env.num_envs == 2
    assert np.asarray(env.reset().step_type).shape == (2,)


def test_make_functional_and_jax_prefix():
  from ngu_jax.envs import disco_maze_jax  # pylint: disable=g-import-not-at-top
  from ngu_jax.envs import functional  # pylint: disable=g-import-not-at-top
  env = envs.make_functional("disco_maze", size=7, max_episode_steps=9)
  assert isinstance(env, disco_maze_jax.DiscoMazeJax)
  assert env.max_episode_steps == 9 and env.grid_shape == (7, 7)
  with envs.make("jax/disco_maze", 2, seed=1, size=7) as lanes:
    assert isinstance(lanes, functional.FunctionalBatchedEnv)
    assert lanes.reset().observation.shape == (2, 7, 7, 3)
  assert "make_functional" in envs.__all__


@pytest.mark.parametrize("name", ["atari/Pong", "jax", "disco-maze",
                                  "minigrid", "gymnax/", 3])
def test_make_functional_unknown_names(name):
  with pytest.raises(ValueError, match="make_functional"):
    envs.make_functional(name)


@pytest.mark.parametrize("name", ["pong", "atari/", "atari", "minigrid/",
                                  "gymnax", "disco-maze", "Atari/Pong", ""])
def test_unknown_name_lists_known_ones(name):
  with pytest.raises(ValueError) as info:
    envs.make(name, 1)
  message = str(info.value)
  assert "unknown environment" in message
  for pattern in ("atari/<Game>", "atari/MontezumaRevenge", "disco_maze",
                  "minigrid/<MiniGrid id>", "minigrid/MiniGrid-DoorKey-8x8-v0",
                  "gymnax/<gymnax id>", "noisy_grid/<noise>", "jax/<name>",
                  "module:factory", "--list"):
    assert pattern in message
  assert envs.known_names() and all(
      isinstance(n, str) for n in envs.known_names())


def test_bad_ids_inside_a_family():
  with pytest.raises(ValueError, match="unknown Atari game"):
    envs.make("atari/NotAGame", 1)
  with pytest.raises(ValueError, match="unknown MiniGrid id"):
    envs.make("minigrid/MiniGrid-Nope-v0", 1)
  with pytest.raises(ValueError, match="string"):
    envs.make(None, 1)


@pytest.mark.parametrize("name, kwargs, expected", [
    ("atari/Pong", {}, ObservationEncoding("pixels")),
    ("disco_maze", {}, ObservationEncoding("pixels")),
    ("minigrid/MiniGrid-DoorKey-5x5-v0", {},
     ObservationEncoding("symbolic", (11, 6, 3))),
    ("gymnax/DeepSea-bsuite", {"size": 10}, ObservationEncoding("binary")),
    ("gymnax/CartPole-v1", {}, ObservationEncoding("features")),
    ("gymnax/Breakout-MinAtar", {}, ObservationEncoding("binary")),
    ("gymnax/FrozenLake-misc", {}, ObservationEncoding("symbolic", (16,))),
])
def test_declared_encodings(name, kwargs, expected):
  if name.startswith("gymnax/") and not _has_module("gymnax"):
    pytest.skip("gymnax not installed")
  with envs.make(name, 2, seed=0, **kwargs) as env:
    assert env.observation_encoding() == expected
    ts = env.reset()
    conformance.check_observation_encoding(env, ts.observation)


def test_available():
  names = envs.available()
  assert len(set(names)) == len(names)
  assert names == tuple(n for f in envs.FAMILIES for n in envs.available(f))
  for name in ("atari/Pong", "atari/MontezumaRevenge", "disco_maze",
               "minigrid/MiniGrid-DoorKey-5x5-v0",
               "minigrid/MiniGrid-DoorKey-8x8-v0", "noisy_grid/tv"):
    assert name in names
  assert all(n.startswith("atari/") for n in envs.available("atari"))
  if _has_module("gymnax"):
    gymnax_names = envs.available("gymnax")
    assert "gymnax/DeepSea-bsuite" in gymnax_names
    assert "gymnax/CartPole-v1" in gymnax_names
    # Refused by the adapter: continuous actions, data downloads.
    assert "gymnax/Pendulum-v1" not in gymnax_names
    assert "gymnax/MNISTBandit-bsuite" not in gymnax_names
  with pytest.raises(ValueError, match="unknown family"):
    envs.available("procgen")


def test_available_names_build():
  # One name per family (and every gymnax id: they are cheap) builds.
  for name in ("atari/Pong", "minigrid/MiniGrid-Empty-5x5-v0", "disco_maze"):
    with envs.make(name, 1) as env:
      env.observation_encoding()
  for name in envs.available("gymnax"):
    with envs.make(name, 1) as env:
      env.observation_encoding()
