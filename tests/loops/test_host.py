"""Tests of the shared host skeleton (`ngu_jax.loops.host`), of the
checkpoint format names (`checkpointing.checkpoint_format`) and of the rows
and checkpoints of the loops that use them."""

import io
import json
import math
import os
import shutil
import types

import numpy as np
import pytest

from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import diagnostics
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.envs import base as envs_base
from ngu_jax.loops import checkpointing
from ngu_jax.loops import host
from ngu_jax.loops import metrics_log
from ngu_jax.loops.compiled import loop as compiled
from ngu_jax.loops.compiled import runner as compiled_runner
from ngu_jax.loops.distributed import launcher
from ngu_jax.loops.python import loop as python_loop
from ngu_jax.loops.python import state as python_state

TINY = dict(grid_output_size=16, lstm_size=16, head_hidden=16,
            embedding_dim=8, rnd_output_dim=8, inverse_dynamics_hidden=16,
            trace_length=6, replay_period=3, min_replay_size=4, batch_size=4,
            memory_capacity=64, replay_capacity=64, samples_per_insert=1.0,
            actor_update_period=5, target_update_period=10)
ENV_KWARGS = dict(size=7, max_episode_steps=20)


def tiny_disco():
  return config_lib.disco_maze(**TINY)


# ------------------------------------------------------------------ schedule

def test_next_point_and_schedule():
  assert host.next_point(0, 100) == 100
  assert host.next_point(99, 100) == 100
  assert host.next_point(100, 100) == 200
  assert host.next_point(250, 100) == 300
  assert host.next_point(250, 0) == 0
  schedule = host.Schedule(100)
  fired = [n for n in range(0, 501, 40) if schedule.fire(n)]
  assert fired == [120, 200, 320, 400]
  never = host.Schedule(0, env_steps=50)
  assert not any(never.fire(n) for n in range(0, 1000, 10))
  resumed = host.Schedule(100, next_at=300)
  assert not resumed.due(250) and resumed.due(300)


def test_schedule_equals_the_incremental_points():
  """`next_point` fires at the same checks as `next += every` did (the
  Python loop's old rule) for any constant check interval."""
  for every in (7, 10, 40, 100):
    for step in (1, 3, 8, 16, 50, 130):
      old, new = every, host.Schedule(every)
      for n in range(step, 2000, step):
        old_fires = n >= old
        if old_fires:
          old += every
        assert new.fire(n) == old_fires, (every, step, n)


# ---------------------------------------------------------------------- rows

def _row_inputs(config):
  return dict(
      env_steps=100, actor_steps=25, episodes=3, learner_steps=7,
      replay_size=40,
      episode_stats=host.episode_columns([1., 0., 2.], [0.5, 0.25, 0.75]),
      env_steps_per_s=10., elapsed_s=10.,
      learner_values={"loss": [1., 3.]},
      actor_sums=np.zeros(len(diagnostics.ACTOR_SUMS), np.float32))


def test_make_row_has_exactly_the_columns_in_order():
  config = tiny_disco()
  row = host.make_row(config, **_row_inputs(config))
  assert tuple(row) == metrics_log.COLUMNS
  assert row["mean_episode_return"] == 1.
  assert row["episode_success_rate"] == pytest.approx(2 / 3)
  assert row["mean_episode_coverage"] == 0.5
  assert row["learner_loss"] == 2.
  assert all(math.isnan(row[c]) for c in host.EVAL_COLUMNS)
  extra = {c: 1 for c in launcher.DISTRIBUTED_COLUMNS}
  extra["eval_return"] = 5.
  row = host.make_row(config, **_row_inputs(config), extra=extra,
                      columns=launcher.COLUMNS)
  assert tuple(row) == launcher.COLUMNS
  assert row["eval_return"] == 5.
  # A new column without a value is an error, not a silent gap.
  with pytest.raises(KeyError, match="new_metric"):
    host.make_row(config, **_row_inputs(config),
                  columns=metrics_log.COLUMNS + ("new_metric",))


