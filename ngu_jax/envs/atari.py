"""Atari on envpool with the NGU preset (NGU App. F.4, Table 8).

Table 8 and docs/design.md#atari: 84x84 grayscale frames, 4 action
repeats with the max over frames 3 and 4, no frame stacking, 1-30 random
no-ops at the start of each episode, the full 18-action set, no sticky
actions, no end of episode (nor zero discount) on life loss, no reward
clipping, and episodes cut after 30 minutes of play = 108,000 frames =
27,000 agent steps. Every setting is a named argument of `make_atari`.

envpool facts this adapter relies on (envpool 1.2.5; checked in
tests/envs/test_atari.py):

* `max_episode_steps` counts *agent* steps (each `frame_skip` frames):
  envpool's `elapsed_step` is incremented once per `step`, and the episode
  is cut when it reaches `max_episode_steps`. 27,000 = 108,000 frames / 4.
* The number of no-ops at reset is uniform in [1, noop_max] (`use_fire_reset`
  replaces the last one by FIRE; the NGU preset switches that off, since
  Table 8 has no fire-on-reset). `noop_max` must therefore be >= 1.
* envpool's dm_env API sets discount 0 on a *truncated* step (it uses
  `1 - done`); this adapter uses the gymnasium API's `terminated` /
  `truncated` flags instead and returns discount 1 on truncation.
* envpool auto-resets: the step after a done one ignores the action, resets
  the lane and returns its first observation (reward 0, both flags false).
  This adapter marks that step FIRST, as `ngu_jax.envs.base` requires.
* envpool reports a game over on exactly the last allowed step as
  truncation; for Atari its `info["terminated"]` (the game-over flag)
  tells them apart, and such a step is returned as a termination
  (discount 0).

The generic envpool -> `BatchedEnv` conversion is
`ngu_jax.envs.envpool_adapter.EnvpoolEnv`.
"""

from typing import Any, Dict, Optional, Sequence

import envpool
import numpy as np

from ngu_jax.envs import base
from ngu_jax.envs import envpool_adapter
from ngu_jax.types import ObservationEncoding
from ngu_jax.types import PIXELS

# Table 8: 30 min of play at 60 frames/s = 108,000 frames = 27,000 agent
# steps with 4 action repeats.
NGU_MAX_EPISODE_STEPS = 27000


class AtariEnv(envpool_adapter.EnvpoolEnv):
  """Envpool Atari as a `BatchedEnv`; build it with `make_atari`.

  Observation: uint8 [B, img_size, img_size, stack_num] (grayscale) or
  [B, img_size, img_size, 3 * stack_num] (RGB), channel-last; envpool's
  [B, C, H, W] is transposed. With the NGU preset: [B, 84, 84, 1].
  Extras (all [B] int32): `lives` (ALE's life counter, not an episode end),
  `elapsed_step` (envpool's agent-step counter of the episode; 0 on FIRST),
  `env_id`.
  """

  def __init__(self, pool: Any, game: str):
    super().__init__(pool, where=f"AtariEnv({game})")
    self.game = game
    # The gymnasium space, not `pool.spec.observation_spec()`: envpool 1.2.5's
    # dm_env spec fails to build on numpy 1.26 (the Reverb stack).
    c, h, w = pool.observation_space.shape
    self._obs_shape = (h, w, c)

  def observation_spec(self) -> base.BoundedArray:
    return base.BoundedArray(self._obs_shape, np.uint8, minimum=0,
                             maximum=255, name="observation")

  def observation_encoding(self) -> ObservationEncoding:
    """Pixels: uint8 frames, scaled by 1/255 in the networks (NGU App. H)."""
    return PIXELS

  def _observation(self, obs) -> np.ndarray:
    if obs.shape[1] == 1:  # [B, 1, H, W] -> [B, H, W, 1]: no copy.
      return obs.reshape(obs.shape[0], *self._obs_shape)
    return np.ascontiguousarray(np.moveaxis(obs, 1, -1))

  def _extras(self, obs, info) -> Dict[str, np.ndarray]:
    return {"lives": info["lives"], "elapsed_step": info["elapsed_step"]}

  def _terminated(self, terminated, truncated, reward, info) -> np.ndarray:
    del reward
    # A game over on exactly the last allowed step is a termination.
    return terminated | (truncated & (info["terminated"] != 0))


def atari_games() -> Sequence[str]:
  """Games envpool ships ROMs for, e.g. "MontezumaRevenge", "Pong"."""
  specs = envpool.registration.registry.specs
  return sorted(task_id[:-len("-v5")] for task_id, entry in specs.items()
                if entry[0] == "envpool.atari" and task_id.endswith("-v5"))


