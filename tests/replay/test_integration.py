"""Actor -> SequenceAdder -> replay -> learner: the layouts agree.

A scripted actor runs a tiny UVFA network over B lanes exactly as an NGU
actor would (state reset at episode starts, extra inputs a_{t-1}, r^e_t, r^i_t,
epsilon-greedy behaviour probabilities), feeding a `SequenceAdder` that writes
into the replay under test. A sampled batch, converted with
`to_sequence_batch`, passes `learning.check_batch`, and unrolling the network
from each item's stored initial state over its stored inputs reproduces the
Q-values the actor computed at every real step: the learner sees exactly what
the actor saw. The batch then goes through `learning.loss`, whose priorities
go back into the replay.
"""

import functools

import jax
import numpy as np
import pytest

from ngu_jax import mixtures
from ngu_jax.agents.ngu import learning
from ngu_jax.losses import retrace
from ngu_jax.networks import make_uvfa_network
from ngu_jax.networks import uvfa
from ngu_jax.replay import AdderStep, SequenceAdder, to_sequence_batch

B, A, N, OBS, LSTM = 3, 3, 2, (4,), 8


@functools.lru_cache(maxsize=None)
def _network():
  net = make_uvfa_network(OBS, A, N, lstm_size=LSTM, head_hidden=8,
                          mlp_hidden_sizes=(8,))
  return net, net.init(jax.random.PRNGKey(0)), jax.jit(net.apply)


@functools.lru_cache(maxsize=None)
def _learner(burn_in):
  """Jitted unroll and loss (one compile per burn-in serves both backends)."""
  net, _, _ = _network()
  loss = functools.partial(learning.loss, net, betas=mixtures.betas(N, 0.3),
                           gammas=mixtures.gammas(N), burn_in=burn_in)
  return jax.jit(net.unroll), jax.jit(loss)


def run_actor(writer, num_steps, lengths, length, period, burn_in, seed=0):
  """Acts for `num_steps` steps; returns {(lane, ep, t): actor Q-values}."""
  net, params, apply = _network()
  rng = np.random.default_rng(seed)
  adder = SequenceAdder(writer, B, sequence_length=length, period=period,
                        burn_in=burn_in)
  epsilons = np.array([0.4, 0.1, 0.01], np.float32)
  mixture = np.arange(B, dtype=np.int32) % N
  state = net.initial_state(B)
  pos = np.zeros((B, 2), np.int64)  # (episode, t) per lane
  prev_action = np.zeros(B, np.int32)
  q_seen = {}
  for _ in range(num_steps):
    first = pos[:, 1] == 0
    r_ext = np.where(first, 0., rng.normal(size=B)).astype(np.float32)
    r_int = np.where(first, 0., rng.uniform(size=B)).astype(np.float32)
    obs = np.concatenate([np.arange(B)[:, None], pos, rng.normal(size=(B, 1))],
                         1).astype(np.float32)  # (lane, episode, t, noise)
    prev_action = np.where(first, -1, prev_action).astype(np.int32)
    # The actor resets its state at episode starts; the adder stores the
    # state it fed (the learner's unroll resets there too).
    zeros = net.initial_state(B)
    state = jax.tree_util.tree_map(
        lambda s, z: np.where(first[:, None], z, s), state, zeros)
    inputs = uvfa.UVFAInputs(obs, prev_action, r_ext, r_int, mixture)
    q, new_state = apply(params, inputs, state)
    q = np.asarray(q)
    greedy = q.argmax(-1)
    explore = rng.uniform(size=B) < epsilons
    action = np.where(explore, rng.integers(0, A, size=B), greedy)
    mu = np.where(action == greedy, 1 - epsilons + epsilons / A,
                  epsilons / A).astype(np.float32)
    length_now = np.array([lengths[l][int(pos[l, 0]) % len(lengths[l])]
                           for l in range(B)])
    last = pos[:, 1] == length_now - 1
    adder.add(AdderStep(
        observation=obs, action=action.astype(np.int32),
        extrinsic_reward=r_ext, intrinsic_reward=r_int,
        discount=np.where(last, 0., 1.).astype(np.float32),
        step_is_first=first, behaviour_prob=mu, prev_action=prev_action,
        prev_extrinsic_reward=r_ext, prev_intrinsic_reward=r_int,
        mixture_index=mixture, epsilon=epsilons,
        recurrent_state=jax.tree_util.tree_map(np.asarray, state)))
    for l in range(B):
      q_seen[(l, int(pos[l, 0]), int(pos[l, 1]))] = q[l]
    state, prev_action = new_state, action.astype(np.int32)
    pos[:, 1] += 1
    pos[last, 0] += 1
    pos[last, 1] = 0
  adder.flush()
  return q_seen


@pytest.mark.parametrize("length, period, burn_in", [(6, 3, 0), (5, 2, 2)])
def test_actor_adder_replay_learner(make_replay, length, period, burn_in):
  net, params, _ = _network()
  replay = make_replay(capacity=1000, min_size=8, seed=0)
  q_seen = run_actor(replay.insert, 60, [[9, 4, 17], [1, 30], [7, 2, 11]],
                     length, period, burn_in)
  assert replay.size >= 8
  keys, items, weights = replay.sample(B + 3)
  batch = to_sequence_batch(items, weights)
  t1, b = learning.check_batch(net, batch, burn_in=burn_in)
  assert (t1, b) == (burn_in + length, B + 3)

  # The learner's unroll from the stored state reproduces the actor's Q.
  inputs = uvfa.UVFAInputs(
      batch.observation, batch.prev_action, batch.prev_extrinsic_reward,
      batch.prev_intrinsic_reward,
      np.broadcast_to(batch.mixture_index, batch.action.shape))
  unroll, loss = _learner(burn_in)
  q, _ = unroll(params, inputs, batch.initial_state, batch.step_is_first)
  q = np.asarray(q)
  for col in range(b):
    for s in np.flatnonzero(batch.mask[:, col]):
      lane, ep, t = batch.observation[s, col, :3].astype(int)
      np.testing.assert_allclose(q[s, col], q_seen[(lane, ep, t)],
                                 rtol=1e-5, atol=1e-5)
  # Behaviour probabilities are those of the stored actions.
  assert np.all(batch.behaviour_prob[batch.mask > 0] > 0)

  # And the learner runs on it; its priorities go back into the replay.
  value, extras = loss(params, params, batch)
  assert np.isfinite(value)
  valid = retrace.valid_mask(batch.mask[burn_in:])
  assert np.all(np.asarray(valid).sum(0) >= 1)  # every item trains
  priorities = np.asarray(extras.priorities)
  assert np.all(priorities > 0)
  replay.update_priorities(keys, priorities)