def test_episode_columns():
  out = host.episode_columns([], [], track_coverage=True)
  assert all(math.isnan(v) for v in out.values())
  assert "mean_episode_frontier" in out and "mean_episode_tv_steps" in out
  out = host.episode_columns([1., -1.], [0.5, 0.5], track_coverage=False)
  assert out["mean_episode_return"] == 0.
  assert out["episode_success_rate"] == 0.5
  assert math.isnan(out["mean_episode_coverage"])
  # Episode extras: the mean of the values at LAST; NaN without values or
  # for an extra the environment does not report.
  out = host.episode_columns([0., 0., 0.], [], False,
                             {"frontier": [2, 3, 7], "tv_steps": []})
  assert out["mean_episode_frontier"] == 4.
  assert math.isnan(out["mean_episode_tv_steps"])
  out = host.episode_columns([0.], [], False, {"tv_steps": [5]})
  assert math.isnan(out["mean_episode_frontier"])
  assert out["mean_episode_tv_steps"] == 5.


def test_episode_extra_columns_follow_the_coverage():
  columns = metrics_log.COLUMNS
  at = columns.index("mean_episode_coverage")
  assert columns[at + 1:at + 3] == ("mean_episode_frontier",
                                    "mean_episode_tv_steps")
  assert tuple(metrics_log.episode_extra_column(n)
               for n in metrics_log.EPISODE_EXTRAS) == columns[at + 1:at + 3]
  assert len(set(columns)) == len(columns)


def test_learner_metrics():
  metrics = host.LearnerMetrics()
  metrics.add({"loss": 1., "rnd_loss": 2.})
  metrics.add({"loss": 3.})
  metrics.extend({"loss": [5.]})
  values = metrics.pop()
  assert values["loss"] == [1., 3., 5.]
  assert values["rnd_loss"][0] == 2. and math.isnan(values["rnd_loss"][1])
  assert set(values) == {name for _, name in diagnostics.LEARNER_COLUMNS}
  assert metrics.values == {}


def test_report_interrupt_messages():
  out = io.StringIO()
  host.report_interrupt("run_experiment", "/x/checkpoint", True, 40,
                        stream=out)
  assert ("run_experiment: interrupted at 40 env steps; checkpoint saved in "
          "/x/checkpoint; continue with resume=True (experiments.train: "
          "--resume).") in out.getvalue()
  out = io.StringIO()
  host.report_interrupt("run_compiled", "/x/checkpoint", False,
                        during="a compiled chunk", stream=out)
  assert ("run_compiled: interrupted in the middle of a compiled chunk: no "
          "checkpoint saved; the last one in /x/checkpoint (if any) stays."
          ) in out.getvalue()
  out = io.StringIO()
  host.report_interrupt("run_distributed", "/x", True, 5, stream=out)
  assert "experiments.launch: --resume" in out.getvalue()
  out = io.StringIO()
  host.report_interrupt("run_experiment", None, True, 5, stream=out)
  assert out.getvalue() == ""


@pytest.mark.parametrize("kwargs, match", [
    (dict(total_env_steps=0), "`total_env_steps`, `num_lanes` and "
     "`log_every_env_steps` must be >= 1, got 0, 2, 10"),
    (dict(num_lanes=0), "must be >= 1"),
    (dict(eval_every_env_steps=-1), "`eval_every_env_steps`"),
    (dict(checkpoint_every_env_steps=5), "need an `output_dir`"),
    (dict(resume=True), "need an `output_dir`"),
    (dict(max_minutes=-1.), "max_minutes"),
    (dict(seeds=[0, 0]), "distinct"),
    (dict(max_restarts=-2), "max_restarts"),
])
def test_check_arguments(kwargs, match):
  args = dict(total_env_steps=10, log_every_env_steps=10, num_lanes=2)
  args.update(kwargs)
  total, log = args.pop("total_env_steps"), args.pop("log_every_env_steps")
  with pytest.raises(ValueError, match=match) as info:
    host.check_arguments("run_x", total, log, **args)
  assert str(info.value).startswith("run_x: ")
  host.check_arguments("run_x", 10, 10, num_lanes=2, seeds=[0, 1],
                       max_restarts=-1, output_dir="d", resume=True,
                       checkpoint_every_env_steps=5)


