"""Tests for ngu_jax.envs.registry: one name per environment, both loops,
and users' own environments as "module:factory"."""

import numpy as np
import pytest

from ngu_jax import envs
from ngu_jax.envs import disco_maze
from ngu_jax.envs import disco_maze_jax
from ngu_jax.envs import functional
from ngu_jax.envs import gymnasium_adapter
from ngu_jax.envs import registry
from ngu_jax.envs import xminigrid_env

USER = "tests.envs.user_envs"
BOTH = ("python", "compiled")


def test_every_name_once_with_its_loops():
  names = envs.available()
  assert len(set(names)) == len(names)
  for family in envs.FAMILIES:
    for name, loops in registry.listing(family):
      assert loops and set(loops) <= set(envs.LOOPS), name
      assert envs.loops_of(name) == loops
  assert envs.loops_of("atari/Pong") == ("python",)
  both = ["disco_maze", "noisy_grid/tv"]
  if xminigrid_env.xminigrid is not None:  # Else MiniGrid is Python-only.
    both.append("minigrid/MiniGrid-DoorKey-8x8-v0")
  for name in both:
    assert envs.loops_of(name) == BOTH
  # envpool has it, xland-minigrid not: the Python loop only.
  assert envs.loops_of("minigrid/MiniGrid-LavaGapS5-v0") == ("python",)
  # The functional implementation in the Python loop; none for Atari.
  assert envs.loops_of("jax/disco_maze") == BOTH
  assert envs.loops_of("jax/atari/Pong") == ()
  for outside in ("atari/NotAGame", "pong", f"{USER}:noisy_lane", None):
    assert envs.loops_of(outside) == ()


# A name from `available()` builds in every loop `loops_of` lists, with the
# implementation the module docstring names; the others refuse it.
@pytest.mark.parametrize("name, batched, lane", [
    ("noisy_grid/tv", functional.FunctionalBatchedEnv, "NoisyGrid"),
    ("disco_maze", disco_maze.DiscoMaze, "DiscoMazeJax"),
    ("minigrid/MiniGrid-Empty-5x5-v0", "MiniGridEnv", "XMiniGrid"),
    ("minigrid/MiniGrid-LavaGapS5-v0", "MiniGridEnv", None),
    ("minigrid/MiniGrid-KeyCorridorS3R3-v0", "MiniGridEnv", "XMiniGrid"),
    ("gymnax/DeepSea-bsuite", "GymnaxEnv", "GymnaxFunctional"),
    ("atari/Pong", "AtariEnv", None),
])
def test_a_listed_name_builds_in_each_loop_it_lists(name, batched, lane):
  if name.startswith("gymnax/"):
    pytest.importorskip("gymnax")
  if lane == "XMiniGrid":
    pytest.importorskip("xminigrid")
  assert name in envs.available()
  assert envs.loops_of(name) == (BOTH if lane else ("python",))
  envs.check_name(name, "python")
  with envs.make(name, 2, seed=1) as env:
    if isinstance(batched, str):
      assert type(env).__name__ == batched
    else:
      assert isinstance(env, batched)
    assert env.num_envs == 2 and env.reset().observation.shape[0] == 2
  if lane is None:
    with pytest.raises(envs.EnvironmentNameError,
                       match="Python loop only|only the Python loop"):
      envs.check_name(name, "compiled")
    with pytest.raises(envs.EnvironmentNameError, match="Python loop"):
      envs.make_functional(name)
    return
  envs.check_name(name, "compiled")
  env = envs.make_functional(name)
  assert isinstance(env, functional.FunctionalEnv)
  assert type(env).__name__ == lane


def test_jax_prefix_is_the_functional_implementation_in_lanes():
  with envs.make("jax/disco_maze", 2, seed=1, size=7) as lanes:
    assert isinstance(lanes, functional.FunctionalBatchedEnv)
    assert isinstance(lanes.functional_env, disco_maze_jax.DiscoMazeJax)
  # The compiled loop reads it as the plain name.
  assert isinstance(envs.make_functional("jax/disco_maze", size=7),
                    disco_maze_jax.DiscoMazeJax)
  envs.check_name("jax/noisy_grid/tv", "python")
  envs.check_name("jax/noisy_grid/tv", "compiled")
  with pytest.raises(envs.EnvironmentNameError, match="Python loop"):
    envs.check_name("jax/atari/Pong", "python")


def test_atari_in_the_compiled_loop_names_the_python_loop():
  for error in (lambda: envs.make_functional("atari/Pong"),
                lambda: envs.check_name("atari/Pong", "compiled")):
    with pytest.raises(envs.EnvironmentNameError) as info:
      error()
    message = str(info.value)
    assert "--loop python" in message and "pure-JAX" in message
    assert "noisy_grid/<noise>" in message  # What the loop does accept.
  assert issubclass(envs.EnvironmentNameError, ValueError)


@pytest.mark.parametrize("name, loop, match", [
    ("pong", "python", "unknown environment 'pong'"),
    ("atari/NotAGame", "python", "unknown environment"),
    ("noisy", "compiled", "noisy_grid/<noise>"),
    ("minigrid/MiniGrid-Nope-v0", "compiled", "unknown functional"),
    (3, "python", "string"),
])
def test_check_name_refuses_unknown_names(name, loop, match):
  with pytest.raises(envs.EnvironmentNameError, match=match):
    envs.check_name(name, loop)


def test_check_name_unknown_loop():
  with pytest.raises(ValueError, match="unknown loop"):
    envs.check_name("disco_maze", "ray")


