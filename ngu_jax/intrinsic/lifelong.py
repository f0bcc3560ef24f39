"""NGU's life-long novelty modulator and the combined intrinsic reward.

The RND error err(x_t) = ||g_hat(x_t) - g(x_t)||^2 (NGU Sec. 2, "Integrating
life-long curiosity") is normalised by running statistics of the errors:

  alpha_t = 1 + (err(x_t) - mu_e) / sigma_e,

and modulates the episodic reward multiplicatively (NGU eq. 1):

  r^i_t = r^episodic_t * min(max(alpha_t, 1), L),   L = 5 (Table 6).

Running statistics. The RND error is non-stationary: the predictor learns,
and the observation normaliser in front of both RND networks moves (its
statistics come from the learner). The paper's "running mean and standard
deviation" therefore track recent errors by default: with `horizon` H > 0
the statistics are the exact mean / variance of all errors while fewer than
H have been seen, then an exponential moving average in which a batch of n
errors has weight n / (H + n) (the count that weighs the past saturates at
H; `update_stats`). `horizon=0` keeps the mean / variance of all errors
ever seen. Errors that must not count (e.g. computed before the RND
observation normaliser was initialised, when they are on another scale:
measured 280 against 5-8 afterwards) are excluded with `valid`; they get
alpha = 1 (and RND-only reward 0).

`init` / `modulator` are an optax-style pair of pure functions over explicit
state; the caller jits (`horizon` is a Python int, static).
"""

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks


class RunningStats(NamedTuple):
  """Running mean and variance of RND errors (a pytree of scalars).

  Attributes:
    mean: [] float32 mean mu_e of the errors (see `update_stats`).
    var: [] float32 population variance sigma_e^2 of the errors.
    count: [] float32 number of errors folded in so far (all of them, also
      beyond the horizon).
  """
  mean: jax.Array
  var: jax.Array
  count: jax.Array


def init() -> RunningStats:
  """Statistics of no errors at all (count 0).

  Each field is its own buffer, so the state can be donated under jit.
  """
  return RunningStats(mean=jnp.zeros((), jnp.float32),
                      var=jnp.zeros((), jnp.float32),
                      count=jnp.zeros((), jnp.float32))


def _check_horizon(horizon, where: str) -> int:
  if (isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer))
      or horizon < 0):
    raise ValueError(f"{where}: `horizon` must be an int >= 0 (0: all errors "
                     f"ever seen), got {horizon!r}.")
  return int(horizon)


def update_stats(stats: RunningStats, values: jax.Array,
                 weights: Optional[jax.Array] = None,
                 horizon: int = 0) -> RunningStats:
  """Folds a batch into the running mean/variance (parallel Welford).

  Uses the pairwise combination of Chan et al. (1979): the batch's own mean
  m_b and sum of squared deviations M_b (n_b values) are merged with the
  running ones (mean m_a, variance v_a, weight n_a):

    n = n_a + n_b,  delta = m_b - m_a,  mean = m_a + delta n_b / n,
    var = (v_a n_a + M_b + delta^2 n_a n_b / n) / n,

  which is stable for long runs (no sum of squares is accumulated). With
  n_a = `stats.count` this is the exact mean / variance of every value seen.
  With `horizon` H > 0, n_a = min(count, H): exact until H values have been
  seen, then an exponential moving average giving a batch of n_b values the
  weight n_b / (H + n_b) (the merge above is then the weighted one, shift
  term included).

  Args:
    stats: the statistics so far.
    values: float array shaped [B] (any B >= 1).
    weights: optional [B] 0/1 (or bool) weights; values with weight 0 do not
      count. If all are 0 the statistics are returned unchanged.
    horizon: H >= 0 (static); 0 weighs every value ever seen equally.

  Returns:
    The updated statistics.
  """
  horizon = _check_horizon(horizon, "lifelong.update_stats")
  values = jnp.asarray(values, jnp.float32)
  if weights is None:
    w = jnp.ones_like(values)
  else:
    w = jnp.broadcast_to(jnp.asarray(weights, jnp.float32), values.shape)
  n_b = jnp.sum(w)
  safe_n_b = jnp.maximum(n_b, 1.0)
  mean_b = jnp.sum(w * values) / safe_n_b
  m2_b = jnp.sum(w * jnp.square(values - mean_b))
  n_a = stats.count if horizon == 0 else jnp.minimum(stats.count,
                                                     float(horizon))
  n = n_a + n_b
  safe_n = jnp.maximum(n, 1.0)
  delta = mean_b - stats.mean
  mean = stats.mean + delta * (n_b / safe_n)
  m2 = stats.var * n_a + m2_b + jnp.square(delta) * (n_a * n_b / safe_n)
  keep = n_b <= 0
  return RunningStats(mean=jnp.where(keep, stats.mean, mean),
                      var=jnp.where(keep, stats.var, m2 / safe_n),
                      count=stats.count + n_b)


