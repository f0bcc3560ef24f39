"""Smoke test of `python -m experiments.train` (single-process NGU)."""

import csv
import dataclasses
import io
import json
import math

import pytest

from experiments import train
from ngu_jax import envs
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.loops import metrics_log


@pytest.mark.slow
def test_train_disco_maze_writes_metrics(tmp_path):
  out = tmp_path / "run"
  summary = train.main([
      "--preset", "disco_maze", "--total-env-steps", "240",
      "--output-dir", str(out), "--seed", "1", "--num-lanes", "2",
      "--log-every", "80", "--eval-every", "200", "--no-progress",
      "--set", "grid_output_size=16", "--set", "lstm_size=16",
      "--set", "head_hidden=16", "--set", "embedding_dim=8",
      "--set", "rnd_output_dim=8", "--set", "inverse_dynamics_hidden=16",
      "--set", "trace_length=10", "--set", "replay_period=5",
      "--set", "min_replay_size=4", "--set", "batch_size=4",
      "--set", "memory_capacity=50", "--set", "replay_capacity=100",
      "--set", "samples_per_insert=0.5",
      "--env-kwarg", "max_episode_steps=25"])
  with open(out / "metrics.csv") as f:
    rows = list(csv.DictReader(f))
  assert [int(r["env_steps"]) for r in rows] == [80, 160, 240]
  last = rows[-1]
  assert int(last["learner_steps"]) >= 2
  for column in ("learner_loss", "action_prediction_loss",
                 "action_prediction_accuracy", "rnd_loss",
                 "mean_episodic_reward", "mean_intrinsic_reward",
                 "mean_alpha", "alpha_above_one", "rnd_error", "q_exploit"):
    assert math.isfinite(float(last[column])), column
  assert 0 <= float(last["action_prediction_accuracy"]) <= 1
  assert int(last["episodes"]) > 0
  assert 0 < float(last["mean_episode_coverage"]) <= 1
  # One evaluation (N = 1: j = 0 is also the most exploratory), at 240.
  assert [math.isnan(float(r["eval_coverage"])) for r in rows] == [
      True, True, False]
  assert 0 < float(last["eval_coverage"]) <= 1
  assert float(last["eval_explore_return"]) == 0.  # Disco Maze: no reward.
  assert float(last["eval_success"]) == 0.  # ... so no episode succeeds.
  assert summary["learner_steps"] == int(last["learner_steps"])
  assert json.loads((out / "config.json").read_text())["lstm_size"] == 16
  # The end checkpoint and, with matplotlib, the learning curves.
  assert summary["checkpoint_path"] == str(out / "checkpoint")
  assert (out / "checkpoint" / "learner.npz").is_file()
  if summary["curves_path"] is not None:
    assert (out / "curves.png").stat().st_size > 0
    assert (out / "heatmaps" / "eval_240.png").stat().st_size > 0
  assert (out / "heatmaps" / "eval_240.npz").is_file()


def test_bad_override_exits(tmp_path):
  with pytest.raises(SystemExit):
    train.main(["--preset", "disco_maze", "--total-env-steps", "8",
                "--output-dir", str(tmp_path), "--set", "lstm_size=0"])


# Tiny networks and budgets: each run reaches a few learner steps; its time
# is mostly compilation.
_TINY = [arg for kv in (
    "lstm_size=8", "head_hidden=8", "embedding_dim=4", "rnd_output_dim=4",
    "inverse_dynamics_hidden=8", "grid_output_size=8", "mlp_hidden_sizes=(8,)",
    "num_mixtures=2", "trace_length=4", "replay_period=2", "aux_loss_steps=2",
    "min_replay_size=2", "batch_size=2", "memory_capacity=20",
    "replay_capacity=20", "samples_per_insert=1.0") for arg in ("--set", kv)]


# Every family the README lists trains end to end with its declared
# observation encoding: Atari and Disco Maze pixels, MiniGrid symbolic codes
# (one-hot), DeepSea a binary [10, 10] grid (-> [10, 10, 1], grid torso),
# CartPole real features (MLP). Measured on 2 CPU cores: Pong 31 s, DeepSea
# 21 s, MiniGrid 18 s (marked slow), CartPole 10-18 s (mostly compilation);
# Disco Maze trains through the same command in
# test_train_disco_maze_writes_metrics, with more checks;
# tests/agents/ngu/test_builder.py traces every family's actor and learner
# step in the fast suite.
_SLOW = pytest.mark.slow


