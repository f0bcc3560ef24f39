"""A user's own environments, named "tests.envs.user_envs:<factory>".

Factories of every kind `ngu_jax.envs.make` / `make_functional` accept
(a FunctionalEnv, a BatchedEnv, a gymnasium vector environment) and of the
kinds they refuse, for tests/envs/test_registry.py,
tests/envs/test_gymnasium_adapter.py and tests/experiments/test_train.py.
"""

import gymnasium
from gymnasium import spaces
import numpy as np

from ngu_jax.envs import disco_maze
from ngu_jax.envs import noisy_grid

# Not callable: "tests.envs.user_envs:NOT_CALLABLE" is refused.
NOT_CALLABLE = 3


def noisy_lane(size: int = 7, max_episode_steps: int = 10, **kwargs):
  """One lane of a small noisy-TV grid: a FunctionalEnv, both loops."""
  return noisy_grid.NoisyGrid("tv", size=size,
                              max_episode_steps=max_episode_steps, **kwargs)


def disco_lanes(num_envs: int, seed: int = 0, **kwargs):
  """B lanes of the numpy Disco Maze: a BatchedEnv, the Python loop only."""
  return disco_maze.DiscoMaze(num_envs, seed=seed, **kwargs)


def too_many_lanes(num_envs: int):
  """A BatchedEnv of num_envs + 1 lanes (refused)."""
  return disco_maze.DiscoMaze(num_envs + 1)


def lanes_without_num_envs(size: int = 7):
  """A BatchedEnv of a fixed 3 lanes, from a factory without `num_envs`."""
  return disco_maze.DiscoMaze(3, size=size)


def not_an_env(**kwargs):
  """Returns a dict (refused, naming what it returned)."""
  return {"not": "an environment", **kwargs}


class ChainEnv(gymnasium.Env):
  """A chain of `length` cells: one gymnasium environment.

  Starts in cell 0. Action `start + 1` moves one cell right, `start` stays.
  Reaching cell `length - 1` terminates with reward 1; after `max_steps`
  steps the episode is truncated (both flags on the same step: terminated).
  Observation float32 [2]: (cell, steps taken).
  """

  def __init__(self, length: int = 3, max_steps: int = 5, start: int = 0):
    self.length = length
    self.max_steps = max_steps
    self.start = start
    self.action_space = spaces.Discrete(2, start=start)
    self.observation_space = spaces.Box(0., 100., (2,), np.float32)
    self._cell = self._steps = 0

  def _obs(self):
    return np.array([self._cell, self._steps], np.float32)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._cell = self._steps = 0
    return self._obs(), {}

  def step(self, action):
    assert self.action_space.contains(action), action
    self._cell += int(action) - self.start
    self._steps += 1
    terminated = self._cell == self.length - 1
    truncated = self._steps >= self.max_steps
    return self._obs(), float(terminated), terminated, truncated, {}


def chain_vector(num_envs: int, seed: int = 0, length: int = 3,
                 max_steps: int = 5, start: int = 0,
                 autoreset_mode: str = "NextStep"):
  """A SyncVectorEnv of num_envs `ChainEnv`s (Python loop only)."""
  del seed  # GymnasiumVectorEnv seeds the first reset.
  return gymnasium.vector.SyncVectorEnv(
      [lambda: ChainEnv(length, max_steps, start)] * num_envs,
      autoreset_mode=autoreset_mode)


def cartpole_vector(num_envs: int, max_episode_steps: int = 500):
  """gymnasium's CartPole-v1, num_envs copies (float32 [4] features)."""
  return gymnasium.make_vec("CartPole-v1", num_envs,
                            vectorization_mode="sync",
                            max_episode_steps=max_episode_steps)


def single_chain():
  """One gymnasium.Env, not a vector (refused, with a hint)."""
  return ChainEnv()


def continuous_actions(num_envs: int):
  """A vector environment with Box actions (refused)."""
  return gymnasium.make_vec("MountainCarContinuous-v0", num_envs,
                            vectorization_mode="sync")


def chain_pair():
  """A gymnasium vector environment of 2 chains, without `num_envs`."""
  return chain_vector(2)
