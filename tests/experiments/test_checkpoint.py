"""Checkpoints, resume and Ctrl-C of the single-process run loop.

Fast tests run Disco Maze with the learner switched off (`min_replay_size`
above what the run inserts, so no sgd step is compiled): actor, adder,
replay, environments, evaluation and loop counters must continue exactly.
The slow test runs the learner too, through `experiments.train`.
"""

import csv
import glob
import json
import os
import shlex
import shutil
import signal
from unittest import mock

import numpy as np
import pytest

from experiments import train
from ngu_jax import envs
from ngu_jax import loops
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import config as config_lib

# The overrides of tests/experiments/test_train.py.
TINY = dict(grid_output_size=16, lstm_size=16, head_hidden=16,
            embedding_dim=8, rnd_output_dim=8, inverse_dynamics_hidden=16,
            trace_length=10, replay_period=5, min_replay_size=4, batch_size=4,
            memory_capacity=50, replay_capacity=100, samples_per_insert=0.5)
NO_LEARNER = dict(TINY, min_replay_size=100)  # Never reached in 80 steps.
RUN = dict(num_lanes=2, seed=1, env_kwargs={"max_episode_steps": 25},
           log_every_env_steps=20, eval_every_env_steps=40, progress=False)
TOTAL = 80
# Every column but the wall-clock ones.
DETERMINISTIC = tuple(c for c in loops.COLUMNS
                      if c not in ("env_steps_per_s", "elapsed_s"))


def _config(**overrides):
  return config_lib.PRESETS["disco_maze"](**{**NO_LEARNER, **overrides})


def _run(out, total, config=None, **kwargs):
  return loops.run_experiment(config or _config(), "disco_maze", total,
                             output_dir=str(out), **{**RUN, **kwargs})


def _csv_rows(out):
  """The deterministic columns of metrics.csv, as written (strings)."""
  with open(os.path.join(out, "metrics.csv")) as f:
    return [{c: r[c] for c in DETERMINISTIC} for r in csv.DictReader(f)]


def _assert_same_checkpoint(a, b):
  """Every array of two checkpoints equal; state.json equal but for time."""
  a, b = os.path.join(a, "checkpoint"), os.path.join(b, "checkpoint")
  files = sorted(os.path.relpath(p, a) for p in glob.glob(f"{a}/**/*.npz",
                                                          recursive=True))
  assert files == sorted(os.path.relpath(p, b) for p in glob.glob(
      f"{b}/**/*.npz", recursive=True))
  for name in files:
    with np.load(os.path.join(a, name), allow_pickle=False) as x, np.load(
        os.path.join(b, name), allow_pickle=False) as y:
      assert sorted(x.files) == sorted(y.files), name
      for k in x.files:
        assert x[k].dtype == y[k].dtype, (name, k)
        np.testing.assert_array_equal(x[k], y[k], err_msg=f"{name} {k}")
  sa = json.loads(open(os.path.join(a, "state.json")).read())
  sb = json.loads(open(os.path.join(b, "state.json")).read())
  for s in (sa, sb):
    del s["counters"]["elapsed_s"]
    last = s["metrics"]["last_row"]
    del last["elapsed_s"], last["env_steps_per_s"]
  assert sa == sb
  ra = json.loads(open(os.path.join(a, "replay", "replay.json")).read())
  rb = json.loads(open(os.path.join(b, "replay", "replay.json")).read())
  assert ra == rb


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
  """An uninterrupted run of TOTAL env steps."""
  out = tmp_path_factory.mktemp("full")
  summary = _run(out, TOTAL)
  return str(out), summary


