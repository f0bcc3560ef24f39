"""The nodes of the distributed NGU program (App. A), run as Ray actors.

Badia et al. (2020), App. A: many actors, each stepping a batch of
environments with the latest parameters and writing prioritised sequences
to a replay; one learner sampling from it; an evaluator. Every node builds
its parts with `NGUBuilder` (as the Python and compiled loops do) and runs
as a Ray actor (`ngu_jax.loops.distributed.program.launch`):

  CounterNode    global counts (env steps, episodes, acknowledged inserts,
                 learner steps) and the actors' episode statistics and
                 diagnostics since the last `drain` (Acme's Counter and
                 logger in one node).
  ReplayNode     the embedded `PrioritizedReplay` with the samples-per-insert
                 rate limit (Reverb's SampleToInsertRatio semantics), which
                 paces the learner and the actors across processes; each
                 sequence counts as its fresh env steps / replay_period
                 (`ngu_jax.loops.pacing`: the single-process loops' rule).
  LearnerNode    `Learner` (the jitted `sgd_step`) over a `ReplayClient`;
                 publishes parameters with `ray.put` once per version, when
                 an actor first asks for it; saves and restores its state.
  ActorNode      a batched environment of B lanes, the jitted actor step and
                 a `SequenceAdder` writing to the replay node; lanes are
                 lanes actor_index * B ... of all actors' K * B lanes
                 (their eps_l and mixtures j, App. A). Each step is the
                 Python loop's host acting step (`loops.acting.ActingStep`,
                 episode statistics included).
  EvaluatorNode  evaluation episodes (j = 0 and j = N - 1, eps =
                 eval_epsilon) with the latest parameters, on request; its
                 environment and actors are the Python loop's
                 (`loops.acting.make_evaluation_actors`).

Long calls (`run`; `serve` for the nodes that only answer calls) return
when `stop()` is called from another thread of the node (nodes are threaded
Ray actors); the driver watches them to learn of a node's death at once. A
node never blocks forever on the replay: waits are short and re-checked
against its stop flag.

Faults (launcher module docstring, "Faults"): Ray restarts a node whose
process died; the node's constructor runs again and knows it
(`was_restarted`). A restarted learner or replay reloads its state from the
program's last checkpoint (`recover_from`), an actor starts fresh lanes,
and the counter and the evaluator start empty (the driver gives the counter
back its counts). `recovery()` says what a node restored. The counter keeps
each actor process's counts as that process's running totals (a "source"),
so a report sent again, or one the counter lost, is never counted twice.

The classes are plain Python (no Ray decorator): `launch` makes them Ray
actors, and tests may run them in-process where Ray is up.
"""

import logging
import os
import threading
import time
import uuid
import warnings
from typing import Any, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu.variants import policy as variant_policy
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import acting
from ngu_jax.loops import checkpointing
from ngu_jax.loops import evaluation
from ngu_jax.loops import host
from ngu_jax.loops import pacing
from ngu_jax.loops.distributed import clients
from ngu_jax.loops.distributed import program as program_lib
from ngu_jax.meta import bandits_vote
from ngu_jax.meta import sliding_window_ucb as ucb
from ngu_jax.replay import prioritized

SKIP_KEYS = 2**40
"""Keys a restarted replay skips (`ReplayNode`): more than any process
inserts between two checkpoints."""
LEARNER_FILE = "learner.npz"
LEARNER_META = "learner.json"
COUNTS = ("env_steps", "actor_steps", "episodes", "acked_inserts",
          "actor_restarts", "node_restarts")


def was_restarted() -> bool:
  """Whether this Ray actor process replaced one that died (False outside a
  Ray actor)."""
  import ray  # pylint: disable=g-import-not-at-top
  if not ray.is_initialized():
    return False
  with warnings.catch_warnings():  # Ray 2.60 warns inside its own API.
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
      return bool(ray.get_runtime_context().was_current_actor_reconstructed)
    except Exception:  # pylint: disable=broad-except  # Not in an actor.
      return False


