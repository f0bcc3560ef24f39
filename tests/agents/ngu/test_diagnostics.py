"""Tests for ngu_jax.agents.ngu.diagnostics (run diagnostics, grid visits)."""

import functools
import math

import jax
import numpy as np
import pytest

from ngu_jax import envs
from ngu_jax.agents.ngu import diagnostics
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.intrinsic import lifelong

# Four lanes, N = 3 mixtures (betas 0, 0.15, 0.3); lane 1 is FIRST.
EXTRAS = dict(
    episodic_reward=np.array([1., 9., 2., 4.], np.float32),
    intrinsic_reward=np.array([2., 0., 3., 4.], np.float32),
    alpha=np.array([0.5, 3., 1., 2.], np.float32),
    rnd_error=np.array([1., 100., 3., 5.], np.float32),
    q_value=np.array([10., 20., 30., 40.], np.float32),
    mixture_index=np.array([0, 0, 2, 1], np.int32))
FIRST = np.array([False, True, False, False])
BETAS = np.array([0., 0.15, 0.3], np.float32)


@pytest.mark.parametrize("jit", [False, True])
def test_actor_step_sums_by_hand(jit):
  fn = functools.partial(diagnostics.actor_step_sums, betas=BETAS)
  if jit:
    fn = jax.jit(fn)
  sums = np.asarray(fn(EXTRAS, FIRST))
  # Lanes 0, 2, 3 (lane 1 is FIRST): 3 steps.
  expected = dict(
      steps=3., episodic_reward=1. + 2. + 4.,
      intrinsic_reward=0. * 2. + 0.3 * 3. + 0.15 * 4.,
      alpha=0.5 + 1. + 2., alpha_above_one=1., rnd_error=1. + 3. + 5.,
      exploit_steps=1., q_exploit=10., explore_steps=1., q_explore=30.)
  assert sums.dtype == np.float32
  np.testing.assert_allclose(
      sums, [expected[name] for name in diagnostics.ACTOR_SUMS], rtol=1e-6)


def test_actor_summary_means_and_nans():
  sums = np.asarray(diagnostics.actor_step_sums(EXTRAS, FIRST, BETAS))
  stats = lifelong.RunningStats(mean=np.float32(4.), var=np.float32(9.),
                                count=np.float32(12.))
  out = diagnostics.actor_summary(2 * sums, use_rnd=True, error_stats=stats)
  assert set(out) == set(diagnostics.ACTOR_COLUMNS)
  assert out["mean_episodic_reward"] == pytest.approx(7. / 3.)
  assert out["mean_intrinsic_reward"] == pytest.approx(1.5 / 3.)
  assert out["mean_alpha"] == pytest.approx(3.5 / 3.)
  assert out["alpha_above_one"] == pytest.approx(1. / 3.)
  assert out["rnd_error"] == pytest.approx(3.)
  assert (out["rnd_error_mean"], out["rnd_error_std"]) == (4., 3.)
  assert (out["q_exploit"], out["q_explore"]) == (10., 30.)

  no_rnd = diagnostics.actor_summary(sums, use_rnd=False, error_stats=stats)
  for column in ("mean_alpha", "alpha_above_one", "rnd_error",
                 "rnd_error_mean", "rnd_error_std"):
    assert math.isnan(no_rnd[column]), column
  assert no_rnd["mean_episodic_reward"] == pytest.approx(7. / 3.)
  rnd_only = diagnostics.actor_summary(sums, use_rnd=True,
                                       intrinsic_reward="rnd")
  for column in ("mean_episodic_reward", "mean_alpha", "alpha_above_one",
                 "rnd_error_mean"):  # No error_stats given: NaN too.
    assert math.isnan(rnd_only[column]), column
  assert rnd_only["rnd_error"] == pytest.approx(3.)
  # No intrinsic reward (even if use_rnd were passed True): only r^i and Q.
  none = diagnostics.actor_summary(sums, use_rnd=True, error_stats=stats,
                                   intrinsic_reward="none")
  for column in ("mean_episodic_reward", "mean_alpha", "alpha_above_one",
                 "rnd_error", "rnd_error_mean", "rnd_error_std"):
    assert math.isnan(none[column]), column
  assert (none["q_exploit"], none["q_explore"]) == (10., 30.)
  unseen = stats._replace(count=np.float32(0.))
  assert math.isnan(diagnostics.actor_summary(
      sums, True, error_stats=unseen)["rnd_error_mean"])
  empty = diagnostics.actor_summary(np.zeros(len(diagnostics.ACTOR_SUMS)),
                                    use_rnd=True)
  assert all(math.isnan(v) for v in empty.values())
  with pytest.raises(ValueError, match="shape"):
    diagnostics.actor_summary(np.zeros(3), use_rnd=True)


