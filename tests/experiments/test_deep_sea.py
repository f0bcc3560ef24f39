"""Tests for experiments.deep_sea (the DeepSea study)."""

import csv
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import compare
from experiments import deep_sea


def test_random_walk_is_exact():
  """2^-N per episode, checked against uniformly random episodes of the
  environment itself (20,000 episodes of DeepSea-4: 1/16 +- 4 std)."""
  gymnax = pytest.importorskip("gymnax")
  del gymnax
  from ngu_jax.envs import gymnax_functional  # pylint: disable=g-import-not-at-top
  size, episodes = 4, 20_000
  env = gymnax_functional.GymnaxFunctional("DeepSea-bsuite", size=size)

  def episode(key):
    reset_key, act_key = jax.random.split(key)
    state, _ = env.reset(reset_key)

    def step(carry, k):
      state, ret = carry
      state, ts = env.step(state, jax.random.randint(k, (), 0, 2))
      return (state, ret + ts.reward), None

    (_, ret), _ = jax.lax.scan(step, (state, 0.),
                               jax.random.split(act_key, size))
    return ret > 0

  found = jax.jit(jax.vmap(episode))(
      jax.random.split(jax.random.key(0), episodes))
  p = deep_sea.random_success(size)
  assert p == 1 / 16
  std = np.sqrt(p * (1 - p) / episodes)
  assert abs(float(jnp.mean(found)) - p) < 4 * std
  assert deep_sea.random_found_probability(10, 1024) == pytest.approx(
      1 - (1 - 2. ** -10) ** 1024)


def _columns(episodes, rates, evals, steps=None):
  n = len(episodes)
  steps = np.arange(1, n + 1) * 100. if steps is None else steps
  return {"env_steps": np.asarray(steps, float),
          "episodes": np.asarray(episodes, float),
          "episode_success_rate": np.asarray(rates, float),
          "eval_return": np.asarray(evals, float)}


def test_run_summary_by_hand():
  # Rows of 10 episodes; successes 0, 0, 2, 5, 10 (rates x new episodes).
  cols = _columns([10, 20, 30, 40, 50], [0., np.nan, .2, .5, 1.],
                  [np.nan, -0.01, np.nan, 0.99, 0.3])
  s = deep_sea.run_summary(cols, final_fraction=0.2)
  assert s["episodes"] == 50 and s["successes"] == 17
  assert s["success_fraction"] == pytest.approx(17 / 50)
  # Rows at >= 0.8 * 500 env steps: (5 + 10) / 20.
  assert s["final_success"] == pytest.approx(0.75)
  assert s["first_episode"] == 30
  # Evaluations -0.01, 0.99, 0.3: 1 of the last 3 above 0.5.
  assert s["eval_final"] == 0.3 and s["eval_solved"] == 0.
  never = deep_sea.run_summary(_columns([10, 20, 30], [0., 0., 0.],
                                        [0.99, 0.2, 0.99]))
  assert np.isnan(never["first_episode"]) and never["successes"] == 0
  assert never["eval_solved"] == 1.  # 2 of the last 3.
  one = deep_sea.run_summary(_columns([10], [0.], [0.99]))
  assert one["eval_solved"] == 1.  # Fewer than 3 evaluations: all of them.
  assert np.isnan(one["minutes"])  # No elapsed_s column.
  # Wall clock: the last row's elapsed_s, and the first evaluation > 0.5.
  cols["elapsed_s"] = np.array([30., 60., 90., 120., 150.])
  s = deep_sea.run_summary(cols)
  assert s["minutes"] == 2.5 and s["first_greedy_minutes"] == 2.
  assert s["eval_last"] == 0.  # The last evaluation: 0.3.
  cols = _columns([10, 20, 30], [0., 0., 0.], [0.99, 0.2, 0.99])
  cols["elapsed_s"] = np.array([60., 120., 180.])
  assert deep_sea.run_summary(cols)["first_greedy_minutes"] == 1.