def find_recovery_checkpoint(recover_from: Optional[str], where: str,
                             attempts: int = 3) -> Optional[str]:
  """The program's last complete checkpoint, checked against its checksums
  (`checkpointing.find_checkpoint`), for a restarted node; None if there is
  none yet (the node then starts afresh, and says so). A checkpoint being
  replaced as it is read is read again (`attempts` times, 1 s apart)."""
  if recover_from is None:
    logging.warning("%s: restarted without a checkpoint directory; starts "
                    "afresh.", where)
    return None
  for attempt in range(attempts):
    try:
      return checkpointing.find_checkpoint(recover_from, recover_from, where)
    except FileNotFoundError:
      logging.warning("%s: restarted before the program's first checkpoint "
                      "(%s); starts afresh.", where, recover_from)
      return None
    except checkpointing.ResumeError:
      if attempt == attempts - 1:
        raise
      time.sleep(1.)
  return None


class _Served:
  """`serve()` (blocks until `stop()`), `stop()` and `pid()` of a node that
  only answers calls; the driver watches `serve` to learn of its death."""

  def _init_served(self) -> None:
    self._serving = threading.Event()

  def serve(self) -> None:
    """Returns once `stop()` was called (before or during the call)."""
    while not self._serving.wait(timeout=60.):
      pass

  def stop(self) -> None:
    self._serving.set()

  def pid(self) -> int:
    """The node's process id (tests kill it)."""
    return os.getpid()


def _environment(env_name: str, num_lanes: int, seed: int,
                 env_kwargs: Optional[Dict[str, Any]]) -> envs.BatchedEnv:
  return envs.make(env_name, num_lanes, seed=seed, **(env_kwargs or {}))