def test_learner_summary():
  values = {"loss": [1., 3.], "action_prediction_loss": [0.5],
            "action_prediction_accuracy": [0.25, 0.75], "rnd_loss": [2.]}
  out = diagnostics.learner_summary(values, use_rnd=True)
  q_columns = ("q_extrinsic", "q_intrinsic")
  assert {k: v for k, v in out.items() if k not in q_columns} == {
      "learner_loss": 2., "action_prediction_loss": 0.5,
      "action_prediction_accuracy": 0.5, "rnd_loss": 2.}
  assert all(math.isnan(out[k]) for k in q_columns)
  # Agent57's split values: Q_e and Q_i, NaN without them even if reported.
  split = {**values, "q_extrinsic_mean": [1., 2.], "q_intrinsic_mean": [4.]}
  out = diagnostics.learner_summary(split, use_rnd=True, split_values=True)
  assert (out["q_extrinsic"], out["q_intrinsic"]) == (1.5, 4.)
  out = diagnostics.learner_summary(split, use_rnd=True)
  assert all(math.isnan(out[k]) for k in q_columns)
  out = diagnostics.learner_summary(values, use_rnd=False,
                                    intrinsic_reward="rnd")
  assert out["learner_loss"] == 2. and math.isnan(out["rnd_loss"])
  assert math.isnan(out["action_prediction_loss"])
  out = diagnostics.learner_summary(values, use_rnd=True,
                                    intrinsic_reward="none")
  assert out["learner_loss"] == 2.
  assert all(math.isnan(out[k]) for k in (
      "rnd_loss", "action_prediction_loss", "action_prediction_accuracy"))
  assert all(math.isnan(v) for v in
             diagnostics.learner_summary({}, use_rnd=True).values())


def test_count_visits_by_hand():
  positions = np.array([[0, 1], [2, 0], [0, 1], [1, 1], [2, 2]])
  mask = np.array([True, True, True, False, True])
  counts = diagnostics.count_visits(positions, (3, 3), mask)
  np.testing.assert_array_equal(counts, [[0, 2, 0],
                                         [0, 0, 0],
                                         [1, 0, 1]])
  assert counts.dtype == np.int64
  # Adding grows the grid to the cells counted; the old counts stay.
  grown = diagnostics.add_visits(counts, np.array([[3, 0], [1, 4]]))
  assert grown.shape == (4, 5)
  np.testing.assert_array_equal(grown[:3, :3], counts)
  assert grown[3, 0] == 1 and grown[1, 4] == 1 and grown.sum() == 6
  np.testing.assert_array_equal(counts.sum(), 4)  # Not modified in place.
  empty = diagnostics.add_visits(np.zeros((0, 0), np.int64),
                                 np.array([[1, 2]]))
  np.testing.assert_array_equal(empty, [[0, 0, 0], [0, 0, 1]])


