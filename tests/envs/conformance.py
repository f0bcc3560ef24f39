"""Conformance checks of the `ngu_jax.envs.base` interface, for every adapter.

Usage from an adapter's tests:

  stats = conformance.check_batched_env(env, num_steps=300, rng=rng,
                                        twin=make_same_env(),
                                        max_episode_steps=limit)
  assert stats.num_last > 0
  # Whether a LAST was a termination or a truncation is adapter knowledge:
  # test the discount of each case in the adapter's own tests.
  conformance.check_rejects_bad_actions(env)

`check_batched_env` asserts, at reset and at every step:
* shapes and dtypes: step_type int32 [B] with StepType values, reward and
  discount float32 [B] and finite, observation [B, *spec.shape] of
  spec.dtype (within the bounds of a BoundedArray spec), every extra an
  array with leading axis B; `first()`/`mid()`/`last()` agree with
  step_type;
* the declared `observation_encoding()` fits the observations
  (`check_observation_encoding`): pixels uint8 or float; symbolic integer
  codes with one count per channel and every code of channel c in
  [0, num_values[c]); binary values in {0, 1}; features bool, integer or
  float; and the networks can resolve the encoded shape's rank;
* reset: every lane FIRST, reward 0, discount 1;
* FIRST appears only at reset or right after that lane's LAST, and always
  right after a LAST; FIRST has reward 0 and discount 1;
* MID has discount 1; LAST has discount 0 (termination) or 1 (truncation);
* with `max_episode_steps`: every episode ends (LAST) by that many steps;
* the arrays of a returned TimeStep are not modified by later steps;
* with `twin` (a second env built identically, same seed): both envs get
  the same random actions except on lanes that just returned LAST, where the
  twin gets a different action; every output must still be identical,
  which shows the env is deterministic and ignores the action after LAST.

Envs whose extras hold "env_id" (envpool async mode) are tracked per env id
instead of per row.
"""

from typing import NamedTuple, Optional

import numpy as np

from ngu_jax import types as ngu_types
from ngu_jax.envs import base

FIRST = int(base.StepType.FIRST)
MID = int(base.StepType.MID)
LAST = int(base.StepType.LAST)


class ConformanceStats(NamedTuple):
  """Counts over all lanes of the steps taken by `check_batched_env`."""
  num_steps: int        # step() calls (each of B lanes).
  num_first: int        # FIRST lane-steps after reset (auto-resets).
  num_last: int         # LAST lane-steps.
  num_terminated: int   # LAST with discount 0.
  num_truncated: int    # LAST with discount 1.
  reward_sum: float     # sum of rewards over all lane-steps.


def _to_numpy(timestep: base.TimeStep) -> base.TimeStep:
  """Copies every array of a TimeStep to numpy (works for JAX arrays)."""
  return base.TimeStep(
      step_type=np.array(timestep.step_type),
      reward=np.array(timestep.reward),
      discount=np.array(timestep.discount),
      observation=np.array(timestep.observation),
      extras={k: np.array(v) for k, v in timestep.extras.items()})


def check_observation_encoding(env: base.BatchedEnv,
                               observation: np.ndarray) -> None:
  """Asserts that `env.observation_encoding()` fits a batch [B, *shape].

  Independent of the networks' checks: plain numpy on the values.
  """
  encoding = env.observation_encoding()
  assert isinstance(encoding, ngu_types.ObservationEncoding), encoding
  shape = tuple(env.observation_spec().shape)
  # Raises for a symbolic encoding without one count per channel.
  encoded = encoding.encoded_shape(shape)
  assert len(encoded) in (1, 3), (encoding, shape, encoded)
  obs = np.asarray(observation)
  dtype = obs.dtype
  kind = encoding.kind
  if kind == "pixels":
    assert dtype == np.uint8 or np.issubdtype(dtype, np.floating), (
        f"pixels must be uint8 or float, got {dtype}")
  elif kind == "symbolic":
    assert np.issubdtype(dtype, np.integer), (
        f"symbolic codes must be integers, got {dtype}")
    codes = obs if obs.ndim - 1 in (1, 3) else obs[..., None]
    codes = codes.reshape(-1, codes.shape[-1]).astype(np.int64)
    high = np.asarray(encoding.num_values)
    assert codes.shape[-1] == high.size, (codes.shape, encoding)
    bad = (codes < 0) | (codes >= high)
    assert not bad.any(), (
        f"symbolic codes out of range: channel(s) "
        f"{np.flatnonzero(bad.any(axis=0)).tolist()} hold "
        f"{np.unique(codes[bad]).tolist()}, num_values {encoding.num_values}")
  else:
    assert (dtype == np.bool_ or np.issubdtype(dtype, np.integer)
            or np.issubdtype(dtype, np.floating)), (kind, dtype)
    if kind == "binary":
      assert np.isin(obs, (0, 1)).all(), (
          f"binary observations hold values {np.unique(obs)[:10].tolist()} "
          "other than 0 and 1")


