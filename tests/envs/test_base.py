"""Tests for ngu_jax.envs.base: TimeStep, specs, input checks, conformance."""

import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.envs import base
from ngu_jax.types import ObservationEncoding
from tests.envs import conformance


class CounterEnv(base.BatchedEnv):
  """A reference env: lane l terminates after 3 + l steps, or is cut at 5.

  The observation is float32 [B, 2]: (steps taken, last action). Lanes
  0-2 terminate (discount 0; lane 2 on the limit's step, where termination
  wins); lanes >= 3 are truncated at 5 steps (discount 1). `bug` switches
  on one deliberate violation of base's semantics, to test that the
  conformance checker catches it.
  """

  def __init__(self, num_envs, num_actions=3, bug=None):
    self._b, self._a, self._bug = num_envs, num_actions, bug
    self._t = np.zeros(num_envs, np.int64)
    self._ended = np.zeros(num_envs, bool)
    self._obs = np.zeros((num_envs, 2), np.float32)
    self.closed = False

  @property
  def num_envs(self):
    return self._b

  def observation_spec(self):
    return base.Array((2,), np.float32, name="observation")

  def observation_encoding(self):
    return ObservationEncoding("features")

  def action_spec(self):
    return base.DiscreteArray(self._a, name="action")

  def reset(self):
    self._t[:] = 0
    self._ended[:] = False
    self._obs = np.zeros((self._b, 2), np.float32)
    b = self._b
    return base.TimeStep(np.zeros(b, np.int32), np.zeros(b, np.float32),
                         np.ones(b, np.float32), self._obs.copy(),
                         {"t": self._t.copy()})

  def step(self, actions):
    actions = base.validate_actions(actions, self._b, self._a, "CounterEnv")
    first = self._ended.copy()
    if self._bug == "action_after_last":
      first[:] = False
    self._t = np.where(first, 0, self._t + 1)
    terminated = ~first & (self._t == 3 + np.arange(self._b))
    truncated = ~first & ~terminated & (self._t >= 5)
    last = terminated | truncated
    self._ended = last
    step_type = np.where(first, 0, np.where(last, 2, 1)).astype(np.int32)
    discount = np.where(terminated, 0.0, 1.0).astype(np.float32)
    if self._bug == "truncation_discount":
      discount = np.where(last, 0.0, 1.0).astype(np.float32)
    reward = np.where(first, 0.0, 1.0).astype(np.float32)
    if self._bug == "reward_on_first":
      reward = np.ones(self._b, np.float32)
    obs = np.stack([self._t, np.where(first, 0, actions)], -1)
    if self._bug == "aliasing":
      self._obs[...] = obs  # Returns (and later overwrites) one buffer.
      obs = self._obs
    else:
      obs = obs.astype(np.float32)
    base.check_observation_finite(obs, "CounterEnv.step")
    return base.TimeStep(step_type, reward, discount, obs,
                         {"t": self._t.copy()})

  def close(self):
    self.closed = True


def test_step_type_values():
  assert (base.StepType.FIRST, base.StepType.MID, base.StepType.LAST) == (
      0, 1, 2)


def test_timestep_predicates():
  ts = base.TimeStep(np.array([0, 1, 2, 1], np.int32), np.zeros(4, np.float32),
                     np.ones(4, np.float32), np.zeros((4, 3)), {})
  np.testing.assert_array_equal(ts.first(), [True, False, False, False])
  np.testing.assert_array_equal(ts.mid(), [False, True, False, True])
  np.testing.assert_array_equal(ts.last(), [False, False, True, False])


def test_specs_are_dm_env_specs():
  spec = base.DiscreteArray(18, name="action")
  assert spec.num_values == 18 and spec.dtype == np.int32 and spec.shape == ()
  obs = base.BoundedArray((84, 84, 1), np.uint8, 0, 255, name="observation")
  assert obs.shape == (84, 84, 1) and obs.maximum == 255


def test_batched_env_is_abstract():
  with pytest.raises(TypeError):
    base.BatchedEnv()  # pylint: disable=abstract-class-instantiated


def test_context_manager_closes():
  with CounterEnv(2) as env:
    env.reset()
  assert env.closed


def test_validate_actions_accepts_integer_arrays():
  for actions in (np.array([0, 2, 1], np.int64), np.array([0, 2, 1], np.uint8),
                  jnp.array([0, 2, 1]), [0, 2, 1]):
    out = base.validate_actions(actions, 3, 3, "f")
    assert out.dtype == np.int32 and out.shape == (3,)
    np.testing.assert_array_equal(out, [0, 2, 1])


@pytest.mark.parametrize("actions,match", [
    (np.array([0, 3, 1, 7]), r"f: `actions` has values outside \[0, 3\) in "
     r"lane\(s\) \[1, 3\]"),
    (np.array([0, -1, 1, 0]), r"lane\(s\) \[1\]"),
    (np.array([0.0, 1.0, 1.0, 0.0]), "integer dtype, got float64"),
    (np.array([True, False, True, False]), "integer dtype, got bool"),
    (np.array([0, 1, 2]), r"shape \[4\], got \(3,\)"),
    (np.zeros((4, 1), np.int32), r"shape \[4\], got \(4, 1\)"),
    (np.int32(1), r"shape \[4\], got \(\)"),
])
def test_validate_actions_rejects(actions, match):
  with pytest.raises(ValueError, match=match):
    base.validate_actions(actions, 4, 3, "f")


