"""The exploit policy and what the explorers find: NGU's Cross Mixture Ratio.

A hand-built replay of a cliff chain (DeepSea's shape): L cells in a row,
"right" moves on at a cost of 0.01 / L, "left" ends the episode with
nothing, the last "right" pays 1. The exploratory mixture's (j = 1)
sequences hold every treasure: two of its lanes reach it, two leave at
cells 2 and 4; the exploit mixture's (j = 0) lanes leave at cells 0, 1, 3
and 5, so no j = 0 sequence ever takes the rewarded transition -- the
situation of the DeepSea runs where the training lanes found the treasure
and the greedy j = 0 policy never did (issue 37).

With NGU's base agent (CMR 0, each sequence trains its own mixture) Q(., j =
0) gets no target for the rewarded transition: its values on the path are
whatever the shared weights extrapolate (above the largest return there is,
or about 0), measured here on three seeds. With CMR 0.5 (NGU Sec. 4.2, App.
C; `NGUConfig.cross_mixture_ratio`) half of each batch trains another
mixture off-policy, and Q(., j = 0) learns the exact value of every cell of
the path, h(G_k), and prefers "right" everywhere on it.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import mixtures
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.losses import retrace
from ngu_jax.networks import uvfa
from ngu_jax.types import SequenceBatch

L, A, N = 6, 2, 2  # Cells, actions (0 left, 1 right), mixtures.
COST = -0.01 / L  # DeepSea's cost of "right".
OBS = (L + 1,)  # The cell, one-hot, and a flag on the episode's last step.
LSTM = 16
# Lane -> the cell where it goes left (None: reaches the treasure), mixture.
LEAVE = (None, None, 2, 4, 0, 1, 3, 5)
MIXTURE = (1, 1, 1, 1, 0, 0, 0, 0)
B = len(LEAVE)
SEEDS = (0, 1, 2)
STEPS = 400


def _config(ratio):
  return NGUConfig(
      num_mixtures=N, torso="mlp", mlp_hidden_sizes=(16,), lstm_size=LSTM,
      head_hidden=16, embedding_dim=4, rnd_output_dim=4,
      inverse_dynamics_hidden=8, aux_loss_steps=2, learning_rate=3e-3,
      target_update_period=20, batch_size=B, trace_length=L + 1,
      replay_period=3, replay_capacity=100, min_replay_size=10,
      gamma_min=0.97, gamma_max=0.99, cross_mixture_ratio=ratio)


def _episode(leave):
  """[L + 1] observation, action, r^e, discount, mask of one lane."""
  obs = np.zeros((L + 1,) + OBS, np.float32)
  action = np.zeros(L + 1, np.int32)
  reward = np.zeros(L + 1, np.float32)
  discount = np.ones(L + 1, np.float32)
  mask = np.ones(L + 1, np.float32)
  end = L if leave is None else leave + 1  # Its terminal step.
  for t in range(L + 1):
    if t > end:
      mask[t] = 0.  # Padding.
      continue
    obs[t, min(t, L - 1)] = 1.
    obs[t, L] = float(t == end)
    if t < end:
      action[t] = 0 if t == leave else 1
      reward[t + 1] = COST if action[t] == 1 else 0.
  if leave is None:
    reward[L] += 1.
  discount[end] = 0.
  return obs, action, reward, discount, mask


def _batch():
  obs, action, reward, discount, mask = (
      np.stack(x, axis=1) for x in zip(*map(_episode, LEAVE)))
  first = np.zeros((L + 1, B), bool)
  first[0] = True
  prev_action = np.concatenate([np.full((1, B), -1), action[:-1]])
  zeros = np.zeros((B, LSTM), np.float32)
  return SequenceBatch(
      observation=obs, action=action, extrinsic_reward=reward,
      intrinsic_reward=np.zeros_like(reward), discount=discount,
      step_is_first=first,
      behaviour_prob=np.full((L + 1, B), 0.5, np.float32), mask=mask,
      prev_action=prev_action.astype(np.int32),
      prev_extrinsic_reward=reward.copy(),
      prev_intrinsic_reward=np.zeros_like(reward),
      mixture_index=np.asarray(MIXTURE, np.int32),
      initial_state=uvfa.LSTMState(hidden=zeros, cell=zeros),
      importance_weights=np.ones(B, np.float32))


@functools.lru_cache(maxsize=None)
def _trained(ratio):
  """Q(x_k, ., j) along the treasure path, [seeds, N, L, A], after STEPS
  learner steps on the batch (the seeds vmapped)."""
  config = _config(ratio)
  networks = networks_lib.make_networks(config, OBS, A)
  batch = _batch()
  step = functools.partial(learning.sgd_step, config, networks)

  def train(key):
    state = learning.init_learner(config, networks, key)
    state, _ = jax.lax.scan(lambda s, _: (step(s, batch)[0], None), state,
                            None, length=STEPS)
    lane0 = lambda x: jnp.asarray(x)[:, :1]  # The treasure path.

    def q_of(j):
      inputs = uvfa.UVFAInputs(
          observation=lane0(batch.observation),
          prev_action=lane0(batch.prev_action),
          prev_extrinsic_reward=lane0(batch.prev_extrinsic_reward),
          prev_intrinsic_reward=lane0(batch.prev_intrinsic_reward),
          mixture_index=jnp.full((L + 1, 1), j, jnp.int32))
      zeros = jnp.zeros((1, LSTM))
      q, _ = networks.uvfa.unroll(state.params.q, inputs,
                                  uvfa.LSTMState(hidden=zeros, cell=zeros),
                                  lane0(batch.step_is_first))
      return q[:L, 0]

    return jnp.stack([q_of(j) for j in range(N)]), state.skipped_steps

  keys = jnp.stack([jax.random.PRNGKey(s) for s in SEEDS])
  q, skipped = jax.jit(jax.vmap(train))(keys)
  assert not np.any(np.asarray(skipped))
  return np.asarray(q)


def _exact_exploit_values():
  """h(G_k), G_k = the discounted extrinsic return of "right" from cell k
  on (the treasure path), with the exploit mixture's gamma_0."""
  gamma = float(mixtures.gammas(N, 0.99, 0.97)[0])
  g, out = 0., []
  for k in reversed(range(L)):
    g = COST + (1. if k == L - 1 else 0.) + gamma * g
    out.append(g)
  h = retrace.signed_hyperbolic_pair(1e-3).apply
  return np.asarray(h(jnp.asarray(out[::-1])))


