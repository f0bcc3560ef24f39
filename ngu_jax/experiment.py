"""Single-process NGU run loop: one batched env, actor, replay, learner.

Badia et al. (2020), "Never Give Up", App. A, run in one process: one
`BatchedEnv` of B lanes is stepped by one `Actor` (one jitted step for all
lanes), whose steps go through the `SequenceAdder` into the embedded
prioritised replay; once the replay holds `min_replay_size` sequences, the
learner runs at `config.samples_per_insert` sampled sequences per inserted
one, paced here (one thread cannot wait on the replay's rate limiter) with
inserts counted as fresh environment steps / `replay_period`: that is the
number of sequences for full-length sequences, and it keeps the many short,
padded sequences of early episodes (e.g. Disco Maze agents walking into
walls after a few steps) from multiplying the learner's work per step of
experience. So the replay ratio (transitions sampled per transition
generated) is samples_per_insert * trace_length / replay_period.
Actors pull parameters every `actor_update_period` steps (Table 6).

Logged to `output_dir/metrics.csv` (`COLUMNS`) every `log_every_env_steps`
environment steps (env steps count every lane): env steps, episodes, mean
return of the episodes finished since the last row, the fraction of them
with a positive return (the success rate of sparse-reward tasks such as
MiniGrid, whose only reward is for reaching the goal), learner steps and
mean loss since the last row, env steps/s, and for Disco Maze the mean
coverage of the finished episodes (Sec. 4.1, `CoverageTracker`). A progress
line goes to stderr (a tqdm bar when tqdm is installed).

Diagnostics (`ngu_jax.diagnostics`), so that a silenced intrinsic reward
shows in every run; means since the last row, NaN when there is nothing to
average or the column does not apply to the config:

  mean_episodic_reward, mean_intrinsic_reward   r^episodic (Alg. 1) and
      beta_j r^i (eq. 1 scaled as the loss sees it, App. A);
  mean_alpha, alpha_above_one   the modulator alpha_t and the fraction of
      steps with alpha_t > 1 (use_rnd with intrinsic_reward "ngu" only);
  rnd_error, rnd_error_mean, rnd_error_std   err(x_t), and the actor's
      running mu_e, sigma_e read at the row (`ActorState.error_stats`);
  rnd_loss, action_prediction_loss, action_prediction_accuracy   the
      learner's `sgd_step` metrics (rnd_loss needs use_rnd);
  q_exploit, q_explore   max_a Q(x_t, a, j) of the lanes of j = 0 and
      j = N - 1.

The actor columns average the training lanes' non-FIRST steps. Per step, one
small jitted function adds the step's sums and counts
(`diagnostics.actor_step_sums`) to a float32 vector on the device, read only
when a row is written: no transfer to the host per step.

Evaluation (`eval_every_env_steps` > 0): every so often, one episode in
each of B fresh evaluation lanes (their own environment, seeded apart) with
`config.eval_epsilon` and the exploitative mixture j = 0, then with the most
exploratory one j = N - 1 (App. A; with N = 1 both are j = 0), using the
learner's latest parameters and writing nothing to the replay. Columns
`eval_return` / `eval_coverage` (j = 0) and `eval_explore_return` /
`eval_explore_coverage` (j = N - 1); NaN in rows without an evaluation.

Visit heatmaps (grid worlds: Disco Maze, MiniGrid; with evaluations and an
`output_dir`): at each evaluation, `output_dir/heatmaps/eval_<env_steps>.png`
and `.npz` (no pickle) hold the visits per grid cell of every step of the
evaluation episodes of j = 0 ("eval_j0") and j = N - 1 ("eval_j<N-1>"), and
of the training lanes since the last evaluation ("train"). Disco Maze
draws a new maze every episode, so its maps overlay many mazes; a
terminating step counts the wall cell the agent hit.

Checkpoints (with `output_dir`): `output_dir/checkpoint/` is written every
`checkpoint_every_env_steps` env steps, at the end of the run and on Ctrl-C,
and `resume=True` continues from it exactly: a run of 2K env steps and a run
of K steps resumed to 2K give bit-identical parameters and metrics rows (for
environments whose state can be saved, i.e. Disco Maze). The directory is
replaced atomically (`ngu_jax.checkpoint.atomic_directory`) and holds no
pickle, only .npz arrays and JSON:

  config.json    the run's configuration (agent config, environment, lanes,
                 seed, log / eval intervals); resuming with another one is
                 refused, naming the differing fields.
  state.json     loop counters (env / actor / learner steps, episodes, the
                 next log and evaluation points, the learner pacing point),
                 the metrics rows so far, the environments' RNG states.
  learner.npz    `LearnerState`: parameters, target parameters, the three
                 optimiser states, RND observation statistics, steps,
                 skipped steps, key.
  actor.npz      the actor's `ActorState` (LSTM states, episodic memories,
                 per-lane embedding parameters, key, error statistics,
                 extras) and the parameters it acts with.
  adder.npz      the `SequenceAdder`'s sequences in progress.
  replay/        the replay (`PrioritizedReplay.save`, its RNG included).
  loop.npz       the last `TimeStep`, per-lane episode returns, the coverage
                 tracker, the episode returns / coverages, learner metrics
                 and actor diagnostic sums since the last metrics row, the
                 training lanes' visits since the last evaluation, and an
                 action not yet applied.
  env.npz, eval.npz, eval_env.npz   environment and evaluation state.

On resume, metrics.csv is rewritten with the checkpoint's rows (rows written
after the checkpoint are dropped) and appended to. A row written only
because the run ended between two log points is not part of the end
checkpoint, so a resumed run logs exactly the rows of an uninterrupted one.
(A checkpoint written before the diagnostic columns existed resumes too: its
rows leave them empty, and the next row's actor diagnostics average only the
steps after the resume.)
Environments that cannot save their state (envpool Atari and MiniGrid,
gymnax) are reset on resume: their episodes in flight restart (and are not
counted), and the adder's sequences in progress are emitted padded first,
as at a truncation, so that no sequence spans the reset.

Ctrl-C: in the main thread the first SIGINT only sets a flag; the loop
finishes its iteration, saves a checkpoint, writes the curves and raises
KeyboardInterrupt (a second Ctrl-C stops at once, without saving). A
KeyboardInterrupt raised by `env.step` itself is caught there, before any
state changed, and saved with the action still to apply. Elsewhere (e.g. a
loop not run in the main thread) the state may be mid-update: nothing is
saved, the last checkpoint stays.

Learning curves: `output_dir/curves.png` (`ngu_jax.plotting.plot_curves`:
returns, coverage, evaluations, intrinsic reward, alpha, RND error,
inverse dynamics, Q values, loss, throughput; panels without information
are left out) at every checkpoint and at the end, when matplotlib is
installed.
"""

