"""Tests for ngu_jax.types: ObservationEncoding."""

import numpy as np
import pytest

from ngu_jax import types as ngu_types
from ngu_jax.types import ObservationEncoding


def test_defaults_and_constants():
  assert ObservationEncoding() == ngu_types.PIXELS
  assert ngu_types.PIXELS.kind == "pixels"
  assert ngu_types.BINARY.kind == "binary"
  assert ngu_types.FEATURES.kind == "features"
  minigrid = ngu_types.symbolic([11, 6, 3])
  assert minigrid == ObservationEncoding("symbolic", (11, 6, 3))
  assert minigrid.num_values == (11, 6, 3)  # Lists become tuples.
  # Frozen and hashable (networks holding it are cache keys of jit).
  assert hash(minigrid) == hash(ngu_types.symbolic(np.array([11, 6, 3])))
  with pytest.raises(AttributeError):
    minigrid.kind = "pixels"


@pytest.mark.parametrize("encoding, shape, expected", [
    (ngu_types.PIXELS, (84, 84, 1), (84, 84, 1)),
    (ngu_types.PIXELS, (10, 10), (10, 10)),  # Pixels are never reshaped.
    (ngu_types.BINARY, (10, 10), (10, 10, 1)),
    (ngu_types.BINARY, (10, 10, 4), (10, 10, 4)),
    (ngu_types.FEATURES, (4,), (4,)),
    (ngu_types.FEATURES, (), (1,)),
    (ngu_types.symbolic((11, 6, 3)), (7, 7, 3), (7, 7, 20)),
    (ngu_types.symbolic((16,)), (), (16,)),
    (ngu_types.symbolic((5,)), (8, 8), (8, 8, 5)),
    (ngu_types.symbolic((2, 3)), (2,), (5,)),
])
def test_encoded_shape(encoding, shape, expected):
  assert encoding.encoded_shape(shape) == expected


def test_symbolic_needs_one_count_per_channel():
  with pytest.raises(ValueError, match=r"one `num_values` entry per channel.*"
                     r"has 3 channel\(s\), num_values \(11, 6\) has 2"):
    ngu_types.symbolic((11, 6)).encoded_shape((7, 7, 3))


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="rgb"), "unknown kind 'rgb'"),
    (dict(kind="symbolic"), "needs `num_values`"),
    (dict(kind="symbolic", num_values=(4, 0)), "each >= 1"),
    (dict(kind="symbolic", num_values=5), "sequence of ints"),
    (dict(kind="symbolic", num_values=(2.5,)), "sequence of ints"),
    (dict(kind="symbolic", num_values=(True,)), "sequence of ints"),
    (dict(kind="binary", num_values=(2,)), "only for kind 'symbolic'"),
])
def test_rejects_bad_encodings(kwargs, match):
  with pytest.raises(ValueError, match=match):
    ObservationEncoding(**kwargs)
