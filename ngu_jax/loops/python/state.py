"""The Python loop's parts and state between iterations, and its checkpoint.

`build_parts` makes the environments and the `NGUBuilder` parts (`Parts`);
`LoopState` (counters, the last `TimeStep`, statistics since the last
metrics row) and `Parts` (environment, replay, learner, adder, actors) are
what `ngu_jax.loops.python.loop.run_experiment` carries;
`save_checkpoint` / `restore_checkpoint` write and read them in the layout
documented in `ngu_jax.loops.checkpointing` (format
`checkpointing.checkpoint_format("python")`, version `CHECKPOINT_VERSION`).
"""

import dataclasses
import logging
import os
from typing import Any, Dict, List, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import acting
from ngu_jax.loops import checkpointing
from ngu_jax.loops import evaluation
from ngu_jax.loops import host
from ngu_jax.loops import metrics_log

# Counters of `LoopState`, saved in state.json.
COUNTERS = ("env_steps", "actor_steps", "episodes", "learner_steps",
            "next_log", "next_eval", "ready_at", "elapsed_s")


@dataclasses.dataclass
class LoopState:
  """The run loop's own state between two iterations (all checkpointed).

  Attributes:
    env_steps / actor_steps / episodes / learner_steps: totals so far.
    log / evaluations: the metrics rows' and the evaluations'
      `host.Schedule` (saved as "next_log" / "next_eval", their next points;
      the properties of those names read and set them).
    ready_at: env steps when the replay first held min_replay_size items
      (the learner's pacing origin), None before.
    elapsed_s: wall-clock seconds of the run so far (all sessions).
    timestep: the `TimeStep` the actor acts on next.
    pending_action: int32 [B], an action chosen (and given to the adder)
      but not yet applied to the environment, else None.
    episode_return: float64 [B], return of each lane's current episode.
    returns / coverages: finished-episode returns and coverages since the
      last metrics row.
    episode_extras: {name: values} for each name of
      `acting.EPISODE_EXTRAS`: the extras at LAST of the episodes finished
      since the last metrics row (`acting.record_episodes`).
    learner_metrics: the `Learner.step` metrics since the last metrics row
      (`host.LearnerMetrics`).
    actor_sums: float32 [len(diagnostics.ACTOR_SUMS)] on the device, the
      `diagnostics.actor_step_sums` of the actor steps since the last row.
    visits: int64 [H, W] grid-cell visits of the training lanes since the
      last evaluation (grid worlds with evaluations), else None.
    rows: the metrics rows so far (`metrics_log.MetricsRows`: the last
      one and the count in memory, all in metrics.csv).
  """
  env_steps: int = 0
  actor_steps: int = 0
  episodes: int = 0
  learner_steps: int = 0
  log: host.Schedule = dataclasses.field(
      default_factory=lambda: host.Schedule(0))
  evaluations: host.Schedule = dataclasses.field(
      default_factory=lambda: host.Schedule(0))
  ready_at: Optional[int] = None
  elapsed_s: float = 0.
  timestep: Any = None
  pending_action: Optional[np.ndarray] = None
  episode_return: Optional[np.ndarray] = None
  returns: List[float] = dataclasses.field(default_factory=list)
  coverages: List[float] = dataclasses.field(default_factory=list)
  episode_extras: Dict[str, List[float]] = dataclasses.field(
      default_factory=acting.zero_episode_extras)
  learner_metrics: host.LearnerMetrics = dataclasses.field(
      default_factory=host.LearnerMetrics)
  actor_sums: Any = None
  visits: Optional[np.ndarray] = None
  rows: metrics_log.MetricsRows = dataclasses.field(
      default_factory=lambda: metrics_log.MetricsRows(None))

  @property
  def next_log(self) -> int:
    return self.log.next_at

  @next_log.setter
  def next_log(self, value: int) -> None:
    self.log.next_at = int(value)

  @property
  def next_eval(self) -> int:
    return self.evaluations.next_at

  @next_eval.setter
  def next_eval(self, value: int) -> None:
    self.evaluations.next_at = int(value)


class Parts(NamedTuple):
  """The run's stateful parts (what a checkpoint saves besides `LoopState`)."""
  env: envs.BatchedEnv
  replay: Any
  learner: learning.Learner
  adder: Any
  actor: actor_lib.Actor
  coverage: Any  # env.make_coverage_tracker(): CoverageTracker or None
  eval_env: Optional[envs.BatchedEnv]
  eval_actors: Dict[int, actor_lib.Actor]
  acting: acting.ActingStep  # `actor` and `coverage`'s host acting step
  # With Agent57's meta-controller and evaluations: the evaluator's bandit.
  eval_bandit: Optional[evaluation.EvaluatorBandit] = None


