"""Tests for experiments.agent57_suite: every (task, variant) builds.

No training: each run's flags are parsed as experiments.train parses them,
the config is built from the preset, and the agent's networks are shaped for
the task's environment (jax.eval_shape, no compile).
"""

import argparse

import jax
import pytest

from experiments import agent57_suite
from experiments import train
from ngu_jax import envs
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import networks as networks_lib


def _flags(task, variant):
  parser = argparse.ArgumentParser()
  parser.add_argument("--preset")
  parser.add_argument("--env")
  parser.add_argument("--loop")
  parser.add_argument("--num-lanes", type=int)
  parser.add_argument("--set", action="append", default=[])
  parser.add_argument("--env-kwarg", action="append", default=[])
  return parser.parse_args(agent57_suite.COMMON + agent57_suite.TASKS[task]
                           + list(variant.args))


@pytest.mark.parametrize("task", sorted(agent57_suite.TASKS))
@pytest.mark.parametrize("variant", agent57_suite.VARIANTS,
                         ids=lambda v: v.name)
def test_every_run_builds(task, variant):
  args = _flags(task, variant)
  config = config_lib.PRESETS[args.preset](
      **train.key_values(args.set, "--set"))
  assert config.num_mixtures == 8 and args.loop == "compiled"
  assert config.split_values == (variant.name == "agent57")
  assert (config.meta_controller == "ucb") == (variant.name == "agent57")
  assert (config.beta == 0.) == (variant.name == "r2d2")
  assert (config.intrinsic_reward == "none") == (variant.name == "r2d2")
  env = envs.make_functional(args.env,
                             **train.key_values(args.env_kwarg, "--env-kwarg"))
  spec = env.observation_spec()
  networks = networks_lib.make_networks(
      config, spec.shape, int(env.action_spec().num_values),
      env.observation_encoding())
  shapes = jax.eval_shape(
      lambda key: networks_lib.init_params(networks, key),
      jax.random.PRNGKey(0))
  assert jax.tree_util.tree_leaves(shapes.q)


def test_main_runs_one_comparison_per_task(monkeypatch, tmp_path):
  calls = []
  monkeypatch.setattr(agent57_suite.compare, "main",
                      lambda argv, *a, **k: calls.append((argv, a)) or "t")
  text = agent57_suite.main([
      "--output-root", str(tmp_path), "--tasks", "catch", "deep_sea",
      "--env-steps", "100", "--seeds", "3", "--variants", "agent57",
      "--set", "beta=0.1"])
  assert [argv[1] for argv, _ in calls] == [
      str(tmp_path / "catch"), str(tmp_path / "deep_sea")]
  assert text == "t\nt"                       # no runs: no arm section
  argv, (description, variants, fixed, metrics) = calls[1]
  assert argv[2:] == ["--env-steps", "100", "--seeds", "3", "--variants",
                      "agent57", "--vmap-seeds", "--set", "beta=0.1"]
  assert fixed == agent57_suite.COMMON + agent57_suite.TASKS["deep_sea"]


def _write_arms(path, steps, shares):
  import csv  # pylint: disable=import-outside-toplevel
  import os  # pylint: disable=import-outside-toplevel
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "metrics.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["env_steps"] + [f"arm_{j}" for j in range(len(shares[0]))])
    for s, row in zip(steps, shares):
      w.writerow([s] + ["" if v is None else v for v in row])


def test_arm_shares_average_seeds_and_plot(tmp_path):
  import numpy as np  # pylint: disable=import-outside-toplevel
  root = str(tmp_path)
  runs = tmp_path / "agent57" / "seeds"
  _write_arms(str(runs / "seed_0"), [10, 20, 30],
              [[None, None, None], [1., 0., 0.], [0.5, 0.5, 0.]])
  _write_arms(str(runs / "seed_1"), [10, 20, 30],
              [[None, None, None], [0., 0., 1.], [0.5, 0., 0.5]])
  got = agent57_suite.arm_shares(root, seeds=[0, 1, 2])
  np.testing.assert_array_equal(got["seeds"], [0, 1])
  np.testing.assert_array_equal(got["env_steps"], [10, 20, 30])
  assert np.isnan(got["shares"][0]).all()          # no window yet
  np.testing.assert_allclose(got["shares"][1:], [[0.5, 0., 0.5],
                                                 [0.5, 0.25, 0.25]])
  out = agent57_suite.arm_choice_plot(root, seeds=[0, 1])
  if out is not None:                              # matplotlib installed
    assert (tmp_path / "arm_choices.png").stat().st_size > 0
  assert agent57_suite.arm_shares(root, seeds=[5]) is None
  # A run cut short: the rows all seeds have.
  _write_arms(str(runs / "seed_2"), [10, 20], [[None] * 3, [0., 1., 0.]])
  got = agent57_suite.arm_shares(root, seeds=[0, 1, 2])
  np.testing.assert_allclose(got["shares"][1], [1 / 3, 1 / 3, 1 / 3])
  assert len(got["env_steps"]) == 2