@pytest.mark.parametrize("first_total, every", [(40, 20), (50, 0)])
def test_resume_continues_exactly(tmp_path, full_run, first_total, every):
  """K steps, checkpoint, resume to TOTAL == TOTAL steps at once.

  With K = 50 the first run also logs an end row at 50 (between two log
  points); the resumed run drops it, as the uninterrupted run has none.
  """
  full_out, full_summary = full_run
  first = _run(tmp_path, first_total, checkpoint_every_env_steps=every)
  assert first["rows"][-1]["env_steps"] == first_total
  resumed = _run(tmp_path, TOTAL, resume=True)
  assert _csv_rows(tmp_path) == _csv_rows(full_out)
  assert [r["env_steps"] for r in resumed["rows"]] == [20, 40, 60, 80]
  for got, want in zip(resumed["rows"], full_summary["rows"]):
    for column in DETERMINISTIC:
      np.testing.assert_equal(got[column], want[column])
  assert resumed["episodes"] > 0 and resumed["replay_size"] > 0
  _assert_same_checkpoint(str(tmp_path), full_out)


def test_checkpoint_holds_no_pickle(full_run):
  out, summary = full_run
  path = summary["checkpoint_path"]
  assert path == os.path.join(out, "checkpoint")
  files = sorted(os.path.relpath(os.path.join(d, f), path)
                 for d, _, fs in os.walk(path) for f in fs)
  assert files == ["actor.npz", "adder.npz", "checksums.json", "config.json",
                   "env.npz", "eval.npz", "eval_env.npz", "learner.npz",
                   "loop.npz", "replay/replay.json", "replay/replay.npz",
                   "state.json"]
  for name in files:
    full = os.path.join(path, name)
    if name.endswith(".npz"):
      with np.load(full, allow_pickle=False) as data:
        for k in data.files:
          assert data[k].dtype != object
    else:
      with open(full) as f:
        json.load(f)
  assert os.path.getsize(os.path.join(out, "curves.png")) > 0
  assert summary["curves_path"] == os.path.join(out, "curves.png")


ACTOR_DIAGNOSTICS = ("mean_episodic_reward", "mean_intrinsic_reward",
                     "mean_alpha", "alpha_above_one", "rnd_error",
                     "q_exploit", "q_explore")
LEARNER_DIAGNOSTICS = ("learner_loss", "action_prediction_loss",
                       "action_prediction_accuracy", "rnd_loss")


def test_diagnostic_columns_and_heatmaps(full_run):
  """Actor diagnostics in every row; heatmaps at every evaluation."""
  out, _ = full_run
  with open(os.path.join(out, "metrics.csv")) as f:
    rows = list(csv.DictReader(f))
  assert tuple(rows[0]) == loops.COLUMNS
  for row in rows:
    values = {c: float(row[c]) for c in loops.COLUMNS}
    for column in ACTOR_DIAGNOSTICS:
      assert np.isfinite(values[column]), (column, row)
    for column in LEARNER_DIAGNOSTICS:  # The learner never ran.
      assert np.isnan(values[column]), (column, row)
    assert values["mean_episodic_reward"] > 0
    assert 0 <= values["alpha_above_one"] <= 1 and values["rnd_error"] > 0
    # N = 1 (the preset): j = 0 is also j = N - 1.
    assert values["q_exploit"] == values["q_explore"]
  heatmaps = os.path.join(out, loops.HEATMAP_DIR)
  assert sorted(os.listdir(heatmaps)) == [
      "eval_40.npz", "eval_40.png", "eval_80.npz", "eval_80.png"]
  for name in ("eval_40", "eval_80"):
    assert open(os.path.join(heatmaps, name + ".png"), "rb").read(4) == (
        b"\x89PNG")
    with np.load(os.path.join(heatmaps, name + ".npz"),
                 allow_pickle=False) as counts:
      assert sorted(counts.files) == ["eval_j0", "train"]
      assert counts["eval_j0"].shape == counts["train"].shape == (21, 21)
      # Every step of both training lanes since the last evaluation.
      assert counts["train"].sum() == 40
      assert counts["eval_j0"].sum() >= 2  # Both lanes' episodes.