class CounterNode(_Served):
  """Global counts and the actors' statistics (module docstring).

  The counts are a `base` (a resumed run's counts, and `increment`s) plus
  each source's running totals (`report(..., source=)`: one actor process);
  `state()` gives both, and `merge` takes them back after the counter's
  process died (the driver holds the last `state()`).
  """

  def __init__(self, num_actor_sums: int = len(diagnostics.ACTOR_SUMS)):
    self._init_served()
    self._lock = threading.Lock()
    self._base = {name: 0 for name in COUNTS}
    self._sources: Dict[str, Dict[str, int]] = {}
    self._num_sums = num_actor_sums
    # Agent57: each actor's latest lane bandits, by its first global lane.
    self._bandits: Dict[int, Dict[str, np.ndarray]] = {}
    self._restarted = was_restarted()
    self._reset_drained()

  def _reset_drained(self) -> None:
    self._returns: List[float] = []
    self._coverages: List[float] = []
    self._episode_extras = acting.zero_episode_extras()
    self._staleness: List[float] = []
    self._sums = np.zeros(self._num_sums, np.float64)
    self._error_stats = None

  def _counts(self) -> Dict[str, int]:
    counts = dict(self._base)
    for totals in self._sources.values():
      for name, value in totals.items():
        counts[name] = counts.get(name, 0) + value
    return counts

  def increment(self, **counts: int) -> Dict[str, int]:
    """Adds to the named counts; returns all counts."""
    with self._lock:
      for name, value in counts.items():
        self._base[name] = self._base.get(name, 0) + int(value)
      return self._counts()

  def report(self, counts: Dict[str, int], returns: List[float],
             coverages: List[float], actor_sums: np.ndarray,
             staleness: List[float], error_stats: Any = None,
             episode_extras: Optional[Dict[str, List[float]]] = None,
             bandits: Optional[Dict[str, np.ndarray]] = None,
             source: Optional[str] = None) -> None:
    """An actor's counts and statistics since its last report.

    `counts`: with `source`, that source's running totals (a report sent
    twice counts once); without, increments. `episode_extras`: {name:
    values at LAST} of its finished episodes (`acting.EpisodeStats.drain`);
    None: none. `bandits`: with Agent57's meta-controller, the actor's lane
    bandits now (`ActorNode.bandits`), kept until the next report of that
    actor (not drained).
    """
    with self._lock:
      if bandits is not None:
        self._bandits[int(bandits["first_lane"])] = bandits
      if source is None:
        for name, value in counts.items():
          self._base[name] = self._base.get(name, 0) + int(value)
      else:
        totals = self._sources.setdefault(source, {})
        for name, value in counts.items():
          totals[name] = max(totals.get(name, 0), int(value))
      self._returns.extend(returns)
      self._coverages.extend(coverages)
      for name, values in (episode_extras or {}).items():
        self._episode_extras.setdefault(name, []).extend(values)
      self._staleness.extend(staleness)
      self._sums += np.asarray(actor_sums, np.float64)
      if error_stats is not None:
        self._error_stats = error_stats

  def get_counts(self) -> Dict[str, int]:
    with self._lock:
      return self._counts()

  def set_counts(self, counts: Dict[str, int]) -> None:
    """Replaces the counts (a resumed program, before any actor reports)."""
    with self._lock:
      self._base = {**{name: 0 for name in COUNTS},
                    **{k: int(v) for k, v in counts.items()}}
      self._sources = {}

  def state(self) -> Dict[str, Any]:
    """{"counts": the counts, "base", "sources": what they add up from},
    for `merge`, and "pid" (a new one: the counter was restarted and holds
    only what was reported since)."""
    with self._lock:
      return dict(counts=self._counts(), base=dict(self._base),
                  sources={k: dict(v) for k, v in self._sources.items()},
                  pid=os.getpid())

  def merge(self, state: Dict[str, Any]) -> Dict[str, int]:
    """Takes back an earlier `state()` (the counter's process died and this
    one started empty): each count of the base and of each source becomes
    the larger of the two, as all of them only grow. Returns the counts."""
    with self._lock:
      for name, value in state["base"].items():
        self._base[name] = max(self._base.get(name, 0), int(value))
      for source, totals in state["sources"].items():
        mine = self._sources.setdefault(source, {})
        for name, value in totals.items():
          mine[name] = max(mine.get(name, 0), int(value))
      return self._counts()

  def recovery(self) -> Dict[str, Any]:
    """{"restarted": bool}: the counter restores nothing itself."""
    return dict(restarted=self._restarted)

  def drain(self) -> Dict[str, Any]:
    """The statistics reported since the last drain (then cleared), and the
    actors' latest lane bandits ("bandits", kept); "pid" as `state`."""
    with self._lock:
      out = dict(returns=self._returns, coverages=self._coverages,
                 episode_extras=self._episode_extras,
                 staleness=self._staleness, actor_sums=self._sums,
                 error_stats=self._error_stats, counts=self._counts(),
                 bandits=dict(self._bandits), pid=os.getpid())
      self._reset_drained()
      return out

  def bandits(self) -> Dict[int, Dict[str, np.ndarray]]:
    """The actors' latest lane bandits, by first global lane."""
    with self._lock:
      return dict(self._bandits)

  def set_bandits(self, bandits: Dict[int, Dict[str, np.ndarray]]) -> None:
    """Replaces the kept bandits (a resumed program, before acting)."""
    with self._lock:
      self._bandits = dict(bandits)


