"""Run diagnostics: the intrinsic-reward pipeline's signals, and grid visits.

Badia et al. (2020), "Never Give Up": what a run logs besides its returns,
so that a silenced intrinsic reward (NGU eq. 1) shows in every run's
metrics.csv (`ngu_jax.loops`).

Actor steps. `actor_step_sums(extras, step_is_first, betas)` reduces one
actor step of B training lanes to a float32 vector of sums and counts
(`ACTOR_SUMS` names its entries), cheap enough to add up on the device at
every step (the caller jits `sums + actor_step_sums(...)` and reads the
vector only when it logs); `actor_summary(sums, ...)` turns the sums of
many steps into means:

  mean_episodic_reward  r^episodic_t (Alg. 1);
  mean_intrinsic_reward beta_j r^i_t, the intrinsic reward as the loss sees
                        it (App. A: r^e + beta_j r^i);
  mean_alpha            the life-long modulator alpha_t (Sec. 2);
  alpha_above_one       the fraction of steps with alpha_t > 1, the only
                        steps where the modulator raises r^i (eq. 1 clips
                        alpha to [1, L]);
  rnd_error             err(x_t) = ||g_hat(x_t) - g(x_t)||^2;
  q_exploit, q_explore  max_a Q(x_t, a, j) over the lanes of mixture j = 0
                        and j = N - 1 (the same lanes when N = 1).

All of them are means over the lanes' non-FIRST steps, the steps whose r^i
is credited to a transition (at FIRST the actor stores r^i = 0). Columns
that do not apply to the config are NaN: alpha without RND or in the
RND-only baseline (`intrinsic_reward == "rnd"`), the RND error without RND,
the episodic reward in the RND-only baseline.

Grid visits. `grid_positions(timestep)` reads the agent's cell from a
grid world's extras (Disco Maze `position` (row, col); MiniGrid
`agent_pos` (x, y)); `add_visits(counts, positions, mask)` adds them to a
[H, W] count array, growing it when a cell lies outside (MiniGrid's grid
size is not in its spec). `ngu_jax.plotting.plot_visit_heatmaps` draws them.

Per-cell signals. `cell_step_sums(shape, positions, extras, action,
step_is_first, num_mixtures)` adds, per grid cell, what the agent saw and
did there in one actor step (jittable; the compiled loop accumulates them
between evaluations): visits, the RND error, alpha and r^i of x_t, and for
the lanes of mixture j = 0 (exploit) and j = N - 1 (most exploratory) the
Q-values Q(x_t, a, j) and the actions taken. `cell_maps(sums)` turns the
sums into [H, W] means ("what does the agent see in each cell?"): where the
life-long novelty ranks cells, whether the bonus reaches the action values,
and which way each policy goes. `ngu_jax.plotting.plot_cell_maps` draws them.
"""

import math
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.agents.ngu import variants

# The extras `actor_step_sums` reads (`ngu_jax.agents.ngu.actor.ActorExtras`).
ACTOR_EXTRAS = ("episodic_reward", "intrinsic_reward", "alpha", "rnd_error",
                "q_value", "mixture_index")
# The entries of the vector of `actor_step_sums`.
ACTOR_SUMS = ("steps", "episodic_reward", "intrinsic_reward", "alpha",
              "alpha_above_one", "rnd_error", "exploit_steps", "q_exploit",
              "explore_steps", "q_explore")
# The metrics.csv columns of `actor_summary`, and of `learner_summary` with
# the `Learner.step` metric each averages.
ACTOR_COLUMNS = ("mean_episodic_reward", "mean_intrinsic_reward",
                 "mean_alpha", "alpha_above_one", "rnd_error",
                 "rnd_error_mean", "rnd_error_std", "q_exploit", "q_explore")
LEARNER_COLUMNS = (("learner_loss", "loss"),
                   ("action_prediction_loss", "action_prediction_loss"),
                   ("action_prediction_accuracy",
                    "action_prediction_accuracy"),
                   ("rnd_loss", "rnd_loss"),
                   # Agent57's split values: Q_e and Q_i of the taken actions.
                   ("q_extrinsic", "q_extrinsic_mean"),
                   ("q_intrinsic", "q_intrinsic_mean"))


