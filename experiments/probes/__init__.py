"""Probes: measurements of trained runs and of the components in isolation."""

import math
from typing import Any

import numpy as np


def json_safe(x: Any) -> Any:
  """`x` with numpy arrays and scalars as lists and floats, dict keys as
  strings, and NaN / inf as None (JSON has neither)."""
  if isinstance(x, dict):
    return {str(k): json_safe(v) for k, v in x.items()}
  if isinstance(x, (list, tuple, np.ndarray)):
    return [json_safe(v) for v in x]
  if isinstance(x, np.generic):
    x = x.item()
  if isinstance(x, float) and not math.isfinite(x):
    return None
  return x