# Users' factories.


def test_functional_factory_runs_in_both_loops():
  lane = envs.make_functional(f"{USER}:noisy_lane", size=9)
  assert lane.observation_spec().shape[:2] == (9, 9)
  envs.check_name(f"{USER}:noisy_lane", "compiled")
  with envs.make(f"{USER}:noisy_lane", 2, seed=3, max_episode_steps=10
                 ) as lanes, envs.make("noisy_grid/tv", 2, seed=3, size=7,
                                       max_episode_steps=10) as named:
    assert isinstance(lanes, functional.FunctionalBatchedEnv)
    # In lanes seeded like a named environment's: the same timesteps.
    np.testing.assert_array_equal(lanes.reset().observation,
                                  named.reset().observation)
    for _ in range(12):
      actions = np.array([4, 1], np.int32)
      a, b = lanes.step(actions), named.step(actions)
      np.testing.assert_array_equal(a.observation, b.observation)
      np.testing.assert_array_equal(a.step_type, b.step_type)
  with envs.make(f"jax/{USER}:noisy_lane", 2) as lanes:
    assert isinstance(lanes, functional.FunctionalBatchedEnv)


def test_batched_factory_gets_num_envs_and_seed():
  with envs.make(f"{USER}:disco_lanes", 3, seed=5, size=7) as env, \
      disco_maze.DiscoMaze(3, seed=5, size=7) as same:
    assert isinstance(env, disco_maze.DiscoMaze) and env.num_envs == 3
    np.testing.assert_array_equal(env.reset().observation,
                                  same.reset().observation)


def test_gymnasium_factory_is_adapted():
  with envs.make(f"{USER}:chain_vector", 2, seed=0, length=4) as env:
    assert isinstance(env, gymnasium_adapter.GymnasiumVectorEnv)
    assert env.num_envs == 2 and env.reset().observation.shape == (2, 2)
  with pytest.raises(envs.EnvironmentNameError, match="SAME_STEP"):
    envs.make(f"{USER}:chain_vector", 2, autoreset_mode="SameStep")


def test_batched_factories_are_refused_by_the_compiled_loop():
  # `num_envs` without a default: refused before calling the factory.
  for name in (f"{USER}:disco_lanes", f"{USER}:chain_vector"):
    with pytest.raises(envs.EnvironmentNameError,
                       match="needs `num_envs`.*only the Python loop"):
      envs.check_name(name, "compiled")
    with pytest.raises(envs.EnvironmentNameError, match="needs `num_envs`"):
      envs.make_functional(name)
  # Built, then refused, saying what it returned and why.
  for name, kind in ((f"{USER}:lanes_without_num_envs", "DiscoMaze"),
                     (f"{USER}:chain_pair", "SyncVectorEnv")):
    with pytest.raises(envs.EnvironmentNameError,
                       match=f"returned a batched environment.*{kind}.*"
                       "only the Python loop.*FunctionalEnv"):
      envs.make_functional(name)


@pytest.mark.parametrize("name, match", [
    ("tests.envs.no_such_module:make",
     "cannot import module 'tests.envs.no_such_module'.*ModuleNotFoundError"),
    (f"{USER}:no_such_factory",
     f"'{USER}' has no attribute 'no_such_factory'"),
    (f"{USER}:ChainEnv.nope", f"'{USER}.ChainEnv' has no attribute 'nope'"),
    (f"{USER}:NOT_CALLABLE", "is a int, not callable"),
    (f"{USER}:", "not 'module:factory'"),
    (":noisy_lane", "not 'module:factory'"),
    (f"{USER}:noisy_lane:x", "not 'module:factory'"),
])
def test_factories_that_cannot_be_loaded(name, match):
  for loop in envs.LOOPS:
    with pytest.raises(envs.EnvironmentNameError, match=match):
      envs.check_name(name, loop)
  with pytest.raises(envs.EnvironmentNameError, match=match):
    envs.make(name, 2)
  with pytest.raises(envs.EnvironmentNameError, match=match):
    envs.make_functional(name)


def test_factories_that_return_something_else():
  expected = "expected a ngu_jax.envs.BatchedEnv.*FunctionalEnv.*VectorEnv"
  with pytest.raises(envs.EnvironmentNameError,
                     match="returned a builtins.dict .*" + expected):
    envs.make(f"{USER}:not_an_env", 2)
  with pytest.raises(envs.EnvironmentNameError,
                     match="returned a builtins.dict .*FunctionalEnv"):
    envs.make_functional(f"{USER}:not_an_env")
  # One gymnasium.Env, not a vector of them: a hint.
  with pytest.raises(envs.EnvironmentNameError,
                     match="ChainEnv.*gymnasium.make_vec"):
    envs.make(f"{USER}:single_chain", 2)
  with pytest.raises(envs.EnvironmentNameError,
                     match="returned a .*ChainEnv.*FunctionalEnv"):
    envs.make_functional(f"{USER}:single_chain")


def test_factories_with_the_wrong_number_of_lanes():
  with pytest.raises(envs.EnvironmentNameError,
                     match="returned 3 lanes, expected num_envs = 2"):
    envs.make(f"{USER}:too_many_lanes", 2)
  with pytest.raises(envs.EnvironmentNameError, match="must take `num_envs`"):
    envs.make(f"{USER}:lanes_without_num_envs", 2)
  with envs.make(f"{USER}:lanes_without_num_envs", 3) as env:
    assert env.num_envs == 3
