"""Intrinsic rewards: NGU's episodic memory and life-long (RND) modulator."""

from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.intrinsic.episodic import EpisodicMemoryConfig
from ngu_jax.intrinsic.episodic import EpisodicMemoryState
from ngu_jax.intrinsic.lifelong import ngu_intrinsic_reward
from ngu_jax.intrinsic.lifelong import RunningStats

__all__ = (
    "episodic",
    "lifelong",
    "EpisodicMemoryConfig",
    "EpisodicMemoryState",
    "ngu_intrinsic_reward",
    "RunningStats",
)
