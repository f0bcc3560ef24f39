"""Run checkpoints: configuration check, metadata, and Ctrl-C deferral.

The checkpoint pieces every training loop shares; the files themselves go
through `ngu_jax.npz_io` (pytrees as .npz, metadata as JSON, no pickle,
directories replaced atomically). `ngu_jax.loops.python.state` saves and
restores the Python loop's parts with them.

Checkpoints (with `output_dir`): `output_dir/checkpoint/` (`CHECKPOINT_DIR`)
is written every `checkpoint_every_env_steps` env steps, at the end of the
run and on Ctrl-C, and `resume=True` continues from it exactly: a run of 2K
env steps and a run of K steps resumed to 2K give bit-identical parameters
and metrics rows (for environments whose state can be saved, i.e. Disco
Maze). The directory is replaced atomically
(`ngu_jax.npz_io.atomic_directory`) and holds no pickle, only .npz
arrays and JSON:

  config.json    the run's configuration (`run_config`: agent config,
                 environment, lanes, seed, log / eval intervals); resuming
                 with another one is refused, naming the differing fields
                 (`read_checkpoint_meta`, `ResumeError`).
  state.json     loop counters (env / actor / learner steps, episodes, the
                 next log and evaluation points, the learner pacing point),
                 the metrics rows' count and the last row ("metrics",
                 `metrics_log.MetricsRows.state`: the rows themselves are
                 in metrics.csv, which a resume cuts back to that count),
                 the environments' RNG states; "format" and "version"
                 (`checkpoint_format("python")`, `CHECKPOINT_VERSION`;
                 version 1, which held every row as "rows", still
                 resumes).
  learner.npz    `LearnerState`: parameters, target parameters, the three
                 optimiser states, RND observation statistics, steps,
                 skipped steps, key.
  actor.npz      the actor's `ActorState` (LSTM states, episodic memories,
                 per-lane embedding parameters, key, error statistics,
                 extras) and the parameters it acts with.
  adder.npz      the `SequenceAdder`'s sequences in progress.
  replay/        the replay (`PrioritizedReplay.save`, its RNG included).
  loop.npz       the last `TimeStep`, per-lane episode returns, the coverage
                 tracker, the episode returns / coverages / extras
                 ("episode_extras/<name>", `acting.EPISODE_EXTRAS`), learner
                 metrics and actor diagnostic sums since the last metrics
                 row, the training lanes' visits since the last evaluation,
                 and an action not yet applied.
  env.npz, eval.npz, eval_env.npz   environment and evaluation state.

On resume, metrics.csv is rewritten with the checkpoint's rows (rows written
after the checkpoint are dropped) and appended to. A row written only
because the run ended between two log points is not part of the end
checkpoint, so a resumed run logs exactly the rows of an uninterrupted one.
(A checkpoint written before the diagnostic columns existed resumes too: its
rows leave them empty, and the next row's actor diagnostics average only the
steps after the resume. Likewise one written before the episode-extra
columns: its rows leave them empty and it resumes with no episode extras
recorded.)
Environments that cannot save their state (envpool Atari and MiniGrid,
gymnax) are reset on resume: their episodes in flight restart (and are not
counted), and the adder's sequences in progress are emitted padded first,
as at a truncation, so that no sequence spans the reset.

Ctrl-C (`DeferInterrupt`): in the main thread the first SIGINT only sets a
flag; the loop finishes its iteration, saves a checkpoint, writes the curves
and raises KeyboardInterrupt (a second Ctrl-C stops at once, without
saving). A KeyboardInterrupt raised by `env.step` itself is caught there,
before any state changed, and saved with the action still to apply.
Elsewhere (e.g. a loop not run in the main thread) the state may be
mid-update: nothing is saved, the last checkpoint stays.
"""

import json
import math
import os
import signal
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu.config import NGUConfig

CHECKPOINT_DIR = "checkpoint"
# The loops whose checkpoints state.json names: "format" is
# `checkpoint_format(loop)`, "version" `CHECKPOINT_VERSION`.
LOOPS = ("python", "compiled", "distributed")
# 2: state.json holds the metrics rows' count and last row ("metrics"), not
# every row ("rows", version 1: a long run's state.json grew with its
# length). Versions OLDEST_CHECKPOINT_VERSION .. CHECKPOINT_VERSION resume.
CHECKPOINT_VERSION = 2
OLDEST_CHECKPOINT_VERSION = 1


