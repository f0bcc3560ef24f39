"""Tests of the one pacing rule (`ngu_jax.loops.pacing`) and of the replay
rate limiter's weighted inserts that express it in the distributed program."""

import numpy as np
import pytest

from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.loops import pacing
from ngu_jax.replay import prioritized


def _config(**overrides):
  return config_lib.disco_maze(**{**dict(
      samples_per_insert=2.0, replay_period=4, trace_length=8, batch_size=4,
      min_replay_size=10, replay_capacity=1000), **overrides})


def test_samples_per_env_step_is_the_config_property():
  config = _config()
  assert config.samples_per_env_step == 0.5
  assert pacing.samples_per_env_step(config) == 0.5


def test_learner_step_due_and_steps_due():
  """batch 4, 0.5 samples per env step: one learner step per 8 env steps,
  the first as soon as the replay is ready."""
  config = _config()
  assert pacing.learner_step_due(config, 0, 0)
  assert not pacing.learner_step_due(config, 1, 7)
  assert pacing.learner_step_due(config, 1, 8)
  assert pacing.learner_steps_due(config, -1) == 0
  assert pacing.learner_steps_due(config, 0) == 1
  assert pacing.learner_steps_due(config, 7) == 1
  assert pacing.learner_steps_due(config, 8) == 2
  for since in range(0, 200, 3):
    due = pacing.learner_steps_due(config, since)
    assert pacing.learner_step_due(config, due - 1, since)
    assert not pacing.learner_step_due(config, due, since)
  assert pacing.is_ready(config, 10) and not pacing.is_ready(config, 9)


def test_learner_step_due_traces_in_float32():
  jnp = pytest.importorskip("jax.numpy")
  config = _config()
  due = pacing.learner_step_due(config, jnp.int32(1),
                                jnp.float32(8.))
  assert due.dtype == jnp.bool_ and bool(due)


def test_insert_weights():
  mask = np.zeros((4, 8), np.float32)
  mask[0, :8] = 1   # a full window: 4 fresh steps of 4
  mask[1, :5] = 1   # padded, 5 real steps: still 4 fresh
  mask[2, :2] = 1   # an episode's last window, 2 real steps
  mask[3, :1] = 1
  np.testing.assert_allclose(pacing.insert_weights(mask, 4),
                             [1., 1., 0.5, 0.25])
  assert pacing.insert_weights(mask[2], 4) == 0.5


def _item():
  return {"x": np.zeros(2, np.float32)}


def _drive(replay, weights, batch, n_inserts):
  """Inserts one item at a time; samples whenever the limiter allows."""
  sampled = 0
  for i in range(n_inserts):
    replay.insert([_item()], timeout=0,
                  weights=None if weights is None else [weights[i]])
    while True:
      try:
        replay.sample(batch, timeout=0)
      except prioritized.ReplayNotReadyError:
        break
      sampled += batch
  return sampled


@pytest.mark.parametrize("weight", [1., 0.5, 0.25])
def test_weighted_inserts_pace_by_fresh_steps(weight):
  """Samples follow spi per unit of weight inserted since readiness,
  within the error buffer (one batch of granularity)."""
  spi, min_size, batch = 2., 10, 4
  replay = prioritized.PrioritizedReplay(
      1000, min_size=min_size, samples_per_insert=spi, error_buffer=8.)
  n = 400
  sampled = _drive(replay, [weight] * n, batch, n)
  units_since_ready = weight * (n - min_size)
  assert abs(sampled - spi * units_since_ready) <= 8. + batch
  assert replay.inserted == n


def test_unweighted_inserts_are_unchanged():
  """Without weights the limiter is Reverb's SampleToInsertRatio as before:
  offset spi * min_size."""
  replay = prioritized.PrioritizedReplay(
      1000, min_size=10, samples_per_insert=2., error_buffer=8.)
  sampled = _drive(replay, None, 4, 100)
  # The largest multiple of 4 with 2 * 100 - s >= 2 * 10 - 8.
  assert sampled == 188


def test_weighted_counters_survive_save_and_restore(tmp_path):
  replay = prioritized.PrioritizedReplay(
      1000, min_size=10, samples_per_insert=2., error_buffer=8., seed=1)
  _drive(replay, [0.5] * 50, 4, 50)
  replay.save(str(tmp_path / "r"))
  other = prioritized.PrioritizedReplay(
      1000, min_size=10, samples_per_insert=2., error_buffer=8., seed=1)
  other.restore(str(tmp_path / "r"))
  assert _drive(other, [0.5] * 30, 4, 30) == _drive(replay, [0.5] * 30, 4,
                                                    30)


def test_bad_weights_are_refused():
  replay = prioritized.PrioritizedReplay(100, min_size=1)
  for weights in ([0.], [1.5], [1., 1.]):
    with pytest.raises(ValueError, match="weights"):
      replay.insert([_item()], weights=weights)