@pytest.mark.parametrize("counts, positions, mask, match", [
    (np.zeros(3), np.zeros((1, 2), int), None, "counts"),
    (np.zeros((2, 2)), np.zeros((1, 3), int), None, "positions"),
    (np.zeros((2, 2)), np.zeros((1, 2)), None, "positions"),
    (np.zeros((2, 2)), np.array([[-1, 0]]), None, "negative"),
    (np.zeros((2, 2)), np.zeros((2, 2), int), np.array([1, 0]), "mask"),
])
def test_add_visits_rejects_bad_input(counts, positions, mask, match):
  with pytest.raises(ValueError, match=match):
    diagnostics.add_visits(counts, positions, mask)


def test_grid_positions():
  def timestep(extras):
    return envs.TimeStep(step_type=np.zeros(2, np.int8),
                         reward=np.zeros(2), discount=np.ones(2),
                         observation=np.zeros((2, 1)), extras=extras)
  maze = timestep({"position": np.array([[1, 2], [3, 4]], np.int32)})
  np.testing.assert_array_equal(diagnostics.grid_positions(maze),
                                [[1, 2], [3, 4]])
  # MiniGrid's agent_pos is (x, y) = (column, row).
  minigrid = timestep({"agent_pos": np.array([[1, 2], [3, 4]], np.int32)})
  np.testing.assert_array_equal(diagnostics.grid_positions(minigrid),
                                [[2, 1], [4, 3]])
  assert diagnostics.grid_positions(timestep({})) is None


# ----------------------------------------------------------------------------
# Per-cell signals.

CELL_EXTRAS = dict(
    rnd_error=np.array([1., 2., 4., 8.], np.float32),
    alpha=np.array([0.5, 1.5, 2., 3.], np.float32),
    intrinsic_reward=np.array([0., 10., 20., 30.], np.float32),
    q_values=np.array([[1., 2.], [3., 5.], [7., 4.], [0., -1.]], np.float32),
    mixture_index=np.array([0, 0, 2, 1], np.int32))
CELL_POSITIONS = np.array([[0, 0], [1, 1], [1, 1], [5, 0]], np.int32)
CELL_ACTION = np.array([1, 0, 0, 1], np.int32)


@pytest.mark.parametrize("jit", [False, True])
def test_cell_step_sums_by_hand(jit):
  """N = 3: lanes 0, 1 are j = 0 (exploit), lane 2 j = 2 (explore), lane 3
  j = 1 (neither); lane 3's row 5 lies outside the 3 x 2 grid (clipped)."""
  fn = functools.partial(diagnostics.cell_step_sums, (3, 2),
                         num_mixtures=3)
  if jit:
    fn = jax.jit(fn)
  sums = np.asarray(fn(CELL_POSITIONS, CELL_EXTRAS, CELL_ACTION,
                       np.zeros(4, bool)))
  names = diagnostics.cell_channels(2)
  assert sums.shape == (3, 2, len(names)) == (3, 2, 6 + 8)
  at = {name: sums[..., k] for k, name in enumerate(names)}
  np.testing.assert_array_equal(at["visits"], [[1, 0], [0, 2], [1, 0]])
  assert at["rnd_error"][1, 1] == 6. and at["alpha"][1, 1] == 3.5
  assert at["intrinsic_reward"][2, 0] == 30.
  assert at["exploit_visits"][1, 1] == 1. and at["explore_visits"][1, 1] == 1.
  assert at["exploit_visits"][2, 0] == 0. == at["explore_visits"][2, 0]
  np.testing.assert_array_equal(
      [at["q_exploit_0"][1, 1], at["q_exploit_1"][1, 1]], [3., 5.])
  np.testing.assert_array_equal(
      [at["q_explore_0"][1, 1], at["q_explore_1"][1, 1]], [7., 4.])
  assert at["act_exploit_1"][0, 0] == 1. and at["act_exploit_0"][1, 1] == 1.
  assert at["act_explore_0"][1, 1] == 1. and at["act_explore_1"].sum() == 0.


