"""Tests of the soak benchmark: its summary arithmetic, its sampler, and
--quick runs of both loops.

The summary (growth %, throughput ratio, verdicts) is a pure function of the
sample rows, checked on hand-written numbers. The --quick runs (2-3
minutes each on 2 cores: the distributed program starts 8 processes, the
compiled loop compiles) are marked slow; the distributed one launches its
nodes on the local Ray cluster shared by the session's tests
(tests/conftest.py's `ray_cluster`).
"""

import csv
import json
import math
import os

import pytest

from experiments.benchmarks import soak  # pylint: disable=g-import-not-at-top,wrong-import-position


def _rows(samples, processes):
  """Sample rows: samples = [(t, env, learner)], processes = {name: [rss]}."""
  rows = []
  for i, (t, env, learner) in enumerate(samples):
    for name, rss in processes.items():
      rows.append(dict(elapsed_s=t, process=name, rss_mb=rss[i],
                       anon_mb=rss[i] / 2, env_steps=env,
                       learner_steps=learner, counted_at_s=t))
  return rows


# Warm-up 60 s: w is the sample at 60 s; the learner starts at 30 s.
SAMPLES = [(0., 0, 0), (30., 1000, 10), (60., 4000, 40), (90., 7000, 70),
           (120., 9700, 97)]


def test_summary_growth_and_throughput_on_hand_numbers():
  rows = _rows(SAMPLES, {"driver": [90., 100., 100., 106., 104.],
                         "learner": [150., 190., 200., 205., 212.]})
  s = soak.summarize(rows, warmup_s=60., replay_full_at_s=40.)
  assert s["warmup_end_s"] == 60. and s["end_s"] == 120.
  driver, learner = s["processes"]["driver"], s["processes"]["learner"]
  assert driver["rss_warmup_mb"] == 100. and driver["rss_end_mb"] == 104.
  assert driver["growth_pct"] == pytest.approx(4.)
  assert driver["rss_max_mb"] == 106.
  assert driver["max_growth_pct"] == pytest.approx(6.)
  assert driver["anon_growth_pct"] == pytest.approx(4.)
  assert driver["pass"]
  assert learner["growth_pct"] == pytest.approx(6.)  # 200 -> 212.
  assert not learner["pass"]
  t = s["throughput"]
  assert t["warmup_from_s"] == 30.
  assert t["env_steps_per_s_warmup"] == pytest.approx(3000 / 30)  # 100.
  assert t["env_steps_per_s_after"] == pytest.approx(5700 / 60)   # 95.
  assert t["env_ratio"] == pytest.approx(0.95)
  assert t["learner_steps_per_s_warmup"] == pytest.approx(1.)
  assert t["learner_steps_per_s_after"] == pytest.approx(57 / 60)
  assert t["learner_ratio"] == pytest.approx(0.95)
  assert s["throughput_pass"]
  assert s["replay_full_before_warmup_end"]
  assert not s["memory_pass"] and s["memory_failures"] == ["learner"]
  assert not s["pass"]
  # Without the learner's growth every criterion holds.
  ok = soak.summarize(_rows(SAMPLES, {"driver": [90., 100., 100., 106.,
                                                 104.]}),
                      warmup_s=60., replay_full_at_s=40.)
  assert ok["memory_pass"] and ok["pass"] and ok["memory_failures"] == []


@pytest.mark.parametrize("end_env,passes", [(4000 + 60 * 89, False),
                                            (4000 + 60 * 91, True),
                                            (4000 + 60 * 109, True),
                                            (4000 + 60 * 111, False)])
def test_throughput_within_ten_percent_either_way(end_env, passes):
  samples = SAMPLES[:3] + [(120., end_env, 100)]
  s = soak.summarize(_rows(samples, {"driver": [1., 1., 1., 1.]}),
                     warmup_s=60., replay_full_at_s=10.)
  assert s["throughput"]["env_ratio"] == pytest.approx(
      (end_env - 4000) / 60 / 100)
  assert s["throughput_pass"] is passes


