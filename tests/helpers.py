"""Helpers shared by the test modules."""

import jax
import numpy as np


def random_params(shapes, seed=0, bias_fan_in=10):
  """Random normal parameters with the given shapes, scaled by 1/sqrt(fan-in).

  Haiku's initialisers compile slowly on CPU, so tests that do not test
  `init` itself take the shapes from `jax.eval_shape(init)` and fill them
  here. Biases (rank-1 leaves) are non-zero too, so that every input matters
  from the start (Haiku initialises biases to 0).

  Args:
    shapes: a pytree of `jax.ShapeDtypeStruct` (or arrays).
    seed: numpy seed.
    bias_fan_in: the scale 1/sqrt(bias_fan_in) of rank-1 leaves.

  Returns:
    A pytree of float32 numpy arrays with the same structure.
  """
  rng = np.random.default_rng(seed)

  def sample(s):
    fan_in = int(np.prod(s.shape[:-1])) if len(s.shape) > 1 else bias_fan_in
    return (rng.normal(size=s.shape) / np.sqrt(fan_in)).astype(np.float32)

  return jax.tree_util.tree_map(sample, shapes)


def assert_trees_equal(got, expected):
  """Same tree structure (None leaves included) and equal arrays."""
  got_leaves, got_tree = jax.tree_util.tree_flatten(got)
  want_leaves, want_tree = jax.tree_util.tree_flatten(expected)
  assert got_tree == want_tree, (got_tree, want_tree)
  for a, b in zip(got_leaves, want_leaves):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
