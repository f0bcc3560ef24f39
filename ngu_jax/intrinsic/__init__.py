"""ngu_jax.intrinsic."""
