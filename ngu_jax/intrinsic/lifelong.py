"""NGU's life-long novelty modulator and the combined intrinsic reward.

The RND error err(x_t) = ||g_hat(x_t) - g(x_t)||^2 (NGU Sec. 2, "Integrating
life-long curiosity") is normalised by running statistics over every error
ever seen:

  alpha_t = 1 + (err(x_t) - mu_e) / sigma_e,

and modulates the episodic reward multiplicatively (NGU eq. 1):

  r^i_t = r^episodic_t * min(max(alpha_t, 1), L),   L = 5 (Table 6).

`init` / `modulator` are an optax-style pair of pure functions over explicit
state; the caller jits.
"""

from typing import NamedTuple, Tuple

import jax
import jax.numpy as jnp

from ngu_jax import _checks


class RunningStats(NamedTuple):
  """Running mean and variance of RND errors (a pytree of scalars).

  Attributes:
    mean: [] float32 mean mu_e of all errors seen.
    var: [] float32 population variance sigma_e^2 of all errors seen.
    count: [] float32 number of errors seen.
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


def update_stats(stats: RunningStats, values: jax.Array) -> RunningStats:
  """Folds a batch into the running mean/variance (parallel Welford).

  Uses the pairwise combination of Chan et al. (1979): the batch's own mean
  and sum of squared deviations are merged with the running ones, which is
  stable for long runs (no sum of squares is accumulated).

  Args:
    stats: the statistics so far.
    values: float array shaped [B] (any B >= 1).

  Returns:
    The statistics of all values seen, this batch included.
  """
  values = jnp.asarray(values, jnp.float32)
  n_b = jnp.asarray(values.shape[0], jnp.float32)
  mean_b = jnp.mean(values)
  m2_b = jnp.sum(jnp.square(values - mean_b))
  n_a = stats.count
  n = n_a + n_b
  delta = mean_b - stats.mean
  mean = stats.mean + delta * (n_b / n)
  m2 = stats.var * n_a + m2_b + jnp.square(delta) * (n_a * n_b / n)
  return RunningStats(mean=mean, var=m2 / n, count=n)


def _fold(stats: RunningStats, errors: jax.Array, where: str):
  """Checks [B] errors, folds them into `stats`; (errors, stats, std, safe)."""
  _checks.check_rank(errors, 1, "errors", where)
  if errors.shape[0] == 0:
    raise ValueError(f"{where}: `errors` is empty.")
  _checks.check_floating(errors, "errors", where)
  _checks.check_finite(errors, "errors", where)
  errors = jnp.asarray(errors, jnp.float32)
  stats = update_stats(stats, errors)
  std = jnp.sqrt(stats.var)
  return errors, stats, std, jnp.where(std > 0, std, 1.0)


def modulator(stats: RunningStats,
              errors: jax.Array) -> Tuple[jax.Array, RunningStats]:
  """Life-long curiosity modulator alpha_t for a batch of RND errors.

  NGU Sec. 2: alpha_t = 1 + (err(x_t) - mu_e) / sigma_e, with mu_e and
  sigma_e the running mean and standard deviation of all errors ever seen.
  The batch is folded into the statistics first, then normalised with them.
  While sigma_e = 0 (the first call with identical errors) alpha = 1.

  Args:
    stats: running statistics from `init` or a previous call.
    errors: RND errors err(x_t) shaped [B], finite and >= 0.

  Returns:
    (alpha, new_stats): alpha shaped [B] float32 and the updated statistics.
  """
  errors, stats, std, safe_std = _fold(stats, errors, "lifelong.modulator")
  z = jnp.where(std > 0, (errors - stats.mean) / safe_std, 0.0)
  return 1.0 + z, stats


def rnd_reward(stats: RunningStats,
               errors: jax.Array) -> Tuple[jax.Array, RunningStats]:
  """RND-only intrinsic reward err(x_t) / sigma_e (the baseline of Fig. 2).

  NGU Sec. 4.1 compares against "a baseline RND implementation" without
  giving its reward; we use the RND error (Burda et al., 2019) divided by
  the running standard deviation of all errors seen (the batch folded in
  first, as in `modulator`), so its scale does not drift as the predictor
  learns. While sigma_e = 0 the reward is 0.

  Args:
    stats: running statistics from `init` or a previous call.
    errors: RND errors err(x_t) shaped [B], finite and >= 0.

  Returns:
    (reward [B] float32, new_stats).
  """
  errors, stats, std, safe_std = _fold(stats, errors, "lifelong.rnd_reward")
  return jnp.where(std > 0, errors / safe_std, 0.0), stats


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