class ReplayNode(_Served):
  """The prioritised sequence replay, rate-limited (module docstring).

  Args:
    config: the agent's config (capacity, exponents, min size, samples per
      insert: `NGUBuilder.make_replay_tables`).
    seed: the sampling RNG's seed.
    replay_backend: `NGUBuilder`'s: "embedded" or "reverb".
    rate_limit: enforce `config.samples_per_insert` (default; False only
      for measurements and tests).
    weigh_inserts: count each inserted sequence as its fresh env steps /
      replay_period (`pacing.insert_weights`; default; items without a
      `mask` count 1), so that the limiter paces the learner as the
      single-process loops do; False: every sequence counts 1 (Reverb's
      SampleToInsertRatio as is).
    recover_from: the program's checkpoint directory: a replay whose
      process died and was restarted by Ray reloads `<checkpoint>/replay`
      from it (the items inserted since are lost), then skips the keys the
      lost process may have issued (`PrioritizedReplay.skip_keys`), so a
      learner's late priority update can never reach a new item.
  """

  def __init__(self, config: NGUConfig, seed: int = 0,
               replay_backend: str = "embedded", rate_limit: bool = True,
               weigh_inserts: bool = True,
               recover_from: Optional[str] = None):
    self._init_served()
    builder = builder_lib.NGUBuilder(config, replay_backend=replay_backend)
    self._replay = builder.make_replay_tables(rate_limit=rate_limit,
                                              seed=seed)
    self._period = config.replay_period
    self._batch_size = config.batch_size
    self._weigh = weigh_inserts and isinstance(self._replay,
                                               prioritized.PrioritizedReplay)
    self._recovery: Dict[str, Any] = dict(restarted=was_restarted())
    if self._recovery["restarted"]:
      path = find_recovery_checkpoint(recover_from, "ReplayNode")
      if path is not None:
        self._replay.restore(os.path.join(path, "replay"))
      info = self.info()
      self._recovery.update(checkpoint=path, inserted=info["inserted"],
                            sampled=info["sampled"], size=info["size"])
      if hasattr(self._replay, "skip_keys"):
        self._recovery["next_key"] = self._replay.skip_keys(SKIP_KEYS)
      logging.warning("ReplayNode: restarted; restored %s (%d items, %d "
                      "inserted).", path, info["size"], info["inserted"])

  def recovery(self) -> Dict[str, Any]:
    """{"restarted": bool} and, when restarted, what was restored:
    "checkpoint" (None: none, started empty), "inserted", "sampled",
    "size", "next_key"."""
    return dict(self._recovery)

  def insert(self, items, priorities, wait_s: float):
    """Keys of the inserted items, or None if not granted within wait_s."""
    try:
      masks = [getattr(item, "mask", None) for item in items]
      if self._weigh and items and all(m is not None for m in masks):
        weights = pacing.insert_weights(
            np.stack([np.asarray(m) for m in masks]), self._period)
        return self._replay.insert(items, priorities, timeout=wait_s,
                                   weights=weights)
      # Items that are not sequences (no `mask`) count 1 each.
      return self._replay.insert(items, priorities, timeout=wait_s)
    except prioritized.ReplayNotReadyError:
      return None

  def max_insert_size(self) -> Optional[int]:
    """The most items one `insert` may carry (None: no limit): one the
    limiter can grant while the learner waits for a batch
    (`PrioritizedReplay.max_insert_size_while_sampling`)."""
    bound = getattr(self._replay, "max_insert_size_while_sampling", None)
    if bound is not None:
      return bound(self._batch_size)
    return getattr(self._replay, "max_insert_size", None)

  def sample(self, batch_size: int, wait_s: float):
    """(keys, items, weights), or None if not granted within wait_s."""
    try:
      return self._replay.sample(batch_size, timeout=wait_s)
    except prioritized.ReplayNotReadyError:
      return None

  def update_priorities(self, keys: np.ndarray,
                        priorities: np.ndarray) -> None:
    self._replay.update_priorities(keys, priorities)

  def info(self) -> Dict[str, int]:
    """size, inserted and sampled (items since construction or restore)."""
    replay = self._replay
    return dict(size=replay.size, capacity=replay.capacity,
                inserted=getattr(replay, "inserted", -1),
                sampled=getattr(replay, "sampled", -1))

  def save(self, path: str) -> None:
    self._replay.save(path)

  def restore(self, path: str) -> None:
    self._replay.restore(path)

  def close(self) -> None:
    if hasattr(self._replay, "close"):
      self._replay.close()