def actor_step_sums(extras: Mapping[str, Any], step_is_first: Any,
                    betas: Any) -> jnp.ndarray:
  """Sums and counts of one actor step of B lanes (NGU eq. 1, App. A).

  Pure and jittable; the caller accumulates the vectors of many steps, e.g.
    add = jax.jit(lambda s, e, f: s + actor_step_sums(e, f, betas))

  Args:
    extras: the step's actor extras (`ActorExtras._asdict()` or a dict with
      at least `ACTOR_EXTRAS`), each shaped [B]: episodic_reward,
      intrinsic_reward (r^i_t, before beta_j), alpha, rnd_error, q_value
      (max_a Q(x_t, a, j)) and mixture_index (int j).
    step_is_first: bool [B], the FIRST flags of the step (excluded).
    betas: float [N], beta_j of the N mixtures (`mixtures.betas`).

  Returns:
    float32 [len(ACTOR_SUMS)]: in `ACTOR_SUMS` order the non-FIRST steps,
    the sums over them of r^episodic, beta_j r^i, alpha and [alpha > 1] and
    err, then the count and the sum of max_a Q over the non-FIRST steps of
    the j = 0 lanes, then the same for the j = N - 1 lanes.
  """
  betas = jnp.asarray(betas, jnp.float32)
  j = jnp.asarray(extras["mixture_index"], jnp.int32)
  live = ~jnp.asarray(step_is_first, bool)
  w = live.astype(jnp.float32)
  exploit = w * (j == 0)
  explore = w * (j == betas.shape[0] - 1)

  def total(x, weight=w):
    return jnp.sum(weight * jnp.asarray(x, jnp.float32))

  alpha = jnp.asarray(extras["alpha"], jnp.float32)
  q = extras["q_value"]
  return jnp.stack([
      jnp.sum(w), total(extras["episodic_reward"]),
      total(betas[j] * jnp.asarray(extras["intrinsic_reward"], jnp.float32)),
      total(alpha), total(alpha > 1.), total(extras["rnd_error"]),
      jnp.sum(exploit), total(q, exploit), jnp.sum(explore),
      total(q, explore)])


def actor_summary(sums: Any, use_rnd: bool, intrinsic_reward: str = "ngu",
                  error_stats: Any = None) -> Dict[str, float]:
  """Means of accumulated `actor_step_sums` (NaN where none or not applicable).

  Args:
    sums: float [len(ACTOR_SUMS)], the sum of `actor_step_sums` vectors.
    use_rnd: `config.use_rnd`; without RND alpha and the RND error are NaN.
    intrinsic_reward: `config.intrinsic.kind`; its part's flags
      (`variants.IntrinsicReward`) say which columns apply: e.g. "rnd" (the
      RND-only baseline) has no episodic reward and no alpha, "recode" no
      RND (its mean_episodic_reward is RECODE's reward before its division
      by the running std).
    error_stats: the actor's running RND-error statistics (an object with
      `mean` and `var`, e.g. `ngu_jax.intrinsic.lifelong.RunningStats`;
      numpy or jax scalars), or None: rnd_error_mean / rnd_error_std NaN.

  Returns:
    {column: float} for every column of `ACTOR_COLUMNS`.

  Raises:
    ValueError: `sums` of another shape.
  """
  s = np.asarray(sums, np.float64)
  if s.shape != (len(ACTOR_SUMS),):
    raise ValueError(f"diagnostics.actor_summary: `sums` must have shape "
                     f"[{len(ACTOR_SUMS)}], got {s.shape}.")
  v = dict(zip(ACTOR_SUMS, s))

  def mean(name, count="steps", applies=True):
    return v[name] / v[count] if applies and v[count] > 0 else math.nan

  reward = variants.get("intrinsic", intrinsic_reward)
  episodic = reward.episodic
  # E.g. RECODE's reward replaces episodic x RND: no RND error, no alpha.
  use_rnd = use_rnd and reward.reads_rnd
  ngu = reward.modulated
  out = {"mean_episodic_reward": mean("episodic_reward", applies=episodic),
         "mean_intrinsic_reward": mean("intrinsic_reward"),
         "mean_alpha": mean("alpha", applies=use_rnd and ngu),
         "alpha_above_one": mean("alpha_above_one", applies=use_rnd and ngu),
         "rnd_error": mean("rnd_error", applies=use_rnd),
         "rnd_error_mean": math.nan, "rnd_error_std": math.nan,
         "q_exploit": mean("q_exploit", "exploit_steps"),
         "q_explore": mean("q_explore", "explore_steps")}
  if use_rnd and error_stats is not None:
    count = getattr(error_stats, "count", None)
    if count is None or float(np.asarray(count)) > 0:
      out["rnd_error_mean"] = float(np.asarray(error_stats.mean))
      out["rnd_error_std"] = math.sqrt(max(float(np.asarray(
          error_stats.var)), 0.))
  return out