def check_timestep_structure(env: base.BatchedEnv,
                             timestep: base.TimeStep) -> None:
  """Asserts shapes, dtypes and value ranges of one TimeStep against specs."""
  assert isinstance(timestep, base.TimeStep), type(timestep)
  b = env.num_envs
  obs_spec = env.observation_spec()
  step_type = np.asarray(timestep.step_type)
  assert step_type.shape == (b,), step_type.shape
  assert step_type.dtype == base.STEP_TYPE_DTYPE, step_type.dtype
  assert np.isin(step_type, (FIRST, MID, LAST)).all(), step_type
  for name in ("reward", "discount"):
    x = np.asarray(getattr(timestep, name))
    assert x.shape == (b,), (name, x.shape)
    assert x.dtype == np.float32, (name, x.dtype)
    assert np.isfinite(x).all(), (name, x)
  discount = np.asarray(timestep.discount)
  assert np.isin(discount, (0.0, 1.0)).all(), discount
  obs = np.asarray(timestep.observation)
  assert obs.shape == (b,) + tuple(obs_spec.shape), (obs.shape,
                                                     obs_spec.shape)
  assert obs.dtype == obs_spec.dtype, (obs.dtype, obs_spec.dtype)
  if np.issubdtype(obs.dtype, np.floating):
    assert np.isfinite(obs).all()
  if isinstance(obs_spec, base.BoundedArray):
    assert (obs >= obs_spec.minimum).all() and (
        obs <= obs_spec.maximum).all(), "observation outside its spec bounds"
  check_observation_encoding(env, obs)
  assert isinstance(timestep.extras, dict), type(timestep.extras)
  for key, value in timestep.extras.items():
    shape = np.shape(value)
    assert shape[:1] == (b,), (key, shape)
  np.testing.assert_array_equal(timestep.first(), step_type == FIRST)
  np.testing.assert_array_equal(timestep.mid(), step_type == MID)
  np.testing.assert_array_equal(timestep.last(), step_type == LAST)


def _assert_same(a: base.TimeStep, b: base.TimeStep, t: int) -> None:
  for name in ("step_type", "reward", "discount", "observation"):
    np.testing.assert_array_equal(
        getattr(a, name), getattr(b, name),
        err_msg=f"twin differs in {name} at step {t}")
  assert a.extras.keys() == b.extras.keys()
  for key in a.extras:
    np.testing.assert_array_equal(a.extras[key], b.extras[key],
                                  err_msg=f"twin differs in extras[{key}] at "
                                  f"step {t}")