@pytest.mark.parametrize("env, flags", [
    pytest.param("atari/Pong", ["--preset", "atari"], marks=_SLOW),
    pytest.param("minigrid/MiniGrid-DoorKey-5x5-v0", ["--preset", "minigrid"],
                 marks=_SLOW),
    pytest.param("gymnax/DeepSea-bsuite", ["--preset", "minigrid",
                                           "--env-kwarg", "size=10"],
                 marks=_SLOW),
    ("gymnax/CartPole-v1", ["--preset", "minigrid", "--set", "torso=auto"]),
])
def test_every_env_family_trains(tmp_path, env, flags):
  if env.startswith("gymnax/"):
    pytest.importorskip("gymnax")
  summary = train.main(flags + _TINY + [
      "--env", env, "--total-env-steps", "40", "--num-lanes", "2",
      "--log-every", "40", "--output-dir", str(tmp_path), "--no-progress"])
  assert summary["learner_steps"] >= 1
  last = summary["rows"][-1]
  assert math.isfinite(float(last["learner_loss"]))


# The compiled loop on each functional family; on Disco Maze also the
# Python loop on the same pure-JAX environment ("jax/<name>"): the same
# files and columns (a property of the loops, not of the family: checked on
# one family, whose heatmaps it covers too; the other families' columns are
# checked against the Disco Maze Python run's). About 2-6 min each on 2
# busy cores, mostly compiling.
_BOTH_LOOPS = "disco_maze"


@pytest.mark.slow
@pytest.mark.parametrize("env, flags", [
    ("disco_maze", ["--preset", "disco_maze", "--env-kwarg", "size=7",
                    "--env-kwarg", "max_episode_steps=25"]),
    ("minigrid/MiniGrid-DoorKey-5x5-v0", ["--preset", "minigrid"]),
    ("gymnax/DeepSea-bsuite", ["--preset", "minigrid", "--env-kwarg",
                               "size=10"]),
])
def test_compiled_loop_trains_with_the_python_loops_outputs(tmp_path, env,
                                                            flags):
  pytest.importorskip("gymnax" if env.startswith("gymnax/") else "jax")
  if env.startswith("minigrid/"):
    pytest.importorskip("xminigrid")
  common = flags + _TINY + ["--total-env-steps", "80", "--num-lanes", "2",
                            "--log-every", "40", "--eval-every", "80",
                            "--no-progress"]
  compiled = train.main(common + [
      "--env", env, "--loop", "compiled", "--seeds", "3", "4",
      "--output-dir", str(tmp_path / "compiled")])
  assert compiled["seeds"] == [3, 4]
  if env == _BOTH_LOOPS:
    train.main(common + [
        "--env", "jax/" + env, "--output-dir", str(tmp_path / "python")])
    python_files = sorted(p.name for p in (tmp_path / "python").iterdir())
    with open(tmp_path / "python" / "metrics.csv") as f:
      python_columns = list(next(csv.DictReader(f)))
  else:
    # What the Python loop writes for a run with an evaluation: every
    # run's files, the maps of a grid world (both families are: `grid_shape`
    # set), and the loops' columns.
    python_files = ["checkpoint", "config.json", "curves.png", "heatmaps",
                    "metrics.csv"]
    python_columns = list(metrics_log.COLUMNS)
  for seed in (3, 4):
    out = tmp_path / "compiled" / f"seed_{seed}"
    with open(out / "metrics.csv") as f:
      rows = list(csv.DictReader(f))
    assert list(rows[0]) == python_columns
    assert [r["env_steps"] for r in rows] == ["40", "80"]
    assert int(rows[-1]["learner_steps"]) >= 1
    assert math.isfinite(float(rows[-1]["learner_loss"]))
    assert math.isfinite(float(rows[-1]["eval_return"]))
    assert sorted(p.name for p in out.iterdir()) == [
        name for name in python_files
        if name not in ("checkpoint", "config.json")]
    if "heatmaps" in python_files:
      assert (out / "heatmaps" / "eval_80.npz").is_file()
  assert (tmp_path / "compiled" / "checkpoint" / "train_state.npz").is_file()


def test_config_json_records_the_compiled_loops_fitted_memory():
  """DIR/config.json holds the config the run trains with: the compiled
  loop fits the episodic memory to the episodes (at most n + 1 slots)."""
  config = config_lib.PRESETS["disco_maze"](memory_capacity=500)
  kwargs = {"size": 5, "max_episode_steps": 30}
  fitted = train.effective_config(config, "compiled", "disco_maze", kwargs)
  assert fitted.memory_capacity == 31
  assert dataclasses.replace(fitted, memory_capacity=500) == config
  assert train.effective_config(config, "python", "jax/disco_maze",
                                kwargs) is config