def learner_summary(values: Mapping[str, Sequence[float]], use_rnd: bool,
                    intrinsic_reward: str = "ngu",
                    split_values: bool = False) -> Dict[str, float]:
  """Means of the learner metrics since the last row (NaN where none).

  Args:
    values: `Learner.step` metric name (the second entries of
      `LEARNER_COLUMNS`) -> the values of the steps since the last row.
    use_rnd: `config.use_rnd`; without RND the RND loss (of a predictor
      nothing reads) is NaN.
    intrinsic_reward: `config.intrinsic.kind`; its part's flags say which
      columns apply: in the RND-only baseline ("rnd") the inverse-dynamics
      columns (of an embedding nothing reads) are NaN; under RECODE
      ("recode") the RND loss (no RND is trained); without an intrinsic
      reward ("none") all of them.
    split_values: `config.loss.split_values`; without Agent57's two networks
      q_extrinsic and q_intrinsic are NaN.

  Returns:
    {column: float} for every column of `LEARNER_COLUMNS`.
  """
  reward = variants.get("intrinsic", intrinsic_reward)
  embedding = reward.reads_embedding
  applies = {"rnd_loss": use_rnd and reward.trains_rnd,
             "action_prediction_loss": embedding,
             "action_prediction_accuracy": embedding,
             "q_extrinsic": split_values, "q_intrinsic": split_values}
  out = {}
  for column, name in LEARNER_COLUMNS:
    got = values.get(name, ())
    out[column] = (float(np.mean(got)) if len(got) and applies.get(column,
                                                                   True)
                   else math.nan)
  return out


def arm_columns(num_arms: int) -> Tuple[str, ...]:
  """The metrics columns of `arm_shares`: "arm_0" .. "arm_<N-1>"."""
  return tuple(f"arm_{j}" for j in range(num_arms))


def arm_shares(bandit_arms: Any, num_arms: int) -> Dict[str, float]:
  """What Agent57's bandits have been choosing (Sec. 3.2, Fig. 8).

  Args:
    bandit_arms: the arms in the lanes' bandit windows
      (`sliding_window_ucb.UCBState.arms`), integer [..., W], -1 in empty
      slots.
    num_arms: N.

  Returns:
    {"arm_j": the share of arm j among the windows' episodes} for j < N;
    NaN where the windows are all empty.
  """
  arms = np.asarray(bandit_arms).reshape(-1)
  counts = np.bincount(arms[arms >= 0], minlength=num_arms)[:num_arms]
  total = counts.sum()
  return {name: (float(c) / total if total else math.nan)
          for name, c in zip(arm_columns(num_arms), counts)}


# DiCE's behaviour policies (`temperature_columns`).
TEMPERATURE_COLUMNS = ("tau_p10", "tau_median", "tau_p90", "policy_entropy")


def temperature_columns(temperature_x: Any, q_values: Any) -> Dict[str, float]:
  """What DiCE's temperatures are at a metrics row (004 Sec. 3.1, App. A).

  Args:
    temperature_x: each lane's x = log(1 + 1/tau) of its current episode,
      float [..., B] (`ActorState.temperature_x`).
    q_values: the lanes' last Q(x_t, ., j), float [..., B, A] (the actor's
      extras), for the entropy of their current policies.

  Returns:
    {"tau_p10", "tau_median", "tau_p90": the 10th / 50th / 90th percentile of
    tau over the lanes, "policy_entropy": the mean entropy (nats) of the
    lanes' softmax(Q / tau) at their last step}.
  """
  x = np.maximum(np.asarray(temperature_x, np.float64).reshape(-1), 1e-6)
  tau = 1. / np.expm1(x)
  q = np.asarray(q_values, np.float64).reshape(x.shape[0], -1)
  logits = q / tau[:, None]
  logits -= logits.max(axis=-1, keepdims=True)
  probs = np.exp(logits)
  probs /= probs.sum(axis=-1, keepdims=True)
  entropy = -np.sum(np.where(probs > 0, probs * np.log(np.where(
      probs > 0, probs, 1.)), 0.), axis=-1)
  p10, p50, p90 = np.percentile(tau, [10, 50, 90])
  return {"tau_p10": float(p10), "tau_median": float(p50),
          "tau_p90": float(p90), "policy_entropy": float(entropy.mean())}


