"""Tests of the distributed benchmark: its scaling model and a --quick run.

The model and the steady-state rates are pure functions, checked on
hand-computed numbers. The --quick run launches Ray nodes on the local
cluster shared by the session's tests (tests/conftest.py's `ray_cluster`).
"""

import json
import math

import pytest

from experiments.benchmarks import distributed  # pylint: disable=g-import-not-at-top,wrong-import-position

COMMON = dict(num_lanes=8, batch_size=32, replay_period=5,
              actor_update_period=100, insert_s=0.002, publish_s=0.02,
              pull_s=0.004)


def test_model_learner_bound_at_the_papers_rate():
  m = distributed.scaling_model(
      16, actor_env_steps_per_s=100., learner_steps_per_s=5.,
      samples_per_insert=4., sample_s=0.01, update_s=0.01, **COMMON)
  lim = m["limits"]
  assert lim["actors"] == pytest.approx(16 * 100.)
  assert lim["learner"] == pytest.approx(5 * 32 * 5 / 4)        # 200
  assert lim["replay"] == pytest.approx(8 * 5 / 0.002 * (1 - 5 * 0.02))
  assert lim["broadcast"] == pytest.approx(100 * 8 / 0.004
                                           * (1 - 5 * 0.02))   # 180,000
  assert m["env_steps_per_s"] == pytest.approx(200.)
  assert m["learner_steps_per_s"] == pytest.approx(5.)
  assert m["limiter"] == "learner"
  assert (m["first_to_saturate"], m["saturating_actors"]) == ("learner", 2)
  assert (m["next_to_saturate"], m["next_saturating_actors"]) == (
      "replay", 180)                                     # 18,000 / 100


def test_model_actor_bound_when_few_actors():
  m = distributed.scaling_model(
      4, actor_env_steps_per_s=100., learner_steps_per_s=20.,
      samples_per_insert=4., sample_s=0.01, update_s=0.01, **COMMON)
  lim = m["limits"]
  assert lim["learner"] == pytest.approx(800.)
  assert lim["replay"] == pytest.approx(20_000 * 0.6)
  assert lim["broadcast"] == pytest.approx(200_000 * 0.6)
  assert m["env_steps_per_s"] == pytest.approx(400.)
  assert m["limiter"] == "actors"
  assert m["learner_steps_per_s"] == pytest.approx(400 * 4 / (32 * 5))
  assert (m["first_to_saturate"], m["saturating_actors"]) == ("learner", 8)


def test_model_replay_bound_with_a_low_sample_ratio():
  m = distributed.scaling_model(
      256, actor_env_steps_per_s=100., learner_steps_per_s=20.,
      samples_per_insert=0.25, sample_s=0.01, update_s=0.01, **COMMON)
  assert m["limits"]["learner"] == pytest.approx(20 * 32 * 5 / 0.25)
  assert m["env_steps_per_s"] == pytest.approx(12_000.)
  assert m["limiter"] == "replay"
  assert m["learner_steps_per_s"] == pytest.approx(12_000 * 0.25 / 160)
  assert (m["first_to_saturate"], m["saturating_actors"]) == ("replay", 120)
  assert (m["next_to_saturate"], m["next_saturating_actors"]) == (
      "learner", 128)


def test_model_node_overloaded_by_the_learner_alone_has_no_capacity():
  m = distributed.scaling_model(
      16, actor_env_steps_per_s=100., learner_steps_per_s=100.,
      samples_per_insert=4., sample_s=0.01, update_s=0.01, **COMMON)
  assert m["limits"]["replay"] == 0.  # 100 * 0.02 s of calls per second.
  assert m["limits"]["broadcast"] == 0.  # 100 * 0.02 s of publishes.
  assert m["env_steps_per_s"] == 0.


def test_transfer_seconds():
  assert distributed.transfer_s(1., 8.) == pytest.approx(1e-3)
  assert distributed.transfer_s(5., 0.) == 0.


def test_steady_rates_skip_warm_up_and_the_final_row():
  rows = [dict(env_steps=800, learner_steps=0, elapsed_s=10.),
          dict(env_steps=1600, learner_steps=2, elapsed_s=12.),
          dict(env_steps=3600, learner_steps=52, elapsed_s=14.),
          dict(env_steps=5600, learner_steps=102, elapsed_s=16.),
          dict(env_steps=5700, learner_steps=104, elapsed_s=19.)]
  r = distributed.steady_rates(rows, drop_last=True)
  assert r["env_steps_per_s"] == pytest.approx(4000 / 4)
  assert r["learner_steps_per_s"] == pytest.approx(100 / 4)
  assert r["window_s"] == pytest.approx(4.)
  r = distributed.steady_rates(rows)
  assert r["env_steps_per_s"] == pytest.approx(4100 / 7)
  assert math.isnan(distributed.steady_rates(rows[:2])["env_steps_per_s"])


def _positive_finite(x):
  return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow  # About a minute on 2 cores: 2 runs, then the hops.
def test_quick_run_reports_every_figure(ray_cluster, tmp_path):
  path = tmp_path / "distributed.json"
  results = distributed.main(["--quick", "--json", str(path)])
  assert ray_cluster.is_initialized()  # main left the cluster up.
  assert json.loads(path.read_text())["settings"]["quick"] is True
  throughput = results["throughput"]
  assert set(throughput) == {"single_process", "distributed_1"}
  for run in throughput.values():
    assert _positive_finite(run["env_steps_per_s"]), run
    assert _positive_finite(run["learner_steps_per_s"]), run
  assert _positive_finite(results["acting_env_steps_per_s"])
  for hop in ("publish", "pull", "insert", "sample", "update"):
    stats = results["hops"][hop]
    assert _positive_finite(stats["median_ms"]), (hop, stats)
    assert stats["p90_ms"] >= stats["median_ms"]
    assert stats["payload_mb"] > 0
  assert results["hops"]["pull"]["measured_from"].startswith("Ray actor")
  assert results["hops"]["items_per_insert"] == 8
  model = results["model"]
  assert model["assumptions"]["learner_steps_per_s"] == 5.
  assert [row["num_actors"] for row in model["rows"]] == [16, 64, 256]
  assert [row["num_actors"] for row in model["paper_rows"]] == [16, 64, 256]
  for row in model["rows"] + model["paper_rows"]:
    assert row["limiter"] in ("actors", "learner", "replay", "broadcast")
    assert _positive_finite(row["env_steps_per_s"]), row
  text = "\n".join(results["lines"])
  for heading in ("## Throughput", "## Hop costs", "## Scaling model",
                  "App. A's setting", "os.cpu_count() = "):
    assert heading in text


def test_paper_setting_reproduces_app_a_rates():
  """With free hops, App. A's setting is learner-bound exactly at 256
  actors of 260 env steps/s (the implied samples per insert)."""
  p = distributed.PAPER_SETTING
  assert p["samples_per_insert"] == pytest.approx(5 * 64 * 40 / (256 * 260))
  free = dict(insert_s=1e-9, sample_s=0., update_s=0., publish_s=0.,
              pull_s=1e-9)
  m = distributed.scaling_model(256, **p, **free)
  assert m["limits"]["learner"] == pytest.approx(256 * 260)
  assert m["env_steps_per_s"] == pytest.approx(256 * 260)
  assert m["learner_steps_per_s"] == pytest.approx(5.)