def test_diagnostics_without_rnd_are_nan(tmp_path):
  """use_rnd=False: no alpha or RND columns; beta r^i = beta r^episodic."""
  config = _config(use_rnd=False)
  rows = loops.run_experiment(
      config, "disco_maze", 16, num_lanes=2, seed=1,
      env_kwargs={"max_episode_steps": 25}, log_every_env_steps=8,
      progress=False)["rows"]
  for row in rows:
    for column in ("mean_alpha", "alpha_above_one", "rnd_error",
                   "rnd_error_mean", "rnd_error_std", "rnd_loss"):
      assert np.isnan(row[column]), column
    # alpha = 1 without RND, so r^i = r^episodic (N = 1: beta_0 = beta).
    assert row["mean_episodic_reward"] > 0
    np.testing.assert_allclose(row["mean_intrinsic_reward"],
                               config.beta * row["mean_episodic_reward"],
                               rtol=1e-5)


def _patch_training_env(monkeypatch, wrap):
  """Replaces `step` of the first env `run_experiment` makes (training)."""
  made = []
  make = envs.make

  def patched_make(*args, **kwargs):
    env = make(*args, **kwargs)
    if not made:
      env.step = wrap(env.step)
    made.append(env)
    return env

  monkeypatch.setattr(envs, "make", patched_make)


@pytest.mark.parametrize("how", ["sigint", "raise_in_env_step",
                                 "raise_mid_step"])
def test_interrupt_leaves_a_checkpoint_that_resumes(tmp_path, monkeypatch,
                                                    full_run, how):
  """Ctrl-C at step 13 (of 40): the resumed run equals the full one.

  sigint: a real SIGINT arrives during env.step: the iteration finishes
  (26 env steps) and is saved. raise_in_env_step: env.step raises
  KeyboardInterrupt before stepping: saved with the action pending (24 env
  steps). raise_mid_step: raised inside the adder, mid-iteration: nothing
  is saved, the periodic checkpoint of 20 env steps stays.
  """
  calls = []

  def wrap(step):
    def patched(action):
      calls.append(1)
      if len(calls) == 13:
        if how == "sigint":
          signal.raise_signal(signal.SIGINT)
        elif how == "raise_in_env_step":
          raise KeyboardInterrupt
      return step(action)
    return patched

  _patch_training_env(monkeypatch, wrap)
  if how == "raise_mid_step":
    observe = actor_lib.Actor.observe

    def patched_observe(self, *args):
      if len(calls) == 13:
        raise KeyboardInterrupt
      return observe(self, *args)
    monkeypatch.setattr(actor_lib.Actor, "observe", patched_observe)
  # Python's own handler, as in an interactive run (a suite started in the
  # background inherits SIG_IGN, which the run loop leaves alone).
  outer_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(KeyboardInterrupt):
      _run(tmp_path, TOTAL, checkpoint_every_env_steps=20)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
  finally:
    signal.signal(signal.SIGINT, outer_handler)
  monkeypatch.undo()
  with open(tmp_path / "checkpoint" / "state.json") as f:
    saved = json.load(f)
  expected = {"sigint": 26, "raise_in_env_step": 24, "raise_mid_step": 20}
  assert saved["counters"]["env_steps"] == expected[how]
  with np.load(tmp_path / "checkpoint" / "loop.npz") as loop:
    assert ("pending_action" in loop.files) == (how == "raise_in_env_step")
  _run(tmp_path, TOTAL, resume=True)
  assert _csv_rows(tmp_path) == _csv_rows(full_run[0])
  _assert_same_checkpoint(str(tmp_path), full_run[0])


def test_ignored_sigint_stays_ignored(tmp_path):
  outer_handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
  seen = []
  try:
    def progress(*args, **kwargs):  # Called in the loop: record the handler.
      del args, kwargs
      seen.append(signal.getsignal(signal.SIGINT))
    with mock.patch.object(loops.metrics_log.ProgressBar, "update", progress):
      _run(tmp_path, 8)
    assert seen and all(h is signal.SIG_IGN for h in seen)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
  finally:
    signal.signal(signal.SIGINT, outer_handler)


