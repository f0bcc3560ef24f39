"""The distributed NGU program: build it, launch it on Ray, supervise it.

NGU App. A's distributed agent from the same `NGUBuilder` as the other
loops: `make_program` describes the nodes (`ngu_jax.loops.distributed.nodes`:
counter, replay, learner, K actors, evaluator) and `run_distributed`
launches them on the Ray cluster this process joined (`ray.init` first,
before JAX starts in this process), then supervises them from the driver:

* Metrics: every `log_every_env_steps` global env steps (counted by the
  counter node) a row of `metrics_log.COLUMNS` plus `DISTRIBUTED_COLUMNS`
  goes to `output_dir/metrics.csv` (learner steps/s, the parameters'
  staleness at the actors' pulls, acknowledged inserts, the replay's
  inserted / sampled counts, actor restarts); curves at checkpoints and
  at the end.
* Pacing: the replay node's samples-per-insert rate limit (Reverb's
  SampleToInsertRatio) paces the learner against all actors together,
  counting each inserted sequence as its fresh env steps / replay_period:
  the rule of the single-process loops (`ngu_jax.loops.pacing`, which
  states what still differs); nothing is paced in the driver. config.json
  records it ("pacing").
* Faults (docs/design.md, "Faults: what each one loses"): every node is
  restarted by Ray when its process dies (`max_restarts` times). The driver
  keeps one long call in flight per node (`run` for the learner and the
  actors, `serve` for the others) and sees a death when it fails; it pings
  the node until Ray restarted it (`_Supervisor`), then runs that node's
  long call again. A restarted learner or replay reloads its state from the
  last checkpoint (`recover_from`); an actor starts fresh lanes; the
  counter gets back the counts the driver last read (actors report running
  totals, so nothing is counted twice); an evaluation in flight is asked
  for again. Calls between nodes are sent again while their node is down
  (`clients.call`), never blindly by Ray (`max_task_retries=0`). A
  checkpoint a node death interrupted is taken again once it is back. An
  exception raised inside a node (a bug, not a dead process) stops the
  program and is raised here; so does a learner, replay or counter dead for
  good (`NodeLost`: `--resume` goes on from the checkpoint).
* Checkpoints (`output_dir/checkpoint/`, written atomically): the
  learner's state (learner.npz, safe npz format), the replay (its npz and
  JSON), the counts and the metrics rows' count and last row (state.json;
  the rows are in metrics.csv) and the run
  configuration (config.json), and with Agent57's meta-controller the
  actors' lane bandits as last reported to the counter (bandits.npz, by
  global lane). They are taken while the program runs
  (every `checkpoint_every_env_steps`) and after it stops. `resume=True`
  restores them; actors start fresh lanes (their episodic memories and
  LSTM states are not saved, as in Acme's distributed agents) but keep
  their lanes' bandits, and the number of actors may differ from the
  checkpoint's (lanes beyond the checkpoint's get fresh bandits). The
  evaluator's bandit starts empty. On several machines `output_dir` must be
  on a file system every node sees.
* Agent57's arm columns (arm_<j>): the shares of the arms in the windows
  of the bandits the actors last reported (every `report_every_s`).
"""

import logging
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ngu_jax.agents.ngu import diagnostics
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu.variants import policy as variant_policy
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import checkpointing
from ngu_jax.loops import host
from ngu_jax.loops import metrics_log
from ngu_jax.loops import pacing
from ngu_jax.loops.distributed import clients
from ngu_jax.loops.distributed import nodes
from ngu_jax.loops.distributed import program as program_lib
from ngu_jax.meta import bandits_vote
from ngu_jax.meta import sliding_window_ucb as ucb

CHECKPOINT_FORMAT = checkpointing.checkpoint_format("distributed")
CHECKPOINT_VERSION = checkpointing.CHECKPOINT_VERSION
DISTRIBUTED_COLUMNS = ("learner_steps_per_s", "mean_staleness",
                       "acked_inserts", "replay_inserted", "replay_sampled",
                       "actor_restarts", "node_restarts", "actors_alive")
COLUMNS = tuple(metrics_log.COLUMNS) + DISTRIBUTED_COLUMNS
# The actors' lane controllers in a checkpoint (Agent57's UCB bandits,
# DiCE's Bandits Vote ensembles).
BANDITS_FILE = "bandits.npz"


def columns_for(config: NGUConfig) -> Tuple[str, ...]:
  """The metrics.csv columns of a distributed run: `COLUMNS`, with Agent57's
  meta-controller the arm shares and the evaluator bandit's columns too
  (`metrics_log.columns_for`)."""
  return tuple(metrics_log.columns_for(config)) + DISTRIBUTED_COLUMNS


def write_bva_curve(config: NGUConfig, bandits: Dict[int, Any],
                    output_dir: str, env_steps: int) -> bool:
  """DiCE's pooled value curves (`metrics_log.write_bva_curve`, in
  `output_dir/bva/`) of the Bandits Vote ensembles the actors last reported
  (`ActorNode.bandits`, by first lane); False when none has. At each
  evaluation."""
  lanes = [bandits[first]["bva"] for first in sorted(bandits)
           if "bva" in bandits[first]]
  if not lanes:
    return False
  state = bandits_vote.BVAState(**{
      name: np.concatenate([np.asarray(lane[name]) for lane in lanes])
      for name in bandits_vote.BVAState._fields})
  metrics_log.write_bva_curve(os.path.join(output_dir, metrics_log.BVA_DIR),
                              int(env_steps), variant_policy.bva_config(config),
                              state)
  return True