def test_bsuite_solution_and_score_by_hand():
  """bsuite's find_solution: the first episode where the running fraction of
  episodes that missed the treasure, (episodes - successes) / episodes, is
  below 0.8 (bsuite/experiments/deep_sea/analysis.py), here per row."""
  episodes = np.array([10., 20., 30., 40., 50.])
  new_successes = np.array([0., 1., 2., 4., 10.])
  # Running bad fractions: 1, 19/20, 27/30 = 0.9, 33/40 = 0.825, 33/50 = 0.66.
  assert deep_sea.bsuite_solution(episodes, new_successes) == 50.
  assert np.isnan(deep_sea.bsuite_solution(episodes, new_successes,
                                           num_episodes=40))
  assert deep_sea.bsuite_solution(episodes, new_successes,
                                  threshold=0.83) == 40.
  assert np.isnan(deep_sea.bsuite_solution(episodes, np.zeros(5)))
  assert np.isnan(deep_sea.bsuite_solution(np.zeros(0), np.zeros(0)))
  # Score: solved before 2^N + 100 episodes. 2^4 + 100 = 116; 2^10 + 100 =
  # 1124; unsolved counts as not.
  assert deep_sea.bsuite_score({4: 115., 10: 1124., 12: np.nan}) == (
      pytest.approx(1 / 3))
  assert deep_sea.bsuite_score({10: 1123.}) == 1.
  assert np.isnan(deep_sea.bsuite_score({}))
  cols = _columns([10, 20, 30, 40, 50], [0., .1, .2, .4, 1.],
                  [np.nan] * 5)
  assert deep_sea.run_summary(cols)["bsuite_episode"] == 50.
  assert np.isnan(deep_sea.run_summary(cols, num_episodes=45)[
      "bsuite_episode"])


def test_protocol_budget_is_episodes_times_n_plus_one(tmp_path):
  steps = deep_sea.protocol_env_steps([10, 50], 10_000)
  assert steps == {10: 110_000, 50: 510_000}
  assert deep_sea.budget_episodes(50, steps[50]) == 10_000
  variants = [v for v in deep_sea.VARIANTS if v.name == "ngu_cmr"]
  jobs = deep_sea.jobs_for(str(tmp_path), [10, 50], variants, [0], steps, [])
  for job, total in zip(jobs, (110_000, 510_000)):
    args = list(job.args)
    assert args[args.index("--total-env-steps") + 1] == str(total)
    assert "cross_mixture_ratio=0.5" in args
  assert deep_sea.PROTOCOL_SIZES == (10, 14, 20, 30, 40, 50)
  for name in deep_sea.DEFAULT_VARIANTS:  # Every default variant exists.
    assert name in [v.name for v in deep_sea.VARIANTS]


def test_jobs_for_one_process_per_size_and_variant(tmp_path):
  variants = [v for v in deep_sea.VARIANTS if v.name in ("ngu", "beta0")]
  jobs = deep_sea.jobs_for(str(tmp_path), [8, 6], variants, [0, 1], 600,
                           ["batch_size=8"])
  assert [j.name for j in jobs] == ["size 8 ngu", "size 8 beta0",
                                    "size 6 ngu", "size 6 beta0"]
  args = list(jobs[1].args)
  assert args[args.index("--seeds") + 1: args.index("--seeds") + 3] == [
      "0", "1"]
  assert "size=8" in args and "beta=0.0" in args and "batch_size=8" in args
  # The variant's flags come last, so they win over --set.
  assert args.index("batch_size=8") < args.index("beta=0.0")
  assert jobs[1].out == os.path.join(str(tmp_path), "size8", "beta0")
  assert deep_sea.seed_dir("r", 8, "ngu", 1, 2) == os.path.join(
      "r", "size8", "ngu", "seed_1")


def _fake_run(root, size, variant, seed, rates, evals):
  d = deep_sea.seed_dir(root, size, variant, seed, 2)
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "metrics.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["env_steps", "episodes", "episode_success_rate",
                "eval_return", "elapsed_s"])
    for i, (r, e) in enumerate(zip(rates, evals)):
      w.writerow([100 * (i + 1), 10 * (i + 1), r, e, 60 * (i + 1)])


