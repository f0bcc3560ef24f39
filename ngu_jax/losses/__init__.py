"""ngu_jax.losses."""
