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
  assert config.samples_per_insert == 16.  # the same replay ratio for all
  assert config.loss.split_values == (variant.name == "agent57")
  assert (config.meta.kind == "ucb") == (variant.name == "agent57")
  assert (config.beta == 0.) == (variant.name == "r2d2")
  assert (config.intrinsic.kind == "none") == (variant.name == "r2d2")
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


@pytest.mark.parametrize("p, verdict", [
    ((0.2, 0.0, 0.45), "worse"), ((0.8, 0.55, 1.0), "better"),
    ((0.5, 0.2, 0.8), "no difference resolved"),
    ((float("nan"),) * 3, "n/a")])
def test_claim_verdict(p, verdict):
  assert agent57_suite.claim_verdict(*p) == verdict


def _write_evals(path, steps, returns, done=True):
  import csv  # pylint: disable=import-outside-toplevel
  import os  # pylint: disable=import-outside-toplevel
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "metrics.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["env_steps", "eval_return"])
    for s, r in zip(steps, returns):
      w.writerow([s, r])
  if done:
    with open(os.path.join(os.path.dirname(path), "done.json"), "w") as f:
      f.write("{}")


def test_suite_summary_picks_the_better_baseline_and_judges_the_claim(
    tmp_path):
  """Catch: Agent57 (returns 1) beats both NGU (0) and R2D2 (0.5; the
  better) on every seed: P = 1, "better". DeepSea: NGU only, unfinished:
  a row without a comparison. A task without runs has no row."""
  pytest.importorskip("rliable")
  steps = [10, 20, 30, 40, 50]
  for variant, value in (("ngu", 0.), ("agent57", 1.), ("r2d2", 0.5)):
    for seed in range(3):
      _write_evals(str(tmp_path / "catch" / variant / "seeds" /
                       f"seed_{seed}"), steps, [value + 0.01 * seed] * 5)
  for seed in range(3):
    _write_evals(str(tmp_path / "deep_sea" / "ngu" / "seeds" /
                     f"seed_{seed}"), steps[:2], [-0.005] * 2, done=False)
  text = agent57_suite.suite_summary(str(tmp_path), seeds=[0, 1, 2], reps=50,
                                     chance=False)
  assert (tmp_path / "results.md").read_text() == text
  rows = {line.split(" | ")[0][2:]: line.split(" | ")
          for line in text.splitlines() if line.startswith("| ")
          and not line.startswith("| task")}
  assert set(rows) == {"catch", "deep_sea"}
  catch = rows["catch"]
  assert catch[1].startswith("0.010") and catch[2].startswith("1.010")
  assert catch[7] == "R2D2"
  assert catch[8].startswith("1.000") and catch[9] == "better"
  assert catch[11] == "better"
  assert catch[12] == "n/a"                      # no arm_ columns
  assert catch[13].rstrip(" |") == "9/9"
  deep = rows["deep_sea"]
  assert deep[1].startswith("-0.005") and deep[2] == "n/a"
  assert deep[7:12] == ["n/a"] * 5
  assert deep[13].rstrip(" |") == "0/9"
  assert agent57_suite.suite_summary(str(tmp_path / "none"), [0]) == ""


def test_chance_on_deep_sea_is_the_random_walk():
  """DeepSea 10 under a uniform random policy: 10 steps, each "right" (half
  of them on average) costs 0.01 / 10, the treasure (+1) is reached with
  probability 2^-10: E[return] = -0.005 + 2^-10 (bsuite; Osband et al.
  2020). 4,096 episodes: a standard error of about 5e-4."""
  got = agent57_suite.chance_return("deep_sea", episodes=4096)
  assert abs(got - (-0.005 + 2. ** -10)) < 1.5e-3, got
  assert agent57_suite._env_of("deep_sea") == (  # pylint: disable=protected-access
      "gymnax/DeepSea-bsuite", {"size": 10})