# ------------------------------------------------------- checkpoint formats

def test_checkpoint_format_names():
  assert checkpointing.checkpoint_format("python") == (
      "ngu_jax.loops.python.checkpoint")
  assert compiled_runner.CHECKPOINT_FORMAT == (
      checkpointing.checkpoint_format("compiled"))
  assert launcher.CHECKPOINT_FORMAT == (
      checkpointing.checkpoint_format("distributed"))
  with pytest.raises(ValueError, match="unknown loop"):
    checkpointing.checkpoint_format("other")


def _fake_checkpoint(path, fmt, version, config=None):
  os.makedirs(path, exist_ok=True)
  ckpt_lib.write_json(os.path.join(path, "config.json"), config or {"a": 1})
  ckpt_lib.write_json(os.path.join(path, "state.json"),
                      {"format": fmt, "version": version})
  return str(path)


@pytest.mark.parametrize("loop", checkpointing.LOOPS)
def test_read_checkpoint_meta_accepts_the_loops_own_format(tmp_path, loop):
  fmt = checkpointing.checkpoint_format(loop)
  path = _fake_checkpoint(tmp_path / loop, fmt, 1)
  meta = checkpointing.read_checkpoint_meta(path, {"a": 1}, loop=loop)
  assert meta["format"] == fmt


@pytest.mark.parametrize("loop, removed", [
    ("python", "ngu_jax.experiment.checkpoint"),
    ("distributed", "ngu_jax.distributed"),
])
def test_the_removed_pre_release_format_names_are_refused(tmp_path, loop,
                                                          removed):
  """The names written before `checkpoint_format` were dropped with the
  legacy layer (CHANGELOG); no published checkpoint carries them."""
  path = _fake_checkpoint(tmp_path / loop, removed, 1)
  with pytest.raises(checkpointing.ResumeError, match="not a checkpoint"):
    checkpointing.read_checkpoint_meta(path, {"a": 1}, loop=loop)


@pytest.mark.parametrize("fmt, version, match", [
    ("ngu_jax.loops.other.checkpoint", 1,
     "format 'ngu_jax.loops.other.checkpoint' version 1"),
    ("ngu_jax.loops.python.checkpoint", 3,
     "format 'ngu_jax.loops.python.checkpoint' version 3; this code reads "
     "versions 1 to 2 \\(written by a newer ngu_jax\\)"),
    ("ngu_jax.loops.python.checkpoint", 0,
     "format 'ngu_jax.loops.python.checkpoint' version 0; this code reads "
     "versions 1 to 2\\.$"),
    ("ngu_jax.loops.distributed.checkpoint", 1,
     "format 'ngu_jax.loops.distributed.checkpoint' version 1"),
])
def test_unknown_format_or_newer_version_is_refused(tmp_path, fmt, version,
                                                    match):
  path = _fake_checkpoint(tmp_path / "c", fmt, version)
  with pytest.raises(checkpointing.ResumeError, match=match):
    checkpointing.read_checkpoint_meta(path, {"a": 1}, loop="python")


def test_also_accept_a_legacy_config(tmp_path):
  path = _fake_checkpoint(tmp_path / "c", "ngu_jax.loops.python.checkpoint",
                          1, config={"a": 1})
  with pytest.raises(checkpointing.ResumeError, match="a: checkpoint 1"):
    checkpointing.read_checkpoint_meta(path, {"a": 2})
  checkpointing.read_checkpoint_meta(path, {"a": 2}, also_accept=[{"a": 1}])


