"""ngu_jax.agents: complete agents assembled from the components."""

from ngu_jax.agents import ngu

__all__ = ("ngu",)
