"""Tests for ngu_jax.envs.atari: the NGU Atari preset on envpool (Table 8)."""

import envpool
import numpy as np
import pytest

from ngu_jax.envs import atari
from ngu_jax.envs import base
from tests.envs import conformance

# Table 8 + docs/design.md#atari, as envpool config values.
NGU_PRESET = {
    "img_height": 84,
    "img_width": 84,
    "gray_scale": True,
    "frame_skip": 4,                     # action repeats; max of frames 3, 4
    "stack_num": 1,
    "noop_max": 30,
    "full_action_space": True,
    "repeat_action_probability": 0.0,    # no sticky actions
    "episodic_life": False,              # no episode end on life loss
    "zero_discount_on_life_loss": False,
    "reward_clip": False,
    "max_episode_steps": 27000,          # agent steps = 108,000 frames
    "use_fire_reset": False,
    "use_inter_area_resize": True,
}


def test_preset_config_value_by_value():
  with atari.make_atari("MontezumaRevenge", 2, seed=7) as env:
    config = env.envpool_config
    for key, value in NGU_PRESET.items():
      assert config[key] == value, (key, config[key], value)
    assert config["task"] == "montezuma_revenge"
    assert (config["num_envs"], config["batch_size"], config["seed"]) == (
        2, 2, 7)
    assert env.num_envs == 2 and not env.is_async
    assert env.action_spec().num_values == 18  # the full action set
    assert env.observation_spec().shape == (84, 84, 1)
    assert env.observation_spec().dtype == np.uint8


def test_every_setting_is_forwarded():
  overrides = dict(img_size=64, gray_scale=False, frame_skip=2, stack_num=3,
                   noop_max=5, full_action_space=False,
                   repeat_action_probability=0.25, episodic_life=True,
                   zero_discount_on_life_loss=True, reward_clip=True,
                   max_episode_steps=100, use_fire_reset=True,
                   use_inter_area_resize=False)
  with atari.make_atari("Pong", 1, **overrides) as env:
    config = env.envpool_config
    for key, value in overrides.items():
      if key == "img_size":
        assert config["img_height"] == config["img_width"] == value
      else:
        assert config[key] == value, key
    assert env.action_spec().num_values == 6  # Pong's minimal set
    assert env.observation_spec().shape == (64, 64, 9)  # 3 RGB frames
    ts = env.reset()
    assert ts.observation.shape == (1, 64, 64, 9)


@pytest.mark.parametrize("game", ["Pong", "MontezumaRevenge"])
def test_conformance(game):
  make = lambda: atari.make_atari(game, 2, seed=1, max_episode_steps=120)
  with make() as env, make() as twin:
    stats = conformance.check_batched_env(
        env, 300, np.random.default_rng(0), twin=twin, max_episode_steps=120)
  assert stats.num_last >= 2


def test_matches_raw_envpool():
  # Same seed and actions: the adapter's observation is envpool's
  # [B, 1, 84, 84] frame moved channel-last, rewards are unchanged.
  kwargs = dict(num_envs=2, seed=3, stack_num=1, full_action_space=True,
                use_fire_reset=False, max_episode_steps=27000)
  raw = envpool.make("SpaceInvaders-v5", env_type="gymnasium", **kwargs)
  with atari.make_atari("SpaceInvaders", 2, seed=3) as env:
    raw_obs, _ = raw.reset()
    ts = env.reset()
    rng = np.random.default_rng(0)
    total = 0.0
    for _ in range(150):
      np.testing.assert_array_equal(ts.observation, raw_obs[:, 0, :, :, None])
      actions = rng.integers(0, 18, size=2).astype(np.int32)
      ts = env.step(actions)
      raw_obs, raw_reward, _, _, _ = raw.step(actions)
      np.testing.assert_array_equal(ts.reward[~ts.first()],
                                    raw_reward[~ts.first()])
      total += ts.reward.sum()
    assert total > 0  # some invaders were hit: rewards were compared
  raw.close()