def test_a_checkpoint_older_than_a_config_field_resumes_at_its_default(
    tmp_path):
  agent = config_lib.NGUConfig().to_dict()
  old_agent = {**agent, "loss": {k: v for k, v in agent["loss"].items()
                                 if k != "split_values"}}
  old_agent.pop("embedding_loss")
  path = _fake_checkpoint(tmp_path / "c", "ngu_jax.loops.python.checkpoint",
                          1, config={"agent": old_agent, "seed": 0})
  # The fields at their defaults (a family's field or a top-level one): the
  # run the checkpoint recorded.
  checkpointing.read_checkpoint_meta(path, {"agent": agent, "seed": 0})
  # Set otherwise, or another field changed: still refused.
  split = config_lib.NGUConfig(split_values=True).to_dict()
  with pytest.raises(checkpointing.ResumeError,
                     match="agent.loss.split_values: not in the checkpoint"):
    checkpointing.read_checkpoint_meta(path, {"agent": split, "seed": 0})
  with pytest.raises(checkpointing.ResumeError, match="agent.beta"):
    checkpointing.read_checkpoint_meta(
        path, {"agent": {**agent, "beta": 0.7}, "seed": 0})


def _flat_agent_config(config):
  """`config` as config.json held it before the variant families: every
  family field under its flat name (`config_lib.FLAT_NAMES`)."""
  nested = config.to_dict()
  flat = {k: v for k, v in nested.items() if k not in config_lib.FAMILIES}
  for name, dotted in config_lib.FLAT_NAMES.items():
    family, field = dotted.split(".")
    flat[name] = nested[family][field]
  return flat


@pytest.mark.parametrize("preset", ["agent57", "dice", "minigrid"])
def test_a_checkpoint_with_flat_variant_names_resumes(tmp_path, preset):
  """config.json files written before the variant families (flat
  `recode_capacity`, `meta_controller`, ...) hold the same config."""
  config = config_lib.PRESETS[preset]()
  flat = _flat_agent_config(config)
  assert "meta_controller" in flat and "meta" not in flat
  assert config_lib.NGUConfig.from_dict(flat) == config
  path = _fake_checkpoint(tmp_path / "c", "ngu_jax.loops.python.checkpoint",
                          1, config={"agent": flat, "seed": 0})
  checkpointing.read_checkpoint_meta(
      path, {"agent": config.to_dict(), "seed": 0})
  other = config_lib.PRESETS[preset](recode_capacity=7).to_dict()
  with pytest.raises(checkpointing.ResumeError,
                     match="agent.recode.capacity: checkpoint 4096, now 7"):
    checkpointing.read_checkpoint_meta(path, {"agent": other, "seed": 0})


# ------------------------------------------------------------- the loops

def _rewrite_json(path, update):
  with open(path) as f:
    data = json.load(f)
  update(data)
  with open(path, "w") as f:
    json.dump(data, f)


def _without_times(rows):
  """Rows without the wall-clock columns (which differ between runs)."""
  return [{k: v for k, v in r.items()
           if k not in ("elapsed_s", "env_steps_per_s")} for r in rows]


def test_python_loop_rows_and_a_resumed_run(tmp_path):
  """Rows have exactly COLUMNS; a resumed run writes the rows of an
  uninterrupted one."""
  config = tiny_disco()
  kwargs = dict(num_lanes=2, env_kwargs=ENV_KWARGS, log_every_env_steps=8,
                progress=False)
  full = python_loop.run_experiment(config, "disco_maze", 32,
                                    output_dir=str(tmp_path / "full"),
                                    **kwargs)
  assert all(tuple(row) == metrics_log.COLUMNS for row in full["rows"])
  out = str(tmp_path / "resumed")
  python_loop.run_experiment(config, "disco_maze", 16, output_dir=out,
                             **kwargs)
  state_json = os.path.join(out, "checkpoint", "state.json")
  with open(state_json) as f:
    assert json.load(f)["format"] == checkpointing.checkpoint_format("python")
  resumed = python_loop.run_experiment(config, "disco_maze", 32,
                                       output_dir=out, resume=True, **kwargs)
  np.testing.assert_equal(_without_times(resumed["rows"]),
                          _without_times(full["rows"]))


