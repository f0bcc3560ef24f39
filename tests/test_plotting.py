"""Tests for ngu_jax.plotting (learning curves of a metrics.csv)."""

import csv
import gzip
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

from ngu_jax.loops import metrics_log
from ngu_jax import plotting

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_metrics(path, rows):
  columns = list(metrics_log.COLUMNS)
  columns += sorted({k for row in rows for k in row} - set(columns))
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=columns)
    writer.writeheader()
    for row in rows:
      writer.writerow({c: row.get(c, math.nan) for c in columns})


def _rows(n, with_coverage=True, with_eval=True, with_reward=True,
          with_diagnostics=False, with_rnd=True, with_frontier=False,
          with_split=False, with_temperature=False):
  rows = []
  for i in range(1, n + 1):
    row = dict(env_steps=100 * i, actor_steps=50 * i, episodes=3 * i,
               mean_episode_return=0.1 * i if i != 2 else math.nan,
               learner_steps=max(0, 5 * i - 5),
               learner_loss=math.nan if i == 1 else 1. / i,
               replay_size=4 * i, env_steps_per_s=100. + i, elapsed_s=i)
    if not with_reward:
      row["mean_episode_return"] = 0.
    if with_coverage:
      row["mean_episode_coverage"] = 0.05 * i
    if with_frontier:  # Noisy grids (episode extras).
      row.update(mean_episode_frontier=2. * i, mean_episode_tv_steps=0.5 * i)
    if with_eval and i % 2 == 0:
      row.update(eval_return=0.2 * i, eval_coverage=0.1 * i,
                 eval_explore_return=0.3 * i, eval_explore_coverage=0.15 * i)
      if not with_reward:
        row.update(eval_return=0., eval_explore_return=0.)
    if with_diagnostics:
      row.update(mean_episodic_reward=1. / i, mean_intrinsic_reward=0.3 / i,
                 q_exploit=0.5 * i, q_explore=0.5 * i)  # Equal: N = 1.
      if with_split:
        row.update(q_extrinsic=0.2 * i, q_intrinsic=0.1 * i)
      if with_temperature:
        row.update(tau_p10=0.1, tau_median=1. / i, tau_p90=2.,
                   policy_entropy=0.5)
      if i > 1:
        row.update(action_prediction_loss=1.4 / i,
                   action_prediction_accuracy=0.2 * i / n)
      if with_rnd:
        row.update(mean_alpha=0.8 + 0.1 * i, alpha_above_one=0.1 * i / n,
                   rnd_error=100. / i, rnd_error_mean=10. / i,
                   rnd_error_std=2. / i, rnd_loss=math.nan if i == 1
                   else 50. / i)
    rows.append(row)
  return rows