def test_aggregate_writes_tables_and_plots(tmp_path):
  pytest.importorskip("rliable")
  root = str(tmp_path)
  variants = [v for v in deep_sea.VARIANTS if v.name in ("ngu", "beta0")]
  for seed in (0, 1):
    _fake_run(root, 4, "ngu", seed, [0., .5, 1.], ["", "", 0.99])
    _fake_run(root, 4, "beta0", seed, [0., 0., 0.], ["", "", -0.01])
  with pytest.raises(FileNotFoundError, match="no runs under"):
    deep_sea.aggregate(str(tmp_path / "nothing"), [4], variants, [0, 1],
                       env_steps=300, reps=50)
  assert "rank cells by rarity" not in deep_sea.aggregate(
      root, [4], variants, [0, 1], env_steps=300, reps=50)
  for seed in (0, 1):  # A count-like signal in NGU's runs.
    _save_cells(deep_sea.seed_dir(root, 4, "ngu", seed, 2), 300,
                [[8., 4.], [2., 1.]], [[1., 2.], [3., 4.]])
  text = deep_sea.aggregate(root, [4], variants, [0, 1], env_steps=300,
                            reps=50)
  # Rows of 2 cells: no correlation within rows.
  assert "| 4 | NGU | -1.00 [-1.00, -1.00] | n/a | -1.00" in text
  ranking = text.split("rank cells by rarity")[1].split("###")[0]
  assert "| 4 | beta = 0 |" not in ranking  # No cell maps: no row.
  assert "| NGU | 0.500 [" in text
  assert "| N = 4 |" in text and "; 2/2; 2/2 |" in text  # Overview table.
  assert "| 2/2 | 20 | 2/2 |" in text  # Found by both, first at 20, solved.
  assert "| beta = 0 | 0.000" in text and "| 0/2 | never" in text
  assert "| NGU | 4 |" in text and "| beta = 0 | none |" in text
  # bsuite's summary: NGU's running bad fractions 10 / 10, (20 - 5) / 20 =
  # 0.75 < 0.8 at episode 20 (2^4 + 100 = 116: within the score's limit);
  # beta = 0 never.
  assert "| NGU | 2/2 solved, episode 20 | 1.000 [" in text
  assert "| beta = 0 | 0/2 solved | 0.000 [" in text
  # Per seed: both NGU seeds' lanes and greedy solved; beta = 0 none.
  assert "| 4 | NGU | {0, 1} | {0, 1} | {0, 1} |" in text
  assert "| 4 | beta = 0 | none | none | none |" in text
  # Wall clock: 3 minutes per process of 2 seeds = 1.50 per seed; the first
  # greedy treasure at the third row (3 min) in both seeds.
  assert "| 4 | NGU | 1.50 | 1.50 (2/2) |" in text
  assert "| 4 | beta = 0 | 1.50 | never |" in text
  assert "10 minutes per seed: NGU 4; beta = 0 none." in text
  assert os.path.exists(os.path.join(root, "results.md"))
  if pytest.importorskip("matplotlib"):
    assert os.path.exists(os.path.join(root, "success.png"))
    assert os.path.exists(os.path.join(root, "first_treasure.png"))
  # Another report from the same runs, elsewhere.
  other = os.path.join(str(tmp_path), "reports", "ngu_only")
  text = deep_sea.aggregate(root, [4], variants[:1], [0, 1], env_steps=300,
                            reps=50, results_dir=other)
  assert "| NGU | 0.500 [" in text and "beta = 0" not in text
  with open(os.path.join(other, "results.md")) as f:
    assert f.read() == text


def test_path_through_training_reads_the_diagonal(tmp_path):
  from ngu_jax import npz_io as checkpoint  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import diagnostics  # pylint: disable=g-import-not-at-top
  n, a = 3, 2
  os.makedirs(tmp_path / "heatmaps")
  for step, err in ((200, 4.), (100, 2.)):
    sums = np.zeros((n + 1, n, len(diagnostics.cell_channels(a))))
    names = diagnostics.cell_channels(a)
    for r in range(n):  # One visit of (r, r), exploit lane, Q = (0, r).
      for name, value in (("visits", 1.), ("rnd_error", err * r),
                          ("alpha", 1.), ("exploit_visits", 1.),
                          ("q_exploit_1", float(r))):
        sums[r, r, names.index(name)] = value
    checkpoint.save_arrays(str(tmp_path / "heatmaps" / f"cells_{step}.npz"),
                           {"sums": sums, "preferred_action":
                            np.ones((n + 1, n), np.int64)})
  d = deep_sea.path_through_training(str(tmp_path))
  np.testing.assert_array_equal(d["env_steps"], [100, 200])
  np.testing.assert_allclose(d["RND error"], [[0., 0.], [2., 4.], [4., 8.]])
  np.testing.assert_allclose(d["Q(right) - Q(other), j = 0"][:, 0],
                             [0., 1., 2.])
  assert np.isnan(d["Q(right) - Q(other), j = N-1"]).all()