@pytest.mark.slow
def test_python_loop_with_agent57_switches_resumes_exactly(tmp_path):
  """Split values and per-lane bandits in the Python loop: rows gain the
  arm shares, and a resumed run (bandits restored from the checkpoint)
  writes the rows of an uninterrupted one."""
  config = config_lib.disco_maze(**{**TINY, "num_mixtures": 2,
                                    "split_values": True,
                                    "meta_controller": "ucb",
                                    "ucb_window": 3, "eval_ucb_epsilon": 0.})
  kwargs = dict(num_lanes=2, env_kwargs=ENV_KWARGS, log_every_env_steps=8,
                eval_every_env_steps=8, progress=False)
  full = python_loop.run_experiment(config, "disco_maze", 32,
                                    output_dir=str(tmp_path / "full"),
                                    **kwargs)
  columns = (metrics_log.COLUMNS + ("arm_0", "arm_1", "eval_arm",
                                    "eval_bandit_return"))
  assert all(tuple(row) == columns for row in full["rows"])
  last = full["rows"][-1]
  assert last["arm_0"] + last["arm_1"] == pytest.approx(1.)
  # The evaluator's bandit: each arm once, then greedy on the windowed mean
  # (Disco Maze pays 0 everywhere: a tie, so the lowest index). A bandit
  # that restarted at the resume (16 env steps) would play 0, 1 again.
  assert [row["eval_arm"] for row in full["rows"]] == [0., 1., 0., 0.]
  assert all(row["eval_bandit_return"] == 0. for row in full["rows"])
  out = str(tmp_path / "resumed")
  python_loop.run_experiment(config, "disco_maze", 16, output_dir=out,
                             **kwargs)
  resumed = python_loop.run_experiment(config, "disco_maze", 32,
                                       output_dir=out, resume=True, **kwargs)
  np.testing.assert_equal(_without_times(resumed["rows"]),
                          _without_times(full["rows"]))


@pytest.mark.slow
def test_python_loop_trains_dice_and_resumes_exactly(tmp_path):
  """DiCE in the Python loop: Boltzmann lanes (BVA temperatures) and DiCE's
  learner. Rows gain the temperature columns; each evaluation writes the
  ensembles' pooled value curves; the sequences carry their tau through the
  host adder and the replay; a resumed run (ensembles and the replay's tau
  restored from the checkpoint) writes the rows of an uninterrupted one."""
  config = config_lib.disco_maze(**{**TINY, "behaviour_policy": "boltzmann",
                                    "learner_loss": "dice",
                                    "bva_num_bandits": 2,
                                    "bva_num_candidates": 2})
  kwargs = dict(num_lanes=2, env_kwargs=ENV_KWARGS, log_every_env_steps=8,
                eval_every_env_steps=16, progress=False)
  full = python_loop.run_experiment(config, "disco_maze", 32,
                                    output_dir=str(tmp_path / "full"),
                                    **kwargs)
  assert full["rows"][-1]["learner_steps"] > 0
  assert math.isfinite(full["rows"][-1]["learner_loss"])
  # The ensembles' pooled value curves at each evaluation (bva/).
  bva_dir = tmp_path / "full" / metrics_log.BVA_DIR
  assert {p.name for p in bva_dir.glob("bva_*.npz")} == {"bva_16.npz",
                                                         "bva_32.npz"}
  curve = ckpt_lib.load_arrays(str(bva_dir / "bva_32.npz"))
  assert curve["values"].shape == (2, curve["x"].shape[0])
  columns = metrics_log.COLUMNS + diagnostics.TEMPERATURE_COLUMNS
  assert all(tuple(row) == columns for row in full["rows"])
  last = full["rows"][-1]
  assert 1 / 50 <= last["tau_p10"] <= last["tau_median"] <= last["tau_p90"]
  assert 0 <= last["policy_entropy"] <= math.log(4) + 1e-6
  out = str(tmp_path / "resumed")
  python_loop.run_experiment(config, "disco_maze", 16, output_dir=out,
                             **kwargs)
  resumed = python_loop.run_experiment(config, "disco_maze", 32,
                                       output_dir=out, resume=True, **kwargs)
  np.testing.assert_equal(_without_times(resumed["rows"]),
                          _without_times(full["rows"]))