def test_growth_is_measured_from_the_first_sample_after_the_warm_up():
  # Samples at 55 and 65 s around a 60 s warm-up: w is the one at 65 s.
  samples = [(25., 100, 1), (55., 400, 4), (65., 500, 5), (95., 800, 8)]
  s = soak.summarize(_rows(samples, {"driver": [50., 80., 100., 102.]}),
                     warmup_s=60., replay_full_at_s=30.)
  assert s["warmup_end_s"] == 65.
  assert s["processes"]["driver"]["growth_pct"] == pytest.approx(2.)
  assert s["throughput"]["env_steps_per_s_warmup"] == pytest.approx(10.)
  assert s["throughput"]["env_ratio"] == pytest.approx(1.)


def test_too_few_samples_and_a_late_replay_fail():
  # No sample after the warm-up: no figures, every verdict False.
  s = soak.summarize(_rows(SAMPLES[:2], {"driver": [1., 1.]}), warmup_s=60.,
                     replay_full_at_s=10.)
  assert math.isnan(s["warmup_end_s"])
  assert math.isnan(s["processes"]["driver"]["growth_pct"])
  assert math.isnan(s["throughput"]["env_ratio"])
  assert not (s["memory_pass"] or s["throughput_pass"] or s["pass"])
  # The last sample is w itself: nothing after the warm-up to compare.
  s = soak.summarize(_rows(SAMPLES[:3], {"driver": [1., 1., 1.]}),
                     warmup_s=60., replay_full_at_s=10.)
  assert math.isnan(s["processes"]["driver"]["growth_pct"])
  assert not s["pass"]
  # The learner started only after the warm-up: no reference throughput.
  late = [(t, env, 0 if t <= 60 else learner) for t, env, learner in SAMPLES]
  s = soak.summarize(_rows(late, {"driver": [1.] * 5}), warmup_s=60.,
                     replay_full_at_s=10.)
  assert math.isnan(s["throughput"]["env_steps_per_s_warmup"])
  assert not s["throughput_pass"]
  # Everything flat, but the replay filled after the warm-up (or never).
  flat = {"driver": [1.] * 5}
  for full_at in (61., None):
    s = soak.summarize(_rows(SAMPLES, flat), warmup_s=60.,
                       replay_full_at_s=full_at)
    assert s["memory_pass"] and s["throughput_pass"]
    assert not s["replay_full_before_warmup_end"] and not s["pass"]


def test_report_prints_the_verdicts():
  rows = _rows(SAMPLES, {"driver": [90., 100., 100., 106., 104.]})
  s = soak.summarize(rows, warmup_s=60., replay_full_at_s=40.)
  settings = dict(loop="distributed", config="cartpole", env="e", actors=4,
                  num_lanes=8, minutes=2., warmup_minutes=1.,
                  sample_every_s=30., replay_capacity=30_000, cpu_count=2,
                  quick=False)
  text = "\n".join(soak.report(s, settings))
  assert "| driver | 100 | 104 | +4.00 | 106 | +4.00 | yes |" in text
  assert "| env steps/s | 100.0 | 95.0 | 0.950 |" in text
  assert "replay full at 0.67 min" in text
  assert "PASS: yes" in text


def test_sampler_schedule_rates_and_replay_fill(tmp_path):
  now = [0.]
  path = tmp_path / "samples.csv"
  sampler = soak.Sampler(str(path), minutes=2., sample_every_s=30.,
                         warmup_s=45., capacity=100, progress_every_s=0.,
                         clock=lambda: now[0])
  me = {"driver": os.getpid(), "gone": None}
  assert sampler.due(0.)
  sampler.take(0., 0, 0, 0., me)
  assert not sampler.due(29.) and sampler.due(30.)
  sampler.replay_size(20., 50)
  assert not sampler.replay_full
  sampler.replay_size(25., 100)
  sampler.replay_size(28., 100)
  assert sampler.replay_full_at_s == 25.
  rows = sampler.take(31., 3100, 31, 31., me)
  assert rows[0]["env_steps_per_s"] == pytest.approx(100.)
  assert rows[0]["learner_steps_per_s"] == pytest.approx(1.)
  assert rows[0]["replay_size"] == 100
  assert rows[0]["rss_mb"] > 0 and rows[0]["anon_mb"] > 0
  assert math.isnan(rows[1]["rss_mb"])  # No pid: NaN, no failure.
  # The end of the warm-up gets a sample of its own.
  assert not sampler.due(44.) and sampler.due(45.)
  sampler.take(46., 4600, 46, 46., me)
  assert not sampler.due(59.) and sampler.due(60.)
  # Counts that did not move in time (compiled: no new row) give NaN.
  rows = sampler.take(61., 4600, 46, 46., me)
  assert math.isnan(rows[0]["env_steps_per_s"])
  assert not sampler.over(119.) and sampler.over(120.)
  assert sampler.due(120.)
  sampler.close()
  with open(path) as f:
    written = list(csv.DictReader(f))
  assert len(written) == 8 and tuple(written[0]) == soak.SAMPLE_COLUMNS
  assert [float(r["elapsed_s"]) for r in written[::2]] == [0., 31., 46., 61.]