def save_bandits(path: str, bandits: Dict[int, Any], total_lanes: int
                 ) -> None:
  """Writes the actors' lane controllers by global lane: the UCB bandits
  ("arms", "returns" [L, W], "num_episodes" [L], "saved" [L]: False for
  lanes no actor reported) and the Bandits Vote ensembles ("bva/<field>"
  [L, ...] of `bandits_vote.BVAState`, "bva_saved" [L]); nothing is
  written when the reports hold neither."""
  arrays = {}
  ucb_reports = {k: b for k, b in bandits.items() if "arms" in b}
  if ucb_reports:
    window = np.asarray(next(iter(ucb_reports.values()))["arms"]).shape[-1]
    arms = np.full((total_lanes, window), ucb.EMPTY, np.int32)
    returns = np.zeros((total_lanes, window), np.float32)
    num_episodes = np.zeros((total_lanes,), np.int32)
    saved = np.zeros((total_lanes,), bool)
    for first, tree in ucb_reports.items():
      lanes = slice(int(first),
                    int(first) + np.asarray(tree["arms"]).shape[0])
      arms[lanes], returns[lanes] = tree["arms"], tree["returns"]
      num_episodes[lanes], saved[lanes] = tree["num_episodes"], True
    arrays.update(arms=arms, returns=returns, num_episodes=num_episodes,
                  saved=saved)
  bva_reports = {k: b["bva"] for k, b in bandits.items() if "bva" in b}
  if bva_reports:
    like = next(iter(bva_reports.values()))
    fields = {f: np.zeros((total_lanes,) + np.asarray(like[f]).shape[1:],
                          np.asarray(like[f]).dtype)
              for f in bandits_vote.BVAState._fields}
    saved = np.zeros((total_lanes,), bool)
    for first, tree in bva_reports.items():
      n = np.asarray(tree["w"]).shape[0]
      for f in fields:
        fields[f][int(first):int(first) + n] = tree[f]
      saved[int(first):int(first) + n] = True
    arrays.update({f"bva/{f}": v for f, v in fields.items()})
    arrays["bva_saved"] = saved
  if arrays:
    ckpt_lib.save_arrays(path, arrays)


def restore_bandits(path: str, actors: List[Any], num_lanes: int, ray
                    ) -> Dict[int, Dict[str, np.ndarray]]:
  """Gives each actor the checkpointed controllers of its global lanes
  (UCB bandits: `ActorNode.restore_bandits`; Bandits Vote ensembles:
  `ActorNode.restore_temperatures`). The number of actors may differ from
  the checkpoint's: lanes beyond it stay fresh. Returns them by first lane,
  for the counter."""
  saved = ckpt_lib.load_arrays(path)
  key = "saved" if "saved" in saved else "bva_saved"
  total = saved[key].shape[0]
  out, calls = {}, []
  for i, actor in enumerate(actors):
    lanes = np.arange(i * num_lanes, (i + 1) * num_lanes)
    inside = lanes < total
    take = np.where(inside, lanes, 0)
    report = {}
    if "saved" in saved:
      part = {k: saved[k][take] for k in ("arms", "returns", "num_episodes")}
      mask = inside & saved["saved"][take]
      if mask.any():
        calls.append(actor.restore_bandits.remote(
            part["arms"], part["returns"], part["num_episodes"], mask))
        report.update(part)
    if "bva_saved" in saved:
      part = {f: saved[f"bva/{f}"][take]
              for f in bandits_vote.BVAState._fields}
      mask = inside & saved["bva_saved"][take]
      if mask.any():
        calls.append(actor.restore_temperatures.remote(part, mask))
        report["bva"] = part
    if report:
      out[i * num_lanes] = dict(report, first_lane=np.asarray(i * num_lanes))
  ray.get(calls)
  return out


def default_actor_cpus(num_actors: int, learner_cpus: float,
                       total_cpus: float) -> float:
  """CPUs per actor: what the learner leaves, shared, at most 1 each."""
  return float(min(1., max(0.1, (total_cpus - learner_cpus) / num_actors)))