def test_check_observation_finite():
  obs = np.zeros((3, 2, 2), np.float32)
  base.check_observation_finite(obs, "f")
  obs[1, 0, 1] = np.nan
  obs[2, 1, 1] = -np.inf
  with pytest.raises(ValueError, match=r"NaN or inf in lane\(s\) \[1, 2\]"):
    base.check_observation_finite(obs, "f")
  with pytest.raises(ValueError, match=r"lane\(s\) \[0\]"):
    base.check_observation_finite(jnp.array([[jnp.inf], [0.0]]), "f")
  base.check_observation_finite(np.full((2, 3), 255, np.uint8), "f")


def test_check_positive_int():
  assert base.check_positive_int(np.int64(3), "n", "f") == 3
  for bad in (0, -1, 2.0, True, "3"):
    with pytest.raises(ValueError, match="`n`"):
      base.check_positive_int(bad, "n", "f")


def test_reference_env_conforms():
  env, twin = CounterEnv(4), CounterEnv(4)
  stats = conformance.check_batched_env(env, 40, np.random.default_rng(0),
                                        twin=twin)
  # Lanes 0-2 terminate (3, 4, 5 steps), lane 3 is cut at 5.
  assert stats.num_terminated > 0 and stats.num_truncated > 0
  assert 0 <= stats.num_last - stats.num_first <= 4
  conformance.check_rejects_bad_actions(env)


def test_reference_env_discounts():
  env = CounterEnv(4)
  env.reset()
  steps = [env.step(np.zeros(4, np.int32)) for _ in range(6)]
  # Lanes 0, 1, 2 terminate at steps 3, 4, 5: discount 0; lane 3 is cut at
  # 5: discount 1; all are FIRST on the step after.
  for lane, t_last, discount in ((0, 3, 0.0), (1, 4, 0.0), (2, 5, 0.0),
                                 (3, 5, 1.0)):
    assert steps[t_last - 1].step_type[lane] == base.StepType.LAST
    assert steps[t_last - 1].discount[lane] == discount
    assert steps[t_last].step_type[lane] == base.StepType.FIRST


@pytest.mark.parametrize("bug", ["action_after_last", "reward_on_first",
                                 "aliasing"])
def test_conformance_catches_bugs(bug):
  with pytest.raises(AssertionError):
    conformance.check_batched_env(CounterEnv(4, bug=bug), 40,
                                  np.random.default_rng(0),
                                  twin=CounterEnv(4, bug=bug))


def test_conformance_catches_long_episodes():
  # Lanes 2, 3 run 5 steps: a limit of 4 must be reported.
  with pytest.raises(AssertionError, match="without LAST"):
    conformance.check_batched_env(CounterEnv(4), 20,
                                  np.random.default_rng(0),
                                  max_episode_steps=4)
  conformance.check_batched_env(CounterEnv(4), 20, np.random.default_rng(0),
                                max_episode_steps=5)


class _NoEncodingEnv(CounterEnv):
  observation_encoding = base.BatchedEnv.observation_encoding


def test_undeclared_encoding_is_a_clear_error():
  with pytest.raises(NotImplementedError,
                     match=r"_NoEncodingEnv.observation_encoding: .*declare"):
    _NoEncodingEnv(2).observation_encoding()


@pytest.mark.parametrize("encoding, error", [
    # CounterEnv's observations (steps taken, last action) reach 5 and 2.
    (ObservationEncoding("binary"), AssertionError),
    # Float observations are not integer codes.
    (ObservationEncoding("symbolic", (6, 3)), AssertionError),
    # One count for two channels.
    (ObservationEncoding("symbolic", (6,)), ValueError),
])
def test_conformance_catches_wrong_encodings(encoding, error):
  env = CounterEnv(4)
  env.observation_encoding = lambda: encoding
  with pytest.raises(error):
    conformance.check_batched_env(env, 20, np.random.default_rng(0))


def test_conformance_checks_symbolic_code_ranges():
  class CodeEnv(CounterEnv):
    """CounterEnv with int32 observations declared as codes."""

    def __init__(self, num_values):
      super().__init__(4)
      self._num_values = num_values

    def observation_spec(self):
      return base.Array((2,), np.int32, name="observation")

    def observation_encoding(self):
      return ObservationEncoding("symbolic", self._num_values)

    def reset(self):
      return _as_int(super().reset())

    def step(self, actions):
      return _as_int(super().step(actions))

  def _as_int(ts):
    return ts._replace(observation=ts.observation.astype(np.int32))

  # Steps taken reach 5, actions 2: counts (6, 3) fit, (5, 3) do not.
  conformance.check_batched_env(CodeEnv((6, 3)), 20,
                                np.random.default_rng(0))
  with pytest.raises(AssertionError, match=r"out of range: channel\(s\) \[0\]"):
    conformance.check_batched_env(CodeEnv((5, 3)), 20,
                                  np.random.default_rng(0))


def test_visit_grid_shapes_are_declared_by_the_environments():
  """The loops' visit heatmaps use the grid the environment declares
  (`BatchedEnv.visit_grid_shape`), not its name."""
  from ngu_jax import envs  # pylint: disable=g-import-not-at-top
  from ngu_jax.loops import metrics_log  # pylint: disable=g-import-not-at-top
  disco = envs.make("disco_maze", 2, seed=0, size=7)
  assert disco.visit_grid_shape() == (7, 7)
  lanes = envs.make("jax/disco_maze", 2, seed=0, size=5)
  assert lanes.visit_grid_shape() == (5, 5)
  # The name is not consulted any more: only the declaration.
  assert metrics_log.grid_shape("anything", disco) == (7, 7)
  # The default: not a grid world.
  assert base.BatchedEnv.visit_grid_shape(disco) is None