class LearnerNode:
  """The learner (`NGUBuilder.make_learner`) over the replay node.

  Args:
    config: the agent's config.
    env_name, env_kwargs: the environment (its spec shapes the networks).
    replay: the `ReplayNode` (a Ray actor handle or `program.NodeName`).
    seed: the learner's key is that of the Python loop with this seed.
    recover_from: the program's checkpoint directory: a learner whose
      process died and was restarted by Ray restores its state from it
      (`restore`; the learner steps since are lost).
  """

  def __init__(self, config: NGUConfig, env_name: str,
               env_kwargs: Optional[Dict[str, Any]], replay: Any,
               seed: int = 0, recover_from: Optional[str] = None):
    env = _environment(env_name, 1, seed, env_kwargs)
    spec = builder_lib.make_environment_spec(env)
    env.close()
    builder = builder_lib.NGUBuilder(config)
    networks = builder.make_networks(spec)
    self._config = config
    self._stop = threading.Event()
    self._lock = threading.Lock()
    self._run_lock = threading.Lock()
    self._replay = clients.ReplayClient(program_lib.resolve(replay),
                                        self._stop.is_set)
    learner_key, _ = jax.random.split(jax.random.PRNGKey(seed))
    self._learner = builder.make_learner(
        learner_key, networks, builder.make_dataset_iterator(self._replay),
        env_spec=spec, replay_client=self._replay)
    self._steps = 0
    self._metrics = host.LearnerMetrics()
    self._published = None  # (version, [ObjectRef])
    self._recovery: Dict[str, Any] = dict(restarted=was_restarted())
    if self._recovery["restarted"]:
      path = find_recovery_checkpoint(recover_from, "LearnerNode")
      if path is not None:
        self.restore(path)
      self._recovery.update(checkpoint=path, steps=self._steps)
      logging.warning("LearnerNode: restarted; restored %s (%d learner "
                      "steps).", path, self._steps)

  def recovery(self) -> Dict[str, Any]:
    """{"restarted": bool} and, when restarted, "checkpoint" (None: none,
    started afresh) and the learner "steps" restored."""
    return dict(self._recovery)

  def pid(self) -> int:
    """The node's process id (tests kill it)."""
    return os.getpid()

  def run(self, max_steps: Optional[int] = None) -> int:
    """Learner steps until `stop()` (or `max_steps`); returns the total.

    A `stop()` that came first (a run issued again as the program stops)
    ends it at once: a node's stop is for good. A run called while one is
    under way (the driver lost track of it) waits for that one to end.
    """
    if not self._run_lock.acquire(blocking=False):
      with self._run_lock:
        return self.steps()
    try:
      return self._run(max_steps)
    finally:
      self._run_lock.release()

  def _run(self, max_steps: Optional[int]) -> int:
    done = 0
    while not self._stop.is_set() and (max_steps is None
                                       or done < max_steps):
      try:
        metrics = self._learner.step()
      except clients.Stopped:
        break
      done += 1
      with self._lock:
        self._steps += 1
        self._metrics.add(metrics)
    self._replay.wait_for_updates()
    return self._steps

  def stop(self) -> None:
    self._stop.set()

  def steps(self) -> int:
    with self._lock:
      return self._steps

  def pop_metrics(self) -> Dict[str, Any]:
    """{"steps": learner steps, "metrics": {name: values since last pop}}."""
    with self._lock:
      return {"steps": self._steps, "metrics": self._metrics.pop()}

  def get_params_ref(self):
    """(version, [ObjectRef]) of the latest parameters.

    The parameters of the current version are put in the object store once
    (at the first request for that version) and shared by every actor; the
    reference is wrapped in a list so that Ray hands it over unresolved.
    """
    import ray  # pylint: disable=g-import-not-at-top
    with self._lock:
      version = self._steps
      if self._published is None or self._published[0] != version:
        params = jax.device_get(self._learner.state.params)
        self._published = (version, [ray.put(params)])
      return self._published

  def save(self, path: str) -> None:
    """Writes learner.npz (the `LearnerState`) and learner.json in `path`."""
    os.makedirs(path, exist_ok=True)
    with self._lock:
      state, steps = self._learner.state, self._steps
    ckpt_lib.save_pytree(os.path.join(path, LEARNER_FILE), state)
    ckpt_lib.write_json(os.path.join(path, LEARNER_META), {"steps": steps})

  def restore(self, path: str) -> int:
    """Restores what `save` wrote; returns the learner steps."""
    state = ckpt_lib.load_pytree(os.path.join(path, LEARNER_FILE),
                                 self._learner.state)
    meta = ckpt_lib.read_json(os.path.join(path, LEARNER_META))
    with self._lock:
      self._learner.restore(state)
      self._steps = int(meta["steps"])
      self._published = None
    return self._steps


class _AckingWriter:
  """The adder's writer: inserts through the client, counts acknowledged
  items (those whose keys came back)."""

  def __init__(self, replay: clients.ReplayClient):
    self._replay = replay
    self.acked = 0

  def insert(self, items, priorities=None):
    keys = self._replay.insert(items, priorities, timeout=None)
    self.acked += len(keys)
    return keys