import csv
import dataclasses
import functools
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import checkpoint as ckpt_lib
from ngu_jax import diagnostics
from ngu_jax import envs
from ngu_jax import mixtures
from ngu_jax import plotting
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu.config import NGUConfig

try:  # Optional progress bar.
  import tqdm  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - depends on the environment.
  tqdm = None

METRICS_FILE = "metrics.csv"
CURVES_FILE = "curves.png"
CHECKPOINT_DIR = "checkpoint"
HEATMAP_DIR = "heatmaps"
COLUMNS = ("env_steps", "actor_steps", "episodes", "mean_episode_return",
           "episode_success_rate", "mean_episode_coverage", "learner_steps",
           "learner_loss", "replay_size", "env_steps_per_s", "elapsed_s",
           "eval_return", "eval_coverage", "eval_explore_return",
           "eval_explore_coverage",
           # Diagnostics (module docstring; `ngu_jax.diagnostics`).
           "mean_episodic_reward", "mean_intrinsic_reward", "mean_alpha",
           "alpha_above_one", "rnd_error", "rnd_error_mean", "rnd_error_std",
           "rnd_loss", "action_prediction_loss", "action_prediction_accuracy",
           "q_exploit", "q_explore")
_CHECKPOINT_FORMAT = "ngu_jax.experiment.checkpoint"
_CHECKPOINT_VERSION = 1


class _Progress:
  """tqdm bar if available, else a simple line rewritten every ~2 s."""

  def __init__(self, total: int, enabled: bool, initial: int = 0):
    self._enabled = enabled
    self._bar = (tqdm.tqdm(total=total, initial=initial, unit="step",
                           file=sys.stderr)
                 if enabled and tqdm is not None else None)
    self._total = total
    self._last_print = 0.

  def update(self, done: int, increment: int, text: str) -> None:
    if not self._enabled:
      return
    if self._bar is not None:
      self._bar.update(increment)
      self._bar.set_postfix_str(text, refresh=False)
      return
    now = time.time()
    if now - self._last_print >= 2. or done >= self._total:
      self._last_print = now
      sys.stderr.write(f"\r{done}/{self._total} env steps  {text}   ")
      sys.stderr.flush()

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
    elif self._enabled:
      sys.stderr.write("\n")


def _mean(values: List[float]) -> float:
  return float(np.mean(values)) if values else math.nan


def evaluate(actor: builder_lib.Actor, env: envs.BatchedEnv,
             track_coverage: bool, visits_shape: Optional[Tuple[int, int]]
             = None) -> Dict[str, Any]:
  """One episode per lane of `env` with `actor` (no adder); mean results.

  Args:
    actor: the evaluation actor (it pulls the latest parameters first).
    env: the evaluation environment (reset here).
    track_coverage: measure Disco Maze coverage (Sec. 4.1).
    visits_shape: (H, W): also count the grid cells of every step of the
      episodes (`diagnostics.grid_positions`; the grid grows if a cell lies
      outside); None: no counts.

  Returns:
    {"return": mean episode return, "coverage": mean episode coverage
    (NaN unless `track_coverage`, i.e. Disco Maze)}, and with
    `visits_shape` "visits": int64 [H, W] visits of the episodes' steps
    (FIRST and LAST included), or None where the environment reports no
    positions.
  """
  lanes = env.num_envs
  tracker = None
  if track_coverage:
    from ngu_jax.envs import disco_maze  # pylint: disable=g-import-not-at-top
    tracker = disco_maze.CoverageTracker(lanes, size=env.size)
  actor.update(wait=True)  # The latest parameters for this evaluation.
  done = np.zeros(lanes, bool)
  episode_return = np.zeros(lanes, np.float64)
  final_coverage = np.full(lanes, math.nan)
  visits = (None if visits_shape is None
            else np.zeros(tuple(visits_shape), np.int64))
  timestep = env.reset()
  while True:
    live = ~done & ~timestep.first()
    episode_return += np.where(live, timestep.reward, 0.)
    if tracker is not None:
      lane_coverage = tracker.update(timestep)
      final_coverage = np.where(live & timestep.last(), lane_coverage,
                                final_coverage)
    if visits is not None:
      positions = diagnostics.grid_positions(timestep)
      visits = (None if positions is None
                else diagnostics.add_visits(visits, positions, ~done))
    done |= timestep.last()
    if done.all():
      break
    action = actor.select_action(timestep)
    actor.update()
    timestep = env.step(action)
  result = {"return": float(episode_return.mean()),
            "coverage": float(np.mean(final_coverage))}
  if visits_shape is not None:
    result["visits"] = visits
  return result


