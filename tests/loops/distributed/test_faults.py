"""Fault injection in the distributed program: each node kind is killed
(SIGKILL) mid-run, Ray restarts it, and the run reaches its total.

What each kill may lose is the bound docs/design.md states ("Faults: what
each one loses"); each test counts inserted, acknowledged and sampled
sequences and learner steps before the kill, in the checkpoint the node
restores, and at the end, and checks that bound exactly:

* learner: it restores the checkpoint's learner steps (the steps since are
  lost); no acknowledged insert is lost.
* replay: it restores the checkpoint's items and counts; the acknowledged
  inserts lost are exactly those since the checkpoint (the learner is
  paused first, so that the rate limiter holds the actors and the count at
  the kill is known).
* counter: no count is lost (each actor reports its running totals; the
  driver gives the counter back what it last read).
* evaluator: the evaluation in flight is asked for again; training goes on.
* actor: a fresh process; acknowledged inserts are never lost.

Marked `faults` (`make test-faults`, which `.ci/run` runs): about a minute
each on 2 cores.
"""

import json
import os
import signal
import time

import pytest

from experiments import cartpole_sanity
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import checkpointing
from ngu_jax.loops.distributed import launcher

pytestmark = pytest.mark.faults

CARTPOLE = "gymnax/CartPole-v1"
SMALL = dict(cartpole_sanity.CONFIG, mlp_hidden_sizes=(32,), lstm_size=32,
             head_hidden=32, min_replay_size=50, batch_size=16)
TOTAL = 4000
CHECKPOINT_EVERY = 500


def _checkpoint(tmp_path):
  """The checkpoint on disk: its counts, learner steps and replay counts."""
  path = os.path.join(str(tmp_path), checkpointing.CHECKPOINT_DIR)
  with open(os.path.join(path, "state.json")) as f:
    counts = json.load(f)["counts"]
  with open(os.path.join(path, "learner.json")) as f:
    learner_steps = json.load(f)["steps"]
  with open(os.path.join(path, "replay", "replay.json")) as f:
    replay = json.load(f)
  return dict(counts=counts, learner_steps=learner_steps,
              inserted=replay["inserted"], sampled=replay["sampled"],
              size=replay["size"], next_id=replay["next_id"])


def _recovery(ray, handle, deadline_s=120.):
  """The restarted node's `recovery()`, once it answers."""
  since = time.monotonic()
  while time.monotonic() - since < deadline_s:
    try:
      info = ray.get(handle.recovery.remote(), timeout=10)
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
      time.sleep(0.5)
      continue
    if info["restarted"]:
      return info
    time.sleep(0.5)
  raise AssertionError("the node did not come back")


def _run(ray, tmp_path, kill, total=TOTAL, end_when_done=False, **kwargs):
  """Runs the program; `kill(handles, counts)` is called at each poll once
  the first periodic checkpoint exists, until it returns True (then, with
  `end_when_done`, the program stops at the next poll)."""
  seen = {}

  def on_poll(handles, counts):
    if "done" in seen:
      return end_when_done
    if not os.path.exists(os.path.join(
        str(tmp_path), checkpointing.CHECKPOINT_DIR, "state.json")):
      return False
    if kill(handles, counts, seen):
      seen["done"] = True
    return False

  summary = launcher.run_distributed(
      NGUConfig(**SMALL), CARTPOLE, total, num_actors=2, num_lanes=4,
      output_dir=str(tmp_path), log_every_env_steps=500,
      checkpoint_every_env_steps=CHECKPOINT_EVERY, max_restarts=1,
      progress=False, on_poll=on_poll, **kwargs)
  assert seen.get("done"), "the fault was never injected"
  assert end_when_done or summary["env_steps"] >= total
  return summary, seen