def check_batched_env(env: base.BatchedEnv,
                      num_steps: int,
                      rng: np.random.Generator,
                      *,
                      twin: Optional[base.BatchedEnv] = None,
                      max_episode_steps: Optional[int] = None
                      ) -> ConformanceStats:
  """Runs `reset` and `num_steps` random steps, asserting base's semantics.

  Args:
    env: the environment under test (not yet reset, or reset: it is reset
      again here).
    num_steps: number of `step` calls.
    rng: numpy generator for the random actions.
    twin: optional second environment built exactly like `env` (same seed).
      It receives different actions on lanes whose previous step was LAST;
      all outputs must stay identical. Not for envpool async mode.
    max_episode_steps: optional time limit in agent steps: then no episode
      may run longer, and a lane that has taken that many steps in its
      episode must return LAST (catches limits counted in frames).

  Returns:
    `ConformanceStats`, e.g. to assert that some episodes ended.
  """
  assert isinstance(env, base.BatchedEnv)
  b = env.num_envs
  assert isinstance(b, int) and b >= 1, b
  action_spec = env.action_spec()
  assert isinstance(action_spec, base.DiscreteArray), action_spec
  assert isinstance(env.observation_spec(), base.Array)
  num_actions = action_spec.num_values

  ts = env.reset()
  check_timestep_structure(env, ts)
  ts = _to_numpy(ts)
  assert (ts.step_type == FIRST).all(), ts.step_type
  assert (ts.reward == 0).all() and (ts.discount == 1).all()
  if twin is not None:
    _assert_same(ts, _to_numpy(twin.reset()), 0)

  by_id = "env_id" in ts.extras
  ids = (np.asarray(ts.extras["env_id"]) if by_id
         else np.arange(b))
  size = int(max(ids.max() + 1, b)) if by_id else b
  seen = np.zeros(size, dtype=bool)
  ended = np.zeros(size, dtype=bool)  # Latest step of that lane was LAST.
  seen[ids] = True
  length = np.zeros(size, dtype=np.int64)  # Steps into the episode.
  stats = dict(num_first=0, num_last=0, num_terminated=0, num_truncated=0,
               reward_sum=0.0)
  prev_raw, prev_copy = None, None
  for t in range(1, num_steps + 1):
    actions = rng.integers(0, num_actions, size=b).astype(np.int32)
    raw = env.step(actions)
    check_timestep_structure(env, raw)
    ts = _to_numpy(raw)
    if twin is not None:
      after_last = ended[np.arange(b)]
      twin_actions = np.where(after_last, (actions + 1) % num_actions,
                              actions).astype(np.int32)
      if num_actions > 1:
        assert (twin_actions != actions).sum() == after_last.sum()
      _assert_same(ts, _to_numpy(twin.step(twin_actions)), t)
    if prev_raw is not None:  # The previous TimeStep must be unchanged.
      _assert_same(_to_numpy(prev_raw), prev_copy, t - 1)
    prev_raw, prev_copy = raw, ts

    ids = np.asarray(ts.extras["env_id"]) if by_id else np.arange(b)
    if by_id:
      size_needed = ids.max() + 1
      if size_needed > size:
        seen = np.concatenate([seen, np.zeros(size_needed - size, bool)])
        ended = np.concatenate([ended, np.zeros(size_needed - size, bool)])
        length = np.concatenate([length, np.zeros(size_needed - size, int)])
        size = size_needed
    first, mid, last = ts.first(), ts.mid(), ts.last()
    expected_first = ended[ids] | ~seen[ids]
    bad = np.flatnonzero(first != expected_first)
    assert bad.size == 0, (
        f"step {t}: lanes {bad.tolist()} have step_type "
        f"{ts.step_type[bad].tolist()}; FIRST must follow LAST (and only "
        "LAST)")
    assert (ts.reward[first] == 0).all(), f"step {t}: FIRST with reward != 0"
    assert (ts.discount[first] == 1).all(), f"step {t}: FIRST with discount"
    assert (ts.discount[mid] == 1).all(), f"step {t}: MID with discount != 1"
    seen[ids] = True
    ended[ids] = last
    length[ids] = np.where(first, 0, length[ids] + 1)
    if max_episode_steps is not None:
      over = np.flatnonzero((length[ids] >= max_episode_steps) & ~last)
      assert over.size == 0, (
          f"step {t}: lanes {over.tolist()} reached {max_episode_steps} "
          "steps without LAST")
    stats["num_first"] += int(first.sum())
    stats["num_last"] += int(last.sum())
    stats["num_terminated"] += int((last & (ts.discount == 0)).sum())
    stats["num_truncated"] += int((last & (ts.discount == 1)).sum())
    stats["reward_sum"] += float(ts.reward.sum())
  return ConformanceStats(num_steps=num_steps, **stats)


def check_rejects_bad_actions(env: base.BatchedEnv) -> None:
  """Asserts that bad actions raise ValueError naming the lane, env usable.

  Resets `env`, then tries: an out-of-range action in the last lane, a
  negative action in lane 0, a float array, a bool array, and wrong shapes.
  Finally one valid step must still succeed.
  """
  import pytest  # pylint: disable=g-import-not-at-top
  b = env.num_envs
  num_actions = env.action_spec().num_values
  env.reset()
  good = np.zeros(b, dtype=np.int32)

  bad = good.copy()
  bad[-1] = num_actions
  with pytest.raises(ValueError, match=rf"lane\(s\) \[{b - 1}\]"):
    env.step(bad)
  bad = good.copy()
  bad[0] = -1
  with pytest.raises(ValueError, match=r"lane\(s\) \[0\]"):
    env.step(bad)
  with pytest.raises(ValueError, match="integer dtype"):
    env.step(good.astype(np.float32))
  with pytest.raises(ValueError, match="integer dtype"):
    env.step(good.astype(bool))
  with pytest.raises(ValueError, match="shape"):
    env.step(np.zeros(b + 1, dtype=np.int32))
  with pytest.raises(ValueError, match="shape"):
    env.step(np.zeros((b, 1), dtype=np.int32))
  ts = env.step(good)
  check_timestep_structure(env, ts)