def test_python_checkpoint_arrays_keep_the_episode_extras():
  """loop.npz holds the episode extras not yet in a row
  ("episode_extras/<name>"); an older loop.npz without them restores
  empty lists."""
  timestep = envs_base.TimeStep(
      step_type=np.zeros(2, np.int32), reward=np.zeros(2, np.float32),
      discount=np.ones(2, np.float32),
      observation=np.zeros((2, 1), np.float32),
      extras={"frontier": np.array([1, 2], np.int32)})
  loop = python_state.LoopState(
      timestep=timestep, episode_return=np.zeros(2), returns=[0., 0.],
      actor_sums=np.zeros(len(diagnostics.ACTOR_SUMS), np.float32),
      episode_extras={"frontier": [3, 4], "tv_steps": [0, 5]})
  parts = types.SimpleNamespace(coverage=None)
  arrays = python_state._loop_arrays(parts, loop)
  np.testing.assert_array_equal(arrays["episode_extras/frontier"], [3, 4])
  np.testing.assert_array_equal(arrays["episode_extras/tv_steps"], [0, 5])
  meta = {"counters": {n: getattr(loop, n) for n in python_state.COUNTERS},
          "rows": []}
  restored = python_state.LoopState()
  python_state._restore_loop(meta, arrays, parts, restored)
  assert restored.episode_extras == {"frontier": [3., 4.],
                                     "tv_steps": [0., 5.]}
  assert restored.returns == [0., 0.]
  older = {k: v for k, v in arrays.items()
           if not k.startswith("episode_extras/")}
  restored = python_state.LoopState(episode_extras={"frontier": [9.]})
  python_state._restore_loop(meta, older, parts, restored)
  assert restored.episode_extras == {"frontier": [], "tv_steps": []}


@pytest.mark.slow
def test_python_loop_noisy_grid_extras_and_checkpoints(tmp_path):
  """The Python loop on the noisy-TV grid: finite frontier / tv_steps
  columns; a checkpoint holding episode extras not yet in a row resumes to
  the rows of an uninterrupted run; one in the layout before the extras
  (no episode_extras/* in loop.npz) resumes with none recorded."""
  config = tiny_disco()
  # Each lane's episodes: FIRST, MID, LAST (timesteps 0-2, 3-5, ...).
  horizon = 2
  kwargs = dict(num_lanes=2, env_kwargs={"size": 7,
                                         "max_episode_steps": horizon},
                log_every_env_steps=8, progress=False)
  full = python_loop.run_experiment(config, "jax/noisy_grid/tv", 32,
                                    output_dir=str(tmp_path / "full"),
                                    **kwargs)
  rows = full["rows"]
  assert [r["env_steps"] for r in rows] == [8, 16, 24, 32]
  for row in rows:
    assert tuple(row) == metrics_log.COLUMNS
    assert 0 <= row["mean_episode_frontier"] <= horizon
    assert 0 <= row["mean_episode_tv_steps"] <= horizon
  assert any(r["mean_episode_tv_steps"] > 0 for r in rows)
  assert any(r["mean_episode_frontier"] > 0 for r in rows)
  # Stopped at 14 env steps (7 actor steps): the row at 8 has the episodes
  # ending at timestep 2; those ending at timestep 5 are in the checkpoint
  # only.
  out = str(tmp_path / "resumed")
  python_loop.run_experiment(config, "jax/noisy_grid/tv", 14, output_dir=out,
                             **kwargs)
  old = str(tmp_path / "old")
  shutil.copytree(out, old)
  loop_npz = os.path.join(out, "checkpoint", "loop.npz")
  saved = ckpt_lib.load_arrays(loop_npz)
  assert len(saved["episode_extras/frontier"]) == 2
  assert len(saved["episode_extras/tv_steps"]) == 2
  resumed = python_loop.run_experiment(config, "jax/noisy_grid/tv", 32,
                                       output_dir=out, resume=True, **kwargs)
  strip = lambda rows: [{k: v for k, v in r.items()  # noqa: E731
                         if k not in ("elapsed_s", "env_steps_per_s")}
                        for r in rows]
  np.testing.assert_equal(strip(resumed["rows"]), strip(rows))
  # The layout before the episode extras (and before checksums).
  old_npz = os.path.join(old, "checkpoint", "loop.npz")
  ckpt_lib.save_arrays(old_npz, {
      k: v for k, v in ckpt_lib.load_arrays(old_npz).items()
      if not k.startswith("episode_extras/")})
  os.remove(os.path.join(old, "checkpoint", ckpt_lib.CHECKSUMS))
  resumed = python_loop.run_experiment(config, "jax/noisy_grid/tv", 32,
                                       output_dir=old, resume=True, **kwargs)
  extras = ("mean_episode_frontier", "mean_episode_tv_steps")
  for got, want in zip(strip(resumed["rows"]), strip(rows)):
    lost = extras if got["env_steps"] == 16 else ()
    np.testing.assert_equal({k: v for k, v in got.items() if k not in lost},
                            {k: v for k, v in want.items() if k not in lost})


