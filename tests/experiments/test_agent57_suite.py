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


def test_main_runs_one_comparison_per_task(monkeypatch):
  calls = []
  monkeypatch.setattr(agent57_suite.compare, "main",
                      lambda argv, *a, **k: calls.append((argv, a)) or "t")
  agent57_suite.main(["--tasks", "catch", "deep_sea", "--env-steps", "100",
                      "--seeds", "3", "--variants", "agent57",
                      "--set", "beta=0.1"])
  assert [argv[1] for argv, _ in calls] == [
      "runs/agent57_suite/catch", "runs/agent57_suite/deep_sea"]
  argv, (description, variants, fixed, metrics) = calls[1]
  assert argv[2:] == ["--env-steps", "100", "--seeds", "3", "--variants",
                      "agent57", "--vmap-seeds", "--set", "beta=0.1"]
  assert fixed == agent57_suite.COMMON + agent57_suite.TASKS["deep_sea"]