def test_compiled_loop_flags_are_checked(tmp_path):
  with pytest.raises(SystemExit):
    train.main(["--preset", "minigrid", "--total-env-steps", "8",
                "--output-dir", str(tmp_path), "--seeds", "0", "1"])
  with pytest.raises(SystemExit):
    train.main(["--preset", "minigrid", "--total-env-steps", "8",
                "--output-dir", str(tmp_path), "--loop", "compiled",
                "--replay-backend", "reverb"])


def test_list_prints_every_name_once_with_its_loops(capsys):
  summary = train.main(["--list"])
  groups = summary["environments"]
  out = capsys.readouterr().out
  assert list(groups) == ["atari", "disco_maze", "minigrid", "gymnax",
                          "noisy_grid"]
  lines = out.splitlines()
  for family, names in groups.items():
    assert sum(line.startswith(f"{family} ({len(names)})  [python: ")
               for line in lines) == 1
    for name, loops in names.items():
      assert loops == envs.loops_of(name)
      printed = [line.split() for line in lines
                 if line.startswith(f"  {name} ")]
      assert printed == [[name, "loops:"] + [
          f"{loop}," for loop in loops[:-1]] + [loops[-1]]], name
  assert groups["atari"]["atari/Pong"] == ("python",)
  assert groups["disco_maze"] == {"disco_maze": ("python", "compiled")}
  assert groups["minigrid"]["minigrid/MiniGrid-DoorKey-5x5-v0"] == (
      "python", "compiled")
  assert groups["noisy_grid"]["noisy_grid/tv"] == ("python", "compiled")
  # Each loop's implementation, and the jax/ and module:factory forms.
  assert "disco_maze (1)  [python: numpy" in out
  assert "compiled: pure JAX (disco_maze_jax.DiscoMazeJax)" in out
  assert "\n  jax/NAME " in out and "\n  module:factory " in out


# Names as --list prints them train in each loop it lists them with, and
# users' own environments ("module:factory", tests/envs/user_envs.py) in
# both loops. One tiny run each, mostly compiling. The noisy grid's settings
# are user_envs.noisy_lane's, so the factory's programs are the named
# grid's, and Disco Maze's are test_max_minutes_...'s: the session's
# compilation cache (and, in one process, the compiled loop's program
# cache) loads them instead of compiling again.
_ENV_FLAGS = {
    "noisy_grid/tv": ["--env-kwarg", "size=7",
                      "--env-kwarg", "max_episode_steps=10"],
    "disco_maze": ["--env-kwarg", "max_episode_steps=25"],
}
_USER = "tests.envs.user_envs"


def _train_tiny(out, env, loop, *flags):
  return train.main(["--preset", "disco_maze", *_TINY, "--env", env,
                     "--loop", loop, "--total-env-steps", "40",
                     "--num-lanes", "2", "--log-every", "20",
                     "--no-progress", "--output-dir", str(out), *flags])


# Every name in each loop it lists: `make test-slow`. `make test` trains
# from the command line in both loops in `test_a_users_factory_trains`
# and in the Python loop in `test_every_env_family_trains`.
_SLOW_PAIRS = {("noisy_grid/tv", "compiled"), ("noisy_grid/tv", "python"),
               ("disco_maze", "python"), ("disco_maze", "compiled")}


@pytest.mark.parametrize("name, loop", [
    pytest.param(name, loop, marks=(pytest.mark.slow,) if (
        name, loop) in _SLOW_PAIRS else ())
    for name in ("noisy_grid/tv", "disco_maze")
    for loop in envs.loops_of(name)])
def test_a_listed_name_trains_in_each_loop_it_lists(tmp_path, name, loop):
  listed = train.list_environments(file=io.StringIO())
  assert loop in listed[name.partition("/")[0]][name]
  summary = _train_tiny(tmp_path, name, loop, *_ENV_FLAGS[name])
  assert [r["env_steps"] for r in _rows(summary, loop)] == [20, 40]
  assert summary["learner_steps"] >= 1


# `make test` trains one factory (the vector one, the cheapest compile);
# the noisy lane in each loop (33 and 49 s) is `make test-slow`'s.
@pytest.mark.parametrize("factory, loop, flags", [
    pytest.param("noisy_lane", "python", [], marks=pytest.mark.slow),
    pytest.param("noisy_lane", "compiled", [], marks=pytest.mark.slow),
    # A gymnasium vector environment: float32 [2] features (MLP torso).
    ("chain_vector", "python", ["--set", "torso=auto", "--env-kwarg",
                                "length=4"]),
])
def test_a_users_factory_trains(tmp_path, factory, loop, flags):
  summary = _train_tiny(tmp_path, f"{_USER}:{factory}", loop, *flags)
  rows = _rows(summary, loop)
  assert [r["env_steps"] for r in rows] == [20, 40]
  assert summary["learner_steps"] >= 1
  assert int(rows[-1]["episodes"]) > 0