def test_compiled_rows_and_config_json_records_the_fitted_memory(tmp_path):
  """config.json holds the effective config (memory fitted to the
  episodes); a checkpoint holding the config as given (before) resumes."""
  config = tiny_disco()
  kwargs = dict(num_lanes=2, env_kwargs=ENV_KWARGS, log_every_env_steps=8,
                progress=False)
  out = str(tmp_path / "run")
  first = compiled_runner.run_compiled(config, "disco_maze", 16,
                                       output_dir=out, **kwargs)
  assert all(tuple(row) == metrics_log.COLUMNS for row in first["rows"][0])
  config_json = os.path.join(out, "checkpoint", "config.json")
  with open(config_json) as f:
    saved = json.load(f)
  fitted = compiled.fit_memory_to_episodes(config, 20)
  assert fitted.memory_capacity == 21 < config.memory_capacity
  assert saved["agent"]["memory_capacity"] == 21
  # An older checkpoint recorded the config as given, and had no
  # `ChunkStats.episode_extras`: it still resumes.
  _rewrite_json(config_json, lambda d: d["agent"].update(
      memory_capacity=config.memory_capacity))
  train_state = os.path.join(out, "checkpoint", "train_state.npz")
  arrays = ckpt_lib.load_arrays(train_state)
  del arrays[".stats.episode_extras"]
  ckpt_lib.save_arrays(train_state, arrays)
  os.remove(os.path.join(out, "checkpoint", ckpt_lib.CHECKSUMS))  # Nor these.
  second = compiled_runner.run_compiled(config, "disco_maze", 32,
                                        output_dir=out, resume=True,
                                        **kwargs)
  assert second["rows"][0][:len(first["rows"][0])] == first["rows"][0]
  assert second["env_steps"] >= 32
  # Another config is still refused.
  with pytest.raises(checkpointing.ResumeError, match="batch_size"):
    compiled_runner.run_compiled(config_lib.disco_maze(**{**TINY,
                                                          "batch_size": 2}),
                                 "disco_maze", 48, output_dir=out,
                                 resume=True, **kwargs)


class _Remote:
  """A fake Ray method: .remote() returns the value; `ray.get` is identity."""

  def __init__(self, value):
    self._value = value

  def remote(self, *args):
    del args
    return self._value


class _Handle:
  def __init__(self, **methods):
    for name, value in methods.items():
      setattr(self, name, _Remote(value))