def test_cell_maps_and_panels():
  sums = np.asarray(diagnostics.cell_step_sums(
      (3, 2), CELL_POSITIONS, CELL_EXTRAS, CELL_ACTION, np.zeros(4, bool), 3))
  maps = diagnostics.cell_maps(sums + sums)  # Two identical steps.
  assert maps["visits"][1, 1] == 4.
  np.testing.assert_allclose(maps["rnd_error"][1, 1], 3.)
  assert np.isnan(maps["rnd_error"][0, 1])  # Never visited.
  np.testing.assert_allclose(maps["q_exploit"][1, 1], [3., 5.])
  np.testing.assert_allclose(maps["policy_exploit"][0, 0], [0., 1.])
  assert np.isnan(maps["q_explore"][0, 0]).all()
  preferred = np.array([[1, 1], [0, 1], [1, 1]])
  panels = diagnostics.cell_panels(maps, preferred, "right")
  assert list(panels)[:4] == ["visits (training lanes)", "RND error",
                              "alpha", "r^i (before beta_j)"]
  # Cell (1, 1): "right" is action 1; Q_exploit = (3, 5) -> +2, Q_explore
  # = (7, 4) -> -3; the exploit lane took action 0 there.
  assert panels["Q(right) - Q(other), j = 0"][1, 1] == 2.
  assert panels["Q(right) - Q(other), j = N-1"][1, 1] == -3.
  assert panels["P(right), j = 0"][1, 1] == 0.
  assert panels["P(right), j = 0"][0, 0] == 1.
  assert len(diagnostics.cell_panels(maps)) == 4
  with pytest.raises(ValueError, match="preferred_action"):
    diagnostics.cell_panels(maps, np.zeros((2, 2), int))
  with pytest.raises(ValueError, match="cell_maps"):
    diagnostics.cell_maps(np.zeros((3, 2, 7)))


def test_arm_shares_by_hand():
  arms = np.array([[0, 2, 2, -1], [1, 2, -1, -1]])  # Two lanes' windows.
  out = diagnostics.arm_shares(arms, 4)
  assert list(out) == ["arm_0", "arm_1", "arm_2", "arm_3"]
  np.testing.assert_allclose([out[k] for k in out], [0.2, 0.2, 0.6, 0.])
  assert all(math.isnan(v) for v in
             diagnostics.arm_shares(np.full((2, 3), -1), 2).values())


def test_temperature_columns_by_hand():
  """tau = 1 / (exp(x) - 1) per lane; percentiles over lanes; the entropy
  of softmax(q / tau) averaged over lanes."""
  tau = np.array([0.5, 1., 2., 4., 8.])
  x = np.log1p(1. / tau)
  q = np.array([[0., 0.], [1., 0.], [0., 0.], [3., 1.], [0., 100.]])
  out = diagnostics.temperature_columns(x, q)
  assert out["tau_median"] == pytest.approx(2., rel=1e-6)
  assert out["tau_p10"] == pytest.approx(0.5 + 0.4 * 0.5, rel=1e-6)
  assert out["tau_p90"] == pytest.approx(4. + 0.6 * 4., rel=1e-6)

  def entropy(row, t):
    p = np.exp(row / t) / np.exp(row / t).sum()
    return -(p * np.log(p)).sum()
  expected = np.mean([np.log(2.), entropy(q[1], 1.), np.log(2.),
                      entropy(q[3], 4.), entropy(q[4], 8.)])
  assert out["policy_entropy"] == pytest.approx(expected, rel=1e-6)
  # x = 0 (tau = infinity) stays finite: the uniform policy.
  flat = diagnostics.temperature_columns(np.zeros(2), np.array([[0., 9.]] * 2))
  assert flat["policy_entropy"] == pytest.approx(np.log(2.), rel=1e-4)
  assert np.isfinite(flat["tau_median"])


