"""Tests for experiments/benchmarks/di_engine_minigrid.py (no DI-engine needed:
a stand-in executable plays DI-engine's environment)."""

import json
import stat
import textwrap

import pytest

from experiments.benchmarks import di_engine_minigrid as bench


def test_steady_rate_drops_the_warm_up_records():
  # 4 records, 25% warm-up: the window runs from the second to the last.
  records = [(0.0, 0), (10.0, 100), (20.0, 300), (30.0, 500)]
  got = bench.steady_rate(records, 0.25)
  assert got["env_steps_per_s"] == pytest.approx((500 - 100) / (30 - 10))
  assert (got["env_steps"], got["seconds"], got["records"]) == (400, 20.0, 3)
  # No warm-up: from the first record.
  assert bench.steady_rate(records, 0.0)["env_steps_per_s"] == (
      pytest.approx(500 / 30))
  # A warm-up past the end still leaves the last two records.
  assert bench.steady_rate(records, 0.99)["env_steps_per_s"] == (
      pytest.approx(200 / 10))


def test_steady_rate_refuses_too_few_records():
  records = [(0.0, 0), (10.0, 100), (20.0, 300), (30.0, 500)]
  assert bench.steady_rate(records, 0.0, min_dropped=2)["env_steps_per_s"] \
      == pytest.approx(20.0)
  with pytest.raises(ValueError, match=">= 3 records"):
    bench.steady_rate([(0.0, 0), (1.0, 10)], 0.25)


def _stand_in(tmp_path, records):
  """An executable that, run as DI-engine's python with `--child`, writes the
  child's JSON with `records`."""
  path = tmp_path / "di_engine_python"
  payload = json.dumps({"records": records, "ding_version": "stand-in",
                        "torch_version": "none", "torch_threads": 2})
  path.write_text(textwrap.dedent(f"""\
      #!/bin/sh
      while [ "$#" -gt 0 ]; do
        if [ "$1" = "--json" ]; then printf '%s' '{payload}' > "$2"; fi
        shift
      done
      """))
  path.chmod(path.stat().st_mode | stat.S_IXUSR)
  return str(path)


def test_main_reports_rates_and_hours_to_a_budget(tmp_path, capsys):
  # (seconds, env steps, learner updates before that collection): the
  # first collection (no updates yet) is never in the window.
  python = _stand_in(tmp_path, [[0.0, 9600, 0], [30.0, 19200, 0],
                                [130.0, 28800, 16], [230.0, 38400, 32],
                                [330.0, 48000, 48]])
  out = tmp_path / "report.json"
  assert bench.main(["--di-engine-python", python, "--ours",
                     "--budget", "ten million=10000000",
                     "--json", str(out)]) == 0
  report = json.loads(out.read_text())
  run = report["runs"]["di_engine_ngu"]
  assert run["env_steps_per_s"] == pytest.approx(96.0)
  assert run["learner_updates_per_collection"] == 16
  assert run["env_steps_per_collection"] == 9600
  assert run["ding_version"] == "stand-in"
  assert report["hours"]["ten million"]["di_engine_ngu"] == pytest.approx(
      10_000_000 / 96.0 / 3600)
  printed = capsys.readouterr().out
  assert "di_engine_ngu" in printed and "ten million" in printed


@pytest.mark.parametrize("argv, message", [
    (["--di-engine-python", "/nonexistent/python"], "make .venv-di-engine"),
    (["--budget", "no-equals"], "NAME=ENV_STEPS"),
    (["--budget", "x=1e7"], "NAME=ENV_STEPS"),
    (["--warmup-fraction", "1.0"], "--warmup-fraction"),
    (["--di-engine-env-steps", "19200"], "three collections"),
    (["--ours-env-steps", "0"], "--ours-env-steps"),
])
def test_main_refuses_bad_input(argv, message, capsys, tmp_path):
  if "--di-engine-python" not in argv:
    argv = argv + ["--di-engine-python", _stand_in(tmp_path, [])]
  with pytest.raises(SystemExit) as e:
    bench.main(argv)
  assert e.value.code == 2
  assert message in capsys.readouterr().err


def test_config_restates_the_published_hyperparameters():
  # DI-engine's dizoo/minigrid/config/minigrid_ngu_config.py (d0b21d0); the
  # observation sizes are this release's env's (see DI_ENGINE_CONFIG).
  c = bench.DI_ENGINE_CONFIG
  assert (c["collector_env_num"], c["nstep"], c["batch_size"],
          c["update_per_collect"], c["learning_rate"], c["n_sample"],
          c["learn_unroll_len"], c["burnin_step"]) == (
              8, 5, 64, 16, 1e-4, 32, 298, 2)


def test_main_shows_a_failed_child_s_last_lines(tmp_path, capsys):
  python = tmp_path / "broken_python"
  python.write_text("#!/bin/sh\necho 'ImportError: no module named ding'\n"
                    "exit 3\n")
  python.chmod(python.stat().st_mode | stat.S_IXUSR)
  with pytest.raises(SystemExit, match="exited with 3"):
    bench.main(["--di-engine-python", str(python), "--ours"])
  assert "no module named ding" in capsys.readouterr().err


@pytest.mark.parametrize("name", bench.OURS)
def test_ours_run_with_the_study_s_flags(name):
  from experiments import minigrid
  variant = {v.name: v for v in minigrid.VARIANTS}[name]
  cmd = bench.ours_command(name)
  assert cmd[-len(variant.args):] == list(variant.args)
  if minigrid.is_ppo(variant):
    assert cmd[:2] == ["-m", minigrid.PPO_MODULE]
    assert "num_steps=128" in cmd  # the study's rollout length
  else:
    assert cmd[:2] == ["-m", "experiments.train"]
    assert ["--loop", "compiled"] == cmd[cmd.index("--loop"):][:2]
    assert all(flag in cmd for flag in minigrid.LAPTOP)


def test_ours_records_read_seed_0_s_rows(tmp_path):
  (tmp_path / "seed_0").mkdir()
  (tmp_path / "seed_0" / "metrics.csv").write_text(
      "env_steps,episodes,elapsed_s\n1024,3,12.5\n2048,,20.0\n")
  assert bench._ours_records(str(tmp_path)) == [(12.5, 1024.0),
                                                 (20.0, 2048.0)]
