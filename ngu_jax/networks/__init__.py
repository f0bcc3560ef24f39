"""ngu_jax.networks."""