def test_resume_with_another_config_is_refused(tmp_path, full_run):
  shutil.copytree(os.path.join(full_run[0], "checkpoint"),
                  tmp_path / "checkpoint")
  with pytest.raises(loops.ResumeError) as error:
    _run(tmp_path, TOTAL, config=_config(lstm_size=32), resume=True,
         log_every_env_steps=10)
  message = str(error.value)
  assert "agent.lstm_size: checkpoint 16, now 32" in message
  assert "log_every_env_steps: checkpoint 20, now 10" in message
  assert "num_lanes" not in message


def test_resume_without_checkpoint_is_refused(tmp_path):
  with pytest.raises(FileNotFoundError, match="no checkpoint to resume"):
    _run(tmp_path, TOTAL, resume=True)
  with pytest.raises(ValueError, match="need an `output_dir`"):
    loops.run_experiment(_config(), "disco_maze", 8, resume=True)


@pytest.mark.parametrize("damage, match", [
    ("truncate learner.npz", "learner.npz"),
    ("remove adder.npz", "adder.npz"),
    ("garble state.json", "state.json"),
    ("remove replay/replay.json", "replay.json"),
])
def test_corrupt_checkpoint_is_refused(tmp_path, full_run, damage, match):
  shutil.copytree(os.path.join(full_run[0], "checkpoint"),
                  tmp_path / "checkpoint")
  action, name = damage.split()
  path = tmp_path / "checkpoint" / name
  if action == "truncate":
    path.write_bytes(path.read_bytes()[:100])
  elif action == "remove":
    path.unlink()
  else:
    path.write_text("{not json")
  with pytest.raises(loops.ResumeError, match=match):
    _run(tmp_path, TOTAL, resume=True)


def test_train_interrupt_exits_with_the_resume_command(tmp_path, monkeypatch,
                                                       capsys):
  def interrupted(*args, **kwargs):
    raise KeyboardInterrupt
  monkeypatch.setattr(loops, "run_experiment", interrupted)
  flags = ["--preset", "disco_maze", "--total-env-steps", "8",
           "--output-dir", str(tmp_path)]
  with pytest.raises(SystemExit) as exit_info:
    train.main(flags)
  assert exit_info.value.code == 130
  assert ("python -m experiments.train " + shlex.join(flags + ["--resume"])
          in capsys.readouterr().err)


def test_train_resume_without_checkpoint_exits(tmp_path):
  with pytest.raises(SystemExit, match="--resume: .*no checkpoint"):
    train.main(["--preset", "disco_maze", "--total-env-steps", "8",
                "--output-dir", str(tmp_path), "--resume"])
  assert not (tmp_path / "config.json").exists()


@pytest.mark.slow
def test_train_resume_with_learner_is_bit_identical(tmp_path, capsys):
  """experiments.train: 160 steps == 80 (checkpoints every 40) + resume."""
  flags = ["--preset", "disco_maze", "--seed", "1", "--num-lanes", "2",
           "--log-every", "40", "--eval-every", "80", "--no-progress",
           "--env-kwarg", "max_episode_steps=25"]
  for key, value in TINY.items():
    flags += ["--set", f"{key}={value}"]
  full = train.main(flags + ["--total-env-steps", "160",
                             "--output-dir", str(tmp_path / "a")])
  train.main(flags + ["--total-env-steps", "80", "--checkpoint-every", "40",
                      "--output-dir", str(tmp_path / "b")])
  resumed = train.main(flags + ["--total-env-steps", "160", "--resume",
                                "--output-dir", str(tmp_path / "b")])
  assert full["learner_steps"] >= 4
  assert resumed["learner_steps"] == full["learner_steps"]
  assert _csv_rows(tmp_path / "b") == _csv_rows(tmp_path / "a")
  _assert_same_checkpoint(str(tmp_path / "b"), str(tmp_path / "a"))
  printed = capsys.readouterr().out
  assert f"checkpoint: {tmp_path / 'b' / 'checkpoint'}" in printed
  assert "curves: " in printed
  with pytest.raises(SystemExit, match="agent.lstm_size"):
    train.main(flags + ["--total-env-steps", "160", "--resume",
                        "--set", "lstm_size=8",
                        "--output-dir", str(tmp_path / "b")])
