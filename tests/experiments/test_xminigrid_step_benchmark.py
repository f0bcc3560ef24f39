"""Smoke test of experiments.benchmarks.xminigrid_step (tiny sizes)."""

import jax
import numpy as np
import pytest

pytest.importorskip("xminigrid")

# pylint: disable=g-import-not-at-top,wrong-import-position
from experiments.benchmarks import xminigrid_step
# pylint: enable=g-import-not-at-top,wrong-import-position


def test_baseline_step_equals_the_library_step():
  # The benchmark's baseline (the former cond) must compute the same
  # transitions as XMiniGrid.step, restarts included (short time limit).
  task = "MiniGrid-Empty-5x5-v0"
  new = xminigrid_step.xminigrid_env.XMiniGrid(task, max_episode_steps=3)
  old = xminigrid_step._CondStep(task, max_episode_steps=3)  # pylint: disable=protected-access
  keys = jax.random.split(jax.random.PRNGKey(0), 4)
  s_new, _ = jax.vmap(new.reset)(keys)
  s_old, _ = jax.vmap(old.reset)(keys)
  step_new, step_old = jax.jit(jax.vmap(new.step)), jax.jit(jax.vmap(old.step))
  rng = np.random.default_rng(0)
  firsts = 0
  for _ in range(10):
    actions = rng.integers(0, 7, 4)
    s_new, ts_new = step_new(s_new, actions)
    s_old, ts_old = step_old(s_old, actions)
    jax.tree_util.tree_map(np.testing.assert_array_equal, ts_new, ts_old)
    jax.tree_util.tree_map(np.testing.assert_array_equal, s_new, s_old)
    firsts += int((ts_new.step_type == 0).sum())
  assert firsts > 0


@pytest.mark.slow  # The benchmarks' smoke runs are in `make test-slow`.
def test_bench_runs_and_prints(capsys):
  xminigrid_step.main(["--lanes", "2", "--steps", "3", "--rounds", "2",
                       "--tasks", "MiniGrid-Empty-5x5-v0"])
  out = capsys.readouterr().out
  assert "| MiniGrid-Empty-5x5-v0 |" in out and "x |" in out