def test_bva_value_curve_pools_each_lanes_bandits():
  """diagnostics.bva_value_curve: per lane `bandits_vote.pooled_values`
  (checked by hand for one lane: the mean over bandits of eq. 9's V),
  leading axes flattened, counts summed over bandits, tile centres."""
  from ngu_jax.meta import bandits_vote  # pylint: disable=g-import-not-at-top
  cfg = bandits_vote.BVAConfig(num_bandits=2, num_candidates=2,
                               learning_rates=(0.1,), widths=(0,))
  keys = jax.random.split(jax.random.PRNGKey(0), 6)
  state = jax.vmap(lambda k: bandits_vote.init(k, cfg))(keys)
  rng = np.random.default_rng(0)
  w = rng.normal(size=np.shape(state.w)).astype(np.float32)
  counts = rng.integers(0, 5, size=np.shape(state.counts)).astype(np.int32)
  state = state._replace(w=w, counts=counts)
  stacked = jax.tree_util.tree_map(
      lambda x: np.reshape(np.asarray(x), (2, 3) + np.shape(x)[1:]), state)
  x, values, lane_counts = diagnostics.bva_value_curve(cfg, stacked)
  k = np.shape(w)[-1]
  assert values.shape == (6, k) and lane_counts.shape == (6, k)
  # Width 0: eq. 9's V is w itself, so the pooled value is w's bandit mean.
  np.testing.assert_allclose(values, w.mean(axis=1), rtol=1e-6)
  np.testing.assert_array_equal(lane_counts, counts.sum(axis=1))
  low, high = bandits_vote.tile_bounds(cfg)
  np.testing.assert_allclose(x, (np.asarray(low) + np.asarray(high)) / 2,
                             rtol=1e-6)


# ------------------------------------------- what the loops ask the agent

def test_extra_columns_per_variant():
  assert diagnostics.extra_columns(NGUConfig()) == ()
  assert diagnostics.extra_columns(object()) == ()
  assert diagnostics.extra_columns(
      NGUConfig(num_mixtures=3, meta_controller="ucb")) == (
          "arm_0", "arm_1", "arm_2", "eval_arm", "eval_bandit_return")
  assert diagnostics.extra_columns(
      NGUConfig(behaviour_policy="boltzmann")) == (
          "tau_p10", "tau_median", "tau_p90", "policy_entropy")


def test_config_capabilities():
  assert not NGUConfig().has_meta_controller
  assert NGUConfig(meta_controller="ucb").has_meta_controller
  assert NGUConfig(meta_controller="ucb").keeps_lane_controllers
  assert NGUConfig(behaviour_policy="boltzmann").keeps_lane_controllers
  assert not NGUConfig(behaviour_policy="boltzmann",
                       temperature_source="random").keeps_lane_controllers


@pytest.mark.parametrize("intrinsic_reward, use_rnd, nan_columns", [
    ("ngu", True, {"q_extrinsic", "q_intrinsic"}),
    ("ngu", False, {"mean_alpha", "alpha_above_one", "rnd_error", "rnd_loss",
                    "q_extrinsic", "q_intrinsic"}),
    ("rnd", True, {"mean_episodic_reward", "mean_alpha", "alpha_above_one",
                   "action_prediction_loss", "action_prediction_accuracy",
                   "q_extrinsic", "q_intrinsic"}),
    ("recode", True, {"mean_alpha", "alpha_above_one", "rnd_error",
                      "rnd_loss", "q_extrinsic", "q_intrinsic"}),
])
def test_summary_columns_follow_the_variant(intrinsic_reward, use_rnd,
                                            nan_columns):
  config = NGUConfig(intrinsic_reward=intrinsic_reward, use_rnd=use_rnd)
  sums = np.ones(len(diagnostics.ACTOR_SUMS))
  learner = {name: [1.] for _, name in diagnostics.LEARNER_COLUMNS}
  out = diagnostics.summary_columns(config, learner, sums)
  assert set(out) == set(diagnostics.ACTOR_COLUMNS) | {
      c for c, _ in diagnostics.LEARNER_COLUMNS}
  nans = {c for c, v in out.items() if np.isnan(v)}
  # rnd_error_mean / _std are NaN without error statistics.
  assert nans - {"rnd_error_mean", "rnd_error_std"} == nan_columns