def make_program(config: NGUConfig, env_name: str, num_actors: int,
                 num_lanes: int, seed: int = 0,
                 env_kwargs: Optional[Dict[str, Any]] = None,
                 eval_lanes: int = 0, max_restarts: int = 3,
                 actor_cpus: float = 1., learner_cpus: float = 1.,
                 replay_backend: str = "embedded",
                 report_every_s: float = 1.,
                 checkpoint_dir: Optional[str] = None) -> program_lib.Program:
  """The NGU program: counter, replay, learner, K actors (and evaluator).

  Args:
    config: the agent's config.
    env_name, env_kwargs: the environment (`ngu_jax.envs.make`).
    num_actors: K actor nodes.
    num_lanes: B lanes per actor (K * B lanes in all, App. A's eps_l).
    seed: seeds the replay, the learner, the actors and the evaluator.
    eval_lanes: lanes of the evaluator node; 0: no evaluator.
    max_restarts: restarts of each node's process after it dies (-1:
      always).
    actor_cpus, learner_cpus: CPUs Ray reserves per actor / for the
      learner (XLA's threads follow); the replay and counter take none.
    replay_backend: the replay node's `NGUBuilder` backend; only
      "embedded" is supported (the ValueError says why).
    report_every_s: seconds between an actor's reports to the counter.
    checkpoint_dir: the program's checkpoint directory, from which a
      restarted learner or replay reloads its state (None: they restart
      afresh).

  Returns:
    A `Program` with nodes "counter", "replay", "learner", "actor_<i>" and
    "evaluator" (if `eval_lanes`).

  Raises:
    ValueError: num_actors or num_lanes < 1, eval_lanes < 0, or a
      replay_backend other than "embedded".
  """
  if replay_backend != "embedded":
    raise ValueError(
        f"make_program: replay_backend={replay_backend!r} is not supported "
        "in the distributed program; use 'embedded'. (With Reverb in the "
        "replay node a sample blocks inside Reverb's sampler, which has no "
        "timeout, and the learner's retries use up the node's threads "
        "until no insert runs; docs/design.md#distributed-program.)")
  for name, value, low in (("num_actors", num_actors, 1),
                           ("num_lanes", num_lanes, 1),
                           ("eval_lanes", eval_lanes, 0)):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
      raise ValueError(f"make_program: `{name}` must be an int >= {low}, "
                       f"got {value!r}.")
  program = program_lib.Program("ngu")
  counter = program.add_node("counter", nodes.CounterNode, num_cpus=0,
                             threads=1, max_concurrency=8,
                             max_restarts=max_restarts)
  replay = program.add_node("replay", nodes.ReplayNode, config, seed=seed,
                            replay_backend=replay_backend,
                            recover_from=checkpoint_dir, num_cpus=0,
                            threads=1, max_concurrency=num_actors + 6,
                            max_restarts=max_restarts)
  learner = program.add_node("learner", nodes.LearnerNode, config, env_name,
                             env_kwargs, replay, seed=seed,
                             recover_from=checkpoint_dir,
                             num_cpus=learner_cpus,
                             max_concurrency=num_actors + 6,
                             max_restarts=max_restarts)
  for i in range(num_actors):
    program.add_node(f"actor_{i}", nodes.ActorNode, config, env_name,
                     env_kwargs, num_lanes, i, num_actors, replay, learner,
                     counter, seed=seed, report_every_s=report_every_s,
                     num_cpus=actor_cpus, max_restarts=max_restarts,
                     max_concurrency=3)
  if eval_lanes:
    program.add_node("evaluator", nodes.EvaluatorNode, config, env_name,
                     env_kwargs, eval_lanes, learner, seed=seed, num_cpus=0,
                     threads=1, max_concurrency=4, max_restarts=max_restarts)
  return program


class NodeLost(RuntimeError):
  """A node the program cannot go on without (learner, replay, counter)
  died and Ray does not restart it again."""


