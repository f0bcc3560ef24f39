"""Generic adapter from an envpool pool (gymnasium API) to `BatchedEnv`.

envpool's own auto-reset and discount conventions differ from
`ngu_jax.envs.base`'s; `EnvpoolEnv` converts them (envpool 1.2.5, checked in
tests/envs/test_atari.py and test_minigrid.py):

* envpool auto-resets: the step after a done one ignores the action, resets
  the lane and returns its first observation (reward 0, both flags false).
  This adapter marks that step FIRST.
* envpool's dm_env API sets discount 0 on a *truncated* step (`1 - done`);
  this adapter reads the gymnasium API's `terminated` / `truncated` flags and
  returns discount 0 on termination, 1 on truncation.

`ngu_jax.envs.atari` and `ngu_jax.envs.minigrid` subclass it.
"""

from typing import Any, Dict, Tuple

import numpy as np

from ngu_jax.envs import base


def check_pool_sizes(num_envs, batch_size, where: str) -> Tuple[int, int]:
  """Validates envpool's pool size and async batch size (None: sync mode).

  Returns:
    (num_envs, batch_size) as ints; batch_size = num_envs in sync mode.
  """
  num_envs = base.check_positive_int(num_envs, "num_envs", where)
  if batch_size is None:
    batch_size = num_envs
  batch_size = base.check_positive_int(batch_size, "batch_size", where)
  if batch_size > num_envs:
    raise ValueError(f"{where}: `batch_size` ({batch_size}) must be <= "
                     f"`num_envs` ({num_envs}).")
  return num_envs, batch_size


class EnvpoolEnv(base.BatchedEnv):
  """Adapts an envpool pool (gymnasium API) to `base.BatchedEnv`.

  Sync mode (`batch_size == num_envs`): row b of every `TimeStep` is
  envpool env b.

  Async mode (`batch_size < num_envs`): each `step` returns the `batch_size`
  envs that finished first; `num_envs` (the rows B of a `TimeStep`) is then
  `batch_size`, `pool_size` is envpool's `num_envs`, and `extras["env_id"]`
  names the env of every row. `step(actions)` applies `actions[b]` to the
  env of row b of the previous `TimeStep`. The auto-reset semantics of
  `base` hold per env id, so per-lane agent state (LSTM carry, episodic
  memory) must be indexed by `extras["env_id"]`.

  Extras (all [B]): `env_id` (int32) plus what `_extras` adds.
  """

  def __init__(self, pool: Any, where: str):
    self._pool = pool
    self._where = where
    self._where_step = f"{where}.step"
    config = pool.config
    self._pool_size = int(config["num_envs"])
    self._batch = int(config["batch_size"])
    self._async = self._batch != self._pool_size
    spec = pool.spec.action_spec()
    self._num_actions = int(spec.num_values)
    # _ended[e]: env e returned LAST on its latest step.
    self._ended = np.zeros(self._pool_size, dtype=bool)
    self._env_ids = np.arange(self._batch, dtype=np.int32)
    self._all_mid = np.full(self._batch, base.StepType.MID,
                            dtype=base.STEP_TYPE_DTYPE)
    self._all_ones = np.ones(self._batch, dtype=np.float32)
    self._needs_reset = True
    self._closed = False

  @property
  def num_envs(self) -> int:
    """Rows B of each `TimeStep` (envpool's `batch_size`)."""
    return self._batch

  @property
  def pool_size(self) -> int:
    """Number of envpool envs (`num_envs` of the pool; > B in async mode)."""
    return self._pool_size

  @property
  def is_async(self) -> bool:
    return self._async

  @property
  def pool(self) -> Any:
    """The underlying envpool object (e.g. to benchmark it raw).

    Stepping it directly bypasses this adapter's bookkeeping: call
    `reset()` on the adapter before using the adapter again.
    """
    return self._pool

  @property
  def envpool_config(self) -> Dict[str, Any]:
    """The resulting envpool configuration (a copy)."""
    return dict(self._pool.config)

  def action_spec(self) -> base.DiscreteArray:
    return base.DiscreteArray(self._num_actions, dtype=np.int32,
                              name="action")

  # Hooks for subclasses.
  def _observation(self, obs) -> np.ndarray:
    return obs

  def _extras(self, obs, info) -> Dict[str, np.ndarray]:
    del obs, info
    return {}

  def _terminated(self, terminated, truncated, reward, info) -> np.ndarray:
    """Lanes whose episode really ended (discount 0), bool [B]."""
    del truncated, reward, info
    return terminated

  def _timestep(self, obs, reward, terminated, truncated, info,
                first: np.ndarray) -> base.TimeStep:
    """Converts envpool's step of B lanes; `first`: lanes that auto-reset."""
    env_ids = info["env_id"]
    reward = np.asarray(reward, dtype=np.float32)
    step_type = self._all_mid.copy()
    discount = self._all_ones.copy()
    done = terminated | truncated
    # Most steps are MID in every lane: skip the bookkeeping then.
    if np.count_nonzero(done) or np.count_nonzero(first):
      not_first = ~first
      last = done & not_first
      terminated = self._terminated(terminated, truncated, reward,
                                    info) & not_first
      step_type[last] = base.StepType.LAST
      step_type[first] = base.StepType.FIRST
      discount[terminated] = 0.0
      reward = np.where(first, np.float32(0), reward)
    else:
      last = done  # All False.
    if self._async:
      self._ended[env_ids] = last
      self._env_ids = env_ids
    else:
      self._ended = last
    extras = self._extras(obs, info)
    extras["env_id"] = env_ids
    return base.TimeStep(step_type=step_type, reward=reward,
                         discount=discount,
                         observation=self._observation(obs), extras=extras)

  def reset(self) -> base.TimeStep:
    """Resets every envpool env; returns B lanes, all FIRST.

    In async mode the other `pool_size - B` envs return their FIRST step
    from later `step` calls.
    """
    self._check_open("reset")
    if self._async:
      if not self._needs_reset:
        raise ValueError(
            f"{self._where}.reset: in async mode envpool cannot reset envs "
            "that are still running; close this environment and build a new "
            "one.")
      self._pool.async_reset()
      obs, info = self._recv_reset()
    else:
      obs, info = self._pool.reset()
    b = self._batch
    self._needs_reset = False
    # Envs not in this batch (async mode) return their first step later:
    # marking them ended makes that step FIRST.
    self._ended = np.ones(self._pool_size, dtype=bool)
    return self._timestep(obs, np.zeros(b, np.float32), np.zeros(b, bool),
                          np.zeros(b, bool), info, np.ones(b, bool))

  def _recv_reset(self) -> Tuple[Any, Dict[str, Any]]:
    obs, _, _, _, info = self._pool.recv()
    return obs, info

  def step(self, actions) -> base.TimeStep:
    if self._needs_reset or self._closed:
      self._check_open("step")
      raise ValueError(
          f"{self._where}.step: call reset() before the first step().")
    actions = base.validate_actions(actions, self._batch, self._num_actions,
                                    self._where_step)
    if self._async:
      self._pool.send(actions, self._env_ids)
      obs, reward, terminated, truncated, info = self._pool.recv()
    else:
      obs, reward, terminated, truncated, info = self._pool.step(actions)
    first = self._ended[info["env_id"]] if self._async else self._ended
    return self._timestep(obs, reward, terminated, truncated, info, first)

  def _check_open(self, method: str) -> None:
    if self._closed:
      raise ValueError(f"{self._where}.{method}: the environment is closed.")

  def close(self) -> None:
    if not self._closed:
      self._closed = True
      close = getattr(self._pool, "close", None)
      if close is not None:
        close()