def build_parts(config: NGUConfig, env_name: str, num_lanes: int, seed: int,
                 env_kwargs: Optional[Dict[str, Any]],
                 eval_every_env_steps: int,
                 replay_backend: str) -> Parts:
  """The environments and the `NGUBuilder` parts (evaluation actors too).

  The coverage tracker is the one the environment declares and the
  evaluation environment and actors are seeded as in every host loop
  (`ngu_jax.loops.acting`).

  Args: those of `loop.run_experiment`.
  """
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
  coverage = acting.make_coverage_tracker(env)

  eval_env = None
  eval_actors = {}  # mixture j -> evaluation actor
  if eval_every_env_steps > 0:
    eval_env = envs.make(env_name, num_lanes,
                         seed=acting.evaluation_env_seed(seed),
                         **(env_kwargs or {}))
    eval_actors = acting.make_evaluation_actors(builder, networks, spec,
                                                learner, config, seed)
  eval_bandit = None
  if eval_actors and config.has_meta_controller:
    eval_bandit = evaluation.EvaluatorBandit(config, seed, num_lanes)
  return Parts(
      env=env, replay=replay, learner=learner, adder=adder, actor=actor,
      coverage=coverage, eval_env=eval_env, eval_actors=eval_actors,
      acting=acting.ActingStep(actor, config, coverage),
      eval_bandit=eval_bandit)


def close_parts(parts: Parts) -> None:
  """Closes the environments and the replay (Reverb: stops its server)."""
  parts.env.close()
  if parts.eval_env is not None:
    parts.eval_env.close()
  if hasattr(parts.replay, "close"):  # Reverb: stops the server.
    parts.replay.close()


def _actor_tree(actor: actor_lib.Actor) -> Dict[str, Any]:
  return {"state": actor.state, "params": actor.params}


def _loop_arrays(parts: Parts, loop: LoopState) -> Dict[str, np.ndarray]:
  """The arrays of loop.npz (`checkpointing` module docstring)."""
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
  arrays.update({f"episode_extras/{k}": np.asarray(v, np.float64)
                 for k, v in loop.episode_extras.items()})
  arrays.update({f"learner_metrics/{k}": np.asarray(v, np.float64)
                 for k, v in loop.learner_metrics.values.items()})
  if loop.visits is not None:
    arrays["visits"] = loop.visits
  if loop.pending_action is not None:
    arrays["pending_action"] = loop.pending_action
  if parts.coverage is not None:
    arrays.update({f"coverage/{k}": v
                   for k, v in parts.coverage.get_state().items()})
  return arrays


def save_checkpoint(path: str, parts: Parts, loop: LoopState,
                    config: Dict[str, Any]) -> None:
  """Writes the checkpoint directory `path` (`checkpointing`) atomically.

  Args:
    path: the checkpoint directory (replaced once complete).
    parts, loop: the run's parts and loop state.
    config: the run's `checkpointing.run_config` (config.json).

  Call between loop iterations (the actor state is read, not copied, and is
  donated at the next step).
  """
  with ckpt_lib.atomic_directory(path) as tmp:
    def join(*names):
      return os.path.join(tmp, *names)
    ckpt_lib.save_pytree(join("learner.npz"), parts.learner.state)
    ckpt_lib.save_pytree(join("actor.npz"), _actor_tree(parts.actor))
    ckpt_lib.save_arrays(join("adder.npz"), parts.adder.state_dict())
    parts.replay.save(join("replay"))
    ckpt_lib.save_arrays(join("loop.npz"), _loop_arrays(parts, loop))
    env_state = checkpointing.env_state(parts.env)
    if env_state is not None:
      ckpt_lib.save_arrays(join("env.npz"), env_state[0])
    eval_env_state = None
    if parts.eval_actors:
      ckpt_lib.save_pytree(join("eval.npz"), {
          str(j): _actor_tree(a) for j, a in parts.eval_actors.items()})
      eval_env_state = checkpointing.env_state(parts.eval_env)
      if eval_env_state is not None:
        ckpt_lib.save_arrays(join("eval_env.npz"), eval_env_state[0])
    if parts.eval_bandit is not None:
      ckpt_lib.save_arrays(join("eval_bandit.npz"), parts.eval_bandit.tree())
    checkpointing.write_run_state(tmp, "python", config, {
        "counters": {name: getattr(loop, name) for name in COUNTERS},
        "metrics": loop.rows.state(),
        "actor": {"has_params": parts.actor.params is not None,
                  "num_updates": parts.actor.num_updates},
        "eval_actors": {str(j): {"has_params": a.params is not None,
                                 "num_updates": a.num_updates}
                        for j, a in parts.eval_actors.items()},
        "env": None if env_state is None else env_state[1],
        "eval_env": None if eval_env_state is None else eval_env_state[1],
    })