def checkpoint_format(loop: str) -> str:
  """state.json's "format" of a loop's checkpoints.

  Args:
    loop: "python", "compiled" or "distributed" (`LOOPS`).

  Returns:
    "ngu_jax.loops.<loop>.checkpoint".
  """
  if loop not in LOOPS:
    raise ValueError(f"checkpoint_format: unknown loop {loop!r}; one of "
                     f"{LOOPS}.")
  return _FORMATS[loop]


_FORMATS = {loop: f"ngu_jax.loops.{loop}.checkpoint" for loop in LOOPS}


# The Python loop's format (kept for imports).
CHECKPOINT_FORMAT = checkpoint_format("python")


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


def config_differences(saved: Any, current: Any, prefix: str = ""
                       ) -> List[str]:
  """'field: checkpoint X, now Y' for every leaf where two configs differ.

  Args:
    saved, current: JSON values (nested dicts compared key by key).
    prefix: the dotted name of this level ("" at the top).
  """
  if isinstance(saved, dict) and isinstance(current, dict):
    out = []
    for key in sorted(set(saved) | set(current)):
      name = f"{prefix}.{key}" if prefix else str(key)
      if key not in saved:
        out.append(f"{name}: not in the checkpoint, now {current[key]!r}")
      elif key not in current:
        out.append(f"{name}: checkpoint {saved[key]!r}, now absent")
      else:
        out.extend(config_differences(saved[key], current[key], name))
    return out
  if saved != current:
    return [f"{prefix}: checkpoint {saved!r}, now {current!r}"]
  return []


def with_new_agent_defaults(saved: Any, current: Any) -> Any:
  """`saved` in today's agent-config form, with the fields it predates.

  Two kinds of old checkpoint still resume:
  * one written before the variant families existed holds flat names
    (`recode_capacity`, `meta_controller`, ...): they are moved into their
    families (`config.nest_flat_names`), which is what they now are;
  * one written before a config field existed (e.g. Agent57's
    `split_values`) ran as that field's default: where `current` sets such a
    field to its default, the field is added to `saved["agent"]`; set to
    anything else, it stays a difference.

  Args:
    saved, current: run configs (`run_config`; JSON values).

  Returns:
    `saved`, or a copy with "agent" upgraded.
  """
  if not (isinstance(saved, dict) and isinstance(current, dict)
          and isinstance(saved.get("agent"), dict)
          and isinstance(current.get("agent"), dict)):
    return saved
  defaults = json.loads(json.dumps(NGUConfig().to_dict(), default=repr))
  agent = _with_defaults(config_lib.nest_flat_names(saved["agent"]),
                         current["agent"], defaults)
  return {**saved, "agent": agent}


def _with_defaults(saved: Dict[str, Any], current: Dict[str, Any],
                   defaults: Dict[str, Any]) -> Dict[str, Any]:
  """`saved` with each key it lacks taken from `current` where that is the
  default (a family's dict key by key)."""
  out = dict(saved)
  for name, value in current.items():
    default = defaults.get(name)
    if name not in out:
      if name in defaults and default == value:
        out[name] = value
    elif isinstance(out[name], dict) and isinstance(value, dict) and (
        isinstance(default, dict)):
      out[name] = _with_defaults(out[name], value, default)
  return out


def find_checkpoint(checkpoint_path: Optional[str], output_dir: Optional[str],
                    where: str = "run_experiment") -> str:
  """The latest complete checkpoint directory to resume from, its files
  checked against its checksums (`npz_io.verify_directory`).

  Raises:
    FileNotFoundError: there is none (the message suggests starting afresh).
    ResumeError: a file of it is missing, truncated or corrupt (named).
  """
  try:
    path = ckpt_lib.find_directory(checkpoint_path)
  except FileNotFoundError:
    raise FileNotFoundError(
        f"{where}: no checkpoint to resume from in {output_dir} "
        f"(expected {checkpoint_path}/); start without `resume`.") from None
  try:
    ckpt_lib.verify_directory(path)
  except ValueError as e:
    raise ResumeError(f"{where}: cannot resume: {e}") from e
  return path


def write_run_state(directory: str, loop: str, config: Dict[str, Any],
                    state: Dict[str, Any]) -> None:
  """A checkpoint's config.json and state.json, written into `directory`.

  Every loop's checkpoint holds these two files: config.json the run's
  config (`read_checkpoint_meta` compares it on resume), state.json
  {"format": `checkpoint_format(loop)`, "version": `CHECKPOINT_VERSION`,
  then `state`'s entries} (the loop's counters and metrics rows).

  Args:
    directory: the checkpoint directory being written (e.g. the temporary
      one of `npz_io.atomic_directory`).
    loop: "python", "compiled" or "distributed".
    config: the run's JSON-able config.
    state: the loop's JSON-able state (not "format" or "version").
  """
  ckpt_lib.write_json(os.path.join(directory, "config.json"), config)
  ckpt_lib.write_json(os.path.join(directory, "state.json"), {
      "format": checkpoint_format(loop), "version": CHECKPOINT_VERSION,
      **state})


