"""The NGU family of policies: intrinsic-reward scales, discounts, epsilons.

NGU learns N policies with one UVFA network (Badia et al., 2020, Sec. 3 and
App. A). Policy j uses the augmented reward r^e + beta_j * r^i and the
discount gamma_j; actor l acts epsilon_l-greedily (Ape-X / R2D2) with the
mixture j = l mod N (docs/design.md#mixtures: the paper's "mod N-1" is a
typo: it would never run the most exploratory policy j = N-1).

All schedules return float32 numpy arrays: they are constants computed once
on the host and handed to jitted code as arrays. `cross_mixture_indices`
(NGU's Cross Mixture Ratio) is a JAX function of the learner's batch.
"""

import jax
import jax.numpy as jnp
import numpy as np


def _check_count(n: int, name: str) -> int:
  if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
    raise ValueError(f"mixtures: `{name}` must be a positive integer, got "
                     f"{n!r}.")
  return int(n)


def betas(num_mixtures: int, beta: float = 0.3) -> np.ndarray:
  """Intrinsic-reward scales beta_j of the N mixtures (NGU App. A).

  beta_0 = 0 (pure exploitation), beta_{N-1} = beta (most exploratory) and
  beta_i = beta * sigmoid(10 * (2i - (N - 2)) / (N - 2)) otherwise, which
  concentrates the mixtures near the two extremes (NGU Fig. 7a).

  With N = 1 the single policy is the exploratory one (NGU(N=1) in the paper,
  Sec. 4.1 and App. B), so the result is [beta].

  Args:
    num_mixtures: N >= 1.
    beta: the largest scale (Table 6: 0.3; Table 7, Disco Maze: 0.5).

  Returns:
    float32 array shaped [N].
  """
  n = _check_count(num_mixtures, "num_mixtures")
  if not np.isfinite(beta) or beta < 0:
    raise ValueError(f"mixtures.betas: `beta` must be finite and >= 0, got "
                     f"{beta!r}.")
  if n == 1:
    return np.array([beta], np.float32)
  i = np.arange(n, dtype=np.float64)
  out = np.empty(n, np.float64)
  if n > 2:
    x = 10.0 * (2.0 * i - (n - 2)) / (n - 2)
    out[:] = beta / (1.0 + np.exp(-x))
  out[0] = 0.0
  out[-1] = beta
  return out.astype(np.float32)


def gammas(num_mixtures: int, gamma_max: float = 0.997,
           gamma_min: float = 0.99) -> np.ndarray:
  """Discounts gamma_j of the N mixtures (NGU App. A, eq. 4).

  gamma_i = 1 - exp(((N - 1 - i) log(1 - gamma_max) + i log(1 - gamma_min))
  / (N - 1)): 1 - gamma_i is evenly spaced in log-space from 1 - gamma_max
  (the exploitative policy j = 0) to 1 - gamma_min (j = N - 1).

  With N = 1 eq. (4) is undefined. The single policy is the exploratory one
  (`betas(1)` = [beta]; NGU Sec. 4.1 "a single exploratory policy"), and
  App. A pairs the most exploratory policy with the smallest discount
  (gamma_{N-1} = gamma_min; Table 6 "Discount r^i 0.99"), so the result is
  [gamma_min].

  Args:
    num_mixtures: N >= 1.
    gamma_max: discount of mixture 0 (Table 6: 0.997).
    gamma_min: discount of mixture N - 1 (Table 6: 0.99).

  Returns:
    float32 array shaped [N].
  """
  n = _check_count(num_mixtures, "num_mixtures")
  if not (0.0 <= gamma_min <= gamma_max < 1.0):
    raise ValueError("mixtures.gammas: need 0 <= gamma_min <= gamma_max < 1, "
                     f"got gamma_min={gamma_min!r}, gamma_max={gamma_max!r}.")
  if n == 1:
    return np.array([gamma_min], np.float32)
  i = np.arange(n, dtype=np.float64)
  log_one_minus = ((n - 1 - i) * np.log1p(-gamma_max)
                   + i * np.log1p(-gamma_min)) / (n - 1)
  return (1.0 - np.exp(log_one_minus)).astype(np.float32)