def test_truncation_counts_agent_steps():
  # A 50-step limit is 50 agent steps (200 frames): LAST with discount 1 at
  # step 50, then FIRST (reward 0, discount 1), then the next cut at 101.
  with atari.make_atari("Pong", 2, max_episode_steps=50) as env:
    ts = env.reset()
    assert (ts.extras["elapsed_step"] == 0).all()
    for t in range(1, 102):
      ts = env.step(np.full(2, 3, np.int32))
      if t in (50, 101):
        assert (ts.step_type == base.StepType.LAST).all(), t
        assert (ts.discount == 1).all(), t
        assert (ts.extras["elapsed_step"] == 50).all()
      elif t == 51:
        assert (ts.step_type == base.StepType.FIRST).all()
        assert (ts.reward == 0).all() and (ts.discount == 1).all()
        assert (ts.extras["elapsed_step"] == 0).all()
      else:
        assert (ts.step_type == base.StepType.MID).all(), t
        assert (ts.extras["elapsed_step"] == (t if t < 51 else t - 51)).all()
      # Sync mode tracks auto-resets by row: env b must be in row b.
      np.testing.assert_array_equal(ts.extras["env_id"], [0, 1])


def test_termination_and_life_loss():
  # Breakout has 5 lives: losing one is MID with discount 1 (no life-loss
  # episode ends); the game over is LAST with discount 0, then FIRST.
  with atari.make_atari("Breakout", 2, seed=0) as env:
    ts = env.reset()
    rng = np.random.default_rng(0)
    lives = ts.extras["lives"].copy()
    assert (lives == 5).all()
    life_losses = terminations = 0
    for _ in range(600):
      prev = ts
      ts = env.step(rng.integers(0, 18, size=2).astype(np.int32))
      lost = (ts.extras["lives"] < prev.extras["lives"]) & ~ts.first()
      life_losses += int((lost & ts.mid()).sum())
      assert (ts.discount[ts.mid()] == 1).all()
      term = ts.last()
      assert (ts.discount[term] == 0).all()
      assert (ts.extras["lives"][term] == 0).all()
      terminations += int(term.sum())
      assert (ts.first() == prev.last()).all()
      if terminations >= 2:
        break
    assert life_losses >= 4 and terminations >= 2


def test_async_mode():
  with atari.make_atari("Pong", 4, batch_size=2, max_episode_steps=30) as env:
    assert env.is_async and env.num_envs == 2 and env.pool_size == 4
    stats = conformance.check_batched_env(env, 150, np.random.default_rng(0),
                                          max_episode_steps=30)
    assert stats.num_last >= 4
    with pytest.raises(ValueError, match="async mode"):
      env.reset()


def test_bad_input():
  with atari.make_atari("Pong", 3) as env:
    conformance.check_rejects_bad_actions(env)
    with pytest.raises(ValueError, match=r"outside \[0, 18\) in lane\(s\) "
                       r"\[1\]"):
      env.step(np.array([0, 18, 0], np.int32))
  with pytest.raises(ValueError, match="closed"):
    env.step(np.zeros(3, np.int32))
  with pytest.raises(ValueError, match="reset"):
    atari.make_atari("Pong", 1).step(np.zeros(1, np.int32))


@pytest.mark.parametrize("kwargs,match", [
    (dict(game="NoSuchGame"), "unknown Atari game"),
    (dict(num_envs=0), "num_envs"),
    (dict(batch_size=5), "batch_size"),
    (dict(noop_max=0), "noop_max"),
    (dict(max_episode_steps=0), "max_episode_steps"),
    (dict(repeat_action_probability=1.5), "repeat_action_probability"),
])
def test_bad_settings(kwargs, match):
  args = dict(game="Pong", num_envs=2)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    atari.make_atari(**args)


def test_games_list():
  games = atari.atari_games()
  for game in ("MontezumaRevenge", "Pong", "PrivateEye", "Pitfall",
               "Venture", "Gravitar", "Solaris"):
    assert game in games
  with atari.make_atari("Pong-v5", 1) as env:
    assert env.game == "Pong"
