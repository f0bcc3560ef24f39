"""Random Network Distillation networks and observation whitening.

Burda et al. (2018), "Exploration by Random Network Distillation"; used by
Badia et al. (2020), "Never Give Up", Sec. 2 "Integrating life-long
curiosity" and App. H.2 (Fig. 16): a fixed, randomly initialised target
network g and a trained predictor ĝ, both mapping an observation to
R^k (k = 128); the novelty signal is err(x) = ||ĝ(x) - g(x)||^2 (see
`ngu_jax.losses.rnd_error`).

Both networks are torso (conv stack for images, MLP for vectors) ->
Linear(k). As an option the predictor gets extra hidden ReLU layers before
its output, as in the RND paper; by default it has the target's
architecture. Fig. 16 is an image that our text copy of the paper does not
contain; these choices follow the text (a random convolutional g, a trained
ĝ, k = 128 outputs). Unlike the RND paper's code we use ReLU (not leaky
ReLU) and Haiku's default initialisers (not orthogonal ones).

The optional running observation normalisation of the RND paper (per-element
running mean / variance over every observation seen, whitened observations
clipped to [-5, 5]) is an optax-style pair of pure functions over an explicit
`ObservationNormStats` state.
"""

from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp

from ngu_jax import types as ngu_types
from ngu_jax.networks import torsos


class RNDParams(NamedTuple):
  """Parameters of the two RND networks (independently initialised)."""
  target: hk.Params  # g: random and fixed, never trained.
  predictor: hk.Params  # ĝ: trained to match g.


class RNDNetworks(NamedTuple):
  """Pure functions of the RND networks (NGU Sec. 2, App. H.2).

  Attributes:
    init: `init(key) -> RNDParams`; the two networks get independent keys.
    target: `target(params.target, observation) -> [B, output_dim]`, g.
    predictor: `predictor(params.predictor, observation) -> [B, output_dim]`,
      ĝ. Observations are shaped [B, *observation_shape], encoded as
      `encoding` says: e.g. pixels, uint8 (scaled by 1/255) or float; or
      whitened floats (`normalize_observation`) with the "features"
      encoding.
    observation_shape: shape of ONE observation, e.g. (84, 84, 1).
    output_dim: k.
    encoding: the inputs' `ngu_jax.types.ObservationEncoding`.
  """
  init: Callable[[jax.Array], RNDParams]
  target: Callable[[hk.Params, jax.Array], jax.Array]
  predictor: Callable[[hk.Params, jax.Array], jax.Array]
  observation_shape: Tuple[int, ...]
  output_dim: int
  encoding: ngu_types.ObservationEncoding = ngu_types.PIXELS