def agent57_gammas(num_mixtures: int = 32, gamma_0: float = 0.9999,
                   gamma_1: float = 0.997, gamma_2: float = 0.99
                   ) -> np.ndarray:
  """Agent57's discount ladder gamma_j (Badia et al., 2020, App. G.1).

    gamma_0 = gamma_0
    gamma_j = gamma_1 + (gamma_0 - gamma_1) sigmoid(10 (2j - 6) / 6), 1 <= j <= 6
    gamma_7 = gamma_1
    gamma_j = 1 - exp(((N - 1 - j) log(1 - gamma_1) + (j - 8) log(1 - gamma_2))
                      / (N - 9)),                                 8 <= j < N

  The last branch is NGU eq. (4)'s log-linear interpolation from gamma_1 at
  j = 8 to gamma_2 at j = N - 1. The formula as quoted in reviews of the paper
  has (N - 9) where we have (N - 1 - j): that gives gamma_31 = 1 - (1 -
  gamma_1)(1 - gamma_2) = 0.99997, which contradicts Sec. 4's range of 0.99 to
  0.9999 (docs/design.md#agent57-as-built).

  Args:
    num_mixtures: N >= 10 (the ladder's fixed branches use j = 0..8, and the
      last needs N - 9 >= 1). Agent57: 32.
    gamma_0: the discount of the exploitative policy j = 0 (0.9999).
    gamma_1: the discount at j = 7 and 8 (0.997).
    gamma_2: the discount of the most exploratory policy j = N - 1 (0.99).

  Returns:
    float32 array shaped [N].
  """
  n = _check_count(num_mixtures, "num_mixtures")
  if n < 10:
    raise ValueError("mixtures.agent57_gammas: App. G.1's ladder needs "
                     f"`num_mixtures` >= 10, got {n}.")
  if not 0.0 <= gamma_2 <= gamma_1 <= gamma_0 < 1.0:
    raise ValueError("mixtures.agent57_gammas: need 0 <= gamma_2 <= gamma_1 "
                     f"<= gamma_0 < 1, got gamma_0={gamma_0!r}, "
                     f"gamma_1={gamma_1!r}, gamma_2={gamma_2!r}.")
  out = np.empty(n, np.float64)
  out[0] = gamma_0
  j = np.arange(1, 7, dtype=np.float64)
  out[1:7] = gamma_1 + (gamma_0 - gamma_1) / (
      1.0 + np.exp(-10.0 * (2.0 * j - 6.0) / 6.0))
  out[7] = gamma_1
  j = np.arange(8, n, dtype=np.float64)
  log_one_minus = ((n - 1 - j) * np.log1p(-gamma_1)
                   + (j - 8) * np.log1p(-gamma_2)) / (n - 9)
  out[8:] = 1.0 - np.exp(log_one_minus)
  return out.astype(np.float32)


def actor_epsilons(num_actors: int, base_epsilon: float = 0.4,
                   alpha: float = 7.0) -> np.ndarray:
  """Per-actor exploration rates epsilon_l (Ape-X; R2D2; NGU App. A).

  epsilon_l = base_epsilon ** (1 + alpha * l / (L - 1)) for l in [0, L); a
  single actor gets base_epsilon.

  Args:
    num_actors: L >= 1 (actors, or actor lanes).
    base_epsilon: epsilon of actor 0 (0.4).
    alpha: exponent range (7).

  Returns:
    float32 array shaped [L].
  """
  n = _check_count(num_actors, "num_actors")
  if not 0.0 <= base_epsilon <= 1.0:
    raise ValueError("mixtures.actor_epsilons: `base_epsilon` must lie in "
                     f"[0, 1], got {base_epsilon!r}.")
  if n == 1:
    return np.array([base_epsilon], np.float32)
  l = np.arange(n, dtype=np.float64)
  return (base_epsilon ** (1.0 + alpha * l / (n - 1))).astype(np.float32)


def actor_mixtures(num_actors: int, num_mixtures: int) -> np.ndarray:
  """Mixture index j = l mod N of lane l (App. A; docs/design.md#mixtures).

  Args:
    num_actors: L >= 1.
    num_mixtures: N >= 1.

  Returns:
    int32 array shaped [L].
  """
  n = _check_count(num_actors, "num_actors")
  m = _check_count(num_mixtures, "num_mixtures")
  return (np.arange(n) % m).astype(np.int32)