@pytest.mark.parametrize("env, loop, message", [
    ("atari/Pong", "compiled", "runs on envpool's C++ emulator, which only "
     "the Python loop runs (`--loop python`"),
    ("minigrid/MiniGrid-LavaGapS5-v0", "compiled",
     "runs in the Python loop only"),
    ("jax/atari/Pong", "python", "no pure-JAX implementation"),
    ("pong", "python", "unknown environment 'pong'"),
    (f"{_USER}:disco_lanes", "compiled", "needs `num_envs`, so it builds a "
     "batched environment"),
    ("tests.envs.no_such_module:make", "python", "cannot import module"),
    (f"{_USER}:nope", "compiled", "has no attribute 'nope'"),
    (f"{_USER}:NOT_CALLABLE", "python", "not callable"),
])
def test_env_names_a_loop_cannot_run_exit_before_writing(tmp_path, env, loop,
                                                         message):
  with pytest.raises(SystemExit) as info:
    _train_tiny(tmp_path / "run", env, loop)
  assert info.value.code == 2  # A bad invocation (test_bad_input.py).
  assert str(info.value).startswith("--env: ")
  assert message in str(info.value)
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("factory, loop, message", [
    ("not_an_env", "python", "returned a builtins.dict"),
    ("not_an_env", "compiled", "returned a builtins.dict"),
    ("lanes_without_num_envs", "compiled", "returned a batched environment"),
    ("too_many_lanes", "python", "returned 3 lanes, expected num_envs = 2"),
    ("single_chain", "python", "gymnasium.make_vec"),
])
def test_a_factory_returning_the_wrong_kind_exits(tmp_path, factory, loop,
                                                  message):
  with pytest.raises(SystemExit) as info:
    _train_tiny(tmp_path / "run", f"{_USER}:{factory}", loop)
  assert info.value.code == 2
  assert str(info.value).startswith("--env: ")
  assert message in str(info.value)
  assert not (tmp_path / "run").exists()  # Refused before anything.


def test_missing_flags_exit_unless_list():
  with pytest.raises(SystemExit):
    train.main(["--preset", "minigrid"])


def _rows(summary, loop):
  """The metrics rows of a run's summary (the first seed's: compiled)."""
  return summary["rows"][0] if loop == "compiled" else summary["rows"]


# The compiled loop's (65 s, a compile per call): `make test-slow`; both
# loops stop through `metrics_log.past_max_minutes`.
@pytest.mark.parametrize("loop", [
    "python", pytest.param("compiled", marks=pytest.mark.slow)])
def test_max_minutes_stops_at_the_first_row_past_it_and_resumes(tmp_path,
                                                                  loop):
  """A wall-clock limit ends the run after its first row (every row comes
  after more than 1e-6 min); --resume without it goes on to the total."""
  out = tmp_path / loop

  def flags(total):
    return ["--preset", "disco_maze", *_TINY, "--total-env-steps", str(total),
            "--num-lanes", "2", "--log-every", "20", "--no-progress",
            "--output-dir", str(out), "--loop", loop,
            "--env-kwarg", "max_episode_steps=25"]

  first = _rows(train.main(flags(80) + ["--max-minutes", "1e-6"]), loop)
  assert [r["env_steps"] for r in first] == [20]
  assert first[0]["elapsed_s"] >= 6e-5
  assert (out / "checkpoint").is_dir()
  resumed = _rows(train.main(flags(80) + ["--resume"]), loop)
  assert [r["env_steps"] for r in resumed] == [20, 40, 60, 80]
  # The limit is on the whole training time (elapsed_s carries over a
  # resume): a run resumed already past it takes no further step.
  again = _rows(train.main(flags(200) + ["--resume", "--max-minutes",
                                         "1e-6"]), loop)
  assert [r["env_steps"] for r in again] == [20, 40, 60, 80]


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_bad_max_minutes_exits(tmp_path, value):
  with pytest.raises(SystemExit):
    train.main(["--preset", "disco_maze", "--total-env-steps", "8",
                "--output-dir", str(tmp_path), "--max-minutes", value])


@pytest.mark.parametrize("bad", [-1., math.nan, math.inf, True, "5"])
def test_loops_reject_bad_max_minutes(bad):
  from ngu_jax import loops  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.disco_maze()
  for run in (loops.run_experiment, loops.run_compiled):
    with pytest.raises(ValueError, match="max_minutes"):
      run(config, "disco_maze", 8, max_minutes=bad)