class _Supervisor:
  """The driver's view of a launched program's nodes (module docstring,
  "Faults").

  Every node has one long call in flight: `run` (learner, actors) or
  `serve` (counter, replay, evaluator). When it fails with `RayActorError`
  the node is pinged (`pid`) until it answers or is known dead: Ray
  answers `ActorUnavailableError` while it restarts the process,
  `ActorDiedError` once restarts are exhausted. A new process id is a
  restart: counted in `failures`, `on_restart(name)` runs (the driver gives
  the counter back its counts and asks for a lost evaluation again), and
  the long call is issued again; the same id is a transient error, and the
  call is issued again too. A call is re-sent by this decision, never
  blindly by Ray. A node dead for good: an actor or the evaluator is left
  out (the others go on); the learner, the replay or the counter stop the
  program (`NodeLost`; `--resume` goes on from the checkpoint).
  """

  PING_EVERY_S = 0.5
  RECOVERY_TIMEOUT_S = clients.RECOVERY_TIMEOUT_S
  OPTIONAL = ("evaluator",)  # The program goes on without it.

  def __init__(self, handles: Dict[str, Any], num_actors: int,
               max_restarts: int,
               on_restart: Optional[Callable[[str], Any]] = None):
    import ray  # pylint: disable=g-import-not-at-top
    self.ray = ray
    self.handles = handles
    self.names = list(handles)
    self.actor_names = [f"actor_{i}" for i in range(num_actors)]
    self.actors = [handles[name] for name in self.actor_names]
    self.max_restarts = max_restarts
    self.on_restart = on_restart
    self.deaths = {name: 0 for name in self.names}
    self.up = {name: True for name in self.names}
    self.pids: Dict[str, Optional[int]] = {name: None for name in self.names}
    self.watches: Dict[str, Any] = {}
    self.pings: Dict[str, Any] = {}
    self.next_ping: Dict[str, float] = {}
    self.stopping = False

  @property
  def failures(self) -> List[int]:
    """Process deaths per actor."""
    return [self.deaths[name] for name in self.actor_names]

  @property
  def alive(self) -> List[bool]:
    """Per actor: not dead for good."""
    return [self.up[name] for name in self.actor_names]

  def node_failures(self) -> Dict[str, int]:
    """Process deaths per node other than the actors."""
    return {name: n for name, n in self.deaths.items()
            if name not in self.actor_names}

  def _long_call(self, name: str) -> None:
    method = "run" if name == "learner" or name in self.actor_names \
        else "serve"
    self.watches[name] = getattr(self.handles[name], method).remote()

  def start(self) -> None:
    pids = self.ray.get([self.handles[n].pid.remote() for n in self.names])
    self.pids = dict(zip(self.names, pids))
    for name in ["learner"] + self.actor_names:
      self._long_call(name)
    for name in self.names:
      if name not in self.watches:
        self._long_call(name)

  def _ping(self, name: str) -> None:
    if name not in self.pings and name not in self.next_ping:
      self.pings[name] = self.handles[name].pid.remote()

  def _watch_ended(self, name: str, ref: Any) -> None:
    ray = self.ray
    del self.watches[name]
    try:
      ray.get(ref)
    except ray.exceptions.RayActorError as e:
      logging.warning("run_distributed: %s's process failed (%s); checking "
                      "whether Ray restarts it.", name, type(e).__name__)
      self._ping(name)
      return
    if not self.stopping:
      raise RuntimeError(f"run_distributed: {name} stopped by itself.")

  def _ping_answered(self, name: str, ref: Any) -> None:
    ray = self.ray
    del self.pings[name]
    try:
      pid = ray.get(ref)
    except ray.exceptions.ActorUnavailableError:  # Restarting: ask again.
      self.next_ping[name] = time.monotonic() + self.PING_EVERY_S
      return
    except ray.exceptions.RayActorError as e:  # Dead for good.
      self.deaths[name] += 1
      self.up[name] = False
      message = (f"run_distributed: {name} died ({self.deaths[name]} "
                 f"deaths; max_restarts={self.max_restarts}) and is not "
                 f"restarted again: {e}")
      if name in self.actor_names or name in self.OPTIONAL:
        logging.error(message)
        return
      raise NodeLost(message + " Resume the run from its checkpoint "
                     "(--resume).") from e
    if pid != self.pids[name]:
      self.deaths[name] += 1
      self.pids[name] = pid
      logging.warning("run_distributed: %s's process died (%d so far); Ray "
                      "restarted it.", name, self.deaths[name])
      if self.on_restart is not None:
        self.on_restart(name)
    if not self.stopping:
      self._long_call(name)

  def answered_from(self, name: str, pid: int) -> bool:
    """A node's answer came from process `pid`: if that is not the process
    known, the node was restarted and it is handled now (counted,
    `on_restart`) rather than when its failed long call is seen. Returns
    whether it was."""
    if self.pids[name] is None:  # Before `start`: the first process.
      self.pids[name] = pid
      return False
    if pid == self.pids[name]:
      return False
    self.deaths[name] += 1
    self.pids[name] = pid
    logging.warning("run_distributed: %s answered from a new process (%d "
                    "deaths so far); Ray restarted it.", name,
                    self.deaths[name])
    if self.on_restart is not None:
      self.on_restart(name)
    return True

  def check(self, timeout: float) -> None:
    """Waits up to `timeout` s for a call to end; handles what ended.

    Raises:
      RuntimeError: every actor is dead, or a long call ended by itself.
      NodeLost: the learner, the replay or the counter is dead for good.
      ray.exceptions.RayTaskError: a node raised (the node's error).
    """
    ray = self.ray
    now = time.monotonic()
    for name, when in list(self.next_ping.items()):
      if now >= when:
        del self.next_ping[name]
        self._ping(name)
    pending = list(self.watches.values()) + list(self.pings.values())
    if not pending:
      time.sleep(timeout if not self.next_ping else min(
          timeout, self.PING_EVERY_S))
      return
    done, _ = ray.wait(pending, num_returns=len(pending), timeout=timeout)
    done = set(done)
    for name, ref in list(self.watches.items()):
      if ref in done:
        self._watch_ended(name, ref)
    for name, ref in list(self.pings.items()):
      if ref in done:
        self._ping_answered(name, ref)
    if not any(self.alive):
      raise RuntimeError("run_distributed: every actor died more than "
                         f"max_restarts={self.max_restarts} times.")

  def call(self, name: str, method: str, *args, **kwargs) -> Any:
    """`ray.get(handles[name].<method>.remote(*args, **kwargs))`, called
    again once
    the node is back if its process died (restarts handled by `check`).

    Raises:
      NodeLost: the node is dead for good or did not come back within
        `RECOVERY_TIMEOUT_S`.
    """
    ray = self.ray
    since = None
    while True:
      if not self.up[name]:
        raise NodeLost(f"run_distributed: {name} is dead; cannot call "
                       f"{method}.")
      try:
        return ray.get(getattr(self.handles[name], method).remote(
            *args, **kwargs))
      except ray.exceptions.RayActorError as e:
        since = time.monotonic() if since is None else since
        if time.monotonic() - since > self.RECOVERY_TIMEOUT_S:
          raise NodeLost(f"run_distributed: {name} did not come back within "
                         f"{self.RECOVERY_TIMEOUT_S:.0f} s: {e}") from e
        if name not in self.watches:
          self._ping(name)
        self.check(timeout=self.PING_EVERY_S)

  def settle(self) -> None:
    """Handles every node death not yet handled (waiting for the restarts
    under way), so that each is counted and followed by `on_restart`."""
    self.check(timeout=0)
    since = time.monotonic()
    while self.pings or self.next_ping:
      if time.monotonic() - since > self.RECOVERY_TIMEOUT_S:
        raise NodeLost("run_distributed: a node did not come back within "
                       f"{self.RECOVERY_TIMEOUT_S:.0f} s: "
                       f"{sorted(set(self.pings) | set(self.next_ping))}.")
      self.check(timeout=self.PING_EVERY_S)

  def stop(self) -> None:
    """Stops the actors, then the learner, then the other nodes; waits for
    their long calls (after `settle`). The nodes stay up for the final row
    and checkpoint; a node restarted from now on is not run again."""
    ray = self.ray
    self.settle()
    self.stopping = True
    order = (self.actor_names, ["learner"],
             [n for n in self.names
              if n != "learner" and n not in self.actor_names])
    for names in order:
      refs = {n: self.watches.pop(n) for n in names if n in self.watches}
      for name in refs:
        self.handles[name].stop.remote()
      for name, ref in refs.items():
        try:
          ray.get(ref)
        except ray.exceptions.RayActorError:
          logging.warning("run_distributed: %s died while stopping.", name)

  def kill(self) -> None:
    for handle in self.handles.values():
      try:
        self.ray.kill(handle, no_restart=True)
      except Exception:  # pylint: disable=broad-except
        pass