def make_atari(
    game: str,
    num_envs: int,
    seed: int = 0,
    *,
    img_size: int = 84,
    gray_scale: bool = True,
    frame_skip: int = 4,
    stack_num: int = 1,
    noop_max: int = 30,
    full_action_space: bool = True,
    repeat_action_probability: float = 0.0,
    episodic_life: bool = False,
    zero_discount_on_life_loss: bool = False,
    reward_clip: bool = False,
    max_episode_steps: int = NGU_MAX_EPISODE_STEPS,
    use_fire_reset: bool = False,
    use_inter_area_resize: bool = True,
    batch_size: Optional[int] = None,
    num_threads: int = 0,
    thread_affinity_offset: int = -1,
) -> AtariEnv:
  """Builds B lanes of an Atari game with the NGU preset (Table 8).

  Args:
    game: envpool game name, e.g. "MontezumaRevenge" or "Pong" (an
      envpool id such as "Pong-v5" is accepted too).
    num_envs: number of envpool envs.
    seed: env i is seeded with `seed + i` (envpool's convention).
    img_size: frames are resized to img_size x img_size (Table 8 / DQN: 84).
    gray_scale: grayscale frames (Table 8: grayscaled) rather than RGB.
    frame_skip: action repeats per agent step (Table 8: 4); the observation
      is the max over the last two frames (Table 8: frames 3 and 4).
    stack_num: frames stacked in the observation (Table 8: 1).
    noop_max: each episode starts with a uniform number in [1, noop_max] of
      no-op frames (Table 8: 30). Must be >= 1.
    full_action_space: all 18 ALE actions (Table 8: full action set)
      rather than the game's minimal set.
    repeat_action_probability: sticky-action probability (Table 8: no
      sticky actions, 0).
    episodic_life: end an episode at every life loss (Table 8: false).
    zero_discount_on_life_loss: discount 0 at a life loss (Table 8: false).
    reward_clip: clip rewards to [-1, 1] (NGU: no clipping; rewards are
      squashed by the value-function transform h instead, App. E).
    max_episode_steps: episode length cap in *agent* steps (Table 8: 30 min
      = 108,000 frames = 27,000 agent steps); a cut episode ends LAST with
      discount 1.
    use_fire_reset: press FIRE after the no-ops at reset, for games with a
      FIRE action (envpool's default is True; Table 8 has no such step).
    use_inter_area_resize: envpool's INTER_AREA resize (its default) rather
      than bilinear.
    batch_size: envpool async mode when smaller than `num_envs`: each step
      returns the first `batch_size` envs to finish (see `EnvpoolEnv`).
      None (default): sync mode, batch_size = num_envs.
    num_threads: envpool worker threads (0: envpool chooses).
    thread_affinity_offset: envpool thread pinning (-1: no pinning).

  Returns:
    An `AtariEnv` with observation uint8 [B, img_size, img_size, C] and
    `action_spec().num_values` actions (18 with the full action set).

  Raises:
    ValueError: unknown game or invalid setting.
  """
  where = "make_atari"
  games = atari_games()
  name = game[:-len("-v5")] if game.endswith("-v5") else game
  if name not in games:
    raise ValueError(
        f"{where}: unknown Atari game {game!r}; envpool has {len(games)} "
        f"games, e.g. {', '.join(games[:5])}, MontezumaRevenge, Pong, "
        f"PrivateEye, Pitfall, Venture.")
  num_envs, batch_size = envpool_adapter.check_pool_sizes(num_envs,
                                                         batch_size, where)
  for value, arg in ((img_size, "img_size"), (frame_skip, "frame_skip"),
                     (stack_num, "stack_num"), (noop_max, "noop_max"),
                     (max_episode_steps, "max_episode_steps")):
    base.check_positive_int(value, arg, where)
  if not 0.0 <= repeat_action_probability <= 1.0:
    raise ValueError(f"{where}: `repeat_action_probability` must be in "
                     f"[0, 1], got {repeat_action_probability}.")
  pool = envpool.make(
      f"{name}-v5",
      env_type="gymnasium",
      num_envs=num_envs,
      batch_size=batch_size,
      seed=int(seed),
      num_threads=int(num_threads),
      thread_affinity_offset=int(thread_affinity_offset),
      img_height=img_size,
      img_width=img_size,
      gray_scale=bool(gray_scale),
      frame_skip=frame_skip,
      stack_num=stack_num,
      noop_max=noop_max,
      full_action_space=bool(full_action_space),
      repeat_action_probability=float(repeat_action_probability),
      episodic_life=bool(episodic_life),
      zero_discount_on_life_loss=bool(zero_discount_on_life_loss),
      reward_clip=bool(reward_clip),
      max_episode_steps=max_episode_steps,
      use_fire_reset=bool(use_fire_reset),
      use_inter_area_resize=bool(use_inter_area_resize),
  )
  return AtariEnv(pool, name)