def test_learner_kill_restores_its_checkpoint(ray_cluster, tmp_path):
  ray = ray_cluster

  def kill(handles, counts, seen):
    learner = handles["learner"]
    seen["steps_before"] = ray.get(learner.steps.remote())
    seen["checkpoint"] = _checkpoint(tmp_path)
    if seen["steps_before"] <= seen["checkpoint"]["learner_steps"]:
      return False  # Nothing to lose yet.
    os.kill(ray.get(learner.pid.remote()), signal.SIGKILL)
    seen["recovery"] = _recovery(ray, learner)
    return True

  summary, seen = _run(ray, tmp_path, kill)
  ckpt, recovery = seen["checkpoint"], seen["recovery"]
  # Restored exactly the checkpoint's learner: the steps since are lost.
  assert recovery["steps"] == ckpt["learner_steps"]
  assert recovery["checkpoint"].endswith(checkpointing.CHECKPOINT_DIR)
  assert seen["steps_before"] > recovery["steps"]
  assert summary["learner_steps"] > seen["steps_before"] - (
      seen["steps_before"] - recovery["steps"])
  assert summary["node_failures"]["learner"] == 1
  assert summary["node_restarts"] == 1
  assert summary["failures"] == [0, 0]
  # Nothing acknowledged was lost: the replay holds every acked insert.
  assert summary["replay"]["inserted"] == summary["acked_inserts"]
  assert summary["replay"]["sampled"] > ckpt["sampled"]


def test_replay_kill_loses_exactly_the_inserts_since_its_checkpoint(
    ray_cluster, tmp_path):
  ray = ray_cluster

  def kill(handles, counts, seen):
    replay, learner = handles["replay"], handles["learner"]
    ckpt = _checkpoint(tmp_path)
    if ray.get(replay.info.remote())["inserted"] <= ckpt["inserted"]:
      return False  # Nothing to lose yet.
    learner_pid = ray.get(learner.pid.remote())
    os.kill(learner_pid, signal.SIGSTOP)
    try:
      # With no samples the rate limiter soon holds every actor's insert:
      # the count at the kill is then known.
      last, stable = -1, 0
      while stable < 4:
        time.sleep(0.5)
        inserted = ray.get(replay.info.remote())["inserted"]
        stable = stable + 1 if inserted == last else 0
        last = inserted
      seen["inserted_at_kill"] = last
      seen["checkpoint"] = ckpt
      os.kill(ray.get(replay.pid.remote()), signal.SIGKILL)
    finally:
      os.kill(learner_pid, signal.SIGCONT)
    seen["recovery"] = _recovery(ray, replay)
    return True

  summary, seen = _run(ray, tmp_path, kill)
  ckpt, recovery = seen["checkpoint"], seen["recovery"]
  # Restored exactly the checkpoint's replay ...
  for name in ("inserted", "sampled", "size"):
    assert recovery[name] == ckpt[name], name
  assert recovery["next_key"] >= ckpt["next_id"] + 2**40
  # ... so the acknowledged inserts lost are exactly those since it.
  lost = seen["inserted_at_kill"] - ckpt["inserted"]
  assert lost > 0
  assert summary["acked_inserts"] - summary["replay"]["inserted"] == lost
  assert summary["node_failures"]["replay"] == 1
  assert summary["node_restarts"] == 1
  assert summary["failures"] == [0, 0]
  assert summary["learner_steps"] > ckpt["learner_steps"]


def test_counter_kill_loses_no_count(ray_cluster, tmp_path):
  ray = ray_cluster

  def kill(handles, counts, seen):
    counter = handles["counter"]
    seen["before"] = ray.get(counter.get_counts.remote())
    os.kill(ray.get(counter.pid.remote()), signal.SIGKILL)
    seen["recovery"] = _recovery(ray, counter)
    return True

  summary, seen = _run(ray, tmp_path, kill)
  rows = summary["rows"]
  for name in ("env_steps", "actor_steps", "episodes", "acked_inserts"):
    values = [row[name] for row in rows]
    assert values == sorted(values), (name, values)  # Never went back.
    assert summary[name] >= seen["before"][name], name
  # Every acknowledged insert counted once: the replay's own count agrees.
  assert summary["acked_inserts"] == summary["replay"]["inserted"]
  assert summary["actor_steps"] * 4 == summary["env_steps"]
  assert summary["node_failures"]["counter"] == 1
  assert summary["node_restarts"] == 1
  assert summary["failures"] == [0, 0]