def test_distributed_row_has_the_columns_in_order():
  """The driver's row (with stand-ins for the nodes): COLUMNS + extras."""
  config = tiny_disco()
  counts = dict(env_steps=100, actor_steps=25, episodes=3, acked_inserts=9,
                actor_restarts=0)
  handles = dict(
      learner=_Handle(pop_metrics={"steps": 5, "metrics": {"loss": [1.]}}),
      counter=_Handle(drain=dict(
          returns=[1.], coverages=[0.5], staleness=[2.],
          actor_sums=np.zeros(len(diagnostics.ACTOR_SUMS)),
          error_stats=None, counts=counts, pid=1)),
      replay=_Handle(info=dict(size=9, inserted=9, sampled=40)))

  class Ray:
    get = staticmethod(lambda x: x)

  class Supervisor:
    ray = Ray()
    alive = [True]

    def call(self, name, method, *args, **kwargs):
      return getattr(handles[name], method).remote(*args, **kwargs)

    def answered_from(self, name, pid):
      del name, pid
      return False

  run = launcher._Run(config, handles, Supervisor(), {}, None)
  row = run.make_row()
  assert tuple(row) == launcher.COLUMNS
  assert row["learner_loss"] == 1. and row["replay_sampled"] == 40
  assert row["mean_staleness"] == 2.
  # A counter without episode extras (this drain has none): NaN.
  assert math.isnan(row["mean_episode_frontier"])
  handles["counter"] = _Handle(drain=dict(
      returns=[1., 0.], coverages=[], staleness=[],
      episode_extras={"frontier": [2, 5], "tv_steps": [0, 1]},
      actor_sums=np.zeros(len(diagnostics.ACTOR_SUMS)),
      error_stats=None, counts=counts, pid=1))
  row = launcher._Run(config, handles, Supervisor(), {}, None).make_row()
  assert row["mean_episode_frontier"] == 3.5
  assert row["mean_episode_tv_steps"] == 0.5


# ------------------------------------------------ the loops' shared helpers

def test_run_interruptibly_iterates_to_done_then_finishes():
  calls = []
  host.run_interruptibly(lambda: calls.append("step"),
                         done=lambda: calls.count("step") == 3,
                         on_interrupt=lambda: calls.append("interrupt"),
                         finish=lambda: calls.append("finish"), enabled=True)
  assert calls == ["step", "step", "step", "finish"]


def test_run_interruptibly_on_ctrl_c_calls_on_interrupt_and_reraises():
  calls = []

  def iterate():
    calls.append("step")
    if len(calls) == 2:
      raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    host.run_interruptibly(iterate, done=lambda: False,
                           on_interrupt=lambda: calls.append("interrupt"),
                           finish=lambda: calls.append("finish"),
                           enabled=False)
  assert calls == ["step", "step", "interrupt"]


@pytest.mark.parametrize("path, consistent, saves", [
    ("ckpt", True, True), ("ckpt", False, False), (None, True, False)])
def test_interrupted_saves_only_a_consistent_state(capsys, path, consistent,
                                                   saves):
  saved = []
  steps = iter([7, 9])
  host.interrupted("run_experiment", path, consistent,
                   lambda: saved.append(True), lambda: next(steps))
  assert bool(saved) == saves
  err = capsys.readouterr().err
  if path is None:
    assert err == ""
  elif saves:
    assert "interrupted at 7 env steps; checkpoint saved in ckpt" in err
  else:
    assert "no checkpoint saved" in err


@pytest.mark.parametrize("loop", checkpointing.LOOPS)
def test_write_run_state_is_what_read_checkpoint_meta_reads(tmp_path, loop):
  checkpointing.write_run_state(str(tmp_path), loop, {"a": 1},
                                {"rows": [], "elapsed_s": 2.5})
  meta = checkpointing.read_checkpoint_meta(str(tmp_path), {"a": 1},
                                            loop=loop)
  assert meta == {"format": checkpointing.checkpoint_format(loop),
                  "version": checkpointing.CHECKPOINT_VERSION, "rows": [],
                  "elapsed_s": 2.5}
  with pytest.raises(checkpointing.ResumeError, match="differs"):
    checkpointing.read_checkpoint_meta(str(tmp_path), {"a": 2}, loop=loop)


def test_loop_state_keeps_its_schedules_under_the_saved_names():
  loop = python_state.LoopState(log=host.Schedule(10),
                                evaluations=host.Schedule(0))
  assert (loop.next_log, loop.next_eval) == (10, 0)
  assert loop.log.fire(12) and loop.next_log == 20
  loop.next_log = 40  # As a restored checkpoint sets it.
  assert not loop.log.due(39) and loop.log.due(40)
  assert not loop.evaluations.fire(10 ** 6)