def restore_bva_lanes(config: NGUConfig, current: bandits_vote.BVAState,
                      x: jax.Array, restored: Dict[str, np.ndarray],
                      saved: np.ndarray, key: jax.Array
                      ) -> Tuple[bandits_vote.BVAState, jax.Array]:
  """DiCE's lanes after a resume: the ensembles of the lanes where `saved`
  [B] from `restored` (`BVAState` fields shaped [B, ...]), the others'
  `current`; the saved lanes' temperatures x [B] drawn afresh from their
  restored ensembles (`bandits_vote.sample_x`, one key per lane from
  `key`), the others' kept. Pure; returns (ensembles, x)."""
  cfg = variant_policy.bva_config(config)
  saved = jnp.asarray(saved, bool)
  new = bandits_vote.BVAState(**{
      f: jnp.asarray(restored[f], getattr(current, f).dtype)
      for f in bandits_vote.BVAState._fields})
  ensembles = jax.tree_util.tree_map(
      lambda n, o: jnp.where(saved.reshape((-1,) + (1,) * (n.ndim - 1)),
                             n, o), new, current)
  drawn = jax.vmap(lambda st, k: bandits_vote.sample_x(st, k, cfg))(
      ensembles, jax.random.split(key, saved.shape[0]))
  return ensembles, jnp.where(saved, drawn, x)


