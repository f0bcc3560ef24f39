"""Agent57's meta-controller: a sliding-window UCB bandit over the N mixtures.

Agent57 (Badia et al., 2020, Sec. 3.2) lets every actor choose which of the N
(beta_j, gamma_j) policies to run in its next episode with a non-stationary
multi-arm bandit (Garivier & Moulines, 2008), rewarded with the undiscounted
extrinsic return of the episode it just played. For episode k, with
N_{k-1}(a, tau) the number of the last tau episodes that played arm a and
mu_{k-1}(a, tau) the mean of their returns:

  A_k = k                                               if k < N
        uniform over [0, N)                             with probability eps
        argmax_a mu_{k-1}(a, tau) + beta sqrt(1 / N_{k-1}(a, tau))  otherwise

An arm the window has not seen scores +inf (its bonus is unbounded), and ties
go to the lowest index (docs/design.md#agent57-as-built: both are our
readings, the paper is silent). Defaults: window 160, epsilon 0.5, beta 1 for
the actors (`ACTOR_DEFAULTS`), and window 3600, epsilon 0.01, greedy on the
windowed mean (beta 0) for the evaluator (`EVALUATOR_DEFAULTS`). One of the
paper's tables prints a window of 90, outside its own search grid {160, 224,
320, 640}; we read it as a typo and keep every value a config field.

The bandit is a pure pytree over explicit state, one per actor lane, so it
jits and vmaps over lanes and seeds:

  state = init(window)
  arm = select(state, key, num_arms=N, epsilon=0.5, beta=1.0)
  ... play one episode with mixture `arm`, undiscounted return g ...
  state = update(state, arm, g, num_arms=N)

`episode_step` folds the two into what an acting loop does every step: at an
episode's end it records the finished episode and draws the next arm;
otherwise it keeps both, so j changes only at episode starts.
"""

from typing import NamedTuple, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import _checks

Array = jax.Array
Scalar = Union[float, Array]

# The arm of a window slot no episode has filled yet.
EMPTY = -1


class UCBState(NamedTuple):
  """The last `window` episodes of one bandit.

  Attributes:
    arms: the arm each remembered episode played, int32 shaped [W]; EMPTY in
      slots no episode has filled yet.
    returns: those episodes' undiscounted returns, float32 shaped [W].
    num_episodes: episodes recorded so far (all time), int32 shaped []. The
      next one goes to slot num_episodes mod W.
  """
  arms: Array
  returns: Array
  num_episodes: Array


class UCBConfig(NamedTuple):
  """One bandit's hyperparameters (Agent57 Sec. 3.2, App. G).

  Attributes:
    window: tau, the number of most recent episodes the statistics use.
    epsilon: probability of a uniformly drawn arm (after the first N).
    beta: the weight of the exploration bonus sqrt(1 / N(a, tau)).
  """
  window: int = 160
  epsilon: float = 0.5
  beta: float = 1.0


ACTOR_DEFAULTS = UCBConfig(window=160, epsilon=0.5, beta=1.0)
# docs/design.md#beyond-ngu: the evaluator is greedy on the windowed mean.
EVALUATOR_DEFAULTS = UCBConfig(window=3600, epsilon=0.01, beta=0.0)


def _check_positive_int(n, name: str, where: str) -> int:
  if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
    raise ValueError(f"{where}: `{name}` must be a positive integer, got "
                     f"{n!r}.")
  return int(n)


def _check_concrete_range(x, low: float, high: float, name: str,
                          where: str) -> None:
  if _checks.is_traced(x):
    return
  value = np.asarray(x)
  if value.shape != () or not low <= float(value) <= high:  # NaN fails.
    raise ValueError(f"{where}: `{name}` must be a number in [{low}, {high}], "
                     f"got {x!r}.")


def init(window: int) -> UCBState:
  """An empty bandit remembering the last `window` episodes.

  Args:
    window: tau >= 1 (Agent57: 160 for actors, 3600 for the evaluator).

  Returns:
    A `UCBState` with every slot EMPTY.
  """
  window = _check_positive_int(window, "window", "sliding_window_ucb.init")
  return UCBState(arms=jnp.full((window,), EMPTY, jnp.int32),
                  returns=jnp.zeros((window,), jnp.float32),
                  num_episodes=jnp.zeros((), jnp.int32))