@pytest.mark.slow
def test_main_runs_a_tiny_study_and_resumes(tmp_path):
  """NGU at N = 3, 2 seeds vmapped, a few hundred env steps (one process;
  the tables of several variants are `test_aggregate_writes_tables_...`)."""
  pytest.importorskip("gymnax")
  pytest.importorskip("rliable")
  root = str(tmp_path / "study")
  argv = ["--output-root", root, "--sizes", "3", "--env-steps", "480",
          "--seeds", "0", "1", "--variants", "ngu", "--jobs", "1",
          "--threads", "1", "--set", "min_replay_size=8",
          "--set", "batch_size=4"]
  text = deep_sea.main(argv)
  assert "### N = 3" in text and "| NGU |" in text
  for variant in ("ngu",):
    out = os.path.join(root, "size3", variant)
    assert os.path.exists(os.path.join(out, compare.DONE_FILE))
    for seed in (0, 1):
      assert os.path.exists(os.path.join(out, f"seed_{seed}",
                                         "metrics.csv"))
      cells = os.listdir(os.path.join(out, f"seed_{seed}", "heatmaps"))
      assert any(c.startswith("cells_") and c.endswith(".npz")
                 for c in cells)
  if pytest.importorskip("matplotlib"):
    assert os.path.exists(os.path.join(root, "path_size3.png"))
  # Done runs are skipped; the results are written again.
  stamp = os.path.getmtime(os.path.join(root, "size3", "ngu", "seed_0",
                                        "metrics.csv"))
  deep_sea.main(argv)
  assert os.path.getmtime(os.path.join(root, "size3", "ngu", "seed_0",
                                       "metrics.csv")) == stamp


def _save_cells(directory, step, visits, signal):
  """A cells_<step>.npz whose RND error, alpha and r^i are all `signal`."""
  from ngu_jax import npz_io as checkpoint  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import diagnostics  # pylint: disable=g-import-not-at-top
  names = diagnostics.cell_channels(2)
  visits = np.asarray(visits, np.float64)
  sums = np.zeros(visits.shape + (len(names),))
  sums[..., names.index("visits")] = visits
  for name in ("rnd_error", "alpha", "intrinsic_reward"):
    sums[..., names.index(name)] = visits * np.asarray(signal, np.float64)
  os.makedirs(os.path.join(directory, "heatmaps"), exist_ok=True)
  checkpoint.save_arrays(os.path.join(directory, "heatmaps",
                                      f"cells_{step}.npz"),
                         {"sums": sums, "preferred_action":
                          np.ones(visits.shape, np.int64)})


def test_rarity_ranking_by_hand(tmp_path):
  pytest.importorskip("scipy")
  d = str(tmp_path)
  visits = [[8., 4.], [2., 1.], [0., 0.]]
  # A count-like signal (1 / sqrt(n)), then one that ranks rare cells last;
  # the never-visited cells do not count.
  _save_cells(d, 100, visits, [[1 / 8 ** .5, .5], [2 ** -.5, 1.], [9., 9.]])
  _save_cells(d, 50, visits, [[4., 3.], [2., 1.], [0., 0.]])
  r = deep_sea.rarity_ranking(d)
  np.testing.assert_array_equal(r["env_steps"], [50, 100])
  for name in deep_sea.RANKED:
    np.testing.assert_allclose(r[name], [1., -1.])
  # Fewer than 3 visited cells, or a constant signal: undefined.
  e = str(tmp_path / "few")
  _save_cells(e, 10, [[1., 2.], [0., 0.]], [[1., 2.], [0., 0.]])
  _save_cells(e, 20, visits, [[1., 1.], [1., 1.], [0., 0.]])
  assert np.isnan(deep_sea.rarity_ranking(e)["alpha"]).all()


