"""Tests for ngu_jax.envs.gymnasium_adapter: gymnasium vector envs as
`BatchedEnv`s, with next-step auto-reset mapped to FIRST / LAST."""

import gymnasium
import numpy as np
import pytest

from ngu_jax.envs import base
from ngu_jax.envs import gymnasium_adapter
from ngu_jax.types import ObservationEncoding
from tests.envs import conformance
from tests.envs import user_envs

FIRST, MID, LAST = (int(base.StepType.FIRST), int(base.StepType.MID),
                    int(base.StepType.LAST))


def _chain(num_envs=1, **kwargs):
  return gymnasium_adapter.GymnasiumVectorEnv(
      user_envs.chain_vector(num_envs, **kwargs), seed=0)


def test_termination_truncation_and_next_step_reset():
  # length 3: two steps right terminate; staying 5 steps truncates.
  with _chain(length=3, max_steps=5) as env:
    ts = env.reset()
    assert ts.step_type.tolist() == [FIRST] and ts.reward.tolist() == [0.]
    right, stay = np.ones(1, np.int32), np.zeros(1, np.int32)
    kinds = []
    for action in (right, right, stay, stay, stay, stay, stay, stay, stay,
                   right):
      ts = env.step(action)
      kinds.append((int(ts.step_type[0]), float(ts.reward[0]),
                    float(ts.discount[0]), ts.observation[0].tolist()))
    assert kinds == [
        (MID, 0., 1., [1., 1.]),
        (LAST, 1., 0., [2., 2.]),   # Terminated: discount 0.
        (FIRST, 0., 1., [0., 0.]),  # The action is ignored.
        (MID, 0., 1., [0., 1.]),
        (MID, 0., 1., [0., 2.]),
        (MID, 0., 1., [0., 3.]),
        (MID, 0., 1., [0., 4.]),
        (LAST, 0., 1., [0., 5.]),   # Truncated only: discount 1.
        (FIRST, 0., 1., [0., 0.]),
        (MID, 0., 1., [1., 1.]),
    ]


def test_both_flags_on_one_step_is_a_termination():
  with _chain(length=3, max_steps=2) as env:
    env.reset()
    env.step(np.ones(1, np.int32))
    ts = env.step(np.ones(1, np.int32))
    assert ts.step_type.tolist() == [LAST] and ts.discount.tolist() == [0.]


def test_discrete_actions_with_a_start_are_shifted():
  # Discrete(2, start=-1): the agent's 0 / 1 are the env's -1 / 0.
  with _chain(start=-1, length=2) as env:
    assert env.action_spec().num_values == 2
    env.reset()
    assert env.step(np.ones(1, np.int32)).step_type.tolist() == [LAST]


def test_conformance_and_specs():
  rng = np.random.default_rng(0)
  with _chain(3, length=4, max_steps=6) as env, _chain(
      3, length=4, max_steps=6) as twin:
    assert env.num_envs == 3
    assert env.observation_spec().shape == (2,)
    assert env.observation_spec().dtype == np.float32
    assert env.observation_encoding() == ObservationEncoding("features")
    stats = conformance.check_batched_env(env, 60, rng, twin=twin,
                                          max_episode_steps=6)
    assert stats.num_terminated > 0 and stats.num_truncated > 0
    conformance.check_rejects_bad_actions(env)
  with gymnasium_adapter.GymnasiumVectorEnv(
      user_envs.cartpole_vector(2, max_episode_steps=20), seed=3) as env, \
      gymnasium_adapter.GymnasiumVectorEnv(
          user_envs.cartpole_vector(2, max_episode_steps=20), seed=3) as twin:
    stats = conformance.check_batched_env(env, 60, rng, twin=twin,
                                          max_episode_steps=20)
    assert stats.num_last > 0


def test_observations_are_copies_and_seeded():
  vec = gymnasium.make_vec("CartPole-v1", 2, vectorization_mode="sync",
                           vector_kwargs={"copy": False})
  with gymnasium_adapter.GymnasiumVectorEnv(vec, seed=7) as env:
    first = env.reset().observation
    kept = first.copy()
    env.step(np.zeros(2, np.int32))
    np.testing.assert_array_equal(first, kept)
  with gymnasium_adapter.GymnasiumVectorEnv(
      user_envs.cartpole_vector(2), seed=7) as again:
    np.testing.assert_array_equal(again.reset().observation, kept)


def test_encodings():
  uint8_images = gymnasium.spaces.Box(0, 255, (4, 4, 3), np.uint8)
  assert gymnasium_adapter.observation_encoding_of(uint8_images) == (
      ObservationEncoding("pixels"))
  assert gymnasium_adapter.observation_encoding_of(
      gymnasium.spaces.Discrete(5)) == ObservationEncoding("symbolic", (5,))
  binary = ObservationEncoding("binary")
  with gymnasium_adapter.GymnasiumVectorEnv(
      user_envs.chain_vector(1), observation_encoding=binary) as env:
    assert env.observation_encoding() == binary


@pytest.mark.parametrize("mode, match", [
    ("SameStep", "SAME_STEP is not supported"),
    ("Disabled", "DISABLED is not supported"),
])
def test_other_autoreset_modes_are_refused(mode, match):
  vec = user_envs.chain_vector(1, autoreset_mode=mode)
  with pytest.raises(ValueError, match=match) as info:
    gymnasium_adapter.GymnasiumVectorEnv(vec)
  assert "NEXT_STEP" in str(info.value)
  vec.close()


def test_undeclared_autoreset_mode_is_refused():
  vec = user_envs.chain_vector(1)
  vec.metadata = {k: v for k, v in vec.metadata.items()
                  if k != "autoreset_mode"}
  with pytest.raises(ValueError, match="does not declare"):
    gymnasium_adapter.GymnasiumVectorEnv(vec)


def test_bad_spaces_and_kinds_are_refused():
  with pytest.raises(ValueError, match="action space must be Discrete"):
    gymnasium_adapter.GymnasiumVectorEnv(user_envs.continuous_actions(1))
  vec = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(
      "Blackjack-v1")])
  with pytest.raises(ValueError, match="Box or a Discrete"):
    gymnasium_adapter.GymnasiumVectorEnv(vec)
  with pytest.raises(ValueError, match="SyncVectorEnv"):
    gymnasium_adapter.GymnasiumVectorEnv(user_envs.single_chain())
  with pytest.raises(ValueError, match="VectorEnv, got dict"):
    gymnasium_adapter.GymnasiumVectorEnv({})


def test_nan_observations_are_refused():
  vec = user_envs.chain_vector(2)

  class NaNs(gymnasium.vector.VectorWrapper):

    def step(self, actions):
      obs, *rest = self.env.step(actions)
      obs = obs.copy()
      obs[1, 0] = np.nan
      return (obs, *rest)

  with gymnasium_adapter.GymnasiumVectorEnv(NaNs(vec)) as env:
    env.reset()
    with pytest.raises(ValueError, match=r"lane\(s\) \[1\]"):
      env.step(np.zeros(2, np.int32))