def bva_value_curve(bva_config: Any, bva_state: Any
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The Bandits Vote ensembles' pooled value curves (DiCE Sec. 3.3, App. A).

  Args:
    bva_config: the lanes' `bandits_vote.BVAConfig`
      (`variants.policy.bva_config`).
    bva_state: their `BVAState`, leaves with any leading lane axes
      ([..., M, K] weights; e.g. [B] lanes, or [S, B] vmapped seeds).

  Returns:
    (x [K]: the tile centres in x = log(1 + 1/tau); values [L, K]: each
    lane's pooled value `bandits_vote.pooled_values` (the mean over its M
    bandits of eq. 9's V); counts [L, K]: each lane's updates per tile,
    summed over its bandits), L the leading axes flattened.
  """
  # pylint: disable=g-import-not-at-top
  from ngu_jax.meta import bandits_vote
  # pylint: enable=g-import-not-at-top
  w = np.asarray(bva_state.w)
  lead = w.shape[:-2]
  flat = jax.tree_util.tree_map(
      lambda x: jnp.reshape(jnp.asarray(x), (-1,) + np.shape(x)[len(lead):]),
      bva_state)
  values = jax.vmap(lambda s: bandits_vote.pooled_values(s, bva_config))(flat)
  low, high = bandits_vote.tile_bounds(bva_config)
  counts = np.asarray(flat.counts).sum(axis=-2)
  return (np.asarray((low + high) / 2., np.float64),
          np.asarray(values, np.float64), counts.astype(np.int64))


# The channels of `cell_step_sums` before the per-action ones.
CELL_SUMS = ("visits", "rnd_error", "alpha", "intrinsic_reward",
             "exploit_visits", "explore_visits")


def cell_channels(num_actions: int) -> Tuple[str, ...]:
  """Names of the last axis of `cell_step_sums` for A actions.

  `CELL_SUMS`, then per action a: "q_exploit_a", "q_explore_a" (sums of
  Q(x_t, a, j)) and "act_exploit_a", "act_explore_a" (times a was taken),
  for the j = 0 and the j = N - 1 lanes.
  """
  names = list(CELL_SUMS)
  for group in ("q_exploit", "q_explore", "act_exploit", "act_explore"):
    names += [f"{group}_{a}" for a in range(num_actions)]
  return tuple(names)


def cell_step_sums(shape: Tuple[int, int], positions: Any,
                   extras: Mapping[str, Any], action: Any,
                   step_is_first: Any, num_mixtures: int) -> jnp.ndarray:
  """Per-cell sums of one actor step of B lanes (NGU eq. 1, Sec. 3).

  Pure and jittable (jnp scatter-adds); cells outside `shape` are clipped to
  its border, so give the full grid (e.g. DeepSea's (N + 1, N): its final
  observation lies below the last row).

  Args:
    shape: (H, W) of the grid.
    positions: int [B, 2], each lane's cell (row, col) at x_t.
    extras: the actor extras of the step (`ActorExtras._asdict()`): rnd_error,
      alpha, intrinsic_reward (r^i_t, before beta_j; 0 at FIRST), q_values
      [B, A] and mixture_index [B].
    action: int [B], a_t.
    step_is_first: bool [B]. FIRST steps count like any other (their r^i is
      0: the start cell's r^i is what the agent is credited there).
    num_mixtures: N (j = N - 1 is the most exploratory mixture).

  Returns:
    float32 [H, W, len(cell_channels(A))] in `cell_channels` order.
  """
  del step_is_first  # Every step counts; documented above.
  h, w = int(shape[0]), int(shape[1])
  q = jnp.asarray(extras["q_values"], jnp.float32)  # [B, A]
  b, a = q.shape
  j = jnp.asarray(extras["mixture_index"], jnp.int32)
  exploit = (j == 0).astype(jnp.float32)
  explore = (j == num_mixtures - 1).astype(jnp.float32)
  taken = jax.nn.one_hot(jnp.asarray(action, jnp.int32), a)
  values = jnp.concatenate([
      jnp.stack([jnp.ones((b,), jnp.float32),
                 jnp.asarray(extras["rnd_error"], jnp.float32),
                 jnp.asarray(extras["alpha"], jnp.float32),
                 jnp.asarray(extras["intrinsic_reward"], jnp.float32),
                 exploit, explore], axis=1),
      exploit[:, None] * q, explore[:, None] * q,
      exploit[:, None] * taken, explore[:, None] * taken], axis=1)
  positions = jnp.asarray(positions, jnp.int32)
  row = jnp.clip(positions[:, 0], 0, h - 1)
  col = jnp.clip(positions[:, 1], 0, w - 1)
  return jnp.zeros((h, w, values.shape[1]), jnp.float32).at[row, col].add(
      values)


def cell_maps(sums: Any) -> Dict[str, np.ndarray]:
  """[H, W] means of accumulated `cell_step_sums` (NaN where never visited).

  Args:
    sums: float [H, W, C], a sum of `cell_step_sums` arrays
      (C = len(cell_channels(A))).

  Returns:
    {"visits", "exploit_visits", "explore_visits": counts;
     "rnd_error", "alpha", "intrinsic_reward": means per visit;
     "q_exploit", "q_explore": [H, W, A] mean Q(x, a, j) over the visits of
     the j = 0 / j = N - 1 lanes; "policy_exploit", "policy_explore":
     [H, W, A] the fraction of those visits that took each action}.

  Raises:
    ValueError: `sums` not [H, W, C] with C = 6 + 4A for some A >= 1.
  """
  s = np.asarray(sums, np.float64)
  extra = s.shape[-1] - len(CELL_SUMS) if s.ndim == 3 else -1
  if s.ndim != 3 or extra < 4 or extra % 4:
    raise ValueError(f"diagnostics.cell_maps: `sums` must be [H, W, "
                     f"{len(CELL_SUMS)} + 4A], got shape {s.shape}.")
  a = extra // 4
  base = len(CELL_SUMS)
  channel = dict(zip(CELL_SUMS, np.moveaxis(s[..., :base], -1, 0)))

  def per(count, x):
    with np.errstate(invalid="ignore", divide="ignore"):
      return np.where(count > 0, x / np.maximum(count, 1), np.nan)

  out = {"visits": channel["visits"],
         "exploit_visits": channel["exploit_visits"],
         "explore_visits": channel["explore_visits"]}
  for name in ("rnd_error", "alpha", "intrinsic_reward"):
    out[name] = per(channel["visits"], channel[name])
  groups = ("q_exploit", "q_explore", "policy_exploit", "policy_explore")
  counts = ("exploit_visits", "explore_visits") * 2
  for k, (name, count) in enumerate(zip(groups, counts)):
    block = s[..., base + k * a: base + (k + 1) * a]
    out[name] = per(channel[count][..., None], block)
  return out


def cell_panels(maps: Mapping[str, np.ndarray],
                preferred_action: Optional[np.ndarray] = None,
                label: str = "a*") -> Dict[str, np.ndarray]:
  """The [H, W] panels of a per-cell figure from `cell_maps`.

  Args:
    maps: `cell_maps(...)`.
    preferred_action: int [H, W], the action of interest in each cell (e.g.
      DeepSea's "right", which its action mapping hides per cell), or None
      (no Q or policy panels).
    label: the preferred action's name in the titles (e.g. "right").

  Returns:
    Ordered {title: float [H, W]}: visits, RND error, alpha, r^i, then with
    `preferred_action`: Q(label) - max of the other actions' Q for j = 0 and
    j = N - 1 (> 0: the greedy policy takes `label`), and the fraction of
    visits that took `label`, for j = 0 and j = N - 1.
  """
  panels = {"visits (training lanes)": maps["visits"],
            "RND error": maps["rnd_error"],
            "alpha": maps["alpha"],
            "r^i (before beta_j)": maps["intrinsic_reward"]}
  if preferred_action is None:
    return panels
  pref = np.asarray(preferred_action, np.int64)
  for j_name, group in (("j = 0", "exploit"), ("j = N-1", "explore")):
    q = maps[f"q_{group}"]
    a = q.shape[-1]
    if pref.shape != q.shape[:2] or pref.min() < 0 or pref.max() >= a:
      raise ValueError(f"diagnostics.cell_panels: `preferred_action` must be "
                       f"ints in [0, {a}) shaped {q.shape[:2]}, got "
                       f"{pref.shape}.")
    chosen = np.take_along_axis(q, pref[..., None], axis=-1)[..., 0]
    others = np.where(np.arange(a) == pref[..., None], -np.inf, q).max(-1)
    panels[f"Q({label}) - Q(other), {j_name}"] = chosen - others
  for j_name, group in (("j = 0", "exploit"), ("j = N-1", "explore")):
    policy = maps[f"policy_{group}"]
    panels[f"P({label}), {j_name}"] = np.take_along_axis(
        policy, pref[..., None], axis=-1)[..., 0]
  return panels


def grid_positions(timestep: Any) -> Optional[np.ndarray]:
  """The agent's grid cell in each lane, as (row, col); None if unknown.

  Args:
    timestep: a `TimeStep` of B lanes. Disco Maze reports
      `extras["position"]` (row, col); envpool MiniGrid `extras["agent_pos"]`
      (x, y) = (col, row).

  Returns:
    int64 [B, 2] (row, col), or None for environments without positions.
  """
  extras = getattr(timestep, "extras", None) or {}
  if "position" in extras:
    return np.asarray(extras["position"], np.int64)
  if "agent_pos" in extras:
    return np.asarray(extras["agent_pos"], np.int64)[:, ::-1]
  return None


def add_visits(counts: np.ndarray, positions: np.ndarray,
               mask: Optional[np.ndarray] = None) -> np.ndarray:
  """Adds one visit per (unmasked) lane to its cell of a count grid.

  Args:
    counts: int64 [H, W] visits so far (H or W may be 0).
    positions: int [B, 2] cells as (row, col), >= 0.
    mask: bool [B], the lanes to count; None: all.

  Returns:
    int64 [H', W'], `counts` plus the visits (a new array). It is `counts`'
    shape, grown to max(H, 1 + largest row) x max(W, 1 + largest column)
    when a counted cell lies outside (new cells count 0).

  Raises:
    ValueError: `counts` not [H, W], `positions` not [B, 2] of integers or
      with negative entries, `mask` not bool [B].
  """
  where = "diagnostics.add_visits"
  counts = np.asarray(counts)
  positions = np.asarray(positions)
  if counts.ndim != 2:
    raise ValueError(f"{where}: `counts` must be [H, W], got shape "
                     f"{counts.shape}.")
  if (positions.ndim != 2 or positions.shape[1] != 2
      or not np.issubdtype(positions.dtype, np.integer)):
    raise ValueError(f"{where}: `positions` must be integers shaped [B, 2], "
                     f"got {positions.dtype} {positions.shape}.")
  if mask is None:
    mask = np.ones(positions.shape[0], bool)
  mask = np.asarray(mask)
  if mask.shape != positions.shape[:1] or mask.dtype != np.bool_:
    raise ValueError(f"{where}: `mask` must be bool [{positions.shape[0]}], "
                     f"got {mask.dtype} {mask.shape}.")
  cells = positions[mask].astype(np.int64)
  if (cells < 0).any():
    raise ValueError(f"{where}: negative positions {cells[cells.min(1) < 0]}.")
  shape = counts.shape
  if len(cells):
    shape = (max(shape[0], int(cells[:, 0].max()) + 1),
             max(shape[1], int(cells[:, 1].max()) + 1))
  out = np.zeros(shape, np.int64)
  out[:counts.shape[0], :counts.shape[1]] = counts
  np.add.at(out, (cells[:, 0], cells[:, 1]), 1)
  return out


def count_visits(positions: np.ndarray, shape: Tuple[int, int],
                 mask: Optional[np.ndarray] = None) -> np.ndarray:
  """Visits per cell of a [H, W] grid (`add_visits` onto zeros).

  Args:
    positions: int [B, 2] cells as (row, col).
    shape: (H, W), grown if a counted cell lies outside.
    mask: bool [B], the lanes to count; None: all.

  Returns:
    int64 [H, W] counts.
  """
  return add_visits(np.zeros(tuple(shape), np.int64), positions, mask)


# ------------------------------------------ the columns the loops ask for
# The loops write these without knowing the agent's variants: they ask
# `extra_columns(config)`, `summary_columns(...)` and
# `lane_controller_columns(...)`.

# With Agent57's meta-controller: the evaluator bandit's arm and the return
# of its evaluation (`ngu_jax.loops.evaluation.evaluate_bandit`).
EVAL_BANDIT_COLUMNS = ("eval_arm", "eval_bandit_return")


def extra_columns(config: Any) -> Tuple[str, ...]:
  """The metrics columns a config adds to the loops' common ones.

  With Agent57's meta-controller (`config.has_meta_controller`) the arm
  shares of the training lanes' bandit windows, "arm_0" .. "arm_<N-1>"
  (`arm_shares`), and `EVAL_BANDIT_COLUMNS`; with DiCE's Boltzmann
  behaviour policy `TEMPERATURE_COLUMNS`. None for other configs (or
  objects that are not an `NGUConfig`).
  """
  columns = ()
  if getattr(config, "has_meta_controller", False):
    columns += arm_columns(config.num_mixtures) + EVAL_BANDIT_COLUMNS
  if hasattr(config, "policy") and variants.get(
      "policy", config.policy.kind).has_temperatures:
    columns += TEMPERATURE_COLUMNS
  return columns


def summary_columns(config: Any, learner_values: Mapping[str, Sequence[float]],
                    actor_sums: Any, error_stats: Any = None
                    ) -> Dict[str, float]:
  """`learner_summary` and `actor_summary` for the config's variant.

  Args:
    config: the agent's `NGUConfig` (which diagnostics apply).
    learner_values: `Learner.step` metric -> values since the last row.
    actor_sums: float [len(ACTOR_SUMS)], summed `actor_step_sums`.
    error_stats: the actor's RND error statistics, or None.

  Returns:
    {column: float} for `LEARNER_COLUMNS`' columns and `ACTOR_COLUMNS`.
  """
  out = learner_summary(learner_values, config.use_rnd,
                        config.intrinsic.kind, config.loss.split_values)
  out.update(actor_summary(actor_sums, config.use_rnd,
                           config.intrinsic.kind, error_stats))
  return out


# What `lane_controller_columns` reads of `actor.lane_controllers`.
CONTROLLER_FIELDS = ("arms", "temperature_x", "q_values")


def lane_controller_columns(config: Any, reports: Mapping[int, Any]
                            ) -> Dict[str, float]:
  """The arm_<j> and DiCE temperature columns from the lanes' controllers.

  Args:
    config: the agent's `NGUConfig`.
    reports: first lane -> an actor's latest `actor.lane_controllers` (at
      least `CONTROLLER_FIELDS`, host arrays): "arms" (its UCB windows'
      arms) with Agent57's meta-controller; "temperature_x" and "q_values"
      with DiCE's Boltzmann lanes.

  Returns:
    The columns of `extra_columns(config)` these give (none without a
    meta-controller or Boltzmann lanes; NaN before any report).
  """
  out = {}
  if config.has_meta_controller:
    arms = [np.asarray(r["arms"]).reshape(-1) for r in reports.values()
            if "arms" in r]
    out.update(arm_shares(
        np.concatenate(arms) if arms else np.zeros((0,), np.int32),
        config.num_mixtures))
  if variants.get("policy", config.policy.kind).has_temperatures:
    lanes = [r for r in reports.values() if "temperature_x" in r]
    if lanes:
      out.update(temperature_columns(
          np.concatenate([r["temperature_x"] for r in lanes]),
          np.concatenate([r["q_values"] for r in lanes])))
    else:
      out.update({c: np.nan for c in TEMPERATURE_COLUMNS})
  return out
