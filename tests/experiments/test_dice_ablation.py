"""Tests for experiments.dice_ablation: every (task, variant) builds, the
script runs one comparison per task, and the tau histogram reads the runs.

No training: each run's flags are parsed as experiments.train parses them,
the config is built from the preset and the agent's networks are shaped for
the task's environment (jax.eval_shape, no compile).
"""

import argparse
import csv
import os

import jax
import numpy as np
import pytest

from experiments import dice_ablation
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
  return parser.parse_args(dice_ablation.COMMON + dice_ablation.TASKS[task]
                           + list(variant.args))


@pytest.mark.parametrize("task", sorted(dice_ablation.TASKS))
@pytest.mark.parametrize("variant", dice_ablation.VARIANTS,
                         ids=lambda v: v.name)
def test_every_run_builds(task, variant):
  args = _flags(task, variant)
  config = config_lib.PRESETS[args.preset](
      **train.key_values(args.set, "--set"))
  assert args.loop == "compiled" and config.loss.kind == "dice"
  assert config.policy.kind == "boltzmann"
  # Table 4: what each variant changes, and nothing else.
  assert config.policy.temperature_source == {"baseline": "fixed",
                                       "random": "random"}.get(variant.name,
                                                               "bva")
  assert config.policy.boltzmann_tau == 1.0
  assert config.loss.dice_entropy_weight == (1.0 if variant.name == "entropy"
                                        else 0.0)
  assert (config.intrinsic.kind, config.beta) == ("none", 0.0)
  env = envs.make_functional(args.env)
  networks = networks_lib.make_networks(
      config, env.observation_spec().shape,
      int(env.action_spec().num_values), env.observation_encoding())
  shapes = jax.eval_shape(
      lambda key: networks_lib.init_params(networks, key),
      jax.random.PRNGKey(0))
  assert jax.tree_util.tree_leaves(shapes.q)


def test_main_runs_one_comparison_per_task(monkeypatch, tmp_path):
  calls = []
  monkeypatch.setattr(dice_ablation.compare, "main",
                      lambda argv, *a, **k: calls.append((argv, a, k)) or "t")
  text = dice_ablation.main([
      "--output-root", str(tmp_path), "--tasks", "catch", "breakout",
      "--env-steps", "100", "--seeds", "3", "--variants", "dice", "random",
      "--set", "bva_c=2.0"])
  assert [argv[1] for argv, _, _ in calls] == [
      str(tmp_path / "catch"), str(tmp_path / "breakout")]
  argv, (description, variants, fixed, metrics), kwargs = calls[1]
  assert argv[2:] == ["--env-steps", "100", "--seeds", "3", "--variants",
                      "dice", "random", "--vmap-seeds", "--set", "bva_c=2.0"]
  assert fixed == dice_ablation.COMMON + dice_ablation.TASKS["breakout"]
  assert kwargs["baseline"] == ("baseline",)
  assert text == "t\nt"                     # no runs: no histogram added


def _write_run(path, steps, taus):
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "metrics.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["env_steps", "tau_p10", "tau_median", "tau_p90"])
    for s, (a, b, c) in zip(steps, taus):
      w.writerow([s, a, b, c])


def test_tau_histogram_pools_rows_and_seeds(tmp_path, monkeypatch):
  pytest.importorskip("matplotlib")
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.axes  # pylint: disable=import-outside-toplevel
  real_hist = matplotlib.axes.Axes.hist
  calls = []

  def spy(self, values, *args, **kwargs):
    calls.append(np.sort(np.asarray(values)))
    return real_hist(self, values, *args, **kwargs)

  monkeypatch.setattr(matplotlib.axes.Axes, "hist", spy)
  root = str(tmp_path)
  steps = [100, 200, 300, 400, 500, 600]
  taus = [(0.1, 1., 10.)] * 3 + [(0.2, 2., 20.)] * 3
  for seed in (0, 1):                  # a vmapped run's layout
    _write_run(os.path.join(root, "dice", "seeds", f"seed_{seed}"), steps,
               taus)
  _write_run(os.path.join(root, "random", "seed0"), steps,   # own-run layout
             [(0.5, float("nan"), 5.)] * 6)
  variants = [v for v in dice_ablation.VARIANTS
              if v.name in ("dice", "random", "baseline")]
  out = dice_ablation.tau_histogram(root, variants, seeds=[0, 1])
  assert out == os.path.join(root, "tau_histogram.png")
  assert os.path.getsize(out) > 0
  # Histograms in call order: variant order, first third then last third.
  # dice: first third = steps <= 200 (2 rows x 3 percentiles x 2 seeds);
  # last third = steps > 400 (2 rows): values from the second tau triple.
  np.testing.assert_allclose(calls[0], np.sort([0.1, 1., 10.] * 4))
  np.testing.assert_allclose(calls[1], np.sort([0.2, 2., 20.] * 4))
  # random: rows with a NaN percentile are dropped; baseline has no runs.
  assert len(calls) == 2
  assert dice_ablation.tau_histogram(root, variants[:1], seeds=[0]) is None