class _Run:
  """Rows, evaluations and checkpoints of one `run_distributed` call."""

  def __init__(self, config: NGUConfig, handles: Dict[str, Any],
               supervisor: _Supervisor, run_config: Dict[str, Any],
               output_dir: Optional[str], num_lanes: int = 1):
    self.config = config
    self.num_lanes = num_lanes
    self.columns = columns_for(config)
    self.handles = handles
    self.supervisor = supervisor
    self.ray = supervisor.ray
    self.run_config = run_config
    # config.json as written before it recorded the pacing (still resumes).
    self.legacy_run_config = {k: v for k, v in run_config.items()
                              if k != "pacing"}
    self.output_dir = output_dir
    # The last row in memory, all in metrics.csv.
    self.rows = metrics_log.MetricsRows(
        None if output_dir is None
        else os.path.join(output_dir, metrics_log.METRICS_FILE),
        self.columns)
    self.learner_metrics = host.LearnerMetrics()
    self.start = time.time()
    self.elapsed_before = 0.
    self.start_counts = {"env_steps": 0, "learner_steps": 0}
    self.last_counts: Dict[str, int] = {}
    self.counter_state: Optional[Dict[str, Any]] = None
    self.pending_eval = None
    self.finished_eval = None
    self.save_due: Optional[str] = None  # A checkpoint a node death broke.

  @property
  def checkpoint_path(self) -> Optional[str]:
    if self.output_dir is None:
      return None
    return os.path.join(self.output_dir, checkpointing.CHECKPOINT_DIR)

  def counts(self) -> Dict[str, int]:
    """The counter's counts (its state kept for `node_restarted`)."""
    state = self._from_counter("state")
    self.counter_state = state
    self.last_counts = state["counts"]
    return self.last_counts

  def _from_counter(self, method: str) -> Dict[str, Any]:
    """The counter's `state` or `drain`; if it answers from a restarted
    process, after `node_restarted` gave it back its counts."""
    out = self.supervisor.call("counter", method)
    if self.supervisor.answered_from("counter", out["pid"]):
      out = self.supervisor.call("counter", method)
    return out

  def node_restarted(self, name: str) -> None:
    """After Ray restarted a node's process (`_Supervisor.on_restart`): the
    counter gets back the counts of the driver's last read (what actors
    reported since is in their running totals), and a lost evaluation is
    asked for again; restarts of nodes other than actors are counted."""
    if name == "counter" and self.counter_state is not None:
      self.supervisor.call("counter", "merge", self.counter_state)
    if name == "evaluator" and self.pending_eval is not None:
      self.pending_eval = None
      self.request_evaluation()
    if name not in self.supervisor.actor_names:
      self.supervisor.call("counter", "increment", node_restarts=1)

  def request_evaluation(self) -> None:
    """Starts an evaluation in the evaluator node (unless one runs)."""
    if ("evaluator" in self.handles and self.pending_eval is None
        and self.supervisor.up["evaluator"]):
      self.pending_eval = self.handles["evaluator"].evaluate.remote()

  def _evaluation(self, wait: bool) -> Optional[Dict[str, float]]:
    """The finished evaluation's columns (waiting for it if `wait`; if the
    evaluator dies meanwhile, for the one asked of its restarted process)."""
    ray = self.ray
    if self.finished_eval is not None:
      result, self.finished_eval = self.finished_eval, None
      return result
    while self.pending_eval is not None:
      ref = self.pending_eval
      done, _ = ray.wait([ref], timeout=None if wait else 0)
      if not done:
        return None
      try:
        result = ray.get(ref)
      except ray.exceptions.RayActorError:
        if not wait:
          return None  # `node_restarted` asks again.
        while self.pending_eval is ref and self.supervisor.up["evaluator"]:
          self.supervisor.call("evaluator", "pid")  # Until it is back.
          self.supervisor.check(timeout=self.supervisor.PING_EVERY_S)
        if self.pending_eval is ref:
          self.pending_eval = None
        continue
      self.pending_eval = None
      return result
    return None

  def evaluate_final(self) -> None:
    """Makes the pending evaluation one of the final parameters."""
    final = self.supervisor.call("learner", "steps")
    if self.pending_eval is not None:
      result = self._evaluation(wait=True)
      if result.get("eval_learner_steps") == final:
        self.finished_eval = result
        return
    self.request_evaluation()

  def make_row(self, wait_for_evaluation: bool = False) -> Dict[str, Any]:
    """A metrics row now, with the evaluation finished since the last one.

    Evaluations run in the evaluator node while the program trains; their
    columns go into the first row after they finish (eval_learner_steps in
    the result says which parameters were evaluated).
    """
    config = self.config
    eval_row = self._evaluation(wait_for_evaluation)
    call = self.supervisor.call
    learner = call("learner", "pop_metrics")
    self.learner_metrics.extend(learner["metrics"])
    drained = self._from_counter("drain")
    replay = call("replay", "info")
    counts = drained["counts"]
    elapsed = time.time() - self.start
    extra = dict(
        learner_steps_per_s=host.rate(
            learner["steps"] - self.start_counts["learner_steps"], elapsed),
        mean_staleness=metrics_log.mean_or_nan(drained["staleness"]),
        acked_inserts=counts["acked_inserts"],
        replay_inserted=replay["inserted"], replay_sampled=replay["sampled"],
        actor_restarts=counts.get("actor_restarts", 0),
        node_restarts=counts.get("node_restarts", 0),
        actors_alive=sum(self.supervisor.alive))
    extra.update(diagnostics.lane_controller_columns(
        config, drained.get("bandits", {})))
    if eval_row is not None:
      extra.update({k: v for k, v in eval_row.items() if k in self.columns})
      if self.output_dir is not None:
        write_bva_curve(config, drained.get("bandits", {}),
                        self.output_dir, counts["env_steps"])
    row = host.make_row(
        config, env_steps=counts["env_steps"],
        actor_steps=counts["actor_steps"], episodes=counts["episodes"],
        learner_steps=learner["steps"], replay_size=replay["size"],
        episode_stats=host.episode_columns(
            drained["returns"], drained["coverages"],
            episode_extras=drained.get("episode_extras")),
        env_steps_per_s=host.rate(
            counts["env_steps"] - self.start_counts["env_steps"], elapsed),
        elapsed_s=self.elapsed_before + elapsed,
        learner_values=self.learner_metrics.pop(),
        actor_sums=drained["actor_sums"],
        error_stats=drained["error_stats"], extra=extra, columns=self.columns)
    self.rows.append(row)
    return row

  def save(self, why: str) -> bool:
    """Checkpoints the learner, the replay and the counts (atomically).

    Returns False, keeping the previous checkpoint, when the learner's or
    the replay's process died while it was taken (`save_due` then says to
    take it again).
    """
    path = self.checkpoint_path
    if path is None:
      return True
    ray, handles = self.ray, self.handles
    try:
      with ckpt_lib.atomic_directory(path) as tmp:
        ray.get([handles["learner"].save.remote(tmp),
                 handles["replay"].save.remote(os.path.join(tmp, "replay"))])
        if self.config.keeps_lane_controllers:
          save_bandits(os.path.join(tmp, BANDITS_FILE),
                       self.supervisor.call("counter", "bandits"),
                       len(self.supervisor.actors) * self.num_lanes)
        counts = self.counts()
        checkpointing.write_run_state(tmp, "distributed", self.run_config, {
            "counts": counts,
            "elapsed_s": self.elapsed_before + time.time() - self.start,
            "metrics": self.rows.state()})
    except ray.exceptions.RayActorError as e:
      logging.warning("run_distributed: the %s checkpoint was not taken: a "
                      "node's process died (%s); %s keeps the previous one, "
                      "and it is taken again once the node is back.", why,
                      type(e).__name__, path)
      self.save_due = why
      return False
    self.save_due = None
    metrics_log.plot_curves(
        os.path.join(self.output_dir, metrics_log.METRICS_FILE),
        os.path.join(self.output_dir, metrics_log.CURVES_FILE),
        min_interval_s=(metrics_log.CHECKPOINT_PLOT_INTERVAL_S
                        if why == "periodic" else 0.))
    logging.info("run_distributed: %s checkpoint at %d env steps in %s.",
                  why, counts["env_steps"], path)
    return True

  def save_until_taken(self, why: str) -> None:
    """`save`, again after each node death, until it is taken (the final
    and the interrupt checkpoints)."""
    since = time.monotonic()
    while not self.save(why):
      if time.monotonic() - since > self.supervisor.RECOVERY_TIMEOUT_S:
        raise NodeLost(f"run_distributed: the {why} checkpoint could not be "
                       "taken: a node did not come back.")
      for name in ("learner", "replay"):
        self.supervisor.call(name, "pid")  # Waits until it is back.

  def restore(self) -> None:
    """Restores the learner, the replay, the counts and the rows."""
    path = checkpointing.find_checkpoint(self.checkpoint_path,
                                         self.output_dir, "run_distributed")
    meta = checkpointing.read_checkpoint_meta(
        path, self.run_config, loop="distributed", where="run_distributed",
        also_accept=[self.legacy_run_config])
    ray, handles = self.ray, self.handles
    try:
      learner_steps = ray.get(handles["learner"].restore.remote(path))
      ray.get(handles["replay"].restore.remote(os.path.join(path, "replay")))
    except ray.exceptions.RayTaskError as e:
      raise checkpointing.ResumeError(
          f"run_distributed: cannot resume from the corrupt or incomplete "
          f"checkpoint {path}: {e}") from e
    counts = dict(meta["counts"])
    ray.get(handles["counter"].set_counts.remote(counts))
    bandits_path = os.path.join(path, BANDITS_FILE)
    if self.config.keeps_lane_controllers and os.path.exists(bandits_path):
      ray.get(handles["counter"].set_bandits.remote(restore_bandits(
          bandits_path, self.supervisor.actors, self.num_lanes, ray)))
    self.rows.restore(metrics_log.saved_metrics(meta))
    self.elapsed_before = float(meta.get("elapsed_s", 0.))
    self.start_counts = {"env_steps": counts["env_steps"],
                         "learner_steps": learner_steps}