def _check_state(state: UCBState, where: str) -> None:
  if not isinstance(state, UCBState):
    raise ValueError(f"{where}: `state` must be a UCBState, got "
                     f"{type(state).__name__}.")
  _checks.check_rank(state.arms, 1, "state.arms", where)
  _checks.check_shape(state.returns, state.arms.shape, "state.returns", where)
  _checks.check_rank(state.num_episodes, 0, "state.num_episodes", where)


def window_statistics(state: UCBState, num_arms: int) -> Tuple[Array, Array]:
  """N(a, tau) and mu(a, tau) over the episodes in the window.

  Args:
    state: a `UCBState` (one bandit; vmap for lanes).
    num_arms: N.

  Returns:
    (counts, means), each shaped [N]: the number of window episodes per arm
    (float32) and the mean of their returns (0 where the count is 0).
  """
  where = "sliding_window_ucb.window_statistics"
  num_arms = _check_positive_int(num_arms, "num_arms", where)
  _check_state(state, where)
  hits = (state.arms[:, None] == jnp.arange(num_arms)[None, :])
  hits = hits.astype(jnp.float32)  # [W, N]; EMPTY slots match no arm.
  counts = hits.sum(axis=0)
  sums = (hits * state.returns[:, None]).sum(axis=0)
  means = sums / jnp.maximum(counts, 1.)
  return counts, means


def scores(state: UCBState, num_arms: int, beta: Scalar = 1.0,
           normalise: bool = False) -> Array:
  """UCB scores mu(a, tau) + beta sqrt(1 / N(a, tau)), +inf where N = 0.

  Args:
    state: a `UCBState`.
    num_arms: N.
    beta: the bonus weight, >= 0.
    normalise: rescale the means to [0, 1] by the smallest and largest return
      in the window, (mu - min) / (max - min) (0 when all are equal), so that
      beta weighs the bonus the same on every task (optional, ours; Agent57
      uses raw returns). Needs a static bool.

  Returns:
    float32 scores shaped [N].
  """
  where = "sliding_window_ucb.scores"
  _check_concrete_range(beta, 0., np.inf, "beta", where)
  counts, means = window_statistics(state, num_arms)
  if normalise:
    filled = state.arms != EMPTY
    low = jnp.min(jnp.where(filled, state.returns, jnp.inf))
    high = jnp.max(jnp.where(filled, state.returns, -jnp.inf))
    spread = high - low
    means = jnp.where(spread > 0, (means - low) / jnp.where(spread > 0,
                                                            spread, 1.), 0.)
  bonus = beta * jnp.sqrt(1. / jnp.maximum(counts, 1.))
  return jnp.where(counts > 0, means + bonus, jnp.inf)


def select(state: UCBState, key: Array, num_arms: int,
           epsilon: Scalar = 0.5, beta: Scalar = 1.0,
           episodes_per_pull: int = 1, normalise: bool = False) -> Array:
  """The arm of the next episode, A_k (Agent57 Sec. 3.2).

  Each arm once first (k < N), then with probability `epsilon` a uniform arm,
  else the argmax of `scores` (lowest index among ties).

  Args:
    state: a `UCBState`.
    key: a PRNG key.
    num_arms: N.
    epsilon: in [0, 1].
    beta: the bonus weight, >= 0.
    episodes_per_pull: E, the episodes recorded per choice (`update_many`;
      the evaluator plays each arm in all its lanes): the first round lasts
      N E episodes, arm floor(k / E) for episode k.
    normalise: as `scores`.

  Returns:
    The arm, int32 shaped [].
  """
  where = "sliding_window_ucb.select"
  _check_concrete_range(epsilon, 0., 1., "epsilon", where)
  episodes_per_pull = _check_positive_int(episodes_per_pull,
                                          "episodes_per_pull", where)
  score = scores(state, num_arms, beta, normalise)
  greedy = jnp.argmax(score).astype(jnp.int32)  # First maximum: lowest index.
  explore_key, arm_key = jax.random.split(key)
  explore = jax.random.uniform(explore_key) < epsilon
  uniform = jax.random.randint(arm_key, (), 0, num_arms, jnp.int32)
  chosen = jnp.where(explore, uniform, greedy)
  first_round = state.num_episodes < num_arms * episodes_per_pull
  return jnp.where(first_round, state.num_episodes // episodes_per_pull,
                   chosen).astype(jnp.int32)