@pytest.mark.parametrize("rows", [
    _rows(6),
    _rows(6, with_diagnostics=True),
    _rows(3, with_reward=False, with_diagnostics=True, with_rnd=False),
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


def test_read_metrics_reads_gzip_and_falls_back_to_it(tmp_path):
  """A .csv.gz reads as its .csv; a metrics.csv of which only the .gz
  exists (docs/results/) reads the .gz; the .csv wins when both exist."""
  text = "env_steps,learner_loss\r\n10,nan\r\n20,1.5\r\n"
  gz = tmp_path / "metrics.csv.gz"
  with gzip.open(gz, "wt", newline="") as f:
    f.write(text)
  csv_path = str(tmp_path / "metrics.csv")
  for path in (str(gz), csv_path):
    data = plotting.read_metrics(path)
    np.testing.assert_array_equal(data["env_steps"], [10., 20.])
    assert math.isnan(data["learner_loss"][0])
    assert data["learner_loss"][1] == 1.5
  assert plotting.find_metrics(csv_path) == str(gz)
  assert plotting.find_metrics(str(gz)) == str(gz)
  (tmp_path / "metrics.csv").write_text("env_steps\n7\n")
  assert plotting.find_metrics(csv_path) == csv_path
  np.testing.assert_array_equal(plotting.read_metrics(csv_path)["env_steps"],
                                [7.])
  missing = str(tmp_path / "other" / "metrics.csv")
  assert plotting.find_metrics(missing) is None
  with pytest.raises(FileNotFoundError, match="no metrics file"):
    plotting.read_metrics(missing)


def test_plot_curves_of_a_gzip_copy(tmp_path):
  pytest.importorskip("matplotlib")
  _write_metrics(str(tmp_path / "metrics.csv"), _rows(5))
  with open(tmp_path / "metrics.csv", "rb") as f_in:
    with gzip.open(tmp_path / "metrics.csv.gz", "wb") as f_out:
      f_out.write(f_in.read())
  (tmp_path / "metrics.csv").unlink()
  png = str(tmp_path / "curves.png")
  assert plotting.plot_curves(str(tmp_path / "metrics.csv.gz"), png) == png
  with open(png, "rb") as f:
    assert f.read(8) == PNG_SIGNATURE


def _axes_spy():
  """(axes, spy): `spy` replaces `plotting._import_matplotlib` and records in
  `axes` every subplot that `plot_curves` adds."""
  # pylint: disable=protected-access
  axes = []
  original = plotting._import_matplotlib

  def spy():
    figure_cls, canvas_cls = original()

    class Figure(figure_cls):

      def add_subplot(self, *args, **kwargs):
        ax = super().add_subplot(*args, **kwargs)
        axes.append(ax)
        return ax
    return Figure, canvas_cls
  return axes, spy


def test_panels_with_values_only(tmp_path, monkeypatch):
  """Optional panels (coverage, evaluation) appear only with data."""
  pytest.importorskip("matplotlib")
  # pylint: disable=protected-access
  metrics = tmp_path / "metrics.csv"
  _write_metrics(metrics, _rows(3, with_coverage=False, with_eval=False))
  titles, spy = _axes_spy()

  monkeypatch.setattr(plotting, "_import_matplotlib", spy)
  plotting.plot_curves(str(metrics), str(tmp_path / "a.png"))
  without = [ax.get_title() for ax in titles]
  titles.clear()
  _write_metrics(metrics, _rows(3))
  plotting.plot_curves(str(metrics), str(tmp_path / "b.png"))
  with_all = [ax.get_title() for ax in titles]
  assert without == ["Episode return", "Learner loss", "Throughput"]
  assert with_all == ["Episode return", "Episode coverage",
                      "Evaluation return", "Evaluation coverage",
                      "Learner loss", "Throughput"]


def _titles(rows, tmp_path):
  metrics = tmp_path / "metrics.csv"
  _write_metrics(metrics, rows)
  return [p.title for p in plotting.panels_for(
      plotting.read_metrics(str(metrics)))]


def test_panels_for_leaves_out_panels_without_information(tmp_path):
  base = ["Learner loss", "Throughput"]
  assert _titles(_rows(3, with_coverage=False, with_eval=False),
                 tmp_path) == ["Episode return"] + base
  assert _titles([], tmp_path) == base
  # Disco Maze: returns all 0 (no return panels); no RND: no alpha / RND.
  assert _titles(_rows(4, with_reward=False, with_diagnostics=True,
                       with_rnd=False), tmp_path) == [
                           "Episode coverage", "Evaluation coverage",
                           "Intrinsic reward", "Inverse dynamics",
                           "Q values"] + base
  assert _titles(_rows(4, with_diagnostics=True, with_frontier=True,
                       with_split=True, with_temperature=True),
                 tmp_path) == [p.title for p in plotting.PANELS]
  assert "Frontier and TV" not in _titles(_rows(4, with_diagnostics=True),
                                          tmp_path)


def test_equal_series_are_drawn_once_and_twin_axes(tmp_path, monkeypatch):
  """q_exploit == q_explore (N = 1): one line with both labels."""
  pytest.importorskip("matplotlib")
  # pylint: disable=protected-access
  metrics = tmp_path / "metrics.csv"
  _write_metrics(metrics, _rows(4, with_diagnostics=True))
  axes, spy = _axes_spy()

  monkeypatch.setattr(plotting, "_import_matplotlib", spy)
  plotting.plot_curves(str(metrics), str(tmp_path / "a.png"))
  by_title = {ax.get_title(): ax for ax in axes}
  q_lines = by_title["Q values"].get_lines()
  assert [line.get_label() for line in q_lines] == ["j = 0, j = N - 1"]
  rnd = by_title["RND error"]
  assert rnd.get_yscale() == "log"
  assert len(rnd.get_lines()) == 3  # err, learner loss, running mean.
  # One legend for both axes of a twin panel (on the twin, drawn on top).
  alpha_ax = by_title["Life-long modulator"]
  twins = [a for a in alpha_ax.figure.axes if a is not alpha_ax
           and a.get_position().bounds == alpha_ax.get_position().bounds]
  assert len(twins) == 1 and alpha_ax.get_legend() is None
  labels = [t.get_text() for t in twins[0].get_legend().get_texts()]
  assert labels == [r"mean $\alpha$", r"fraction $\alpha > 1$"]


@pytest.mark.parametrize("n, max_points, want", [
    (10, 4, [0, 3, 6, 9]),   # Evenly spaced, first and last kept.
    (5, 5, [0, 1, 2, 3, 4]),  # Not above the limit: unchanged.
    (3, 1000, [0, 1, 2])])
def test_thin_keeps_evenly_spaced_finite_points(n, max_points, want):
  ok = np.ones(n, bool)
  np.testing.assert_array_equal(np.flatnonzero(plotting.thin(ok, max_points)),
                                want)
  # Among the finite points only: every third row of 30 (an evaluation
  # column), thinned to 4 of its 10.
  sparse = np.arange(30) % 3 == 0
  np.testing.assert_array_equal(np.flatnonzero(plotting.thin(sparse, 4)),
                                [0, 9, 18, 27])


def test_long_curves_are_drawn_thinned(tmp_path, monkeypatch):
  pytest.importorskip("matplotlib")
  metrics = tmp_path / "metrics.csv"
  _write_metrics(metrics, _rows(plotting.MAX_CURVE_POINTS + 500))
  axes, spy = _axes_spy()
  monkeypatch.setattr(plotting, "_import_matplotlib", spy)
  plotting.plot_curves(str(metrics), str(tmp_path / "a.png"))
  lines = [line for ax in axes for line in ax.get_lines()]
  assert lines
  want_last = 100 * (plotting.MAX_CURVE_POINTS + 500)
  for line in lines:
    x = line.get_xdata()
    assert len(x) <= plotting.MAX_CURVE_POINTS, line.get_label()
  returns = [line for line in lines
             if len(line.get_xdata()) == plotting.MAX_CURVE_POINTS]
  assert returns and all(line.get_xdata()[-1] == want_last
                         for line in returns)


@pytest.mark.parametrize("counts", [
    {"j = 0": np.array([[0, 1], [30, 2]]), "train": np.zeros((2, 2))},
    {"one": np.array([[5]])},
])
def test_plot_visit_heatmaps_writes_a_png(tmp_path, counts):
  pytest.importorskip("matplotlib")
  png = tmp_path / "heat.png"
  assert plotting.plot_visit_heatmaps(counts, str(png), "t") == str(png)
  assert png.read_bytes().startswith(PNG_SIGNATURE)
  assert not (tmp_path / "heat.png.tmp").exists()


def test_plot_visit_heatmaps_rejects_bad_counts(tmp_path):
  with pytest.raises(ValueError, match="empty"):
    plotting.plot_visit_heatmaps({}, str(tmp_path / "a.png"))
  with pytest.raises(ValueError, match=r"\[H, W\]"):
    plotting.plot_visit_heatmaps({"a": np.zeros(3)}, str(tmp_path / "a.png"))


def test_plot_cell_maps_writes_a_png(tmp_path):
  pytest.importorskip("matplotlib")
  png = tmp_path / "cells.png"
  grid = np.array([[1., np.nan], [-2., 3.]])
  panels = {"visits (training lanes)": np.array([[3., 0.], [1., 9.]]),
            "alpha": grid, "Q(right) - Q(other), j = 0": grid,
            "empty": np.full((2, 2), np.nan)}
  assert plotting.plot_cell_maps(panels, str(png), "t", columns=2) == str(
      png)
  assert png.read_bytes().startswith(PNG_SIGNATURE)
  with pytest.raises(ValueError, match="empty"):
    plotting.plot_cell_maps({}, str(png))
  with pytest.raises(ValueError, match=r"\[H, W\]"):
    plotting.plot_cell_maps({"a": np.zeros(3)}, str(png))


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


def test_arm_choice_panel_when_the_bandits_report(tmp_path):
  rows = _rows(3)
  for i, row in enumerate(rows):
    row.update(arm_0=0.5, arm_1=0.25 * i, arm_10=0.1)
  titles = _titles(rows, tmp_path)
  assert titles[-3:] == ["Arm choices (bandit windows)", "Learner loss",
                         "Throughput"]
  panel = [p for p in plotting.panels_for(plotting.read_metrics(
      str(tmp_path / "metrics.csv"))) if p.title.startswith("Arm")][0]
  assert [c for c, _ in panel.series] == ["arm_0", "arm_1", "arm_10"]
  assert panel.twin == ()  # No evaluator bandit in these rows.
  for i, row in enumerate(rows):
    row.update(eval_arm=float(i % 2), eval_bandit_return=1.)
  _titles(rows, tmp_path)
  panel = [p for p in plotting.panels_for(plotting.read_metrics(
      str(tmp_path / "metrics.csv"))) if p.title.startswith("Arm")][0]
  assert [c for c, _ in panel.twin] == ["eval_arm"]
  plotting.plot_curves(str(tmp_path / "metrics.csv"), str(tmp_path / "c.png"))
  assert (tmp_path / "c.png").is_file()
  assert "Arm choices (bandit windows)" not in _titles(_rows(3), tmp_path)


def test_write_bva_curve_accumulates_evaluations(tmp_path):
  """metrics_log.write_bva_curve: one npz per evaluation, values.png redrawn
  from all of them; bad input only logs."""
  pytest.importorskip("matplotlib")
  import jax  # pylint: disable=g-import-not-at-top
  from ngu_jax.meta import bandits_vote  # pylint: disable=g-import-not-at-top
  cfg = bandits_vote.BVAConfig(num_bandits=2, num_candidates=2)
  state = jax.vmap(lambda k: bandits_vote.init(k, cfg))(
      jax.random.split(jax.random.PRNGKey(1), 3))
  directory = str(tmp_path / "bva")
  for steps in (100, 200):
    state = state._replace(w=state.w + 1.)
    metrics_log.write_bva_curve(directory, steps, cfg, state)
  from ngu_jax import npz_io  # pylint: disable=g-import-not-at-top
  got = npz_io.load_arrays(str(tmp_path / "bva" / "bva_200.npz"))
  assert got["values"].shape == (3, got["x"].shape[0])
  np.testing.assert_allclose(got["values"], 2.)     # width > 0 averages w
  assert (tmp_path / "bva" / "bva_100.npz").exists()
  assert (tmp_path / "bva" / "values.png").stat().st_size > 0
  metrics_log.write_bva_curve(directory, 300, cfg, None)   # logs, no raise
  assert not (tmp_path / "bva" / "bva_300.npz").exists()
  with pytest.raises(ValueError, match="no curves"):
    plotting.plot_bva_curves({}, str(tmp_path / "x.png"))