def distributed_run_config(config: NGUConfig, env_name: str, num_lanes: int,
                           seed: int, env_kwargs: Optional[Dict[str, Any]],
                           log_every_env_steps: int,
                           eval_every_env_steps: int) -> Dict[str, Any]:
  """config.json of a distributed run: `checkpointing.run_config` + pacing.

  "pacing" says how the learner is paced (`ngu_jax.loops.pacing`): the
  replay node's rate limiter, inserts weighted by fresh env steps /
  replay_period, samples_per_env_step of the config. Checkpoints written
  before it (without "pacing") still resume.
  """
  out = checkpointing.run_config(config, env_name, num_lanes, seed,
                                 env_kwargs, log_every_env_steps,
                                 eval_every_env_steps)
  out["pacing"] = dict(
      rule="replay rate limiter, inserts weighted by fresh env steps / "
           "replay_period (ngu_jax.loops.pacing)",
      samples_per_env_step=pacing.samples_per_env_step(config))
  return out


def run_distributed(config: NGUConfig, env_name: str, total_env_steps: int,
                    num_actors: int = 2, num_lanes: int = 8, seed: int = 0,
                    output_dir: Optional[str] = None,
                    env_kwargs: Optional[Dict[str, Any]] = None,
                    log_every_env_steps: int = 1000,
                    eval_every_env_steps: int = 0, eval_lanes: int = 0,
                    checkpoint_every_env_steps: int = 0,
                    resume: bool = False, progress: bool = True,
                    max_restarts: int = 3,
                    actor_cpus: Optional[float] = None,
                    learner_cpus: float = 1.,
                    replay_backend: str = "embedded",
                    poll_s: float = 0.5,
                    on_poll: Optional[Callable[[Dict[str, Any],
                                                Dict[str, int]], Any]] = None
                    ) -> Dict[str, Any]:
  """Trains NGU with K actor processes, a learner and a replay on Ray.

  Ray must be initialised in this process (`ray.init`, before JAX starts
  here; `experiments.launch` does it).

  Args:
    config: the agent's config.
    env_name: a name `ngu_jax.envs.make` accepts.
    total_env_steps: budget in env steps over all actors' lanes (the
      program stops at the first poll past it); with `resume`, the total.
    num_actors: K actor processes.
    num_lanes: B lanes per actor.
    seed: seeds every node.
    output_dir: metrics.csv, curves.png and checkpoint/ (created); None
      writes nothing.
    env_kwargs: extra keyword arguments of `envs.make`.
    log_every_env_steps: a metrics row at the first poll past every
      multiple of this (and one at the end).
    eval_every_env_steps: start an evaluation (in the evaluator node, while
      training goes on) at the first poll past every multiple of this, and
      one of the final parameters; its columns go into the next row. 0:
      never.
    eval_lanes: lanes of the evaluator node (one episode each); 0: no
      evaluator (default: num_lanes when `eval_every_env_steps`).
    checkpoint_every_env_steps: also checkpoint at the first poll past
      every multiple of this; 0: only at the end. Needs `output_dir`.
    resume: continue from `output_dir/checkpoint` (the run configuration
      must be the checkpoint's; the number of actors may differ).
    progress: a progress bar on stderr.
    max_restarts: how often each actor process is restarted after it dies
      (-1: always).
    actor_cpus: CPUs per actor (default: what `learner_cpus` leaves of the
      cluster, shared, at most 1 each).
    learner_cpus: CPUs of the learner node.
    replay_backend: the replay node's backend: "embedded" (the only one
      supported; `make_program`).
    poll_s: seconds between the driver's checks.
    on_poll: called as on_poll(handles, counts) at every poll (tests inject
      faults with it, the soak benchmark samples memory); when it returns
      True the program stops there as if the total were reached (final
      row, evaluation and checkpoint).

  Returns:
    A summary: the last metrics row plus "rows", "metrics_path",
    "curves_path", "checkpoint_path", "failures" (process deaths per actor)
    and "replay" (the replay node's size / inserted / sampled at the end).

  Raises:
    RuntimeError: Ray is not initialised, every actor died, or a node's
      `run` ended by itself.
    ray.exceptions.RayTaskError: a node raised (its error inside).
    ResumeError: with `resume`, another configuration or a corrupt
      checkpoint; FileNotFoundError: no checkpoint.
  """
  import ray  # pylint: disable=g-import-not-at-top
  if not ray.is_initialized():
    raise RuntimeError("run_distributed: Ray is not initialised; call "
                       "ray.init(...) first (before JAX starts in this "
                       "process), or use `python -m experiments.launch`.")
  host.check_arguments(
      "run_distributed", total_env_steps, log_every_env_steps,
      eval_every_env_steps=eval_every_env_steps,
      checkpoint_every_env_steps=checkpoint_every_env_steps,
      output_dir=output_dir, resume=resume, max_restarts=max_restarts)
  if eval_every_env_steps and not eval_lanes:
    eval_lanes = num_lanes
  if actor_cpus is None:
    actor_cpus = default_actor_cpus(
        num_actors, learner_cpus, ray.cluster_resources().get("CPU", 1.))
  run_config = distributed_run_config(
      config, env_name, num_lanes, seed, env_kwargs, log_every_env_steps,
      eval_every_env_steps)
  checkpoint_dir = (None if output_dir is None else os.path.abspath(
      os.path.join(output_dir, checkpointing.CHECKPOINT_DIR)))
  if output_dir is not None and max_restarts and not (
      checkpoint_every_env_steps or resume):
    logging.warning("run_distributed: no periodic checkpoints "
                    "(checkpoint_every_env_steps=0): a learner or replay "
                    "whose process dies restarts afresh.")
  program = make_program(config, env_name, num_actors, num_lanes, seed,
                         env_kwargs, eval_lanes, max_restarts, actor_cpus,
                         learner_cpus, replay_backend,
                         checkpoint_dir=checkpoint_dir)
  handles = program_lib.launch(program)
  supervisor = _Supervisor(handles, num_actors, max_restarts)
  run = _Run(config, handles, supervisor, run_config, output_dir, num_lanes)
  supervisor.on_restart = run.node_restarted
  metrics_path = curves_path = None
  if output_dir is not None:
    os.makedirs(output_dir, exist_ok=True)
    metrics_path = os.path.join(output_dir, metrics_log.METRICS_FILE)
    curves_path = os.path.join(output_dir, metrics_log.CURVES_FILE)
  bar = None
  try:
    if resume:
      run.restore()
    run.rows.open(resume)
    counts = run.counts()
    env_steps = counts["env_steps"]
    log = host.Schedule(log_every_env_steps, env_steps)
    evaluations = host.Schedule(eval_every_env_steps, env_steps)
    checkpoints = host.Schedule(checkpoint_every_env_steps, env_steps)
    bar = metrics_log.ProgressBar(total_env_steps, progress,
                                  initial=min(env_steps, total_env_steps))
    run.start = time.time()
    supervisor.start()
    shown = env_steps
    try:
      while env_steps < total_env_steps:
        supervisor.check(timeout=poll_s)
        counts = run.counts()
        env_steps = counts["env_steps"]
        if on_poll is not None and on_poll(handles, counts):
          break
        bar.update(env_steps, env_steps - shown,
                   f"{counts['episodes']} episodes, "
                   f"{sum(supervisor.alive)}/{num_actors} actors")
        shown = env_steps
        if evaluations.fire(env_steps):
          run.request_evaluation()
        if env_steps < total_env_steps and log.fire(env_steps):
          run.make_row()
        if ((checkpoints.fire(env_steps) or run.save_due)
            and env_steps < total_env_steps):
          run.save("periodic")
    except KeyboardInterrupt:
      # Stop the nodes, keep what they learned, tell the user how to go on.
      supervisor.stop()
      host.interrupted("run_distributed", run.checkpoint_path, True,
                       lambda: run.save_until_taken("interrupt"),
                       lambda: run.last_counts.get("env_steps"))
      raise
    supervisor.stop()
    if eval_every_env_steps:
      run.evaluate_final()
    run.make_row(wait_for_evaluation=True)
    run.save_until_taken("final")
    replay_info = supervisor.call("replay", "info")
  finally:
    if bar is not None:
      bar.close()
    run.rows.close()
    supervisor.kill()
  curves_path = metrics_log.plot_curves(metrics_path, curves_path)
  summary = dict(run.rows.last)
  summary.update(rows=run.rows.all(), metrics_path=metrics_path,
                 curves_path=curves_path,
                 checkpoint_path=run.checkpoint_path,
                 failures=list(supervisor.failures),
                 node_failures=supervisor.node_failures(), replay=replay_info)
  return summary

