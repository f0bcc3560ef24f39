"""Tests for ngu_jax.envs (issue 4)."""