def actor_epsilons_per_mixture(num_actors: int, num_mixtures: int,
                               base_epsilon: float = 0.4,
                               alpha: float = 7.0) -> np.ndarray:
  """epsilon_l spread over each mixture's lanes (ours; App. A's schedule).

  Lane l = j + N m acts with mixture j = l mod N (`actor_mixtures`) and
  epsilon = base_epsilon ** (1 + alpha * m / (M - 1)), m = l // N, M the
  number of lanes of mixture j: every mixture gets the whole range of App.
  A's epsilons. `actor_epsilons` (App. A's epsilon_l over all L lanes) ties
  epsilon to j when L / N is small: with L = 16, N = 8 mixture j's lanes j
  and j + 8 have epsilons 0.4^(1 + 7 j / 15) and 0.4^(1 + 7 (j + 8) / 15),
  so the most exploratory mixture (j = 7) acts almost greedily (0.02 and
  0.0007) while j = 0 gets the largest epsilons (0.4, 0.013). With the
  paper's L = 256, N = 32 the two schedules nearly agree (each mixture's 8
  lanes span the range either way).

  Args:
    num_actors: L >= 1.
    num_mixtures: N >= 1.
    base_epsilon, alpha: as `actor_epsilons`.

  Returns:
    float32 array shaped [L].
  """
  n = _check_count(num_actors, "num_actors")
  m = _check_count(num_mixtures, "num_mixtures")
  lanes = np.arange(n)
  mixture = lanes % m
  index = lanes // m
  out = np.empty(n, np.float32)
  for j in range(min(m, n)):
    mine = mixture == j
    out[mine] = actor_epsilons(int(mine.sum()), base_epsilon, alpha)[
        index[mine]]
  return out


def cross_mixture_indices(key, mixture_index, num_mixtures: int,
                          ratio: float):
  """Relabels a batch's sequences to train other mixtures (NGU Sec. 4.2).

  NGU's Cross Mixture Ratio (CMR, Sec. 4.2 and App. C, Fig. 3 / Table 11):
  "the proportion in the training batches of experience collected using
  different values of beta_i from the one being trained". CMR 0 (NGU's
  base agent) trains each sequence's own mixture; CMR 0.5 trains half of
  each batch on another mixture. Here exactly round(ratio * B) sequences,
  chosen uniformly without replacement, get a mixture index drawn
  uniformly from the N - 1 others; the rest keep theirs. The learner then
  trains them off-policy (Retrace with the stored behaviour probabilities)
  on r^e + beta_j' r^i with gamma_j', the network conditioned on j'.

  A JAX function (jit / vmap); `num_mixtures` and `ratio` are static.

  Args:
    key: PRNG key.
    mixture_index: int [B], the mixtures the sequences were collected with.
    num_mixtures: N >= 2 when ratio > 0.
    ratio: CMR in [0, 1].

  Returns:
    int32 [B]: the mixture each sequence trains.
  """
  n = _check_count(num_mixtures, "num_mixtures")
  if (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
      or not 0 <= ratio <= 1):
    raise ValueError(f"mixtures.cross_mixture_indices: `ratio` must be a "
                     f"number in [0, 1], got {ratio!r}.")
  mixture_index = jnp.asarray(mixture_index, jnp.int32)
  if mixture_index.ndim != 1:
    raise ValueError(f"mixtures.cross_mixture_indices: `mixture_index` must "
                     f"be shaped [B], got {mixture_index.shape}.")
  b = mixture_index.shape[0]
  count = int(round(ratio * b))
  if count == 0:
    return mixture_index
  if n < 2:
    raise ValueError("mixtures.cross_mixture_indices: a cross mixture ratio "
                     "> 0 needs num_mixtures >= 2 (no other mixture to "
                     f"train), got {n}.")
  pick_key, shift_key = jax.random.split(key)
  chosen = jnp.zeros((b,), bool).at[
      jax.random.permutation(pick_key, b)[:count]].set(True)
  shift = jax.random.randint(shift_key, (b,), 1, n)  # j' = j + 1..N-1 mod N.
  return jnp.where(chosen, (mixture_index + shift) % n, mixture_index)