def update(state: UCBState, arm: Array, episode_return: Array,
           num_arms: int) -> UCBState:
  """Records one finished episode: its arm and undiscounted return.

  The oldest episode leaves the window once it is full.

  Args:
    state: a `UCBState`.
    arm: the arm the episode played, integer in [0, N), shaped [].
    episode_return: its undiscounted extrinsic return, finite, shaped [].
    num_arms: N.

  Returns:
    The new `UCBState`.
  """
  where = "sliding_window_ucb.update"
  num_arms = _check_positive_int(num_arms, "num_arms", where)
  _check_state(state, where)
  _checks.check_rank(arm, 0, "arm", where)
  _checks.check_rank(episode_return, 0, "episode_return", where)
  arm = jnp.asarray(arm)
  if not jnp.issubdtype(arm.dtype, jnp.integer):
    raise ValueError(f"{where}: `arm` must be an integer, got dtype "
                     f"{arm.dtype}.")
  episode_return = jnp.asarray(episode_return, jnp.float32)
  _checks.check_in_range(arm, 0, num_arms, "arm", where)
  _checks.check_finite(episode_return, "episode_return", where)
  slot = state.num_episodes % state.arms.shape[0]
  return UCBState(arms=state.arms.at[slot].set(arm.astype(jnp.int32)),
                  returns=state.returns.at[slot].set(episode_return),
                  num_episodes=state.num_episodes + 1)


def update_many(state: UCBState, arm: Array, episode_returns: Array,
                num_arms: int) -> UCBState:
  """Records several finished episodes of one arm, in order (`update` each).

  The evaluator plays one arm in all its lanes (`ngu_jax.loops.evaluation`):
  each lane's episode is one episode of that arm.

  Args:
    state: a `UCBState`.
    arm: the arm the episodes played, integer in [0, N), shaped [].
    episode_returns: their undiscounted returns, finite, shaped [E].
    num_arms: N.

  Returns:
    The `UCBState` after E `update`s (the oldest episodes leave a full
    window first).
  """
  where = "sliding_window_ucb.update_many"
  _checks.check_rank(episode_returns, 1, "episode_returns", where)
  episode_returns = jnp.asarray(episode_returns, jnp.float32)

  def one(state, episode_return):
    return update(state, arm, episode_return, num_arms), None

  return jax.lax.scan(one, state, episode_returns)[0]


def episode_step(state: UCBState, key: Array, arm: Array,
                 episode_return: Array, done: Array, num_arms: int,
                 epsilon: Scalar = 0.5, beta: Scalar = 1.0,
                 normalise: bool = False) -> Tuple[UCBState, Array]:
  """One acting step of a lane's bandit: update and re-draw at episode ends.

  Where `done`, the finished episode (`arm`, `episode_return`) is recorded and
  the next episode's arm drawn; elsewhere the state and `arm` are kept, so a
  lane's mixture changes only at episode starts and the bandit learns nothing
  before its first finished episode.

  Args:
    state: a `UCBState` (vmap for lanes).
    key: a PRNG key.
    arm: the arm of the episode that this step belongs to, int shaped [].
    episode_return: that episode's undiscounted extrinsic return so far.
    done: whether the episode ended at this step, bool shaped [].
    num_arms, epsilon, beta, normalise: as `select`.

  Returns:
    (state, arm for the next step).
  """
  where = "sliding_window_ucb.episode_step"
  _checks.check_rank(done, 0, "done", where)
  done = jnp.asarray(done, jnp.bool_)
  recorded = update(state, arm, episode_return, num_arms)
  new_state = jax.tree_util.tree_map(
      lambda new, old: jnp.where(done, new, old), recorded, state)
  next_arm = select(recorded, key, num_arms, epsilon, beta,
                    normalise=normalise)
  return new_state, jnp.where(done, next_arm, arm).astype(jnp.int32)