class ResumeError(ValueError):
  """A run cannot resume from its checkpoint: another configuration, or a
  corrupt or incomplete checkpoint (the message says which)."""


def run_config(config: NGUConfig, env_name: str, num_lanes: int, seed: int,
               env_kwargs: Optional[Dict[str, Any]],
               log_every_env_steps: int,
               eval_every_env_steps: int) -> Dict[str, Any]:
  """What a resumed run must share with its checkpoint (its config.json).

  Returns:
    A JSON-able dict: "agent" (`config.to_dict()`), "env_name",
    "env_kwargs", "num_lanes", "seed", "log_every_env_steps",
    "eval_every_env_steps". The budget, checkpoint interval and progress
    display may differ on resume.
  """
  return json.loads(json.dumps(dict(
      agent=config.to_dict(), env_name=env_name,
      env_kwargs=dict(env_kwargs or {}), num_lanes=num_lanes, seed=seed,
      log_every_env_steps=log_every_env_steps,
      eval_every_env_steps=eval_every_env_steps), default=repr))


def _differences(saved: Any, current: Any, prefix: str = "") -> List[str]:
  """'field: checkpoint X, now Y' for every leaf where two configs differ."""
  if isinstance(saved, dict) and isinstance(current, dict):
    out = []
    for key in sorted(set(saved) | set(current)):
      name = f"{prefix}.{key}" if prefix else str(key)
      if key not in saved:
        out.append(f"{name}: not in the checkpoint, now {current[key]!r}")
      elif key not in current:
        out.append(f"{name}: checkpoint {saved[key]!r}, now absent")
      else:
        out.extend(_differences(saved[key], current[key], name))
    return out
  if saved != current:
    return [f"{prefix}: checkpoint {saved!r}, now {current!r}"]
  return []


class _DeferInterrupt:
  """Defers Ctrl-C (SIGINT) to the run loop's iteration boundaries.

  Installed only in the main thread (the only one Python delivers signals
  to) and only while `enabled`. The first SIGINT sets `requested`; the loop
  then checkpoints after its iteration and raises KeyboardInterrupt. A second
  SIGINT raises KeyboardInterrupt at once.
  """

  def __init__(self, enabled: bool):
    self._enabled = enabled
    self._installed = False
    self._previous = None
    self.requested = False

  def _handle(self, signum, frame):
    del signum, frame
    if self.requested:
      raise KeyboardInterrupt
    self.requested = True
    sys.stderr.write("\nInterrupted: saving a checkpoint after this step "
                     "(Ctrl-C again stops at once, without saving).\n")
    sys.stderr.flush()

  def __enter__(self):
    # Only in the main thread, and not where SIGINT is ignored (e.g. a run
    # started with nohup or in a background job): that choice is kept.
    if (self._enabled
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
      self._previous = signal.signal(signal.SIGINT, self._handle)
      self._installed = True
    return self

  def __exit__(self, *exc_info):
    if self._installed:
      signal.signal(signal.SIGINT, self._previous if self._previous
                    is not None else signal.default_int_handler)
      self._installed = False
    return False


# Counters of `_Loop`, saved in state.json.
_COUNTERS = ("env_steps", "actor_steps", "episodes", "learner_steps",
             "next_log", "next_eval", "ready_at", "elapsed_s")


@dataclasses.dataclass
class _Loop:
  """The run loop's own state between two iterations (all checkpointed).

  Attributes:
    env_steps / actor_steps / episodes / learner_steps: totals so far.
    next_log / next_eval: env steps of the next metrics row / evaluation.
    ready_at: env steps when the replay first held min_replay_size items
      (the learner's pacing origin), None before.
    elapsed_s: wall-clock seconds of the run so far (all sessions).
    timestep: the `TimeStep` the actor acts on next.
    pending_action: int32 [B], an action chosen (and given to the adder)
      but not yet applied to the environment, else None.
    episode_return: float64 [B], return of each lane's current episode.
    returns / coverages: finished-episode returns and coverages since the
      last metrics row.
    learner_metrics: `Learner.step` metric name (`diagnostics.
      LEARNER_COLUMNS`) -> its values since the last metrics row.
    actor_sums: float32 [len(diagnostics.ACTOR_SUMS)] on the device, the
      `diagnostics.actor_step_sums` of the actor steps since the last row.
    visits: int64 [H, W] grid-cell visits of the training lanes since the
      last evaluation (grid worlds with evaluations), else None.
    rows: the metrics rows so far.
  """
  env_steps: int = 0
  actor_steps: int = 0
  episodes: int = 0
  learner_steps: int = 0
  next_log: int = 0
  next_eval: int = 0
  ready_at: Optional[int] = None
  elapsed_s: float = 0.
  timestep: Any = None
  pending_action: Optional[np.ndarray] = None
  episode_return: Optional[np.ndarray] = None
  returns: List[float] = dataclasses.field(default_factory=list)
  coverages: List[float] = dataclasses.field(default_factory=list)
  learner_metrics: Dict[str, List[float]] = dataclasses.field(
      default_factory=dict)
  actor_sums: Any = None
  visits: Optional[np.ndarray] = None
  rows: List[Dict[str, Any]] = dataclasses.field(default_factory=list)


class _Parts(NamedTuple):
  """The run's stateful parts (what a checkpoint saves besides `_Loop`)."""
  env: envs.BatchedEnv
  replay: Any
  learner: builder_lib.Learner
  adder: Any
  actor: builder_lib.Actor
  coverage: Any  # disco_maze.CoverageTracker or None
  eval_env: Optional[envs.BatchedEnv]
  eval_actors: Dict[int, builder_lib.Actor]


def _rows_to_json(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
  return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
           for k, v in row.items()} for row in rows]


