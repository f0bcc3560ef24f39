"""The actor with Agent57's meta-controller (`meta_controller="ucb"`).

Each lane's mixture j is checked against a plain Python sliding-window UCB
fed with the lane's episodes as written out here: the arm of each episode
and its undiscounted extrinsic return (the rewards that arrived with the
episode's non-FIRST steps, the last one included).
"""

import dataclasses
import functools

import jax
import numpy as np
import pytest

from ngu_jax import mixtures
from ngu_jax.agents.ngu import actor
from tests.agents.ngu import test_actor as base
from tests.meta.test_sliding_window_ucb import _reference_pick

B, N = base.B, base.N
WINDOW = 3
UCB_CONFIG = dataclasses.replace(base.CONFIG, meta_controller="ucb",
                                 ucb_window=WINDOW, ucb_epsilon=0.,
                                 ucb_beta=0.5)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _episodes(steps, seed):
  """FIRST flags and rewards: lane b starts episodes every b + 2 steps."""
  rng = np.random.default_rng(seed)
  first = np.zeros((steps, B), bool)
  for b in range(B):
    first[::b + 2, b] = True
  reward = np.round(rng.normal(size=(steps, B)), 1).astype(np.float32)
  reward[first] = 0.
  return first, reward


@JIT
def test_lanes_follow_the_reference_bandit(jit):
  steps = 30
  first, reward = _episodes(steps, 0)
  obs = np.random.default_rng(1).normal(size=(steps, B) + base.OBS).astype(
      np.float32)
  net = base._networks(UCB_CONFIG)
  state = actor.init(UCB_CONFIG, net, jax.random.PRNGKey(0), B)
  step = functools.partial(actor.select_action, UCB_CONFIG, net)
  step = jax.jit(step) if jit else step
  history = [[] for _ in range(B)]   # (arm, return) of finished episodes.
  arm = [0] * B
  ret = [0.] * B
  for t in range(steps):
    _, state = step(base._params(), state, obs[t], reward[t], first[t])
    for b in range(B):
      if first[t, b]:
        if t > 0:
          history[b].append((arm[b], ret[b]))
          arm[b] = _reference_pick(history[b], N, WINDOW, beta=0.5)
        ret[b] = 0.
      else:
        ret[b] += float(reward[t, b])
    np.testing.assert_array_equal(state.mixture_index, arm, err_msg=f"t={t}")
    np.testing.assert_array_equal(state.extras.mixture_index, arm)
    np.testing.assert_allclose(state.episode_return, ret, rtol=1e-6,
                               atol=1e-6)
  # The bandits hold the finished episodes, oldest first in ring order.
  for b in range(B):
    assert int(state.bandit.num_episodes[b]) == len(history[b])
    recent = history[b][-WINDOW:]
    slots = [(len(history[b]) - len(recent) + i) % WINDOW
             for i in range(len(recent))]
    np.testing.assert_array_equal(state.bandit.arms[b, slots],
                                  [a for a, _ in recent])
    np.testing.assert_allclose(state.bandit.returns[b, slots],
                               [r for _, r in recent], rtol=1e-6, atol=1e-6)
  # The first N episodes of every lane play 0, 1, ..., N - 1 in order.
  for b in range(B):
    assert [a for a, _ in history[b][:N]] == list(range(N))


def test_without_meta_controller_lanes_keep_mixture_l_mod_n():
  net = base._networks()
  state = actor.init(base.CONFIG, net, jax.random.PRNGKey(0), B)
  assert state.bandit is None and state.episode_return is None
  np.testing.assert_array_equal(state.mixture_index, np.arange(B) % N)


def test_evaluation_actors_keep_their_mixture():
  net = base._networks(UCB_CONFIG)
  state = actor.init(UCB_CONFIG, net, jax.random.PRNGKey(0), B,
                     evaluation=True, eval_mixture_index=1)
  assert state.bandit is None
  np.testing.assert_array_equal(state.mixture_index, [1] * B)



def test_lanes_get_app_a_epsilons_over_all_lanes():
  # A lane's mixture changes with its bandit, so the epsilons are App. A's
  # over all L lanes, not spread per fixed mixture.
  net = base._networks(UCB_CONFIG)
  state = actor.init(UCB_CONFIG, net, jax.random.PRNGKey(0), B, first_lane=2,
                     total_lanes=8)
  np.testing.assert_allclose(state.epsilon,
                             mixtures.actor_epsilons(8)[2:2 + B], rtol=1e-6)