def make_rnd_networks(
    observation_shape: Sequence[int],
    output_dim: int = 128,
    torso: str = "auto",
    *,
    predictor_hidden_sizes: Sequence[int] = (),
    mlp_hidden_sizes: Sequence[int] = (256, 256),
    encoding: Optional[ngu_types.ObservationEncoding] = None,
    grid_filters: Sequence[int] = torsos.GRID_FILTERS,
) -> RNDNetworks:
  """Builds the RND target g and predictor ĝ (NGU App. H.2, Fig. 16).

  Args:
    observation_shape: shape of ONE observation: [H, W, C] images or [D]
      vectors.
    output_dim: k, the size of the random features (128 in NGU).
    torso: "atari" | "grid" | "mlp" | "auto" (see
      `ngu_jax.networks.resolve_torso_kind`); both networks use the torso's
      conv stack only (no dense layer) followed by Linear(output_dim).
    predictor_hidden_sizes: widths of extra Linear -> ReLU layers of the
      predictor before its output layer (the RND paper uses (512, 512));
      empty by default: the predictor has the target's architecture.
    mlp_hidden_sizes: layer widths of the MLP torso (vector observations).
    encoding: what the networks' inputs are
      (`ngu_jax.types.ObservationEncoding`); None: "pixels". Raw
      observations: the environment's encoding. Observations whitened by
      `normalize_observation` (real-valued, of the raw shape) are
      `ngu_jax.types.FEATURES`, whatever the environment's encoding: they
      must not be one-hot encoded or scaled again. NOTE: symbolic codes out
      of range are rejected on concrete arrays only (under jit the
      Q-network checks the same observations).
    grid_filters: channels of the grid torso's two convolutions (Table 7:
      (16, 32)).

  Returns:
    An `RNDNetworks` container of pure functions.

  Raises:
    ValueError: for an unsupported observation shape / torso kind or a
      non-positive size.
  """
  where = "networks.make_rnd_networks"
  observation_shape = tuple(int(s) for s in observation_shape)
  encoding = torsos.as_encoding(encoding, where)
  torsos.resolve_torso_kind(observation_shape, torso, encoding)  # Early.
  grid_filters = torsos.check_grid_filters(grid_filters, where)
  predictor_hidden_sizes = tuple(int(s) for s in predictor_hidden_sizes)
  if output_dim < 1 or any(s < 1 for s in predictor_hidden_sizes):
    raise ValueError(f"{where}: sizes must be >= 1, got output_dim="
                     f"{output_dim}, predictor_hidden_sizes="
                     f"{predictor_hidden_sizes}.")

  def network(hidden_sizes, name):
    def forward(observation):
      x = torsos.make_torso(observation_shape, torso, encoding=encoding,
                            conv_only=True, grid_filters=grid_filters,
                            mlp_hidden_sizes=mlp_hidden_sizes,
                            name=f"{name}_torso")(observation)
      for i, size in enumerate(hidden_sizes):
        x = jax.nn.relu(hk.Linear(size, name=f"{name}_hidden_{i}")(x))
      return hk.Linear(output_dim, name=f"{name}_output")(x)
    return hk.without_apply_rng(hk.transform(forward))

  target_net = network((), "target")
  predictor_net = network(predictor_hidden_sizes, "predictor")

  def init(key: jax.Array) -> RNDParams:
    target_key, predictor_key = jax.random.split(key)
    dummy = torsos.dummy_observation(observation_shape, encoding)
    return RNDParams(target=target_net.init(target_key, dummy),
                     predictor=predictor_net.init(predictor_key, dummy))

  def checked_apply(net: hk.Transformed, name: str):
    """`net.apply` behind the observation checks, errors naming `name`."""
    where = f"networks.rnd.{name}"

    def apply(params: hk.Params, observation: jax.Array) -> jax.Array:
      torsos.check_observation_batch(observation, observation_shape,
                                     "observation", where, encoding,
                                     runtime_code_check=False)
      return net.apply(params, observation)
    apply.__name__ = name
    return apply

  return RNDNetworks(init=init, target=checked_apply(target_net, "target"),
                     predictor=checked_apply(predictor_net, "predictor"),
                     observation_shape=observation_shape,
                     output_dim=int(output_dim), encoding=encoding)


class ObservationNormStats(NamedTuple):
  """Running per-element observation statistics (RND paper, Sec. 2.4)."""
  mean: jax.Array  # [*observation_shape] float32.
  var: jax.Array  # [*observation_shape] float32, population variance.
  count: jax.Array  # [] float32, number of observations merged so far.


def observation_normalizer_init(
    observation_shape: Sequence[int]) -> ObservationNormStats:
  """Empty statistics: mean 0, variance 1, count 0.

  With count 0 the first update replaces mean and variance by the batch's;
  before any update `normalize_observation` only clips.

  Args:
    observation_shape: shape of ONE observation, e.g. (84, 84, 1).

  Returns:
    `ObservationNormStats` with mean / var shaped [*observation_shape].
  """
  shape = tuple(int(s) for s in observation_shape)
  return ObservationNormStats(mean=jnp.zeros(shape, jnp.float32),
                              var=jnp.ones(shape, jnp.float32),
                              count=jnp.zeros((), jnp.float32))