def _fold(stats: RunningStats, errors: jax.Array, valid, horizon: int,
          where: str):
  """Checks [B] errors, folds the valid ones into `stats`.

  Returns:
    (errors, valid [B] bool, stats, std, safe_std).
  """
  _checks.check_rank(errors, 1, "errors", where)
  if errors.shape[0] == 0:
    raise ValueError(f"{where}: `errors` is empty.")
  _checks.check_floating(errors, "errors", where)
  errors = jnp.asarray(errors, jnp.float32)
  if valid is None:
    valid = jnp.ones(errors.shape, bool)
  else:
    valid = jnp.asarray(valid)
    if valid.dtype != jnp.bool_:
      raise ValueError(f"{where}: `valid` must be bool, got dtype "
                       f"{valid.dtype}.")
    if valid.ndim not in (0, 1) or (valid.ndim == 1
                                    and valid.shape != errors.shape):
      raise ValueError(f"{where}: `valid` must be a scalar or shaped "
                       f"{errors.shape}, got {valid.shape}.")
    valid = jnp.broadcast_to(valid, errors.shape)
  # Invalid errors may be anything (even NaN): they are never used.
  _checks.check_finite(jnp.where(valid, errors, 0.0), "errors", where)
  errors = jnp.where(valid, errors, 0.0)
  stats = update_stats(stats, errors, valid, horizon)
  std = jnp.sqrt(stats.var)
  return errors, valid, stats, std, jnp.where(std > 0, std, 1.0)


def modulator(stats: RunningStats, errors: jax.Array, *,
              horizon: int = 0,
              valid: Optional[jax.Array] = None
              ) -> Tuple[jax.Array, RunningStats]:
  """Life-long curiosity modulator alpha_t for a batch of RND errors.

  NGU Sec. 2: alpha_t = 1 + (err(x_t) - mu_e) / sigma_e, with mu_e and
  sigma_e running statistics of the errors (module docstring). The valid
  errors of the batch are folded into the statistics first, then normalised
  with them. While sigma_e = 0 (e.g. the first call with identical errors)
  alpha = 1; invalid errors get alpha = 1 and leave the statistics as they
  are.

  Args:
    stats: running statistics from `init` or a previous call.
    errors: RND errors err(x_t) shaped [B], finite and >= 0 where valid.
    horizon: H of `update_stats` (static); 0 = all errors ever seen.
    valid: optional bool, scalar or [B]: which errors count (default all).

  Returns:
    (alpha, new_stats): alpha shaped [B] float32 and the updated statistics.
  """
  z, stats = _standardize(stats, errors, horizon, valid, "lifelong.modulator")
  return 1.0 + z, stats


def standardize(stats: RunningStats, values: jax.Array, *,
                horizon: int = 0,
                valid: Optional[jax.Array] = None
                ) -> Tuple[jax.Array, RunningStats]:
  """(values - running mean) / running std, the batch folded in first.

  The z-score inside NGU's modulator (`modulator` is 1 + this, Sec. 2),
  for any bonus: a reward standardised this way has running mean 0, so it
  does not pay an agent for staying in an episode (an always-positive
  bonus, e.g. `rnd_reward`, does: `examples/ppo_ngu.py`). While the std is
  0, and for invalid values, the result is 0.

  Args:
    stats: running statistics from `init` or a previous call.
    values: finite floats shaped [B].
    horizon: H of `update_stats` (static); 0 = all values ever seen.
    valid: optional bool, scalar or [B]: which values count (default all).

  Returns:
    ((values - mean) / std [B] float32, new_stats).
  """
  return _standardize(stats, values, horizon, valid, "lifelong.standardize")