def test_rarity_ranking_within_rows(tmp_path):
  pytest.importorskip("scipy")
  visits = [[9., 8., 7.], [3., 2., 1.], [0., 0., 0.]]
  # A signal of the row alone (the episodic memory filling up over an
  # episode): correlated with visits over all cells, undefined within rows.
  d = str(tmp_path / "row")
  _save_cells(d, 10, visits, [[5., 5., 5.], [1., 1., 1.], [0., 0., 0.]])
  r = deep_sea.rarity_ranking(d)
  assert r["alpha"][0] > 0.8
  assert np.isnan(r["alpha_within_rows"]).all()
  # Count-like in both rows, then count-like in one row only.
  e = str(tmp_path / "cells")
  _save_cells(e, 10, visits, [[1., 2., 3.], [10., 20., 30.], [0., 0., 0.]])
  _save_cells(e, 20, visits, [[3., 2., 1.], [10., 20., 30.], [0., 0., 0.]])
  r = deep_sea.rarity_ranking(e)
  for name in deep_sea.RANKED:
    np.testing.assert_allclose(r[name + "_within_rows"], [-1., 0.])
  np.testing.assert_allclose(r["intrinsic_reward"][0], -1.)


def test_missing_runs_are_grouped_by_process():
  missing = ["size8/ngu/seed0", "size8/ngu/seed1", "size10/rnd/seed1"]
  assert deep_sea._group_missing(missing, 2) == [  # pylint: disable=protected-access
      "size8/ngu", "size10/rnd/{seed1}"]


def test_intrinsic_reward_by_row(tmp_path):
  d = str(tmp_path)
  assert deep_sea.intrinsic_reward_by_row(d).size == 0  # No cell maps.
  _save_cells(d, 10, [[4., 0.], [1., 3.], [0., 0.]],
              [[2., 9.], [4., 8.], [5., 5.]])
  _save_cells(d, 5, [[1., 1.], [1., 1.], [1., 1.]],
              [[0., 0.], [0., 0.], [0., 0.]])  # Not the last window.
  np.testing.assert_allclose(deep_sea.intrinsic_reward_by_row(d),
                             [2., (4. + 3. * 8.) / 4., np.nan])


def test_mixture_success_by_hand(tmp_path):
  """j = 0 lanes: 4 episodes (visits of (0, 0)), 1 "right" at (N-1, N-1);
  j = N-1 lanes: 2 episodes, 2 treasures; a "left" there pays nothing."""
  from ngu_jax import npz_io as checkpoint  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import diagnostics  # pylint: disable=g-import-not-at-top
  n, a = 3, 2
  names = diagnostics.cell_channels(a)
  preferred = np.zeros((n + 1, n), np.int64)
  preferred[n - 1, n - 1] = 1  # "right" is action 1 at the last cell.
  os.makedirs(tmp_path / "heatmaps")
  for step, exploit_found in ((300, 1.), (150, 0.)):
    sums = np.zeros((n + 1, n, len(names)))
    sums[0, 0, names.index("exploit_visits")] = 4.
    sums[0, 0, names.index("explore_visits")] = 2.
    sums[n - 1, n - 1, names.index("act_exploit_1")] = exploit_found
    sums[n - 1, n - 1, names.index("act_exploit_0")] = 3.  # Left: nothing.
    sums[n - 1, n - 1, names.index("act_explore_1")] = 2.
    checkpoint.save_arrays(str(tmp_path / "heatmaps" / f"cells_{step}.npz"),
                           {"sums": sums, "preferred_action": preferred})
  m = deep_sea.mixture_success(str(tmp_path))
  np.testing.assert_array_equal(m["env_steps"], [150, 300])
  np.testing.assert_allclose(m["exploit"], [0., 0.25])
  np.testing.assert_allclose(m["explore"], [1., 1.])
  np.testing.assert_allclose(m["exploit_episodes"], [4., 4.])
  assert deep_sea.mixture_success(str(tmp_path / "none"))["exploit"].size == 0
