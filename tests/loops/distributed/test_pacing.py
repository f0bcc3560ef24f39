"""The same config paces its learner alike locally and distributed.

`ngu_jax.loops.pacing`: the Python loop runs samples_per_env_step sampled
sequences per fresh env step once the replay is ready; the distributed
replay node's rate limiter expresses the same rule by weighing every
inserted sequence by its fresh env steps / replay_period. Disco Maze with
a tiny maze ends many episodes after a few steps (agents walk into walls),
so many sequences are short and padded: counting inserted sequences (the
limiter before) would pace the distributed learner faster per env step.
"""

import pytest

from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.loops import pacing
from ngu_jax.loops.distributed import launcher
from ngu_jax.loops.python import loop as python_loop

TINY = dict(grid_output_size=16, lstm_size=16, head_hidden=16,
            embedding_dim=8, rnd_output_dim=8, inverse_dynamics_hidden=16,
            trace_length=10, replay_period=5, min_replay_size=60,
            batch_size=8, memory_capacity=32, replay_capacity=2000,
            samples_per_insert=2.0, actor_update_period=5,
            target_update_period=10)
ENV_KWARGS = dict(size=5, max_episode_steps=12)
TOTAL = 3000
LANES = 4


@pytest.mark.slow  # About 2 minutes on 2 CPU cores (two loops compile).
def test_learner_steps_per_env_step_agree(ray_cluster):
  """Measured: 141 learner steps at 3,000 env steps locally, 151 at 3,220
  distributed (0.0470 and 0.0469 per env step; 1,043 sequences inserted
  for 644 fresh units: counting sequences would have paced ~60% faster)."""
  del ray_cluster
  config = config_lib.disco_maze(**TINY)
  local = python_loop.run_experiment(
      config, "disco_maze", TOTAL, num_lanes=LANES, env_kwargs=ENV_KWARGS,
      log_every_env_steps=TOTAL, progress=False)
  remote = launcher.run_distributed(
      config, "disco_maze", TOTAL, num_actors=1, num_lanes=LANES,
      env_kwargs=ENV_KWARGS, log_every_env_steps=TOTAL, progress=False,
      poll_s=0.2)
  local_rate = local["learner_steps"] / local["env_steps"]
  remote_rate = remote["learner_steps"] / remote["env_steps"]
  # The environment exercises the difference: more sequences than fresh
  # env steps / replay_period (short padded ones), so counting sequences
  # would pace the distributed learner faster.
  items = remote["replay"]["inserted"]
  fresh_units = remote["env_steps"] / config.replay_period
  assert items > 1.4 * fresh_units, (items, fresh_units)
  # Tolerance, in learner steps, of the distributed count against the rule
  # applied to its own env steps (`pacing` module docstring):
  # * the limiter's error_buffer, max(0.1 min_size r, 2 r) sampled
  #   sequences, ahead or behind;
  # * steps still in the actor's adder, uncounted: < one window (trace
  #   length) per lane;
  # * the env steps at which each run's replay became ready differ (other
  #   episodes): up to min_replay_size full sequences' worth of env steps.
  # (About 12% of the learner steps here. min_replay_size 60 keeps n + r m
  # <= 2 error_buffer for a batch of 8 and 4 lanes' inserts: no deadlock.)
  spi = config.samples_per_insert
  error_buffer = max(0.1 * config.min_replay_size * spi, 2. * spi)
  lag_steps = (LANES * config.trace_length
               + config.min_replay_size * config.replay_period)
  tolerance = (error_buffer / config.batch_size
               + pacing.samples_per_env_step(config) * lag_steps
               / config.batch_size)
  # Counting sequences instead would be off by (items / fresh units - 1)
  # of the learner steps: far outside the tolerance.
  assert (items / fresh_units - 1) * remote["learner_steps"] > 2 * tolerance
  assert abs(remote_rate - local_rate) * remote["env_steps"] <= tolerance, (
      local["learner_steps"], local["env_steps"], remote["learner_steps"],
      remote["env_steps"], tolerance)