def _actor_template(actor: actor_lib.Actor, learner: learning.Learner,
                    info: Dict[str, Any]) -> Dict[str, Any]:
  """The `_actor_tree` layout of a saved actor (params None if it had none)."""
  return {"state": actor.state,
          "params": learner.state.params if info["has_params"] else None}


def _restore_parts(path: str, meta: Dict[str, Any], parts: Parts) -> None:
  """Restores the learner, the actors, the replay and the adder."""
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
  if parts.eval_bandit is not None:
    parts.eval_bandit.restore(ckpt_lib.load_arrays(join("eval_bandit.npz")))
  parts.replay.restore(join("replay"))
  adder_state = ckpt_lib.load_arrays(join("adder.npz"))
  parts.adder.load_state_dict(
      adder_state, recurrent_state=parts.actor.state.extras.recurrent_state)


def _restore_loop(meta: Dict[str, Any], arrays: Dict[str, np.ndarray],
                  parts: Parts, loop: LoopState) -> None:
  """Restores `loop` (but its timestep) and the coverage tracker."""
  for name in COUNTERS:
    setattr(loop, name, meta["counters"][name])
  loop.rows.restore(metrics_log.saved_metrics(meta))
  loop.episode_return = arrays["episode_return"]
  loop.returns = arrays["returns"].tolist()
  loop.coverages = arrays["coverages"].tolist()
  # Checkpoints written before the episode extras have none: empty lists.
  loop.episode_extras = acting.zero_episode_extras()
  loop.episode_extras.update(
      {k[len("episode_extras/"):]: v.tolist() for k, v in arrays.items()
       if k.startswith("episode_extras/")})
  # Checkpoints written before the diagnostics had only the losses.
  values = {k[len("learner_metrics/"):]: v.tolist()
            for k, v in arrays.items() if k.startswith("learner_metrics/")}
  if "losses" in arrays:
    values["loss"] = arrays["losses"].tolist()
  loop.learner_metrics = host.LearnerMetrics(values)
  if "actor_sums" in arrays:
    loop.actor_sums = jnp.array(arrays["actor_sums"], copy=True)
  if "visits" in arrays and loop.visits is not None:
    loop.visits = arrays["visits"]
  if parts.coverage is not None:
    parts.coverage.set_state({k: arrays[f"coverage/{k}"]
                              for k in ("visited", "count")})


def _restore_envs(path: str, meta: Dict[str, Any],
                  arrays: Dict[str, np.ndarray], parts: Parts,
                  loop: LoopState) -> None:
  """Restores the environments and `loop.timestep`, or resets them."""
  def join(*names):
    return os.path.join(path, *names)

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


def restore_checkpoint(path: str, meta: Dict[str, Any], parts: Parts,
                       loop: LoopState) -> None:
  """Restores every part and `loop` from the checkpoint directory `path`.

  Args:
    path: a checkpoint directory (`checkpointing.find_checkpoint`).
    meta: its state.json (`checkpointing.read_checkpoint_meta`).
    parts, loop: freshly built; updated in place.

  Environments without `set_state` are reset instead (`checkpointing`
  module docstring).
  """
  _restore_parts(path, meta, parts)
  arrays = ckpt_lib.load_arrays(os.path.join(path, "loop.npz"))
  _restore_loop(meta, arrays, parts, loop)
  _restore_envs(path, meta, arrays, parts, loop)


def restore_or_reset(parts: Parts, loop: LoopState,
                     resume_from: Optional[str],
                     meta: Optional[Dict[str, Any]]) -> None:
  """Restores the run from the checkpoint `resume_from`, or (None) resets.

  Raises:
    ResumeError: a corrupt or incomplete checkpoint.
  """
  if resume_from is None:
    loop.timestep = parts.env.reset()
    return
  try:
    restore_checkpoint(resume_from, meta, parts, loop)
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise checkpointing.ResumeError(
        f"run_experiment: cannot resume from the corrupt or incomplete "
        f"checkpoint {resume_from}: {e}") from e
