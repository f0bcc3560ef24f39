"""Tests of the episodic-memory benchmark's timing of memory steps (shared
with the RECODE benchmark, whose --quick run is its smoke test)."""

import jax.numpy as jnp

from experiments.benchmarks import episodic_memory
from experiments.benchmarks import timing


def test_time_steps_cycle_the_queries_and_count_lane_steps(monkeypatch):
  seen = []

  def step(config, state, query):
    seen.append(int(query))
    return jnp.float32(query), state + config

  # The clock is read before and after the 4 steps that follow the warm-up.
  monkeypatch.setattr(timing, "clock", iter([0., 6.]).__next__)
  seconds, state = episodic_memory.time_steps(
      step, 1, jnp.int32(0), jnp.arange(3), repeats=4, lanes=2)
  assert seen == [0, 0, 1, 2, 0]  # Warm-up on queries[0], then i % 3.
  assert seconds == 6. / (4 * 2)
  assert int(state) == 5  # Threaded through all five calls.