class ActorNode:
  """B lanes acting and writing sequences to the replay (module docstring).

  Args:
    config: the agent's config.
    env_name, env_kwargs: the environment.
    num_lanes: B.
    actor_index, num_actors: this actor's index among K actors.
    replay, learner, counter: the nodes (Ray actor handles or
      `program.NodeName`s).
    seed: seeds the environment and the action keys (with actor_index); a
      restarted actor (after its process died) draws fresh seeds.
    report_every_s: seconds between reports to the counter.
  """

  def __init__(self, config: NGUConfig, env_name: str,
               env_kwargs: Optional[Dict[str, Any]], num_lanes: int,
               actor_index: int, num_actors: int, replay: Any, learner: Any,
               counter: Any, seed: int = 0, report_every_s: float = 1.):
    self._restarted = was_restarted()
    actor_seed = seed * 100_003 + 1 + actor_index
    if self._restarted:
      actor_seed = int(np.random.SeedSequence().entropy % (2**31))
      logging.warning("ActorNode %d: restarted after its process died; "
                      "fresh lanes (seed %d).", actor_index, actor_seed)
    replay, learner, counter = (program_lib.resolve(node)
                                for node in (replay, learner, counter))
    self._config = config
    self._index = actor_index
    self._num_lanes = num_lanes
    self._counter = counter
    self._report_every_s = report_every_s
    self._stop = threading.Event()
    self._run_lock = threading.Lock()
    self._env = _environment(env_name, num_lanes, actor_seed % (2**31),
                             env_kwargs)
    spec = builder_lib.make_environment_spec(self._env)
    builder = builder_lib.NGUBuilder(config)
    networks = builder.make_networks(spec)
    policy = builder.make_policy(networks, spec)
    self._variables = clients.VariableClient(learner)
    self._writer = _AckingWriter(
        clients.ReplayClient(replay, self._stop.is_set))
    adder = builder.make_adder(self._writer, spec, policy)
    self._actor = builder.make_actor(
        jax.random.PRNGKey(actor_seed), policy, spec, self._variables, adder,
        first_lane=actor_index * num_lanes,
        total_lanes=num_actors * num_lanes)
    self._acting = acting.ActingStep(
        self._actor, config, acting.make_coverage_tracker(self._env),
        variables=self._variables)
    self._total_steps = 0
    # Of the `run` call, at its last report.
    self._reported_steps = self._reported_episodes = 0
    # This process's running totals, reported as one counter source.
    self._source = f"actor_{actor_index}.{uuid.uuid4().hex[:12]}"
    self._totals = {name: 0 for name in COUNTS}
    self._totals["actor_restarts"] = int(self._restarted)

  def pid(self) -> int:
    """The node's process id (tests kill it)."""
    return os.getpid()

  def bandits(self) -> Optional[Dict[str, np.ndarray]]:
    """This actor's lane controllers now, by its "first_lane": with
    Agent57's meta-controller the lane bandits as numpy arrays ("arms",
    "returns" [B, W], "num_episodes" [B]); with DiCE's Boltzmann lanes
    their "temperature_x" [B] and last "q_values" [B, A], and with Bandits
    Vote temperatures the ensembles ("bva": `BVAState` fields, [B, ...]);
    None with neither."""
    lanes = jax.tree_util.tree_map(np.asarray, jax.device_get(
        actor_lib.lane_controllers(self._actor.state)))
    if not lanes:
      return None
    return {"first_lane": np.asarray(self._index * self._num_lanes), **lanes}

  def restore_bandits(self, arms: np.ndarray, returns: np.ndarray,
                      num_episodes: np.ndarray, saved: np.ndarray) -> None:
    """Puts checkpointed bandits into the lanes where `saved` [B] (a resumed
    program, before `run`); each such lane's next episode plays its bandit's
    choice. The other lanes keep their fresh bandits."""
    config, state = self._config, self._actor.state
    saved = jnp.asarray(saved, bool)
    restored = ucb.UCBState(arms=jnp.asarray(arms, jnp.int32),
                            returns=jnp.asarray(returns, jnp.float32),
                            num_episodes=jnp.asarray(num_episodes, jnp.int32))
    bandit = jax.tree_util.tree_map(
        lambda new, old: jnp.where(
            saved.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
        restored, state.bandit)
    keys = jax.random.split(jax.random.fold_in(state.key, 1), saved.shape[0])
    drawn = jax.vmap(lambda b, k: ucb.select(
        b, k, config.num_mixtures, config.meta.epsilon, config.meta.beta,
        normalise=config.meta.normalise_returns))(
            bandit, keys)
    mixture = jnp.where(saved, drawn, state.mixture_index)
    self._actor.restore(state._replace(bandit=bandit, mixture_index=mixture),
                        self._actor.params, self._actor.num_updates)

  def restore_temperatures(self, bva: Dict[str, np.ndarray],
                           saved: np.ndarray) -> None:
    """Puts checkpointed Bandits Vote ensembles (`BVAState` fields, [B, ...])
    into the lanes where `saved` [B] (a resumed program, before `run`); each
    such lane's next episode plays a temperature drawn from its restored
    ensemble (`restore_bva_lanes`). The other lanes keep theirs."""
    state = self._actor.state
    bva_state, x = restore_bva_lanes(
        self._config, state.bva, state.temperature_x, bva, saved,
        jax.random.fold_in(state.key, 2))
    self._actor.restore(state._replace(bva=bva_state, temperature_x=x),
                        self._actor.params, self._actor.num_updates)

  def stop(self) -> None:
    self._stop.set()

  def restarted(self) -> bool:
    """Whether this process replaced one that died."""
    return self._restarted

  def run(self, max_steps: Optional[int] = None) -> int:
    """Acts until `stop()` (or `max_steps` actor steps); returns the steps.

    Every `report_every_s` the counts (env steps, episodes, acknowledged
    inserts: this process's running totals) and statistics (returns,
    coverage, actor diagnostics, the staleness of the parameters at each
    pull) go to the counter. A report the counter did not acknowledge (its
    process died) is not sent again: the next one carries the totals, and
    its statistics are lost. The last report is sent until acknowledged.
    A run called while one is under way (the driver lost track of it)
    waits for that one to end and returns 0.
    """
    if not self._run_lock.acquire(blocking=False):
      with self._run_lock:
        return 0
    try:
      return self._run(max_steps)
    finally:
      self._run_lock.release()

  def _run(self, max_steps: Optional[int]) -> int:
    import ray  # pylint: disable=g-import-not-at-top
    actor, env, lanes = self._actor, self._env, self._num_lanes
    stats = acting.EpisodeStats.zeros(lanes)
    totals = self._totals
    steps = 0
    pending = None
    last_report = time.monotonic()

    def report(final: bool):
      nonlocal pending, last_report
      if pending is not None:
        try:
          ray.get(pending)
        except ray.exceptions.RayActorError as e:
          logging.warning("ActorNode %d: the counter did not acknowledge a "
                          "report (%s); the next carries its counts.",
                          self._index, type(e).__name__)
      new_steps = steps - self._reported_steps
      totals["env_steps"] += new_steps * lanes
      totals["actor_steps"] += new_steps
      totals["episodes"] += stats.episodes - self._reported_episodes
      totals["acked_inserts"] = self._writer.acked
      self._reported_steps, self._reported_episodes = steps, stats.episodes
      drained = stats.drain()
      args = (dict(totals), drained["returns"], drained["coverages"],
              drained["actor_sums"], drained["staleness"],
              jax.device_get(actor.state.error_stats),
              drained["episode_extras"], self.bandits(), self._source)
      if final:
        pending = None
        clients.call(self._counter.report, *args,
                     what=f"ActorNode {self._index}: last report")
      else:
        pending = self._counter.report.remote(*args)
      last_report = time.monotonic()

    self._reported_steps, self._reported_episodes = 0, 0
    timestep = env.reset()
    try:
      while not self._stop.is_set() and (max_steps is None
                                         or steps < max_steps):
        action = self._acting(timestep, stats)
        timestep = env.step(action)
        steps += 1
        if time.monotonic() - last_report >= self._report_every_s:
          report(final=False)
    except clients.Stopped:
      pass
    report(final=True)
    self._total_steps += steps
    return steps

  def info(self) -> Dict[str, Any]:
    """This process's "steps" (actor steps of finished `run` calls),
    "acked_inserts", "params_version", "restarted" and "totals" (as last
    reported)."""
    return dict(steps=self._total_steps, acked_inserts=self._writer.acked,
                totals=dict(self._totals),
                params_version=self._variables.version,
                restarted=self._restarted)


class EvaluatorNode(_Served):
  """Evaluation episodes with the latest parameters (module docstring).

  Args:
    config, env_name, env_kwargs: the agent and environment.
    num_lanes: evaluation lanes (one episode each per evaluation).
    learner: the `LearnerNode` (a Ray actor handle or `program.NodeName`).
    seed: the run's seed: the evaluation environment and actors are
      seeded from it as in the Python loop (`loops.acting`).
  """

  def __init__(self, config: NGUConfig, env_name: str,
               env_kwargs: Optional[Dict[str, Any]], num_lanes: int,
               learner: Any, seed: int = 0):
    self._init_served()
    self._restarted = was_restarted()
    self._evaluations = 0
    self._env = _environment(env_name, num_lanes,
                             acting.evaluation_env_seed(seed), env_kwargs)
    spec = builder_lib.make_environment_spec(self._env)
    builder = builder_lib.NGUBuilder(config)
    networks = builder.make_networks(spec)
    self._config = config
    self._variables = clients.VariableClient(program_lib.resolve(learner))
    self._track_coverage = (
        acting.make_coverage_tracker(self._env) is not None)
    self._actors = acting.make_evaluation_actors(
        builder, networks, spec, self._variables, config, seed)
    # Agent57's evaluator bandit (`loops.evaluation.EvaluatorBandit`); it
    # starts empty when a program resumes or the node restarts (not in the
    # checkpoint).
    self._bandit = (evaluation.EvaluatorBandit(config, seed, num_lanes)
                    if config.has_meta_controller else None)

  def recovery(self) -> Dict[str, Any]:
    """{"restarted": bool, "evaluations": served by this process}: a
    restarted evaluator starts afresh."""
    return dict(restarted=self._restarted, evaluations=self._evaluations)

  def evaluate(self) -> Dict[str, float]:
    """The eval_* metrics columns, and the learner step evaluated."""
    results = {j: evaluation.evaluate(actor, self._env, self._track_coverage)
               for j, actor in self._actors.items()}
    bandit_result = None
    if self._bandit is not None:
      bandit_result = evaluation.evaluate_bandit(
          self._actors[0], self._bandit, self._env, self._track_coverage)
    row = evaluation.evaluation_columns(results, self._config.num_mixtures,
                                        bandit_result)
    row["eval_learner_steps"] = self._variables.version
    self._evaluations += 1
    return row
