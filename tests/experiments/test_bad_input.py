"""Bad invocations of `experiments.train` and `experiments.launch`.

One table: each row a command line that must be refused with exactly one
line on stderr (`python -m experiments.<cli>: error: ...`, naming what is
wrong) and exit status 2, without a traceback, before anything is written
(the directory tree the commands see is the same, byte for byte and
mtime for mtime, before and after) and, for `launch`, before Ray starts.
Nothing trains: a checkpoint of another configuration is two JSON files
made here (as `tests/loops/test_host.py::_fake_checkpoint` makes them).
Two rows run as real processes (`python -m ...`).
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from experiments import launch
from experiments import train
from ngu_jax import npz_io
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.loops import checkpointing
from ngu_jax.loops import compiled
from ngu_jax.loops.distributed import launcher

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
USER = "tests.envs.user_envs"
# A read-only file system, refused even for root (skipped where writable).
READ_ONLY = "/proc/sys"

# The flags every row starts from (a later flag of the same name wins).
TRAIN = ["--preset", "disco_maze", "--total-env-steps", "8",
         "--output-dir", "{tmp}/new_run"]
LAUNCH = ["--preset", "minigrid", "--total-env-steps", "8",
          "--output-dir", "{tmp}/new_run"]
MINIGRID = "minigrid/MiniGrid-DoorKey-8x8-v0"


def _train(case_id, expect, *flags, base=True, marks=()):
  argv = (TRAIN if base else []) + list(flags)
  return pytest.param("train", argv, expect, id=f"train-{case_id}",
                      marks=marks)


def _launch(case_id, expect, *flags, base=True, marks=()):
  argv = (LAUNCH if base else []) + list(flags)
  return pytest.param("launch", argv, expect, id=f"launch-{case_id}",
                      marks=marks)


_NO_REVERB = pytest.mark.skipif(
    importlib.util.find_spec("reverb") is not None,
    reason="dm-reverb is installed: --replay-backend reverb is valid")

CASES = [
    # ---------------------------------------------------------- train
    # Wrong types.
    _train("steps-word", "argument --total-env-steps: invalid int value: "
           "'ten'", "--total-env-steps", "ten"),
    _train("lanes-float", "argument --num-lanes: invalid int value: '2.5'",
           "--num-lanes", "2.5"),
    _train("seed-word", "argument --seed: invalid int value", "--seed",
           "one"),
    _train("log-every-exp", "argument --log-every: invalid int value",
           "--log-every", "1e3"),
    _train("eval-every-empty", "argument --eval-every: invalid int value",
           "--eval-every", ""),
    _train("checkpoint-every-float", "argument --checkpoint-every: invalid "
           "int value", "--checkpoint-every", "10.0"),
    _train("max-minutes-word", "argument --max-minutes: invalid float value",
           "--max-minutes", "soon"),
    _train("seeds-word", "argument --seeds: invalid int value: 'x'",
           "--loop", "compiled", "--seeds", "0", "x"),
    _train("steps-no-value", "argument --total-env-steps: expected one "
           "argument", "--total-env-steps"),
    # Out of range.
    _train("steps-0", "--total-env-steps must be >= 1, got 0",
           "--total-env-steps", "0"),
    _train("steps-negative", "--total-env-steps must be >= 1, got -5",
           "--total-env-steps", "-5"),
    _train("lanes-0", "--num-lanes must be >= 1, got 0", "--num-lanes", "0"),
    _train("log-every-0", "--log-every must be >= 1, got 0", "--log-every",
           "0"),
    _train("log-every-negative", "--log-every must be >= 1, got -5",
           "--log-every", "-5"),
    _train("eval-every-negative", "--eval-every must be >= 0, got -1",
           "--eval-every", "-1"),
    _train("checkpoint-every-negative", "--checkpoint-every must be >= 0, "
           "got -1", "--checkpoint-every", "-1"),
    _train("seed-negative", f"--seed must be in 0..{train.MAX_SEED}, got -1",
           "--seed", "-1"),
    _train("seed-huge", f"--seed must be in 0..{train.MAX_SEED}",
           "--seed", str(2**40)),
    _train("max-minutes-negative", "--max-minutes must be a finite number "
           ">= 0, got -1.0", "--max-minutes", "-1"),
    _train("max-minutes-nan", "--max-minutes must be a finite number",
           "--max-minutes", "nan"),
    _train("max-minutes-inf", "--max-minutes must be a finite number",
           "--max-minutes", "inf"),
    _train("seeds-repeated", "--seeds must be distinct, got 3 3", "--loop",
           "compiled", "--seeds", "3", "3"),
    _train("seeds-negative", f"--seeds must be in 0..{train.MAX_SEED}",
           "--loop", "compiled", "--seeds", "-2"),
    # Unknown names.
    _train("preset", "argument --preset: invalid choice: 'nope'", "--preset",
           "nope"),
    _train("env", "--env: make: unknown environment 'pong'", "--env",
           "pong"),
    _train("loop", "argument --loop: invalid choice: 'jit'", "--loop", "jit"),
    _train("replay-backend", "argument --replay-backend: invalid choice: "
           "'redis'", "--replay-backend", "redis"),
    _train("set-field", "--set: NGUConfig: unknown field 'betta'; did you "
           "mean beta", "--set", "betta=0.3"),
    _train("set-family-field", "--set: NGUConfig: unknown field(s) meta.knd",
           "--set", "meta.knd=ucb"),
    _train("flag", "unrecognized arguments: --lanes 4", "--lanes", "4"),
    _train("env-of-another-loop", "only the Python loop runs", "--env",
           "atari/Pong", "--loop", "compiled"),
    _train("factory-module", "--env: make: cannot import module "
           "'tests.envs.no_such_module'", "--env",
           "tests.envs.no_such_module:make"),
    _train("factory-attribute", "has no attribute 'nope'", "--env",
           f"{USER}:nope"),
    _train("preset-without-env", "--preset deep_sea has no default "
           "environment: name one with --env", "--preset", "deep_sea"),
    # Values the config refuses.
    _train("set-mixtures-0", "--set: NGUConfig: `num_mixtures` must be a "
           "positive integer, got 0", "--set", "num_mixtures=0"),
    _train("set-recode-capacity", "`recode.capacity` must be a positive "
           "integer, got -1", "--set", "recode.capacity=-1"),
    _train("set-meta-kind", "`meta.kind` must be one of ('none', 'ucb'), got "
           "'thompson'", "--set", "meta.kind=thompson"),
    _train("set-word", "`lstm_size` must be a positive integer, got 'abc'",
           "--set", "lstm_size=abc"),
    _train("set-tuple", "`mlp_hidden_sizes` must be a non-empty sequence",
           "--set", "mlp_hidden_sizes=(0,)"),
    # Malformed KEY=VALUE.
    _train("set-no-equals", "--set: expected KEY=VALUE, got 'lstm_size'",
           "--set", "lstm_size"),
    _train("set-no-key", "--set: expected KEY=VALUE, got '=8'", "--set",
           "=8"),
    _train("env-kwarg-no-equals", "--env-kwarg: expected KEY=VALUE, got "
           "'size'", "--env-kwarg", "size"),
    # Environments that cannot be built as asked.
    _train("env-kwarg-value", "--env disco_maze --env-kwarg size='abc': "
           "cannot build the environment: DiscoMaze: `size` must be an odd "
           "integer", "--env-kwarg", "size=abc"),
    _train("env-kwarg-name", "unexpected keyword argument 'colour'",
           "--env-kwarg", "colour=red"),
    _train("env-kwarg-compiled", "`size` must be an odd integer >= 5, got 4",
           "--loop", "compiled", "--env-kwarg", "size=4"),
    _train("factory-returns-dict", "--env: make: 'tests.envs.user_envs:"
           "not_an_env' returned a builtins.dict", "--env",
           f"{USER}:not_an_env"),
    _train("factory-lanes", "returned 3 lanes, expected num_envs = 2",
           "--env", f"{USER}:too_many_lanes", "--num-lanes", "2"),
    _train("torso-does-not-fit", "do not fit its observations (try --set "
           "torso=auto): networks.resolve_torso_kind: the grid torso needs",
           "--env", f"{USER}:chain_vector", "--env-kwarg", "length=4"),
    # Conflicting switches.
    _train("seeds-python-loop", "--seeds with several seeds needs --loop "
           "compiled", "--seeds", "0", "1"),
    _train("compiled-reverb", "--loop compiled keeps its replay on the "
           "device; --replay-backend applies to the Python loop", "--loop",
           "compiled", "--replay-backend", "reverb"),
    _train("seed-and-seeds", "--seed and --seeds conflict", "--loop",
           "compiled", "--seed", "3", "--seeds", "4", "5"),
    _train("list-and-preset", "--list takes no other flag, got --preset",
           "--list", "--preset", "disco_maze", base=False),
    _train("list-and-resume", "--list takes no other flag, got --output-dir,"
           " --resume", "--list", "--resume", "--output-dir", "{tmp}/x",
           base=False),
    _train("reverb-not-installed", "--replay-backend reverb: dm-reverb is not "
           "installed", "--replay-backend", "reverb", marks=_NO_REVERB),
    # Missing required flags, empty values.
    _train("nothing", "the following arguments are required: --preset, "
           "--total-env-steps, --output-dir (or --list)", base=False),
    _train("preset-only", "the following arguments are required: "
           "--total-env-steps, --output-dir", "--preset", "disco_maze",
           base=False),
    _train("output-dir-empty", "--output-dir must not be empty",
           "--output-dir", ""),
    _train("env-empty", "--env must not be empty", "--env", ""),
    # Missing or extra files, unwritable output directories.
    _train("output-is-file", "--output-dir: {tmp}/file.txt exists and is "
           "not a directory", "--output-dir", "{tmp}/file.txt"),
    _train("parent-is-file", "--output-dir: cannot create "
           "{tmp}/file.txt/run: {tmp}/file.txt is not a directory",
           "--output-dir", "{tmp}/file.txt/run"),
    _train("parent-read-only", "--output-dir: cannot create "
           "{tmp}/read_only/run: {tmp}/read_only is not writable",
           "--output-dir", "{tmp}/read_only/run"),
    _train("output-read-only", "--output-dir: {tmp}/read_only is not "
           "writable", "--output-dir", "{tmp}/read_only"),
    _train("read-only-file-system", f"{READ_ONLY} is not writable",
           "--output-dir", f"{READ_ONLY}/ngu_run"),
    _train("resume-no-directory", "--resume: no checkpoint to resume from in "
           "{tmp}/new_run (expected {tmp}/new_run/checkpoint/); start "
           "without --resume", "--resume"),
    _train("resume-no-checkpoint", "--resume: no checkpoint to resume from",
           "--resume", "--output-dir", "{tmp}/existing_run"),
    _train("resume-checkpoint-is-file", "--resume: no checkpoint to resume "
           "from", "--resume", "--output-dir", "{tmp}/checkpoint_is_file"),
    _train("resume-other-config", "--resume: run_experiment: cannot resume "
           "from {tmp}/python_run/checkpoint: the run's configuration "
           "differs from the checkpoint's: agent.lstm_size: checkpoint 16, "
           "now 512", "--resume", "--output-dir", "{tmp}/python_run"),
    _train("resume-other-loop", "state.json is not a checkpoint of this "
           "loop: format 'ngu_jax.loops.compiled.checkpoint'", "--resume",
           "--output-dir", "{tmp}/python_config_compiled_format"),
    _train("resume-corrupt", "--resume: run_experiment: cannot resume from "
           "the corrupt or incomplete checkpoint", "--resume",
           "--output-dir", "{tmp}/corrupt_run"),
    _train("resume-file-missing", "learner.npz is missing (listed in "
           "checksums.json)", "--resume", "--output-dir",
           "{tmp}/incomplete_run"),
    _train("resume-compiled-other-seeds", "--resume: run_compiled: cannot "
           "resume from {tmp}/compiled_run/checkpoint: the run's "
           "configuration differs from the checkpoint's: seed: checkpoint 7, "
           "now 0; seeds: checkpoint [7], now [0]", "--resume", "--loop",
           "compiled", "--output-dir", "{tmp}/compiled_run"),
    # A run's directory is not touched by a refused command.
    _train("existing-run-bad-set", "unknown field 'betta'", "--output-dir",
           "{tmp}/existing_run", "--set", "betta=1"),
    _train("existing-run-bad-env-kwarg", "cannot build the environment",
           "--output-dir", "{tmp}/python_run", "--env-kwarg", "size=4"),
    # ---------------------------------------------------------- launch
    _launch("nothing", "the following arguments are required: --preset, "
            "--total-env-steps, --output-dir", base=False),
    _launch("steps-word", "argument --total-env-steps: invalid int value: "
            "'ten'", "--total-env-steps", "ten"),
    _launch("actors-word", "argument --num-actors: invalid int value: "
            "'two'", "--num-actors", "two"),
    _launch("actor-cpus-word", "argument --actor-cpus: invalid float value",
            "--actor-cpus", "half"),
    _launch("actors-0", "--num-actors must be >= 1, got 0", "--num-actors",
            "0"),
    _launch("lanes-0", "--num-lanes must be >= 1, got 0", "--num-lanes",
            "0"),
    _launch("steps-0", "--total-env-steps must be >= 1, got 0",
            "--total-env-steps", "0"),
    _launch("log-every-negative", "--log-every must be >= 1, got -5",
            "--log-every", "-5"),
    _launch("eval-every-negative", "--eval-every must be >= 0, got -1",
            "--eval-every", "-1"),
    _launch("checkpoint-every-negative", "--checkpoint-every must be >= 0, "
            "got -1", "--checkpoint-every", "-1"),
    _launch("eval-lanes-negative", "--eval-lanes must be >= 0, got -1",
            "--eval-lanes", "-1"),
    _launch("max-restarts", "--max-restarts must be >= -1, got -2",
            "--max-restarts", "-2"),
    _launch("seed-negative", f"--seed must be in 0..{train.MAX_SEED}, got "
            "-1", "--seed", "-1"),
    _launch("actor-cpus-negative", "--actor-cpus must be a finite number >= "
            "0, got -1.0", "--actor-cpus", "-1"),
    _launch("actor-cpus-nan", "--actor-cpus must be a finite number",
            "--actor-cpus", "nan"),
    _launch("learner-cpus-inf", "--learner-cpus must be a finite number",
            "--learner-cpus", "inf"),
    _launch("num-cpus-0", "--num-cpus must be >= 1, got 0", "--num-cpus",
            "0"),
    _launch("cpus-and-address", "argument --address: not allowed with "
            "argument --num-cpus", "--num-cpus", "2", "--address", "auto"),
    _launch("address-empty", "--address must not be empty", "--address", ""),
    _launch("eval-lanes-without-eval", "--eval-lanes needs --eval-every",
            "--eval-lanes", "4"),
    _launch("flag", "unrecognized arguments: --max-minutes 5",
            "--max-minutes", "5"),
    _launch("preset", "--preset: choose one of agent57, atari, deep_sea, "
            "dice, disco_maze, minigrid; got 'nope'", "--preset", "nope"),
    _launch("preset-without-env", "--preset deep_sea has no default "
            "environment", "--preset", "deep_sea"),
    _launch("env", "--env: make: unknown environment 'pong'", "--env",
            "pong"),
    _launch("factory-module", "cannot import module "
            "'tests.envs.no_such_module'", "--env",
            "tests.envs.no_such_module:make"),
    _launch("set-field", "--set: NGUConfig: unknown field 'betta'", "--set",
            "betta=0.3"),
    _launch("set-mixtures-0", "`num_mixtures` must be a positive integer",
            "--set", "num_mixtures=0"),
    _launch("set-no-equals", "--set: expected KEY=VALUE, got 'lstm_size'",
            "--set", "lstm_size"),
    _launch("env-kwarg-no-equals", "--env-kwarg: expected KEY=VALUE",
            "--env-kwarg", "size"),
    _launch("output-is-file", "--output-dir: {tmp}/file.txt exists and is "
            "not a directory", "--output-dir", "{tmp}/file.txt"),
    _launch("parent-is-file", "{tmp}/file.txt is not a directory",
            "--output-dir", "{tmp}/file.txt/run"),
    _launch("parent-read-only", "{tmp}/read_only is not writable",
            "--output-dir", "{tmp}/read_only/run"),
    _launch("read-only-file-system", f"{READ_ONLY} is not writable",
            "--output-dir", f"{READ_ONLY}/ngu_run"),
    _launch("resume-no-checkpoint", "--resume: no checkpoint to resume from "
            "in {tmp}/existing_run", "--resume", "--output-dir",
            "{tmp}/existing_run"),
    _launch("resume-other-config", "--resume: run_distributed: cannot "
            "resume from {tmp}/distributed_run/checkpoint: the run's "
            "configuration differs from the checkpoint's: agent.lstm_size: "
            "checkpoint 16, now 256", "--resume", "--output-dir",
            "{tmp}/distributed_run"),
    _launch("resume-corrupt", "cannot resume from the corrupt or incomplete "
            "checkpoint", "--resume", "--output-dir", "{tmp}/corrupt_run"),
    _launch("existing-run-bad-flag", "--num-actors must be >= 1",
            "--output-dir", "{tmp}/existing_run", "--num-actors", "0"),
]


def _fake_checkpoint(directory, loop, config):
  """A checkpoint directory as the loops write one, without the arrays:
  config.json and state.json (no checksums.json: not verified)."""
  path = os.path.join(directory, checkpointing.CHECKPOINT_DIR)
  os.makedirs(path)
  npz_io.write_json(os.path.join(path, "config.json"), config)
  npz_io.write_json(os.path.join(path, "state.json"), {
      "format": checkpointing.checkpoint_format(loop),
      "version": checkpointing.CHECKPOINT_VERSION})


def _make_scene(tmp):
  """The files the rows meet (runs, checkpoints, files in the way)."""
  with open(os.path.join(tmp, "file.txt"), "w") as f:
    f.write("not a directory\n")
  # A run without a checkpoint (no --resume possible).
  os.makedirs(os.path.join(tmp, "existing_run"))
  for name, text in (("metrics.csv", "env_steps\n8\n"),
                     ("config.json", "{}\n")):
    with open(os.path.join(tmp, "existing_run", name), "w") as f:
      f.write(text)
  os.makedirs(os.path.join(tmp, "checkpoint_is_file"))
  with open(os.path.join(tmp, "checkpoint_is_file", "checkpoint"), "w") as f:
    f.write("a file\n")
  # Checkpoints of another configuration: lstm_size 16, the presets' 512
  # (disco_maze) and 256 (minigrid).
  small = config_lib.disco_maze(lstm_size=16)
  _fake_checkpoint(os.path.join(tmp, "python_run"), "python",
                   checkpointing.run_config(small, "disco_maze", 8, 0, {},
                                            1000, 0))
  _fake_checkpoint(os.path.join(tmp, "python_config_compiled_format"),
                   "compiled", checkpointing.run_config(
                       config_lib.disco_maze(), "disco_maze", 8, 0, {},
                       1000, 0))
  fitted = train.effective_config(config_lib.disco_maze(), "compiled",
                                  "disco_maze", {})
  _fake_checkpoint(os.path.join(tmp, "compiled_run"), "compiled",
                   compiled.compiled_config(fitted, "disco_maze", 8, [7], {},
                                            1000, 0))
  _fake_checkpoint(os.path.join(tmp, "distributed_run"), "distributed",
                   launcher.distributed_run_config(
                       config_lib.minigrid(lstm_size=16), MINIGRID, 8, 0, {},
                       1000, 0))
  corrupt = os.path.join(tmp, "corrupt_run", checkpointing.CHECKPOINT_DIR)
  os.makedirs(corrupt)
  for name in ("config.json", "state.json"):
    with open(os.path.join(corrupt, name), "w") as f:
      f.write("{not json")
  incomplete = os.path.join(tmp, "incomplete_run")
  _fake_checkpoint(incomplete, "python", checkpointing.run_config(
      config_lib.disco_maze(), "disco_maze", 8, 0, {}, 1000, 0))
  npz_io.write_json(os.path.join(incomplete, checkpointing.CHECKPOINT_DIR,
                                 npz_io.CHECKSUMS),
                    {"files": {"learner.npz": {"bytes": 1, "sha256": "0"}}})
  read_only = os.path.join(tmp, "read_only")
  os.makedirs(read_only)
  with open(os.path.join(read_only, "keep.txt"), "w") as f:
    f.write("kept\n")
  os.chmod(read_only, 0o500)


def _snapshot(root):
  """Every path under `root` with its kind, mode, mtime and bytes."""
  out = {}
  for directory, dirs, files in os.walk(root):
    for name in dirs + files:
      path = os.path.join(directory, name)
      st = os.lstat(path)
      content = None
      if os.path.isfile(path) and not os.path.islink(path):
        with open(path, "rb") as f:
          content = f.read()
      out[os.path.relpath(path, root)] = (st.st_mode, st.st_mtime_ns,
                                          content)
  out["."] = os.lstat(root).st_mtime_ns
  return out


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
  tmp = str(tmp_path_factory.mktemp("bad_input"))
  _make_scene(tmp)
  yield tmp
  os.chmod(os.path.join(tmp, "read_only"), 0o700)


def _skip_unless_refused(argv, tmp):
  """Skips rows whose directory is writable here (e.g. for root)."""
  joined = " ".join(argv)
  read_only = os.path.join(tmp, "read_only")
  if "{tmp}/read_only" in joined and os.access(read_only,
                                                os.W_OK | os.X_OK):
    pytest.skip(f"{read_only} (mode 0o500) is writable for this user "
                f"(uid {os.getuid()}: root): it cannot be refused")
  if READ_ONLY in joined and (not os.path.isdir(READ_ONLY) or os.access(
      READ_ONLY, os.W_OK | os.X_OK)):
    pytest.skip(f"{READ_ONLY} is not a read-only directory here")


def _ray_initialized():
  if importlib.util.find_spec("ray") is None:
    return False
  import ray  # pylint: disable=g-import-not-at-top
  return ray.is_initialized()


@pytest.mark.parametrize("cli, argv, expect", CASES)
def test_bad_invocation_is_one_line_exit_2_and_writes_nothing(
    scene, monkeypatch, capsys, cli, argv, expect):
  _skip_unless_refused(argv, scene)
  argv = [arg.replace("{tmp}", scene) for arg in argv]
  expect = expect.replace("{tmp}", scene)
  monkeypatch.chdir(ROOT)  # "tests.envs..." factories import from here.
  ray_before = _ray_initialized()
  ray_starts = []
  monkeypatch.setattr(launch, "init_ray",
                      lambda *args, **kwargs: ray_starts.append(args))
  before = _snapshot(scene)
  module = train if cli == "train" else launch
  capsys.readouterr()
  with pytest.raises(SystemExit) as info:
    module.main(argv)
  out, err = capsys.readouterr()
  assert info.value.code == 2, (info.value.code, err)
  lines = err.splitlines()
  assert len(lines) == 1 and err.endswith("\n"), err
  prefix = f"python -m experiments.{cli}: error: "
  assert lines[0].startswith(prefix), lines[0]
  assert expect in lines[0], lines[0]
  assert "Traceback" not in err and "Traceback" not in out
  assert out == ""
  assert str(info.value) == lines[0][len(prefix):]
  assert _snapshot(scene) == before
  if cli == "launch":
    assert not ray_starts
    assert _ray_initialized() == ray_before


def test_the_table_covers_both_clis():
  counts = {"train": 0, "launch": 0}
  for case in CASES:
    counts[case.values[0]] += 1
  assert counts["train"] >= 35 and counts["launch"] >= 15, counts
  assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("cli, flags, expect", [
    ("train", TRAIN + ["--total-env-steps", "ten"],
     "argument --total-env-steps: invalid int value: 'ten'"),
    ("launch", LAUNCH + ["--num-actors", "0"],
     "--num-actors must be >= 1, got 0"),
])
def test_a_real_process_exits_2_with_one_line(tmp_path, cli, flags, expect):
  argv = [arg.replace("{tmp}", str(tmp_path)) for arg in flags]
  done = subprocess.run(
      [sys.executable, "-m", f"experiments.{cli}", *argv], cwd=ROOT,
      capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode == 2, (done.returncode, done.stderr)
  assert done.stderr.splitlines() == [
      f"python -m experiments.{cli}: error: {expect}"], done.stderr
  assert "Traceback" not in done.stdout and done.stdout == ""
  assert os.listdir(tmp_path) == []


def test_a_good_invocation_writes_config_json_after_the_checks(
    tmp_path, monkeypatch):
  """The counterpart: flags that pass every check write DIR/config.json
  (then the loop runs; here a stand-in that records its arguments)."""
  calls = []

  def run_experiment(config, env_name, total, **kwargs):
    calls.append((config, env_name, total))
    assert (tmp_path / "run" / "config.json").is_file()
    return {"metrics_path": "m", "curves_path": None,
            "checkpoint_path": "c"}

  monkeypatch.setattr(train.loops, "run_experiment", run_experiment)
  train.main(["--preset", "disco_maze", "--total-env-steps", "8",
              "--output-dir", str(tmp_path / "run"), "--set",
              "lstm_size=16"])
  assert calls and calls[0][0].lstm_size == 16
  saved = json.loads((tmp_path / "run" / "config.json").read_text())
  assert saved["lstm_size"] == 16
