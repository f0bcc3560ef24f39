"""Tests for ngu_jax.meta.sliding_window_ucb (Agent57 Sec. 3.2).

Oracles: a written-out history whose picks are computed by hand, and a plain
Python sliding-window UCB over a random history.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.meta import sliding_window_ucb as ucb

JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _maybe_jit(fn, jit, **static):
  f = functools.partial(fn, **static)
  return jax.jit(f) if jit else f


def _play(history, num_arms, window, jit, epsilon=0., beta=1.):
  """The picks before each episode of `history` (and one after the last)."""
  select = _maybe_jit(ucb.select, jit, num_arms=num_arms, epsilon=epsilon,
                      beta=beta)
  update = _maybe_jit(ucb.update, jit, num_arms=num_arms)
  state = ucb.init(window)
  key = jax.random.PRNGKey(0)
  picks = []
  for arm, ret in history:
    key, sub = jax.random.split(key)
    picks.append(int(select(state, sub)))
    state = update(state, jnp.int32(arm), jnp.float32(ret))
  picks.append(int(select(state, key)))
  return picks, state


@JIT
def test_hand_computed_history(jit):
  # N = 3, window 4, beta 1, epsilon 0. Scores before each pick:
  #   0-2: each arm once first.
  #   3: means (1, 0, .5), one episode each: 2, 1, 1.5 -> 0.
  #   4: arm 0 twice, mean 1: 1 + sqrt(1/2) = 1.71 beats 1 and 1.5 -> 0.
  #   5: episode 0 has left the window; arm 0: (1 + 0) / 2 + 0.71 = 1.21,
  #      arm 1: 1, arm 2: 1.5 -> 2.
  history = [(0, 1.), (1, 0.), (2, .5), (0, 1.), (0, 0.)]
  picks, _ = _play(history, num_arms=3, window=4, jit=jit)
  assert picks == [0, 1, 2, 0, 0, 2]


def _reference_pick(history, num_arms, window, beta):
  """Greedy sliding-window UCB in plain Python (epsilon 0)."""
  k = len(history)
  if k < num_arms:
    return k
  recent = history[-window:]
  best, best_score = None, -math.inf
  for a in range(num_arms):
    returns = [r for arm, r in recent if arm == a]
    score = (math.inf if not returns else
             sum(returns) / len(returns) + beta * math.sqrt(1. / len(returns)))
    if score > best_score:  # Strict: ties keep the lowest index.
      best, best_score = a, score
  return best


@JIT
@pytest.mark.parametrize("num_arms,window", [(4, 6), (5, 3), (3, 20)])
def test_matches_plain_python_reference(jit, num_arms, window):
  rng = np.random.default_rng(num_arms * 100 + window)
  history = []
  select = _maybe_jit(ucb.select, jit, num_arms=num_arms, epsilon=0.,
                      beta=0.7)
  update = _maybe_jit(ucb.update, jit, num_arms=num_arms)
  state = ucb.init(window)
  for _ in range(40):
    pick = int(select(state, jax.random.PRNGKey(1)))
    assert pick == _reference_pick(history, num_arms, window, 0.7)
    # Play an arm that is not always the pick, so that the window mixes arms.
    arm = pick if rng.random() < 0.5 else int(rng.integers(num_arms))
    ret = float(np.round(rng.normal(), 2))
    history.append((arm, ret))
    state = update(state, jnp.int32(arm), jnp.float32(ret))


def test_unseen_arm_scores_infinity_and_ties_go_low():
  state = ucb.init(2)
  for arm in (0, 1, 2, 2, 2):  # Window 2 ends with (2, 2): arms 0, 1 unseen.
    state = ucb.update(state, jnp.int32(arm), jnp.float32(5.), num_arms=4)
  s = np.asarray(ucb.scores(state, 4, beta=1.))
  np.testing.assert_array_equal(s[[0, 1, 3]], np.inf)
  assert s[2] == pytest.approx(5. + math.sqrt(.5))
  assert int(ucb.select(state, jax.random.PRNGKey(0), 4, epsilon=0.)) == 0


@JIT
def test_update_many_is_updates_in_order(jit):
  """E episodes of one arm = E `update`s in order, through a full window."""
  update_many = _maybe_jit(ucb.update_many, jit, num_arms=3)
  state = ucb.update(ucb.init(4), jnp.int32(2), jnp.float32(7.), num_arms=3)
  returns = np.array([1., 2., 3., 4., 5.], np.float32)
  expected = state
  for ret in returns:
    expected = ucb.update(expected, jnp.int32(1), jnp.float32(ret),
                          num_arms=3)
  got = update_many(state, jnp.int32(1), jnp.asarray(returns))
  for a, b in zip(got, expected):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # The window holds the last 4 episodes: 2, 3, 4, 5 of arm 1.
  counts, means = ucb.window_statistics(got, 3)
  np.testing.assert_array_equal(counts, [0., 4., 0.])
  np.testing.assert_allclose(means, [0., 3.5, 0.])


def test_normalised_scores_rescale_the_means_by_the_window_range():
  """(mu - min) / (max - min) over the window's returns, then the bonus; an
  affine map, so the greedy arm is unchanged with beta = 0 but the bonus
  weighs the same whatever the return scale."""
  state = ucb.init(8)
  for arm, ret in [(0, 10.), (1, 30.), (1, 50.), (2, 20.), (2, 20.)]:
    state = ucb.update(state, jnp.int32(arm), jnp.float32(ret), num_arms=4)
  got = ucb.scores(state, 4, beta=1., normalise=True)
  # Returns span [10, 50]: means 10, 40, 20 -> 0, 0.75, 0.25; arm 3 unseen.
  expected = [0. + 1., 0.75 + math.sqrt(1 / 2), 0.25 + math.sqrt(1 / 2)]
  np.testing.assert_allclose(got[:3], expected, rtol=1e-6)
  assert np.isposinf(got[3])
  # The same history at 1000x the scale scores the same.
  scaled = state._replace(returns=state.returns * 1000.)
  np.testing.assert_allclose(ucb.scores(scaled, 4, 1., normalise=True)[:3],
                             expected, rtol=1e-5)
  # One return value everywhere: means 0, the bonus alone.
  flat = state._replace(returns=jnp.full_like(state.returns, 3.))
  np.testing.assert_allclose(ucb.scores(flat, 4, 1., normalise=True)[:3],
                             [1., math.sqrt(1 / 2), math.sqrt(1 / 2)],
                             rtol=1e-6)
  assert int(ucb.select(state, jax.random.PRNGKey(0), 3, epsilon=0., beta=0.,
                        normalise=True)) == 1


def test_counts_forget_outside_the_window():
  state = ucb.init(3)
  for arm, ret in [(1, 10.), (0, 1.), (0, 2.), (0, 3.)]:
    state = ucb.update(state, jnp.int32(arm), jnp.float32(ret), num_arms=2)
  counts, means = ucb.window_statistics(state, 2)
  np.testing.assert_array_equal(counts, [3., 0.])
  np.testing.assert_allclose(means, [2., 0.])
  assert int(state.num_episodes) == 4


def test_epsilon_draws_uniform_arms_after_the_first_round():
  # After the first N episodes, epsilon 1 gives uniform picks; the greedy
  # arm (2) would otherwise be chosen every time.
  num_arms = 4
  state = ucb.init(8)
  for arm, ret in [(0, 0.), (1, 0.), (2, 9.), (3, 0.)]:
    state = ucb.update(state, jnp.int32(arm), jnp.float32(ret), num_arms)
  keys = jax.random.split(jax.random.PRNGKey(3), 4000)
  picks = jax.vmap(lambda k: ucb.select(state, k, num_arms, epsilon=1.))(keys)
  freq = np.bincount(np.asarray(picks), minlength=num_arms) / 4000
  np.testing.assert_allclose(freq, .25, atol=.03)
  greedy = jax.vmap(lambda k: ucb.select(state, k, num_arms, epsilon=0.))(keys)
  assert set(np.asarray(greedy).tolist()) == {2}


def test_first_round_ignores_epsilon():
  state = ucb.init(8)
  for k in range(3):
    picks = jax.vmap(lambda key: ucb.select(state, key, 3, epsilon=1.))(
        jax.random.split(jax.random.PRNGKey(k), 50))
    assert set(np.asarray(picks).tolist()) == {k}
    state = ucb.update(state, jnp.int32(k), jnp.float32(0.), 3)


def test_first_round_with_several_episodes_per_pull():
  """With E episodes recorded per choice (the evaluator's lanes), each arm
  is chosen once (epsilon ignored): arm floor(k / E) for the first N E
  episodes; then the scores."""
  state = ucb.init(16)
  picks = []
  for returns in ([0., 0.], [5., 5.], [1., 1.]):
    arm = ucb.select(state, jax.random.PRNGKey(len(picks)), 3, epsilon=1.,
                     episodes_per_pull=2)
    picks.append(int(arm))
    state = ucb.update_many(state, arm, jnp.asarray(returns), 3)
  assert picks == [0, 1, 2]
  greedy = ucb.select(state, jax.random.PRNGKey(1), 3, epsilon=0., beta=0.,
                      episodes_per_pull=2)
  assert int(greedy) == 1  # Windowed means 0, 5, 1.
  with pytest.raises(ValueError, match="episodes_per_pull"):
    ucb.select(state, jax.random.PRNGKey(0), 3, episodes_per_pull=0)


@JIT
def test_episode_step_changes_arm_only_at_episode_ends(jit):
  step = _maybe_jit(ucb.episode_step, jit, num_arms=3, epsilon=0., beta=1.)
  state = ucb.init(4)
  arm = ucb.select(state, jax.random.PRNGKey(0), 3, epsilon=0.)
  key = jax.random.PRNGKey(1)
  # Steps inside the first episode: no update, the arm stays 0.
  for ret in (0., 1., 1.):
    state, arm = step(state, key, arm, jnp.float32(ret), jnp.bool_(False))
    assert int(arm) == 0 and int(state.num_episodes) == 0
  state, arm = step(state, key, arm, jnp.float32(1.), jnp.bool_(True))
  assert int(arm) == 1 and int(state.num_episodes) == 1
  np.testing.assert_array_equal(state.arms, [0, -1, -1, -1])
  np.testing.assert_allclose(state.returns, [1., 0., 0., 0.])


def test_vmaps_over_lanes():
  lanes = 5
  states = jax.vmap(lambda _: ucb.init(4))(jnp.arange(lanes))
  arms = jnp.zeros((lanes,), jnp.int32)
  done = jnp.array([True, False, True, False, True])
  keys = jax.random.split(jax.random.PRNGKey(0), lanes)
  states, arms = jax.jit(jax.vmap(functools.partial(
      ucb.episode_step, num_arms=3, epsilon=0.)))(
          states, keys, arms, jnp.ones((lanes,)), done)
  np.testing.assert_array_equal(arms, [1, 0, 1, 0, 1])
  np.testing.assert_array_equal(states.num_episodes, [1, 0, 1, 0, 1])


@pytest.mark.parametrize("call,match", [
    (lambda: ucb.init(0), "window"),
    (lambda: ucb.init(2.5), "window"),
    (lambda: ucb.scores(ucb.init(2), 3, beta=-1.), "beta"),
    (lambda: ucb.select(ucb.init(2), jax.random.PRNGKey(0), 3, epsilon=1.5),
     "epsilon"),
    (lambda: ucb.update(ucb.init(2), jnp.int32(3), jnp.float32(0.), 3),
     "arm"),
    (lambda: ucb.update(ucb.init(2), jnp.float32(1.), jnp.float32(0.), 3),
     "integer"),
    (lambda: ucb.update(ucb.init(2), jnp.int32(1), jnp.float32(np.nan), 3),
     "NaN"),
    (lambda: ucb.update(ucb.init(2), jnp.int32([1]), jnp.float32(0.), 3),
     "rank"),
])
def test_rejects_bad_input(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_rejects_out_of_range_arm_under_jit():
  update = jax.jit(functools.partial(ucb.update, num_arms=3))
  with pytest.raises(Exception, match="arm"):
    jax.block_until_ready(update(ucb.init(2), jnp.int32(5), jnp.float32(0.)))