def test_cmr_trains_the_exploit_values_on_the_explorers_sequences():
  q = _trained(0.5)[:, 0]  # [seeds, L, A], j = 0.
  exact = _exact_exploit_values()
  np.testing.assert_allclose(q[..., 1], np.broadcast_to(exact, q[..., 1].shape),
                             atol=0.03)
  np.testing.assert_allclose(q[..., 0], 0., atol=0.03)  # Left ends it.
  assert np.all(q[..., 1] - q[..., 0] > 0.3)  # Greedy j = 0 takes the path.


@pytest.mark.slow  # The control of the CMR test above.
def test_without_cmr_the_exploit_values_have_no_target_on_the_path():
  """The mechanism (CMR 0, NGU's base agent): no j = 0 sequence takes the
  last "right", so Q(., j = 0) there is extrapolated, not learned; the
  explorers' own values (j = 1, their sequences) are learned."""
  q = _trained(0.0)
  exact = _exact_exploit_values()
  errors = np.abs(q[:, 0, :, 1] - exact).max(axis=1)  # Per seed.
  assert errors.max() > 0.1, errors
  # j = 1 saw the treasure: its "right" beats "left" along the whole path.
  assert np.all(q[:, 1, :, 1] - q[:, 1, :, 0] > 0.2)


def test_config_checks_the_ratio():
  with pytest.raises(ValueError, match="cross_mixture_ratio"):
    NGUConfig(cross_mixture_ratio=1.5)
  with pytest.raises(ValueError, match="cross_mixture_ratio"):
    NGUConfig(num_mixtures=1, cross_mixture_ratio=0.5)
  assert NGUConfig().cross_mixture_ratio == 0.  # NGU's base agent.