def test_evaluator_kill_asks_for_the_lost_evaluation_again(ray_cluster,
                                                          tmp_path):
  ray = ray_cluster

  def kill(handles, counts, seen):
    evaluator = handles["evaluator"]
    if "stopped_at" not in seen:
      # Frozen, it holds the next evaluation the driver asks for.
      seen["pid"] = ray.get(evaluator.pid.remote())
      os.kill(seen["pid"], signal.SIGSTOP)
      seen["stopped_at"] = counts["env_steps"]
      return False
    if "killed_at" not in seen:
      if counts["env_steps"] < seen["stopped_at"] + 2 * CHECKPOINT_EVERY:
        return False  # An evaluation was asked for since: it waits.
      os.kill(seen["pid"], signal.SIGKILL)
      seen["killed_at"] = counts["env_steps"]
      return False
    try:
      info = ray.get(evaluator.recovery.remote(), timeout=1)
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
      return False
    # The restarted process served the lost evaluation (asked for again;
    # the driver asks for no other while one is pending), then another.
    if info["evaluations"] < 2:
      return False
    seen["recovery"] = info
    return True

  # The run ends once the hook has seen that (its total is never reached).
  summary, seen = _run(ray, tmp_path, kill, total=10**7, end_when_done=True,
                       eval_every_env_steps=CHECKPOINT_EVERY, eval_lanes=2)
  assert seen["recovery"]["restarted"]
  rows = summary["rows"]
  evaluated = [row for row in rows if row["eval_return"] == row["eval_return"]]
  frozen = [row for row in evaluated
            if seen["stopped_at"] < row["env_steps"] <= seen["killed_at"]]
  after = [row for row in evaluated if row["env_steps"] > seen["killed_at"]]
  shown = [(row["env_steps"], row["eval_return"]) for row in rows]
  assert not frozen, shown  # The frozen evaluator answered nothing ...
  assert len(after) >= 2, (seen, shown)  # ... its restart did.
  assert rows[-1] in after  # The final parameters were evaluated.
  assert summary["node_failures"]["evaluator"] == 1
  assert summary["node_restarts"] == 1
  assert summary["acked_inserts"] == summary["replay"]["inserted"]


def test_actor_kill_restarts_it_fresh_and_loses_no_acked_insert(
    ray_cluster, tmp_path):
  ray = ray_cluster

  def kill(handles, counts, seen):
    actor, other = handles["actor_0"], handles["actor_1"]
    if "killed" not in seen:
      seen["acked"] = counts["acked_inserts"]
      # The other actor pauses (so the run cannot end first) until the
      # restarted process has inserted.
      seen["other_pid"] = ray.get(other.pid.remote())
      os.kill(seen["other_pid"], signal.SIGSTOP)
      os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
      seen["killed"] = True
      return False
    try:
      info = ray.get(actor.info.remote(), timeout=5)
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
      return False  # Still restarting.
    if not (info["restarted"] and info["acked_inserts"] > 0):
      return False
    os.kill(seen["other_pid"], signal.SIGCONT)
    return True

  summary, seen = _run(ray, tmp_path, kill)
  assert summary["failures"] == [1, 0]
  assert summary["actor_restarts"] == 1
  assert summary["node_restarts"] == 0
  assert summary["actors_alive"] == 2
  assert summary["acked_inserts"] > seen["acked"]
  # A killed actor's inserts since its last report are in the replay but
  # were never counted as acknowledged; none acknowledged is missing.
  assert summary["replay"]["inserted"] >= summary["acked_inserts"]