def _check_stats_observation(stats: ObservationNormStats,
                             observation: jax.Array, where: str) -> None:
  # Raw observations of any encoding: pixels, codes, 0/1 grids, features
  # (bool, integer or floating point; floats without NaN/inf).
  torsos.check_observation_batch(observation, tuple(stats.mean.shape),
                                 "observation", where, ngu_types.FEATURES)


def observation_normalizer_update(
    stats: ObservationNormStats,
    observation: jax.Array) -> ObservationNormStats:
  """Merges a batch into the running statistics (Chan et al., 1979).

  The batch's mean and variance are computed in two passes (in float32) and
  merged with the parallel update

    n = n_a + n_b,  δ = mean_b - mean_a,
    mean = mean_a + δ n_b / n,
    var = (n_a var_a + n_b var_b + δ² n_a n_b / n) / n,

  which avoids the cancellation of E[x²] - E[x]². The result equals the
  population mean / variance over every observation merged so far.

  NOTE: `count` is float32, so it counts exactly up to 2**24 observations;
  beyond that the merge weights carry a relative error of order 1e-7.

  Args:
    stats: current statistics.
    observation: a batch shaped [B, *observation_shape] of raw values of
      any encoding: uint8 pixels (NOT divided by 255; whitening removes the
      scale), integer codes, bool / 0-1 grids or float features.

  Returns:
    Updated statistics.
  """
  where = "networks.rnd.observation_normalizer_update"
  _check_stats_observation(stats, observation, where)
  x = observation.astype(jnp.float32)
  batch_count = jnp.asarray(x.shape[0], jnp.float32)
  batch_mean = jnp.mean(x, axis=0)
  batch_var = jnp.mean(jnp.square(x - batch_mean), axis=0)
  total = stats.count + batch_count
  # Guards B = 0 (total = 0): the statistics are then left unchanged.
  safe_total = jnp.maximum(total, 1.0)
  delta = batch_mean - stats.mean
  mean = stats.mean + delta * (batch_count / safe_total)
  m2 = (stats.var * stats.count + batch_var * batch_count +
        jnp.square(delta) * (stats.count * batch_count / safe_total))
  var = jnp.where(total > 0, m2 / safe_total, stats.var)
  return ObservationNormStats(mean=mean, var=var, count=total)


def normalize_observation(stats: ObservationNormStats,
                          observation: jax.Array,
                          clip: float = 5.0,
                          min_var: float = 1e-8) -> jax.Array:
  """Whitens and clips observations (RND paper, Sec. 2.4).

  Returns clip((x - mean) / sqrt(max(var, min_var)), -clip, clip). The
  variance floor guards elements that have been constant so far (var = 0,
  e.g. after a first update with a single observation): they map to 0 when
  unchanged and to ±clip otherwise, never to NaN.

  Args:
    stats: running statistics from `observation_normalizer_update`.
    observation: observations shaped [B, *observation_shape], raw values
      of any encoding (bool, integer or float), as fed to the update.
    clip: bound of the output range.
    min_var: variance floor.

  Returns:
    Whitened observations shaped [B, *observation_shape], float32: real
    features, whatever the raw observations were, so the RND networks that
    take them are built with `ngu_jax.types.FEATURES` (no 1/255 scaling, no
    one-hot; `ngu_jax.agents.ngu.networks.make_networks` does so).
  """
  where = "networks.rnd.normalize_observation"
  _check_stats_observation(stats, observation, where)
  if isinstance(clip, (int, float)) and clip <= 0:
    raise ValueError(f"{where}: `clip` must be > 0, got {clip}.")
  x = observation.astype(jnp.float32)
  std = jnp.sqrt(jnp.maximum(stats.var, min_var))
  return jnp.clip((x - stats.mean) / std, -clip, clip)