def read_checkpoint_meta(path: str, config: Dict[str, Any],
                         checkpoint_format: Optional[str] = None,
                         version: int = CHECKPOINT_VERSION,
                         loop: str = "python",
                         also_accept: Sequence[Dict[str, Any]] = (),
                         where: str = "run_experiment"
                         ) -> Dict[str, Any]:
  """Reads state.json after checking config.json against `config`.

  Args:
    path: the checkpoint directory.
    config: this run's `run_config` (or the loop's own JSON-able config).
    checkpoint_format: the one "format" state.json must have; default:
      `checkpoint_format(loop)`.
    version: the newest version this code reads (down to
      `OLDEST_CHECKPOINT_VERSION`; older and newer ones are refused).
    loop: "python", "compiled" or "distributed".
    also_accept: other forms of `config` a checkpoint may hold (e.g. one
      written before config.json recorded the effective config).
    where: the loop's function name, for messages.

  Returns:
    The state.json dict.

  Raises:
    ResumeError: a missing or corrupt file, another format or version
      (naming both), or a differing config (listing the fields).
  """
  try:
    saved = ckpt_lib.read_json(os.path.join(path, "config.json"))
    meta = ckpt_lib.read_json(os.path.join(path, "state.json"))
  except (OSError, ValueError) as e:
    raise ResumeError(f"{where}: cannot resume from the corrupt or "
                      f"incomplete checkpoint {path}: {e}") from e
  saved = with_new_agent_defaults(saved, config)
  differences = config_differences(saved, config)
  if differences and any(not config_differences(saved, other)
                         for other in also_accept):
    differences = []
  if differences:
    raise ResumeError(
        f"{where}: cannot resume from {path}: the run's configuration "
        "differs from the checkpoint's:\n  " + "\n  ".join(differences))
  formats = ((checkpoint_format,) if checkpoint_format is not None
             else (_FORMATS[loop],))
  got_format = meta.get("format") if isinstance(meta, dict) else None
  got_version = meta.get("version") if isinstance(meta, dict) else None
  if got_format not in formats:
    raise ResumeError(
        f"{where}: {path}/state.json is not a checkpoint of this loop: "
        f"format {got_format!r} version {got_version!r}; this code reads "
        f"format {formats[0]!r} version {version}.")
  if not (isinstance(got_version, int)
          and OLDEST_CHECKPOINT_VERSION <= got_version <= version):
    raise ResumeError(
        f"{where}: {path} has checkpoint format {got_format!r} version "
        f"{got_version!r}; this code reads versions "
        f"{OLDEST_CHECKPOINT_VERSION} to {version}"
        + (" (written by a newer ngu_jax)." if isinstance(got_version, int)
           and got_version > version else "."))
  return meta


def rows_to_json(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """Metrics rows for JSON: non-finite floats become None."""
  return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
           for k, v in row.items()} for row in rows]


def rows_from_json(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """The inverse of `rows_to_json` (None becomes NaN)."""
  return [{k: (math.nan if v is None else v) for k, v in row.items()}
          for row in rows]


def env_state(env: Optional[envs.BatchedEnv]
              ) -> Optional[Tuple[Dict[str, np.ndarray], Dict[str, Any]]]:
  """(arrays, JSON values) of `env.get_state()`, or None if unsupported."""
  get_state = getattr(env, "get_state", None)
  if get_state is None:
    return None
  state = get_state()
  arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
  return arrays, {k: v for k, v in state.items() if k not in arrays}


class DeferInterrupt:
  """Defers Ctrl-C (SIGINT) to the run loop's iteration boundaries.

  Installed only in the main thread (the only one Python delivers signals
  to) and only while `enabled`. The first SIGINT sets `requested`; the loop
  then checkpoints after its iteration and raises KeyboardInterrupt. A second
  SIGINT raises KeyboardInterrupt at once.

  Usage:
    with DeferInterrupt(enabled=True) as interrupt:
      while ...:
        ...  # one iteration
        if interrupt.requested:
          raise KeyboardInterrupt  # after saving
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
