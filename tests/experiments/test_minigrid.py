"""Tests for experiments.minigrid (the MiniGrid study's runs and tables).

The study's logic on written metrics files (no training): which processes
each (task, variant) gets, the staged budgets and the early stop when
solved, and the tables; one end-to-end wiring run is `make test-slow`.
"""

import csv
import dataclasses
import os

import numpy as np
import pytest

from experiments import compare
from experiments import minigrid

COLUMNS = ["env_steps", "elapsed_s", "eval_success", "eval_return",
           "episode_success_rate", "mean_intrinsic_reward"]
VARIANTS = {v.name: v for v in minigrid.VARIANTS}
TASK = minigrid.Task("toy", "minigrid/MiniGrid-DoorKey-5x5-v0", "compiled",
                     (1_000_000, 3_000_000), 2, "eval_success", 0.9, "none")


def _write(root, task, variant, seed, success, steps=(500_000, 1_000_000)):
  directory, _ = compare.locate_run(os.path.join(root, task.name), variant,
                                    seed)
  if not os.path.isdir(directory):
    directory = os.path.join(
        compare.vmapped_run_dir(os.path.join(root, task.name), variant),
        f"seed_{seed}")
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "metrics.csv"), "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=COLUMNS)
    writer.writeheader()
    for i, step in enumerate(steps):
      writer.writerow({"env_steps": step, "elapsed_s": 60. * (i + 1),
                       "eval_success": success[i], "eval_return": success[i],
                       "episode_success_rate": 0.5,
                       "mean_intrinsic_reward": 0.1})