def _standardize(stats, values, horizon, valid, where):
  horizon = _check_horizon(horizon, where)
  values, valid, stats, std, safe_std = _fold(stats, values, valid, horizon,
                                              where)
  return jnp.where(valid & (std > 0), (values - stats.mean) / safe_std,
                   0.0), stats


def rnd_reward(stats: RunningStats, errors: jax.Array, *,
               horizon: int = 0,
               valid: Optional[jax.Array] = None
               ) -> Tuple[jax.Array, RunningStats]:
  """RND-only intrinsic reward err(x_t) / sigma_e (the baseline of Fig. 2).

  NGU Sec. 4.1 compares against "a baseline RND implementation" without
  giving its reward; we use the RND error (Burda et al., 2019) divided by
  the running standard deviation of the errors (the same statistics as
  `modulator`, the batch folded in first), so its scale does not drift as
  the predictor learns. While sigma_e = 0, and for invalid errors, the
  reward is 0.

  Args:
    stats: running statistics from `init` or a previous call.
    errors: RND errors err(x_t) shaped [B], finite and >= 0 where valid.
    horizon: H of `update_stats` (static); 0 = all errors ever seen.
    valid: optional bool, scalar or [B]: which errors count (default all).

  Returns:
    (reward [B] float32, new_stats).
  """
  return _divide(stats, errors, horizon, valid, "lifelong.rnd_reward")


def divide_by_running_std(stats: RunningStats, values: jax.Array, *,
                          horizon: int = 0,
                          valid: Optional[jax.Array] = None
                          ) -> Tuple[jax.Array, RunningStats]:
  """values / running std of all values seen, the batch folded in first.

  The normalisation RECODE applies to its reward (003 Sec. 3, "a running
  estimate of its standard-deviation as in Burda et al. (2019)"), over all
  lanes of an actor; the same arithmetic as `rnd_reward`. While the std is
  0, and for invalid values, the result is 0.

  Args:
    stats: running statistics from `init` or a previous call.
    values: finite floats shaped [B].
    horizon: H of `update_stats` (static); 0 = all values ever seen.
    valid: optional bool, scalar or [B]: which values count (default all).

  Returns:
    (values / std [B] float32, new_stats).
  """
  return _divide(stats, values, horizon, valid,
                 "lifelong.divide_by_running_std")


def _divide(stats, values, horizon, valid, where):
  horizon = _check_horizon(horizon, where)
  values, valid, stats, std, safe_std = _fold(stats, values, valid, horizon,
                                              where)
  return jnp.where(valid & (std > 0), values / safe_std, 0.0), stats


def ngu_intrinsic_reward(r_episodic: jax.Array, alpha: jax.Array,
                         max_scale: float = 5.0) -> jax.Array:
  """NGU's intrinsic reward r^i = r^episodic * min(max(alpha, 1), L) (eq. 1).

  Args:
    r_episodic: episodic rewards shaped [B] (from `episodic.step`).
    alpha: life-long modulators shaped [B] (from `modulator`).
    max_scale: L, the clipping factor (Table 6: 5).

  Returns:
    r^i shaped [B] float32.
  """
  where = "lifelong.ngu_intrinsic_reward"
  if not max_scale >= 1.0:
    raise ValueError(f"{where}: `max_scale` must be >= 1, got {max_scale!r}.")
  if jnp.shape(r_episodic) != jnp.shape(alpha):
    raise ValueError(f"{where}: `r_episodic` and `alpha` must have the same "
                     f"shape, got {jnp.shape(r_episodic)} and "
                     f"{jnp.shape(alpha)}.")
  return (jnp.asarray(r_episodic, jnp.float32)
          * jnp.clip(jnp.asarray(alpha, jnp.float32), 1.0, max_scale))