def _rows_from_json(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
  return [{k: (math.nan if v is None else v) for k, v in row.items()}
          for row in rows]


def _env_state(env: Optional[envs.BatchedEnv]):
  """(arrays, JSON values) of `env.get_state()`, or None if unsupported."""
  get_state = getattr(env, "get_state", None)
  if get_state is None:
    return None
  state = get_state()
  arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
  return arrays, {k: v for k, v in state.items() if k not in arrays}


def _actor_tree(actor: builder_lib.Actor) -> Dict[str, Any]:
  return {"state": actor.state, "params": actor.params}


def _save_checkpoint(path: str, parts: _Parts, loop: _Loop,
                     config: Dict[str, Any]) -> None:
  """Writes the checkpoint directory `path` (module docstring) atomically.

  Call between loop iterations (the actor state is read, not copied, and is
  donated at the next step).
  """
  def join(*names):
    return os.path.join(tmp, *names)

  with ckpt_lib.atomic_directory(path) as tmp:
    ckpt_lib.save_pytree(join("learner.npz"), parts.learner.state)
    ckpt_lib.save_pytree(join("actor.npz"), _actor_tree(parts.actor))
    ckpt_lib.save_arrays(join("adder.npz"), parts.adder.state_dict())
    parts.replay.save(join("replay"))
    ts = loop.timestep
    arrays = {"episode_return": loop.episode_return,
              "returns": np.asarray(loop.returns, np.float64),
              "coverages": np.asarray(loop.coverages, np.float64),
              "actor_sums": np.asarray(jax.device_get(loop.actor_sums)),
              "timestep/step_type": ts.step_type,
              "timestep/reward": ts.reward,
              "timestep/discount": ts.discount,
              "timestep/observation": ts.observation}
    arrays.update({f"timestep/extras/{k}": v for k, v in ts.extras.items()})
    arrays.update({f"learner_metrics/{k}": np.asarray(v, np.float64)
                   for k, v in loop.learner_metrics.items()})
    if loop.visits is not None:
      arrays["visits"] = loop.visits
    if loop.pending_action is not None:
      arrays["pending_action"] = loop.pending_action
    if parts.coverage is not None:
      arrays.update({f"coverage/{k}": v
                     for k, v in parts.coverage.get_state().items()})
    ckpt_lib.save_arrays(join("loop.npz"), arrays)
    env_state = _env_state(parts.env)
    if env_state is not None:
      ckpt_lib.save_arrays(join("env.npz"), env_state[0])
    eval_env_state = None
    if parts.eval_actors:
      ckpt_lib.save_pytree(join("eval.npz"), {
          str(j): _actor_tree(a) for j, a in parts.eval_actors.items()})
      eval_env_state = _env_state(parts.eval_env)
      if eval_env_state is not None:
        ckpt_lib.save_arrays(join("eval_env.npz"), eval_env_state[0])
    meta = {
        "format": _CHECKPOINT_FORMAT,
        "version": _CHECKPOINT_VERSION,
        "counters": {name: getattr(loop, name) for name in _COUNTERS},
        "rows": _rows_to_json(loop.rows),
        "actor": {"has_params": parts.actor.params is not None,
                  "num_updates": parts.actor.num_updates},
        "eval_actors": {str(j): {"has_params": a.params is not None,
                                 "num_updates": a.num_updates}
                        for j, a in parts.eval_actors.items()},
        "env": None if env_state is None else env_state[1],
        "eval_env": None if eval_env_state is None else eval_env_state[1],
    }
    ckpt_lib.write_json(join("config.json"), config)
    ckpt_lib.write_json(join("state.json"), meta)


def _read_checkpoint_meta(path: str, config: Dict[str, Any]
                          ) -> Dict[str, Any]:
  """Reads state.json after checking config.json against `config`.

  Raises:
    ResumeError: a missing or corrupt file, another format or version, or
      a differing config (listing the fields).
  """
  try:
    saved = ckpt_lib.read_json(os.path.join(path, "config.json"))
    meta = ckpt_lib.read_json(os.path.join(path, "state.json"))
  except (OSError, ValueError) as e:
    raise ResumeError(f"run_experiment: cannot resume from the corrupt or "
                      f"incomplete checkpoint {path}: {e}") from e
  differences = _differences(saved, config)
  if differences:
    raise ResumeError(
        f"run_experiment: cannot resume from {path}: the run's configuration "
        "differs from the checkpoint's:\n  " + "\n  ".join(differences))
  if not isinstance(meta, dict) or meta.get("format") != _CHECKPOINT_FORMAT:
    raise ResumeError(f"run_experiment: {path}/state.json is not a run "
                      "checkpoint.")
  if meta.get("version") != _CHECKPOINT_VERSION:
    raise ResumeError(f"run_experiment: {path} has checkpoint version "
                      f"{meta.get('version')!r}; this code reads version "
                      f"{_CHECKPOINT_VERSION}.")
  return meta


def _actor_template(actor: builder_lib.Actor, learner: builder_lib.Learner,
                    info: Dict[str, Any]) -> Dict[str, Any]:
  """The `_actor_tree` layout of a saved actor (params None if it had none)."""
  return {"state": actor.state,
          "params": learner.state.params if info["has_params"] else None}


def _restore_checkpoint(path: str, meta: Dict[str, Any], parts: _Parts,
                        loop: _Loop) -> None:
  """Restores every part and `loop` from the checkpoint directory `path`.

  Environments without `set_state` are reset instead (module docstring).
  """
  def join(*names):
    return os.path.join(path, *names)

  learner = parts.learner
  learner.restore(ckpt_lib.load_pytree(join("learner.npz"), learner.state))
  tree = ckpt_lib.load_pytree(
      join("actor.npz"), _actor_template(parts.actor, learner, meta["actor"]))
  parts.actor.restore(tree["state"], tree["params"],
                      meta["actor"]["num_updates"])
  if parts.eval_actors:
    infos = meta["eval_actors"]
    trees = ckpt_lib.load_pytree(join("eval.npz"), {
        str(j): _actor_template(a, learner, infos[str(j)])
        for j, a in parts.eval_actors.items()})
    for j, actor in parts.eval_actors.items():
      actor.restore(trees[str(j)]["state"], trees[str(j)]["params"],
                    infos[str(j)]["num_updates"])
  parts.replay.restore(join("replay"))
  adder_state = ckpt_lib.load_arrays(join("adder.npz"))
  parts.adder.load_state_dict(
      adder_state, recurrent_state=parts.actor.state.extras.recurrent_state)

  for name in _COUNTERS:
    setattr(loop, name, meta["counters"][name])
  loop.rows = _rows_from_json(meta["rows"])
  arrays = ckpt_lib.load_arrays(join("loop.npz"))
  loop.episode_return = arrays["episode_return"]
  loop.returns = arrays["returns"].tolist()
  loop.coverages = arrays["coverages"].tolist()
  # Checkpoints written before the diagnostics had only the losses.
  loop.learner_metrics = {k[len("learner_metrics/"):]: v.tolist()
                          for k, v in arrays.items()
                          if k.startswith("learner_metrics/")}
  if "losses" in arrays:
    loop.learner_metrics["loss"] = arrays["losses"].tolist()
  if "actor_sums" in arrays:
    loop.actor_sums = jnp.array(arrays["actor_sums"], copy=True)
  if "visits" in arrays and loop.visits is not None:
    loop.visits = arrays["visits"]
  if parts.coverage is not None:
    parts.coverage.set_state({k: arrays[f"coverage/{k}"]
                              for k in ("visited", "count")})

  if meta["env"] is not None and hasattr(parts.env, "set_state"):
    env_arrays = ckpt_lib.load_arrays(join("env.npz"))
    parts.env.set_state({**env_arrays, **meta["env"]})
    extras = {k[len("timestep/extras/"):]: v for k, v in arrays.items()
              if k.startswith("timestep/extras/")}
    loop.timestep = envs.TimeStep(
        step_type=arrays["timestep/step_type"],
        reward=arrays["timestep/reward"],
        discount=arrays["timestep/discount"],
        observation=arrays["timestep/observation"], extras=extras)
    loop.pending_action = arrays.get("pending_action")
  else:
    logging.warning(
        "run_experiment: the environment cannot save its state; resuming "
        "with a reset: the episodes in flight restart (uncounted) and the "
        "adder's sequences in progress are emitted padded, as at a "
        "truncation.")
    parts.adder.flush()
    loop.timestep = parts.env.reset()
    loop.pending_action = None
  if meta["eval_env"] is not None and hasattr(parts.eval_env, "set_state"):
    env_arrays = ckpt_lib.load_arrays(join("eval_env.npz"))
    parts.eval_env.set_state({**env_arrays, **meta["eval_env"]})


def _write_metrics_rows(path: str, rows: List[Dict[str, Any]]) -> None:
  """Writes metrics.csv with exactly `rows` (atomically)."""
  tmp = path + ".tmp"
  with open(tmp, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
  os.replace(tmp, path)


@functools.lru_cache(maxsize=8)
def _jitted_actor_sums(num_mixtures: int, beta: float):
  """jit of sums + `diagnostics.actor_step_sums` (one compile per betas)."""
  betas = mixtures.betas(num_mixtures, beta)

  def add(sums, extras, step_is_first):
    return sums + diagnostics.actor_step_sums(extras, step_is_first, betas)
  return jax.jit(add)


def _grid_shape(env_name: str, env: envs.BatchedEnv
                ) -> Optional[Tuple[int, int]]:
  """The initial visit-count grid of a grid world, else None.

  Disco Maze: its size x size grid. MiniGrid: (0, 0), grown to the cells
  visited (its grid size is not in its spec).
  """
  if env_name == "disco_maze":
    return (int(env.size), int(env.size))
  if env_name.startswith("minigrid/"):
    return (0, 0)
  return None


def _write_heatmaps(directory: str, env_steps: int,
                    counts: Dict[str, Tuple[str, np.ndarray]]) -> None:
  """eval_<env_steps>.npz (the counts) and .png (`plot_visit_heatmaps`).

  Args:
    directory: where both go (created).
    env_steps: the env steps of the evaluation.
    counts: npz key (e.g. "eval_j0", "train") -> (panel title, int64
      [H, W] visits); padded with zeros to one shape.

  A failure only logs (never stops a run).
  """
  try:
    height = max(c.shape[0] for _, c in counts.values())
    width = max(c.shape[1] for _, c in counts.values())
    padded = {key: np.pad(c, ((0, height - c.shape[0]),
                              (0, width - c.shape[1])))
              for key, (_, c) in counts.items()}
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"eval_{env_steps}")
    ckpt_lib.save_arrays(stem + ".npz", padded)
    plotting.plot_visit_heatmaps(
        {title: padded[key] for key, (title, _) in counts.items()},
        stem + ".png", title=f"Visits per grid cell at {env_steps} env steps")
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("run_experiment: could not write the heatmaps of %d env "
                    "steps in %s: %r", env_steps, directory, e)


def _plot(metrics_path: Optional[str], curves_path: Optional[str]
          ) -> Optional[str]:
  """plotting.plot_curves, but a failure only logs (never stops a run)."""
  if metrics_path is None:
    return None
  try:
    return plotting.plot_curves(metrics_path, curves_path)
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("run_experiment: could not write %s: %r", curves_path, e)
    return None


def run_experiment(config: NGUConfig, env_name: str, total_env_steps: int,
                   num_lanes: int = 8, seed: int = 0,
                   output_dir: Optional[str] = None,
                   env_kwargs: Optional[Dict[str, Any]] = None,
                   log_every_env_steps: int = 1000,
                   eval_every_env_steps: int = 0,
                   progress: bool = True,
                   checkpoint_every_env_steps: int = 0,
                   resume: bool = False,
                   replay_backend: str = "embedded") -> Dict[str, Any]:
  """Trains NGU in one process for `total_env_steps` environment steps.

  Args:
    config: the agent's config.
    env_name: a name `ngu_jax.envs.make` accepts, e.g. "disco_maze".
    total_env_steps: budget in environment steps over all lanes (the run
      takes ceil(total / num_lanes) actor steps); with `resume`, the total
      including the steps already taken.
    num_lanes: B, lanes of the batched environment (one actor).
    seed: seeds the environment, the replay and the agent's keys.
    output_dir: where `metrics.csv`, `curves.png`, `heatmaps/` and
      `checkpoint/` go (created); None writes nothing (and saves no
      checkpoint).
    env_kwargs: extra keyword arguments of `envs.make`.
    log_every_env_steps: a metrics row every this many env steps (and one
      at the end).
    eval_every_env_steps: evaluate (see the module docstring) at the first
      metrics row past every multiple of this; 0 never.
    progress: show a progress bar / line on stderr.
    checkpoint_every_env_steps: also checkpoint at the first iteration past
      every multiple of this many env steps; 0: only at the end (and on
      Ctrl-C). Needs `output_dir`.
    resume: continue from `output_dir/checkpoint` (module docstring); the
      run's configuration (`run_config`) must be the checkpoint's.
    replay_backend: "embedded" (default) or "reverb" (`NGUBuilder`; needs
      the [reverb] extra; its server is stopped at the end of the run).

  Returns:
    A summary dict: the last metrics row plus "rows" (all rows, those before
    a resume included), "metrics_path", "curves_path" (None without
    matplotlib) and "checkpoint_path" (None without `output_dir`).

  Raises:
    ValueError: bad arguments.
    ResumeError: (a ValueError) with `resume`, a configuration differing
      from the checkpoint's (listing the fields) or a corrupt checkpoint.
    FileNotFoundError: `resume` without a checkpoint in `output_dir`.
    KeyboardInterrupt: on Ctrl-C, after saving a checkpoint (module
      docstring).
  """
  if total_env_steps < 1 or num_lanes < 1 or log_every_env_steps < 1:
    raise ValueError("run_experiment: `total_env_steps`, `num_lanes` and "
                     "`log_every_env_steps` must be >= 1, got "
                     f"{total_env_steps}, {num_lanes}, {log_every_env_steps}.")
  if checkpoint_every_env_steps < 0:
    raise ValueError("run_experiment: `checkpoint_every_env_steps` must be "
                     f">= 0, got {checkpoint_every_env_steps}.")
  if output_dir is None and (resume or checkpoint_every_env_steps):
    raise ValueError("run_experiment: `resume` and "
                     "`checkpoint_every_env_steps` need an `output_dir`.")
  this_config = run_config(config, env_name, num_lanes, seed, env_kwargs,
                           log_every_env_steps, eval_every_env_steps)
  checkpoint_path = metrics_path = curves_path = None
  resume_from = meta = None
  if output_dir is not None:
    checkpoint_path = os.path.join(output_dir, CHECKPOINT_DIR)
    metrics_path = os.path.join(output_dir, METRICS_FILE)
    curves_path = os.path.join(output_dir, CURVES_FILE)
  if resume:
    try:
      resume_from = ckpt_lib.find_directory(checkpoint_path)
    except FileNotFoundError:
      raise FileNotFoundError(
          f"run_experiment: no checkpoint to resume from in {output_dir} "
          f"(expected {checkpoint_path}/); start without `resume`.") from None
    meta = _read_checkpoint_meta(resume_from, this_config)
  elif checkpoint_path is not None and os.path.isdir(checkpoint_path):
    logging.warning("run_experiment: %s holds a checkpoint; starting afresh "
                    "(it is replaced at this run's first checkpoint; pass "
                    "resume=True to continue it instead).", checkpoint_path)

  env = envs.make(env_name, num_lanes, seed=seed, **(env_kwargs or {}))
  spec = builder_lib.make_environment_spec(env)
  builder = builder_lib.NGUBuilder(config, replay_backend=replay_backend)
  learner_key, actor_key = jax.random.split(jax.random.PRNGKey(seed))
  networks = builder.make_networks(spec)
  policy = builder.make_policy(networks, spec)
  replay = builder.make_replay_tables(spec, policy, rate_limit=False,
                                      seed=seed)
  learner = builder.make_learner(
      learner_key, networks, builder.make_dataset_iterator(replay),
      env_spec=spec, replay_client=replay)
  adder = builder.make_adder(replay, spec, policy)
  actor = builder.make_actor(actor_key, policy, spec, learner, adder)
  coverage = None
  if env_name == "disco_maze":
    from ngu_jax.envs import disco_maze  # pylint: disable=g-import-not-at-top
    coverage = disco_maze.CoverageTracker(num_lanes, size=env.size)

  eval_env = None
  eval_actors = {}  # mixture j -> evaluation actor
  if eval_every_env_steps > 0:
    eval_env = envs.make(env_name, num_lanes, seed=seed + 10_000,
                         **(env_kwargs or {}))
    for mixture in sorted({0, config.num_mixtures - 1}):
      eval_policy = builder.make_policy(networks, spec, evaluation=True,
                                        eval_mixture_index=mixture)
      eval_actors[mixture] = builder.make_actor(
          jax.random.PRNGKey(seed + 1 + mixture), eval_policy, spec, learner)
  parts = _Parts(env=env, replay=replay, learner=learner, adder=adder,
                 actor=actor, coverage=coverage, eval_env=eval_env,
                 eval_actors=eval_actors)

  # Diagnostics (module docstring): actor sums on the device, training-lane
  # visits for the heatmaps of grid worlds with evaluations.
  add_actor_sums = _jitted_actor_sums(config.num_mixtures, config.beta)
  zero_sums = np.zeros(len(diagnostics.ACTOR_SUMS), np.float32)
  grid_shape = _grid_shape(env_name, env) if eval_actors else None
  heatmap_dir = (os.path.join(output_dir, HEATMAP_DIR)
                 if output_dir is not None and grid_shape is not None
                 else None)
  loop = _Loop(next_log=log_every_env_steps, next_eval=eval_every_env_steps,
               episode_return=np.zeros(num_lanes, np.float64),
               actor_sums=jnp.array(zero_sums),
               visits=(None if grid_shape is None
                       else np.zeros(grid_shape, np.int64)))
  csv_file = writer = None
  bar = None
  try:
    if resume:
      try:
        _restore_checkpoint(resume_from, meta, parts, loop)
      except (OSError, ValueError, KeyError, TypeError) as e:
        raise ResumeError(f"run_experiment: cannot resume from the corrupt "
                          f"or incomplete checkpoint {resume_from}: {e}"
                          ) from e
    else:
      loop.timestep = env.reset()
    if output_dir is not None:
      os.makedirs(output_dir, exist_ok=True)
      if resume:  # Keep the rows up to the checkpoint, then append.
        _write_metrics_rows(metrics_path, loop.rows)
        csv_file = open(metrics_path, "a", newline="")
      else:
        csv_file = open(metrics_path, "w", newline="")
      writer = csv.DictWriter(csv_file, fieldnames=COLUMNS)
      if not resume:
        writer.writeheader()

    batch_size = config.batch_size
    min_size = config.min_replay_size
    # Sampled sequences allowed per fresh env step (module docstring).
    samples_per_env_step = config.samples_per_insert / config.replay_period
    every = checkpoint_every_env_steps
    next_checkpoint = (loop.env_steps // every + 1) * every if every else 0
    start = time.time() - loop.elapsed_s
    bar = _Progress(total_env_steps, progress, initial=min(
        loop.env_steps, total_env_steps))

    def make_row() -> Dict[str, Any]:
      """The metrics row now (evaluating if due); resets the accumulators."""
      loop.elapsed_s = elapsed = time.time() - start
      row = dict(
          env_steps=loop.env_steps, actor_steps=loop.actor_steps,
          episodes=loop.episodes,
          mean_episode_return=_mean(loop.returns),
          episode_success_rate=_mean([float(r > 0) for r in loop.returns]),
          mean_episode_coverage=(_mean(loop.coverages)
                                 if coverage is not None else math.nan),
          learner_steps=loop.learner_steps, replay_size=replay.size,
          env_steps_per_s=loop.env_steps / max(elapsed, 1e-9),
          elapsed_s=elapsed, eval_return=math.nan, eval_coverage=math.nan,
          eval_explore_return=math.nan, eval_explore_coverage=math.nan)
      row.update(diagnostics.learner_summary(
          loop.learner_metrics, config.use_rnd, config.intrinsic_reward))
      row.update(diagnostics.actor_summary(
          jax.device_get(loop.actor_sums), config.use_rnd,
          config.intrinsic_reward,
          jax.device_get(actor.state.error_stats)))
      if eval_actors and loop.env_steps >= loop.next_eval:
        loop.next_eval += eval_every_env_steps
        results = {j: evaluate(eval_actor, eval_env, coverage is not None,
                               visits_shape=grid_shape)
                   for j, eval_actor in eval_actors.items()}
        last = config.num_mixtures - 1
        for prefix, j in (("eval_", 0), ("eval_explore_", last)):
          row[prefix + "return"] = results[j]["return"]
          row[prefix + "coverage"] = results[j]["coverage"]
        if grid_shape is not None:
          names = {0: "exploit", last: "most exploratory"}
          if last == 0:
            names[0] = "the only mixture"
          counts = {f"eval_j{j}": (f"evaluation j = {j} ({names[j]})",
                                   result["visits"])
                    for j, result in sorted(results.items())
                    if result["visits"] is not None}
          if counts and loop.visits is not None:
            counts["train"] = ("training lanes since the last evaluation",
                               loop.visits)
          if counts and heatmap_dir is not None:
            _write_heatmaps(heatmap_dir, loop.env_steps, counts)
          loop.visits = np.zeros(grid_shape, np.int64)
      loop.rows.append(row)
      if writer is not None:
        writer.writerow(row)
        csv_file.flush()
      loop.returns, loop.coverages, loop.learner_metrics = [], [], {}
      loop.actor_sums = jnp.array(zero_sums)
      return row

    def save(why: str, plot: bool = True) -> None:
      loop.elapsed_s = time.time() - start
      _save_checkpoint(checkpoint_path, parts, loop, this_config)
      if plot:
        _plot(metrics_path, curves_path)
      logging.info("run_experiment: %s checkpoint at %d env steps in %s.",
                   why, loop.env_steps, checkpoint_path)

    consistent = True  # `loop` and `parts` can be saved as they are.
    with _DeferInterrupt(enabled=checkpoint_path is not None) as interrupt:
      try:
        while loop.env_steps < total_env_steps:
          if loop.pending_action is None:
            consistent = False
            # Episode statistics of the step just received.
            timestep = loop.timestep
            first, last = timestep.first(), timestep.last()
            loop.episode_return = np.where(
                first, 0., loop.episode_return) + np.where(
                    first, 0., timestep.reward)
            if coverage is not None:
              lane_coverage = coverage.update(timestep)
              loop.coverages.extend(lane_coverage[last].tolist())
            loop.returns.extend(loop.episode_return[last].tolist())
            loop.episodes += int(last.sum())
            # Act.
            if loop.visits is not None:
              positions = diagnostics.grid_positions(timestep)
              if positions is not None:
                loop.visits = diagnostics.add_visits(loop.visits, positions)
            action = actor.select_action(timestep)
            actor.observe(timestep, action)
            extras = actor.state.extras
            loop.actor_sums = add_actor_sums(
                loop.actor_sums,
                {k: getattr(extras, k) for k in diagnostics.ACTOR_EXTRAS},
                first)
            actor.update()
            loop.pending_action = action
            consistent = True
          # A KeyboardInterrupt out of env.step leaves a consistent state:
          # the action is still pending.
          timestep = env.step(loop.pending_action)
          consistent = False
          loop.timestep, loop.pending_action = timestep, None
          loop.actor_steps += 1
          loop.env_steps += num_lanes

          # Learn at `samples_per_insert` once the replay holds min_size
          # items (the first batch as soon as it does).
          if loop.ready_at is None and replay.size >= min_size:
            loop.ready_at = loop.env_steps
          while (loop.ready_at is not None
                 and loop.learner_steps * batch_size
                 <= samples_per_env_step * (loop.env_steps - loop.ready_at)):
            metrics = learner.step()
            for _, name in diagnostics.LEARNER_COLUMNS:
              loop.learner_metrics.setdefault(name, []).append(
                  metrics.get(name, math.nan))
            loop.learner_steps += 1

          rate = loop.env_steps / max(time.time() - start, 1e-9)
          bar.update(loop.env_steps, num_lanes,
                     f"{rate:.0f} env steps/s, {loop.episodes} episodes, "
                     f"{loop.learner_steps} learner steps")
          if loop.env_steps >= loop.next_log:
            loop.next_log += log_every_env_steps
            make_row()
          consistent = True
          if (every and loop.env_steps >= next_checkpoint
              and loop.env_steps < total_env_steps):
            next_checkpoint = (loop.env_steps // every + 1) * every
            save("periodic")
          if interrupt.requested:
            raise KeyboardInterrupt
      except KeyboardInterrupt:
        if checkpoint_path is not None and consistent:
          save("interrupt")
          sys.stderr.write(
              f"\nrun_experiment: interrupted at {loop.env_steps} env steps; "
              f"checkpoint saved in {checkpoint_path}; continue with "
              "resume=True (experiments.train: --resume).\n")
        elif checkpoint_path is not None:
          sys.stderr.write(
              "\nrun_experiment: interrupted in the middle of a step: no "
              f"checkpoint saved; the last one in {checkpoint_path} (if any) "
              "stays.\n")
        raise

      # The end (a Ctrl-C now is ignored: the run is complete). A row only
      # because the run ends between two log points is written after the
      # checkpoint, so that a resumed run drops it.
      if checkpoint_path is not None:
        save("final", plot=False)
      if not loop.rows or loop.rows[-1]["env_steps"] != loop.env_steps:
        make_row()
  finally:
    if bar is not None:
      bar.close()
    if csv_file is not None:
      csv_file.close()
    env.close()
    if eval_env is not None:
      eval_env.close()
    if hasattr(replay, "close"):  # Reverb: stops the server.
      replay.close()
  curves_path = _plot(metrics_path, curves_path)
  summary = dict(loop.rows[-1]) if loop.rows else {}
  summary.update(rows=loop.rows, metrics_path=metrics_path,
                 curves_path=curves_path, checkpoint_path=checkpoint_path)
  return summary