def test_jobs_per_family_and_loop():
  root = "/r"
  ngu = minigrid.jobs_for(root, minigrid.TASKS["doorkey8"], VARIANTS["ngu"],
                          [0, 1], 1000)
  assert len(ngu) == 1 and ngu[0].module == "experiments.train"
  args = list(ngu[0].args)
  assert args[args.index("--loop") + 1] == "compiled"
  assert args[-3:] == ["--seeds", "0", "1"]
  assert args[args.index("--total-env-steps") + 1] == "1000"
  # Log, evaluation and checkpoint intervals come from the whole budget,
  # so a later stage resumes the same config.
  assert args[args.index("--eval-every") + 1] == str(1_000_000 // 20)
  assert ngu[0].out == "/r/doorkey8/ngu/seeds"
  ppo = minigrid.jobs_for(root, minigrid.TASKS["doorkey8"], VARIANTS["ppo_ngu"],
                          [0, 1], 1000)
  assert ppo[0].module == "examples.ppo_ngu"
  assert "--intrinsic" in ppo[0].args and "ngu" in ppo[0].args
  # Every task now runs in the compiled loop (KeyCorridor and MultiRoom on
  # ngu_jax.envs.xminigrid_levels), PPO included; a Python-loop task would
  # run one process per seed, and no PPO.
  for name in ("keycorridor", "multiroom"):
    task = minigrid.TASKS[name]
    assert task.loop == "compiled"
    assert minigrid.runs_on(task, VARIANTS["ppo"])
    kc = minigrid.jobs_for(root, task, VARIANTS["beta0"], [0, 2], 1000)
    assert kc[0].out == f"/r/{name}/beta0/seeds"
  envpool_task = dataclasses.replace(minigrid.TASKS["keycorridor"],
                                     loop="python")
  python = minigrid.jobs_for(root, envpool_task, VARIANTS["beta0"], [0, 2],
                             1000)
  assert [j.out for j in python] == ["/r/keycorridor/beta0/seed0",
                                     "/r/keycorridor/beta0/seed2"]
  assert python[1].args[-2:] == ["--seed", "2"]
  assert not minigrid.runs_on(envpool_task, VARIANTS["ppo"])
  assert minigrid.runs_on(envpool_task, VARIANTS["rnd"])


def test_solved_and_first_solved(tmp_path):
  root = str(tmp_path)
  variant = VARIANTS["ngu"]
  _write(root, TASK, "ngu", 0, [0.95, 0.9])
  assert not minigrid.solved(root, TASK, variant, [0, 1])  # Seed 1 missing.
  assert minigrid.reached(root, TASK, variant, [0, 1]) == 0
  _write(root, TASK, "ngu", 1, [0.5, 1.0])
  assert not minigrid.solved(root, TASK, variant, [0, 1])
  assert minigrid.reached(root, TASK, variant, [0, 1]) == 1_000_000
  _write(root, TASK, "ngu", 1, [0.5, 1.0, 0.92],
         steps=(500_000, 1_000_000, 1_500_000))
  assert minigrid.solved(root, TASK, variant, [0, 1])
  cols = compare.read_metrics(
      f"{root}/toy/ngu/seeds/seed_1/metrics.csv")
  assert minigrid.first_solved(cols, TASK) == 1_000_000
  cols["eval_success"] = np.array([0.95, 0.1, np.nan])
  assert np.isnan(minigrid.first_solved(cols, TASK))


def test_stages_stop_when_solved(tmp_path, monkeypatch):
  """Stage 1 runs what has not reached its budget; stage 2 extends only the
  unsolved runs, whose done.json (stage 1's) is removed first."""
  root = str(tmp_path)
  queues = []
  monkeypatch.setattr(compare, "run_jobs",
                      lambda queue, **kw: queues.append(list(queue)))
  for name, success in (("ngu", [1., 1.]), ("beta0", [0., 0.])):
    for seed in (0, 1):
      _write(root, TASK, name, seed, success)
    done = os.path.join(root, "toy", name, "seeds", compare.DONE_FILE)
    open(done, "w").write("{}")
  minigrid.run_study(root, [TASK], [VARIANTS["ngu"], VARIANTS["beta0"],
                                    VARIANTS["ppo"]], None, 1, 1, False)
  assert [[j.name for j in q] for q in queues] == [
      ["toy ppo"], ["toy beta0", "toy ppo"]]
  assert "3000000" in queues[1][0].args
  assert not os.path.exists(os.path.join(root, "toy", "beta0", "seeds",
                                         compare.DONE_FILE))
  assert os.path.exists(os.path.join(root, "toy", "ngu", "seeds",
                                     compare.DONE_FILE))


def test_aggregate_headline(tmp_path, monkeypatch):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  monkeypatch.setattr(minigrid, "_chance", lambda task: {
      "eval_success": 0.02, "eval_return": 0.01,
      "episode_success_rate": 0.02})
  for seed in (0, 1):
    _write(root, TASK, "ngu", seed, [0.2, 0.4])
    _write(root, TASK, "ppo", seed, [0.9, 1.0])
  text = minigrid.aggregate(root, [TASK], [VARIANTS["ngu"], VARIANTS["ppo"],
                                           VARIANTS["rnd"]], None, reps=100)
  assert "Start from: **PPO**" in text
  lines = [l for l in text.splitlines() if l.startswith("| ")]
  ngu = next(l for l in lines if l.startswith("| NGU"))
  # Final: the evaluations in the last 20% of the steps (the last one).
  assert "| 2 | 1,000,000 | 0.400 [" in ngu and "| —, — |" in ngu
  assert "| PPO | 2 | 1,000,000 | 1.000 [" in text
  assert "| 0.50M, 0.50M | 2 |" in text  # Solved at, minutes per run.
  assert "no runs yet" in next(l for l in lines if l.startswith("| RND"))
  assert "uniform random policy (chance) | | | 0.020" in text
  # Below chance, nothing is recommended.
  monkeypatch.setattr(minigrid, "_chance", lambda task: {
      "eval_success": 1.0})
  text = minigrid.aggregate(root, [TASK], [VARIANTS["ngu"], VARIANTS["ppo"]],
                            None, reps=100)
  assert "Start from" not in text
  assert "No variant's greedy policy beats chance (1.000)" in text
  assert "succeed most often with NGU (N=8, beta=0.3) (0.500)" in text
  assert os.path.exists(os.path.join(root, "toy", "results.md"))
  assert os.path.exists(os.path.join(root, "toy",
                                     "eval_success_wallclock.png"))


def test_aggregate_keeps_other_tasks_sections(tmp_path, monkeypatch):
  # Each task's section comes from its own command: aggregating one task
  # keeps the page's other sections (in TASKS order) and replaces its own.
  pytest.importorskip("rliable")
  root = str(tmp_path)
  monkeypatch.setattr(minigrid, "_chance", lambda task: None)
  for seed in (0, 1):
    _write(root, TASK, "ngu", seed, [0.2, 0.4])
  with open(os.path.join(root, "results.md"), "w") as f:
    f.write("# title\n\nintro\n\n## MiniGrid-FourRooms-v0 (fourrooms)\n\n"
            "four rooms table\n\n## MiniGrid-DoorKey-8x8-v0 (doorkey8)\n\n"
            "doorkey table\n\n## Toy (toy)\n\nstale\n")
  for _ in range(2):  # Twice: the toy section must not pile up.
    text = minigrid.aggregate(root, [TASK], [VARIANTS["ngu"]], None, reps=50)
    assert text.index("doorkey table") < text.index("four rooms table")
    assert text.index("four rooms table") < text.index("| NGU")
    assert "stale" not in text and text.count("(toy)") == 1
  assert minigrid.page_sections(text)["doorkey8"][0] == (
      "## MiniGrid-DoorKey-8x8-v0 (doorkey8)")


def test_command_line_errors():
  with pytest.raises(SystemExit):
    minigrid.main(["--tasks", "doorkey9"])
  with pytest.raises(SystemExit):
    minigrid.main(["--seeds", "0", "0", "--aggregate-only"])
  with pytest.raises(SystemExit):
    minigrid.main(["--max-env-steps", "3", "--aggregate-only"])


@pytest.mark.slow
def test_study_end_to_end(tmp_path):
  """A tiny budget through both families' processes and the tables."""
  pytest.importorskip("rliable")
  root = str(tmp_path)
  minigrid.main(["--output-root", root, "--tasks", "doorkey8",
                 "--variants", "ngu", "ppo", "--seeds", "0", "1",
                 "--max-env-steps", "4096", "--jobs", "2"])
  for variant in ("ngu", "ppo"):
    for seed in (0, 1):
      cols = compare.read_metrics(
          f"{root}/doorkey8/{variant}/seeds/seed_{seed}/metrics.csv")
      assert cols["env_steps"][-1] >= 4096
      assert np.isfinite(cols["eval_success"]).any()
  text = open(os.path.join(root, "results.md")).read()
  assert "| PPO | 2 |" in text


@pytest.mark.parametrize("variant", [v.name for v in minigrid.NGU_FAMILY])
def test_ngu_family_variants_make_valid_configs(variant):
  # Every `--set` of an NGU-family variant is a field the minigrid preset
  # accepts with a value its checks pass (a typo would fail the run only
  # after the study started it).
  from experiments import train  # pylint: disable=g-import-not-at-top
  args = VARIANTS[variant].args
  sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
  assert sets
  config = train.make_config("minigrid", sets)
  if variant.startswith("ngu_zs"):
    assert config.intrinsic.normalization == "standardize"
  if variant == "ngu_zs_cmr_g97":
    np.testing.assert_allclose(config.mixture_gammas(), 0.97)
  if variant.endswith("spi16"):
    assert config.samples_per_insert == 16.
  if variant.endswith("_unc"):
    assert config.retrace_traces == "uncorrected"
