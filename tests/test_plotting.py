"""Tests for ngu_jax.plotting (learning curves of a metrics.csv)."""

import csv
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

from ngu_jax import experiment
from ngu_jax import plotting

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_metrics(path, rows):
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=experiment.COLUMNS)
    writer.writeheader()
    for row in rows:
      writer.writerow({c: row.get(c, math.nan) for c in experiment.COLUMNS})


def _rows(n, with_coverage=True, with_eval=True):
  rows = []
  for i in range(1, n + 1):
    row = dict(env_steps=100 * i, actor_steps=50 * i, episodes=3 * i,
               mean_episode_return=0.1 * i if i != 2 else math.nan,
               learner_steps=max(0, 5 * i - 5),
               learner_loss=math.nan if i == 1 else 1. / i,
               replay_size=4 * i, env_steps_per_s=100. + i, elapsed_s=i)
    if with_coverage:
      row["mean_episode_coverage"] = 0.05 * i
    if with_eval and i % 2 == 0:
      row.update(eval_return=0.2 * i, eval_coverage=0.1 * i,
                 eval_explore_return=0.3 * i, eval_explore_coverage=0.15 * i)
    rows.append(row)
  return rows


@pytest.mark.parametrize("rows", [
    _rows(6),
    _rows(4, with_coverage=False, with_eval=False),  # NaN columns.
    _rows(1),
    [],  # Header only: a figure saying "no data yet".
])
def test_plot_curves_writes_a_png(tmp_path, rows):
  pytest.importorskip("matplotlib")
  metrics = tmp_path / "metrics.csv"
  _write_metrics(metrics, rows)
  png = tmp_path / "curves.png"
  assert plotting.plot_curves(str(metrics), str(png)) == str(png)
  data = png.read_bytes()
  assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
  assert not (tmp_path / "curves.png.tmp").exists()


def test_read_metrics_parses_nan_and_missing(tmp_path):
  metrics = tmp_path / "metrics.csv"
  metrics.write_text("env_steps,learner_loss,other\n10,nan,x\n20,1.5,\n")
  data = plotting.read_metrics(str(metrics))
  np.testing.assert_array_equal(data["env_steps"], [10., 20.])
  assert math.isnan(data["learner_loss"][0]) and data["learner_loss"][1] == 1.5
  assert np.isnan(data["other"]).all()


def test_panels_with_values_only(tmp_path):
  """Optional panels (coverage, evaluation) appear only with data."""
  pytest.importorskip("matplotlib")
  # pylint: disable=protected-access
  metrics = tmp_path / "metrics.csv"
  _write_metrics(metrics, _rows(3, with_coverage=False, with_eval=False))
  titles = []
  original = plotting._import_matplotlib

  def spy():
    figure_cls, canvas_cls = original()

    class Figure(figure_cls):

      def add_subplot(self, *args, **kwargs):
        ax = super().add_subplot(*args, **kwargs)
        titles.append(ax)
        return ax
    return Figure, canvas_cls

  plotting._import_matplotlib = spy
  try:
    plotting.plot_curves(str(metrics), str(tmp_path / "a.png"))
    without = [ax.get_title() for ax in titles]
    titles.clear()
    _write_metrics(metrics, _rows(3))
    plotting.plot_curves(str(metrics), str(tmp_path / "b.png"))
    with_all = [ax.get_title() for ax in titles]
  finally:
    plotting._import_matplotlib = original
  assert without == ["Episode return", "Learner loss", "Throughput"]
  assert with_all == ["Episode return", "Disco Maze coverage",
                      "Evaluation return", "Evaluation coverage",
                      "Learner loss", "Throughput"]


def test_without_matplotlib_warns_once_and_skips(tmp_path, monkeypatch):
  metrics = tmp_path / "metrics.csv"
  _write_metrics(metrics, _rows(2))
  for name in ("matplotlib", "matplotlib.figure",
               "matplotlib.backends.backend_agg"):
    monkeypatch.setitem(sys.modules, name, None)  # import raises.
  monkeypatch.setattr(plotting, "_warned_missing", False)
  with pytest.warns(RuntimeWarning, match="matplotlib is not installed"):
    assert plotting.plot_curves(str(metrics), str(tmp_path / "c.png")) is None
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # The second call does not warn.
    assert plotting.plot_curves(str(metrics), str(tmp_path / "c.png")) is None
  assert not (tmp_path / "c.png").exists()


def test_import_does_not_import_matplotlib():
  code = ("import sys, ngu_jax.plotting; "
          "assert 'matplotlib' not in sys.modules, 'imported'")
  subprocess.run([sys.executable, "-c", code], check=True)
