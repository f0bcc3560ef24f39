"""Aggregate statistics over seeds: IQM with stratified bootstrap CIs.

Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the
Statistical Precipice" (NeurIPS), recommend reporting the interquartile mean
(IQM: the mean of the middle 50% of the runs) with a 95% stratified bootstrap
confidence interval rather than a mean +- std over a handful of seeds. This
module wraps their library, rliable (`pip install -e ".[results]"`), for one
task: scores are shaped [num_runs] and become rliable's [num_runs, 1].

IQM is rliable's `aggregate_iqm`, `scipy.stats.trim_mean(x, 0.25)`: with
`n` runs it drops `floor(n / 4)` runs at each end.

NOTE: rliable's stratified bootstraps draw their indices from numpy's global
RNG (`np.random.choice`); their `random_state` argument only reaches arch's
base class (and is deprecated there). The functions here seed the global RNG
with `seed` for the call and restore its previous state afterwards.
"""

import contextlib
import math
from typing import Iterator, Tuple

import numpy as np

INSTALL_HINT = ('rliable is not installed: pip install -e ".[results]" '
                '(or pip install "rliable>=1.2" "pandas<3").')


def require_rliable():
  """Imports rliable's library and metrics, or raises a helpful ImportError.

  Returns:
    The modules `(rliable.library, rliable.metrics)`.
  """
  try:
    from rliable import library  # pylint: disable=g-import-not-at-top
    from rliable import metrics  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(INSTALL_HINT) from e
  return library, metrics


def rliable_version() -> str:
  """The installed rliable version (raises ImportError when missing)."""
  require_rliable()
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  try:
    return metadata.version("rliable")
  except metadata.PackageNotFoundError:
    return "unknown"


@contextlib.contextmanager
def _seeded_global_rng(seed: int) -> Iterator[None]:
  """Seeds numpy's global RNG for the block, then restores its state."""
  state = np.random.get_state()
  np.random.seed(seed)
  try:
    yield
  finally:
    np.random.set_state(state)


def _finite(scores: np.ndarray) -> np.ndarray:
  """The finite entries of a rank-1 array of scores, as float64."""
  scores = np.asarray(scores, np.float64)
  if scores.ndim != 1:
    raise ValueError(f"scores must be shaped [num_runs], got {scores.shape}.")
  return scores[np.isfinite(scores)]


def _iqm_per_point(scores: np.ndarray) -> np.ndarray:
  """IQM over runs (and tasks) of [runs, tasks, points] -> [points]."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  flat = scores.reshape(-1, scores.shape[-1])
  return stats.trim_mean(flat, proportiontocut=0.25, axis=0)


def iqm_ci(scores: np.ndarray, reps: int = 2000, seed: int = 0,
           confidence: float = 0.95) -> Tuple[float, float, float]:
  """IQM of the runs' scores and its stratified bootstrap (percentile) CI.

  Agarwal et al. 2021, Sec. 4 (IQM) and Sec. 3.2 (stratified bootstrap).

  Args:
    scores: one score per run, shaped [num_runs]; NaNs are dropped.
    reps: bootstrap replications.
    seed: seeds the bootstrap (deterministic for a fixed seed).
    confidence: coverage of the interval.

  Returns:
    `(iqm, low, high)`. With no finite score: all NaN; with one: `(score,
    nan, nan)`.
  """
  finite = _finite(scores)
  if finite.size < 2:
    value = float(finite[0]) if finite.size else math.nan
    return value, math.nan, math.nan
  library, metrics = require_rliable()
  func = lambda x: np.array([metrics.aggregate_iqm(x)])
  with _seeded_global_rng(seed):
    points, intervals = library.get_interval_estimates(
        {"x": finite[:, None]}, func, reps=reps,
        confidence_interval_size=confidence)
  low, high = intervals["x"][:, 0]
  return float(points["x"][0]), float(low), float(high)


def iqm_curve(curves: np.ndarray, reps: int = 1000, seed: int = 0,
              confidence: float = 0.95
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """IQM over runs at each point of a curve, with pointwise bootstrap CIs.

  Points where every run is finite share one rliable bootstrap over a
  [runs, 1, points] array (runs are resampled independently per point, as in
  rliable's sample-efficiency curves); other points go through `iqm_ci` on
  their finite runs.

  Args:
    curves: shaped [num_runs, num_points].
    reps: bootstrap replications.
    seed: seeds the bootstrap.
    confidence: coverage of the intervals.

  Returns:
    `(iqm, low, high)`, each shaped [num_points]; NaN where `iqm_ci` gives NaN.
  """
  curves = np.asarray(curves, np.float64)
  if curves.ndim != 2:
    raise ValueError(f"curves must be [num_runs, num_points], got "
                     f"{curves.shape}.")
  out = np.full((3, curves.shape[1]), math.nan)
  full = np.isfinite(curves).all(axis=0)
  if full.any() and curves.shape[0] >= 2:
    library, _ = require_rliable()
    with _seeded_global_rng(seed):
      points, intervals = library.get_interval_estimates(
          {"x": curves[:, None, full]}, _iqm_per_point, reps=reps,
          confidence_interval_size=confidence)
    out[0, full] = points["x"]
    out[1:, full] = intervals["x"]
  else:
    full[:] = False
  for j in np.flatnonzero(~full):
    out[:, j] = iqm_ci(curves[:, j], reps=reps, seed=seed,
                       confidence=confidence)
  return out[0], out[1], out[2]


def probability_of_improvement(
    x: np.ndarray, y: np.ndarray, reps: int = 2000, seed: int = 0,
    confidence: float = 0.95) -> Tuple[float, float, float]:
  """P(X > Y): the chance a run of X scores higher than a run of Y.

  Agarwal et al. 2021, Sec. 4 (Mann-Whitney U statistic / (n_x n_y); ties
  count 1/2), with a CI from resampling the runs of X and Y independently.

  Args:
    x: one score per run of X, shaped [num_runs_x]; NaNs are dropped.
    y: the same for Y, shaped [num_runs_y].
    reps: bootstrap replications.
    seed: seeds the bootstrap.
    confidence: coverage of the interval.

  Returns:
    `(probability, low, high)`; all NaN when X or Y has fewer than 2 finite
    runs.
  """
  x, y = _finite(x), _finite(y)
  if x.size < 2 or y.size < 2:
    return math.nan, math.nan, math.nan
  library, metrics = require_rliable()
  func = lambda a, b: np.array([metrics.probability_of_improvement(a, b)])
  with _seeded_global_rng(seed):
    points, intervals = library.get_interval_estimates(
        {"p": [x[:, None], y[:, None]]}, func, reps=reps,
        confidence_interval_size=confidence)
  low, high = intervals["p"][:, 0]
  return float(points["p"][0]), float(low), float(high)
