"""Intrinsic rewards: NGU's episodic memory and RND modulator; RECODE memory."""

from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.intrinsic import recode
from ngu_jax.intrinsic.episodic import EpisodicMemoryConfig
from ngu_jax.intrinsic.episodic import EpisodicMemoryState
from ngu_jax.intrinsic.lifelong import ngu_intrinsic_reward
from ngu_jax.intrinsic.lifelong import RunningStats
from ngu_jax.intrinsic.recode import RecodeConfig
from ngu_jax.intrinsic.recode import RecodeState

__all__ = (
    "episodic",
    "lifelong",
    "recode",
    "EpisodicMemoryConfig",
    "EpisodicMemoryState",
    "ngu_intrinsic_reward",
    "RunningStats",
    "RecodeConfig",
    "RecodeState",
)