def test_read_memory_of_this_process_and_of_none():
  memory = soak.read_memory(os.getpid())
  assert memory["rss_mb"] >= memory["anon_mb"] > 0
  assert soak.read_memory(2**22 + 12345) is None  # Above pid_max.


def test_csv_tail_reads_only_complete_rows(tmp_path):
  path = tmp_path / "metrics.csv"
  tail = soak._CsvTail(str(path))  # pylint: disable=protected-access
  assert tail.last() is None  # No file yet.
  with open(path, "w") as f:
    f.write("env_steps,learner_steps\n1,2\n3,")
    f.flush()
    assert tail.last() == {"env_steps": "1", "learner_steps": "2"}
    f.write("4\n")
    f.flush()
    assert tail.last() == {"env_steps": "3", "learner_steps": "4"}
    assert tail.last() is None  # Nothing new.
  tail.close()


@pytest.mark.parametrize("argv", [["--minutes", "5", "--warmup-minutes",
                                    "6"],
                                   ["--sample-every-s", "0"]])
def test_bad_windows_are_refused(argv, capsys):
  with pytest.raises(SystemExit):
    soak.main(argv)
  assert "error: --" in capsys.readouterr().err


def _check_outputs(results, out, processes):
  summary = results["summary"]
  for name in ("samples.csv", "summary.json", "soak.png", "config.json"):
    assert (out / name).exists(), name
  config = json.loads((out / "config.json").read_text())
  assert config["config"]["replay_capacity"] == (
      soak.SETTINGS["cartpole"]["quick_replay_capacity"])
  assert config["soak"]["quick"] is True
  assert set(processes) <= set(summary["processes"])
  for name in processes:
    p = summary["processes"][name]
    assert p["rss_warmup_mb"] > 0 and math.isfinite(p["growth_pct"]), name
  # How soon the replay fills and the learner starts depends on the load
  # of the machine (2 shared cores): only that they did is checked.
  assert summary["throughput"]["env_steps_per_s_after"] > 0
  assert summary["throughput"]["learner_steps_per_s_after"] > 0
  assert 0 < summary["replay_full_at_s"] < summary["end_s"]
  assert "PASS: " in "\n".join(results["lines"])


@pytest.mark.slow  # About 2.2 minutes on 2 cores (compilation: ~35 s).
def test_quick_compiled_run(tmp_path):
  out = tmp_path / "compiled"
  results = soak.main(["--loop", "compiled", "--quick", "--output-dir",
                       str(out), "--json", str(tmp_path / "s.json")])
  _check_outputs(results, out, ["driver"])
  assert set(results["summary"]["processes"]) == {"driver"}
  assert json.loads((tmp_path / "s.json").read_text())["settings"][
      "loop"] == "compiled"
  assert (out / "run" / "metrics.csv").exists()


@pytest.mark.slow  # About 2.7 minutes on 2 cores: 8 processes start.
def test_quick_distributed_run(ray_cluster, tmp_path):
  out = tmp_path / "distributed"
  results = soak.main(["--loop", "distributed", "--quick", "--output-dir",
                       str(out)])
  assert ray_cluster.is_initialized()  # main left the cluster up.
  nodes = ["driver", "counter", "replay", "learner"] + [
      f"actor_{i}" for i in range(4)]
  _check_outputs(results, out, nodes)
  assert results["summary"]["loop"]["failures"] == [0, 0, 0, 0]
  with open(out / "samples.csv") as f:
    rows = list(csv.DictReader(f))
  assert all(math.isfinite(float(r["object_store_mb"])) for r in rows)
  # The program stopped at the wall time (on_poll returned True).
  assert float(rows[-1]["elapsed_s"]) >= 60. * soak.QUICK["distributed"][
      "minutes"]
