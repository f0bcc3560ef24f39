"""Tests for ngu_jax.envs."""
