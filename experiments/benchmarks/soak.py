r"""Benchmark: a soak run -- resident memory and throughput stay flat for hours.

Issue 40 (item 5): research runs last hours, so a run must not grow (replay,
episodic memories, Ray's object store, metric buffers) nor slow down. This
runs one loop (`--loop`) for a set wall time (`--minutes`) and samples, every
`--sample-every-s` seconds:

* the resident memory of each process (/proc/<pid>/status: VmRSS, and its
  RssAnon / RssShmem parts; Linux only, no psutil):
  - distributed: the driver, every node of `run_distributed`'s program
    ("counter", "replay", "learner", "actor_<i>", "evaluator" if any) and
    Ray's own "ray:raylet" (it holds the object store) and
    "ray:gcs_server". A node's process id is asked once through Ray's
    `ActorHandle.__ray_call__` (it runs `os.getpid()` inside the node; no
    node method is added), an actor's again at every sample through
    `ActorNode.pid` (Ray restarts a dead actor in a new process); Ray's
    processes are those the driver's `ray.init` started
    (`ray._private.worker._global_node.all_processes`). The GCS keeps
    Ray's task events (one per remote call) up to
    `task_events_max_num_task_in_gcs` tasks, so it grows for the first
    minutes (~20 MB/min in a --quick run on 2 cores; with
    RAY_task_events_max_num_task_in_gcs=2000 in the environment it stayed
    flat, +2.7%): Ray's, not this library's, and left at Ray's default;
  - compiled: the one process (and, on a GPU, the device's bytes in use,
    `Device.memory_stats()`, in `device_mb`);
* Ray's object store (distributed): `object_store_mb`, the bytes held in it
  now, as `ray.cluster_resources()` minus `ray.available_resources()` of
  "object_store_memory" (the raylet reports its plasma usage there: a 95 MB
  `ray.put` shows and is freed again when its reference is dropped, checked
  on Ray 2.60; the figure lags by the raylet's report period, under a
  second). `ray memory` / `memory_summary` would need grpcio, which is not
  installed. `shm_mb` is what /dev/shm holds (machine-wide): the pages of
  the plasma arena touched so far, a high-water mark (freed objects leave
  them touched);
* throughput over each interval: env steps/s and learner steps/s.
  Distributed: the counter node's env steps (`on_poll`'s counts) and
  `LearnerNode.steps`, read at the sample. Compiled: the last metrics row
  of the running `run_compiled` (its metrics.csv, flushed after every
  chunk), read every 0.25 s; `counted_at_s` is when that row was first seen.

The replay capacity (`--replay-capacity`; defaults per setting and loop in
`SETTINGS`) is chosen so that the replay is FULL well before the end of the
warm-up window at the rates measured on a 2-core machine (the compiled
loop's replay is a preallocated array, so there filling changes no memory):
memory growth only means something once every buffer is full. The time it
filled is printed and recorded (`replay_full_at_s`; distributed: the replay
node's size, asked at every driver poll, 0.5 s, until full).

Summary (`summarize`), against the warm-up window (`--warmup-minutes`,
default 10, the reference; "w" is the first sample at or after its end):
* memory, per process: RSS at w and at the last sample; growth % =
  100 (RSS_last - RSS_w) / RSS_w, and the largest RSS after w; the
  criterion is growth < 5% (`GROWTH_LIMIT_PCT`) for every process (RssAnon,
  the private heap, is reported beside it: VmRSS also counts shared pages
  of the object store that the process touched);
* throughput: env steps/s over the warm-up, from the first sample with a
  learner step (start-up, compilation and the unpaced replay fill before
  `min_replay_size` left out) to w, against env steps/s from w to the last
  sample; the criterion is |after / warm-up - 1| <= 10%
  (`THROUGHPUT_TOLERANCE`). Learner steps/s are reported the same way.
* pass: both criteria, and the replay full before the end of the warm-up.

Outputs in `--output-dir` (default runs/soak/<loop>): samples.csv (a row per
sample per process: elapsed_s, process, pid, rss_mb, anon_mb, shmem_mb and
the sample's env_steps, learner_steps, counted_at_s, env_steps_per_s,
learner_steps_per_s, replay_size, object_store_mb, shm_mb, device_mb;
written as it goes), summary.json, soak.png (RSS per process, RSS relative
to w, throughput and the object store / device memory against minutes, the
warm-up window shaded), config.json (the agent's whole config, the environment and the
soak's settings), and the loop's own outputs in run/ (metrics.csv, curves,
the final checkpoint). A progress line goes to stderr every
`--progress-every-s` (default 180 s); a table is printed at the end.

Usage:
  python -m experiments.benchmarks.soak [--loop distributed|compiled]
      [--minutes 60] [--warmup-minutes 10] [--sample-every-s 30]
      [--actors 4] [--num-lanes B] [--config cartpole|disco_maze]
      [--replay-capacity N] [--log-every-env-steps 5000]
      [--eval-every-env-steps 0] [--checkpoint-every-env-steps 0]
      [--output-dir DIR] [--quick] [--json PATH]
  --quick: 2.5 min (distributed) / 2 min (compiled), warm-up 1.5 / 1.25
  min (`QUICK`), a sample every 5 s, a smaller replay (2,000 sequences on
  CartPole: `SETTINGS`' quick_replay_capacity).
"""

import argparse
import csv
import json
import math
import os
import platform
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from experiments.benchmarks import local_ray

# Token authentication (Ray 2.60's secure mode), never disabled; Ray reads
# the mode when it is imported, so it is set before anything imports Ray.
os.environ.setdefault("RAY_AUTH_MODE", "token")

LOOPS = ("distributed", "compiled")
GROWTH_LIMIT_PCT = 5.
"""Issue 40: "resident memory growth under 5% after the first 10 minutes"."""
THROUGHPUT_TOLERANCE = 0.10
"""Issue 40: "throughput within 10% of its first 10 minutes"."""
TOTAL_ENV_STEPS = 10**12
"""The loops' budget: never reached, the wall time stops them."""
COMPILED_POLL_S = 0.25
"""How often the compiled loop's watcher reads its metrics.csv."""
QUICK = {"distributed": dict(minutes=2.5, warmup_minutes=1.5),
         "compiled": dict(minutes=2., warmup_minutes=1.25)}
"""--quick: a smoke run (a sample every 5 s, progress every 20 s); the
criteria are computed but mean little. On 2 busy cores the distributed
program's first env step comes 45-75 s after launch and the compiled loop's
first chunk compiles for ~35 s, so the warm-up (which holds the reference
throughput) ends after the replay filled in both."""


def _cartpole_config():
  """experiments/cartpole_sanity.py's config."""
  from experiments import cartpole_sanity  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.NGUConfig(**cartpole_sanity.CONFIG)


def _disco_maze_config():
  """experiments/benchmarks/loops.py's Disco Maze config (laptop scale)."""
  from ngu_jax.agents.ngu import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.disco_maze(batch_size=32, lstm_size=128, head_hidden=128,
                               grid_output_size=128, trace_length=10,
                               replay_period=5)


SETTINGS = {
    # experiments/cartpole_sanity.py's config (the distributed benchmark's
    # default). Rates measured by --quick runs on 2 busy cores (replay
    # period 5: a lane inserts a sequence every 5 env steps): distributed,
    # 4 actors of 8 lanes, 900-1,500 env steps/s (180-300 sequences/s:
    # 30,000 fill in 2-3 min, after 45-75 s of start-up); compiled, 32
    # lanes, ~6,500 env steps/s (30,000 in under 30 s after ~35 s of
    # compilation).
    "cartpole": dict(
        env="gymnax/CartPole-v1", env_kwargs={},
        config=_cartpole_config,
        replay_capacity={"distributed": 30_000, "compiled": 30_000},
        quick_replay_capacity=2_000),
    # experiments/benchmarks/loops.py's Disco Maze (11x11, laptop networks),
    # slower per env step: docs/performance.md's loops benchmark (16 lanes,
    # 2 cores) has the Python loop at ~430 env steps/s; a --quick compiled
    # soak (32 lanes, 2 busy cores) ran ~470 env steps/s after ~75 s of
    # compilation, i.e. ~90 sequences/s: 10,000 fill in ~2 min (the
    # distributed program's rate on it was not measured; assumed of the
    # Python loop's order, as on CartPole). --quick is too short for its
    # compilation: use it on CartPole.
    "disco_maze": dict(
        env="disco_maze", env_kwargs={"size": 11},
        config=_disco_maze_config,
        replay_capacity={"distributed": 10_000, "compiled": 10_000},
        quick_replay_capacity=500),
}


# ---------------------------------------------------------------- probes


def read_memory(pid: int) -> Optional[Dict[str, float]]:
  """{"rss_mb", "anon_mb", "shmem_mb"} of a live process (/proc), or None.

  VmRSS = RssAnon + RssFile + RssShmem (Linux >= 4.5); MB are MiB.
  """
  fields = {"VmRSS:": "rss_mb", "RssAnon:": "anon_mb",
            "RssShmem:": "shmem_mb"}
  out = {name: math.nan for name in fields.values()}
  try:
    with open(f"/proc/{int(pid)}/status") as f:
      for line in f:
        key = line.split(None, 1)[0] if line.strip() else ""
        if key in fields:
          out[fields[key]] = float(line.split()[1]) / 1024.  # kB -> MiB.
  except (OSError, ValueError):
    return None
  if math.isnan(out["rss_mb"]):  # A zombie has no VmRSS.
    return None
  return out


def shm_used_mb(path: str = "/dev/shm") -> float:
  """MiB in use on the file system of `path` (Ray's plasma arena), or NaN."""
  try:
    st = os.statvfs(path)
  except OSError:
    return math.nan
  return (st.f_blocks - st.f_bfree) * st.f_frsize / 2**20


def object_store_mb(ray) -> float:
  """MiB held in Ray's object store now (module docstring), or NaN."""
  try:
    total = ray.cluster_resources().get("object_store_memory")
    free = ray.available_resources().get("object_store_memory", 0.)
  except Exception:  # pylint: disable=broad-except
    return math.nan
  if total is None:
    return math.nan
  return (total - free) / 2**20


def device_memory_mb() -> float:
  """MiB in use on the first JAX device (GPU), NaN where not reported."""
  try:
    import jax  # pylint: disable=g-import-not-at-top
    stats = jax.local_devices()[0].memory_stats()
  except Exception:  # pylint: disable=broad-except
    return math.nan
  if not stats or "bytes_in_use" not in stats:
    return math.nan
  return stats["bytes_in_use"] / 2**20


def ray_system_pids() -> Dict[str, int]:
  """{"ray:raylet", "ray:gcs_server"}: pids of the Ray processes this
  driver's `ray.init` started; {} when it joined a cluster."""
  try:
    import ray  # pylint: disable=g-import-not-at-top
    processes = ray._private.worker._global_node.all_processes  # pylint: disable=protected-access
  except Exception:  # pylint: disable=broad-except
    return {}
  out = {}
  for kind in ("raylet", "gcs_server"):
    infos = processes.get(kind) or []
    if infos and getattr(infos[0], "process", None) is not None:
      out[f"ray:{kind}"] = int(infos[0].process.pid)
  return out


# --------------------------------------------------------------- sampler


SAMPLE_COLUMNS = ("elapsed_s", "process", "pid", "rss_mb", "anon_mb",
                  "shmem_mb", "env_steps", "learner_steps", "counted_at_s",
                  "env_steps_per_s", "learner_steps_per_s", "replay_size",
                  "object_store_mb", "shm_mb", "device_mb")


class Sampler:
  """Takes the samples, writes samples.csv as it goes, prints progress.

  The loops call `replay_size` (until the replay is full) and, when `due`,
  `take`; times are seconds since the sampler was made (`now`).

  Args:
    path: samples.csv (None: not written).
    minutes: the wall time of the soak.
    sample_every_s: seconds between samples (at multiples of it, and one
      at the end of the warm-up, so that w lies on the boundary).
    warmup_s: the warm-up window.
    capacity: the replay's capacity (sequences).
    progress_every_s: seconds between progress lines on stderr (0: none).
    label: the progress lines' prefix.
    clock: the time source (tests).
  """

  def __init__(self, path: Optional[str], minutes: float,
               sample_every_s: float, warmup_s: float, capacity: int,
               progress_every_s: float = 180., label: str = "soak",
               clock: Callable[[], float] = time.monotonic):
    self.clock = clock
    self.start = clock()
    self.deadline_s = 60. * minutes
    self.every_s = sample_every_s
    self.warmup_s = warmup_s
    self.capacity = capacity
    self.progress_every_s = progress_every_s
    self.label = label
    self.rows: List[Dict[str, Any]] = []
    self.next_s = 0.
    self.warmup_sampled = False
    self.next_progress_s = progress_every_s
    self.previous: Optional[Tuple[float, float, float]] = None
    self.replay_full_at_s: Optional[float] = None
    self.last_replay_size = 0
    self._file = None
    if path is not None:
      self._file = open(path, "w", newline="")
      self._writer = csv.DictWriter(self._file, fieldnames=SAMPLE_COLUMNS)
      self._writer.writeheader()
      self._file.flush()

  def now(self) -> float:
    return self.clock() - self.start

  @property
  def replay_full(self) -> bool:
    return self.replay_full_at_s is not None

  def over(self, now: float) -> bool:
    return now >= self.deadline_s

  def due(self, now: float) -> bool:
    """Whether a sample is due (always at the end of the wall time)."""
    return (now >= self.next_s or self.over(now)
            or (not self.warmup_sampled and now >= self.warmup_s))

  def replay_size(self, now: float, size: int) -> None:
    """Records the replay's size; the first time it is full, when."""
    self.last_replay_size = int(size)
    if self.replay_full_at_s is None and size >= self.capacity:
      self.replay_full_at_s = now
      self._say(f"replay full ({size} sequences) at {now / 60:.2f} min")

  def take(self, now: float, env_steps: float, learner_steps: float,
           counted_at_s: float, processes: Dict[str, int],
           object_store: float = math.nan, shm: float = math.nan,
           device: float = math.nan) -> List[Dict[str, Any]]:
    """One sample: a row per process (`processes`: {name: pid}); returns
    them. Rates are over the interval since the previous sample's counts
    (NaN for the first, or when the counts did not move in time)."""
    env_rate = learner_rate = math.nan
    if self.previous is not None:
      at, env, learner = self.previous
      dt = counted_at_s - at
      if dt > 0:
        env_rate = (env_steps - env) / dt
        learner_rate = (learner_steps - learner) / dt
    if self.previous is None or counted_at_s > self.previous[0]:
      self.previous = (counted_at_s, env_steps, learner_steps)
    common = dict(elapsed_s=now, env_steps=env_steps,
                  learner_steps=learner_steps, counted_at_s=counted_at_s,
                  env_steps_per_s=env_rate, learner_steps_per_s=learner_rate,
                  replay_size=self.last_replay_size,
                  object_store_mb=object_store, shm_mb=shm,
                  device_mb=device)
    rows = []
    for name, pid in processes.items():
      memory = read_memory(pid) if pid is not None else None
      memory = memory or {"rss_mb": math.nan, "anon_mb": math.nan,
                          "shmem_mb": math.nan}
      rows.append(dict(common, process=name, pid=pid, **memory))
    self.rows.extend(rows)
    if self._file is not None:
      for row in rows:
        self._writer.writerow(row)
      self._file.flush()
    if now >= self.warmup_s:
      self.warmup_sampled = True
    while self.next_s <= now:
      self.next_s += self.every_s
    if self.progress_every_s and (now >= self.next_progress_s
                                  or self.over(now)):
      while self.next_progress_s <= now:
        self.next_progress_s += self.progress_every_s
      self._say(progress_line(rows, self.deadline_s, self.capacity,
                              self.replay_full_at_s))
    return rows

  def _say(self, text: str) -> None:
    sys.stderr.write(f"{self.label}: {text}\n")
    sys.stderr.flush()

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
      self._file = None


def _mb(x: float) -> str:
  return "n/a" if not math.isfinite(x) else f"{x:,.0f}"


def progress_line(rows: Sequence[Dict[str, Any]], deadline_s: float,
                  capacity: int, full_at: Optional[float]) -> str:
  """One sample's progress line (minutes, rates, RSS per process)."""
  r = rows[0]
  rss = ", ".join(f"{row['process']} {_mb(row['rss_mb'])}" for row in rows)
  replay = (f"full at {full_at / 60:.1f} min" if full_at is not None
            else f"{r['replay_size']}/{capacity}")
  line = (f"{r['elapsed_s'] / 60:.1f}/{deadline_s / 60:g} min, "
          f"{int(r['env_steps']):,} env steps ({r['env_steps_per_s']:,.0f}/s), "
          f"learner {r['learner_steps_per_s']:.1f}/s, replay {replay}; "
          f"RSS MB: {rss}")
  if math.isfinite(r["object_store_mb"]):
    line += f"; object store {r['object_store_mb']:.1f} MB"
  if math.isfinite(r["device_mb"]):
    line += f"; device {r['device_mb']:,.0f} MB"
  return line


# --------------------------------------------------------------- summary


def _rate(a: Dict[str, Any], b: Dict[str, Any], key: str) -> float:
  dt = b["counted_at_s"] - a["counted_at_s"]
  if dt <= 0:
    return math.nan
  return (b[key] - a[key]) / dt


def _growth(value: float, base: float) -> float:
  if not (base > 0 and math.isfinite(value)):
    return math.nan
  return 100. * (value - base) / base


def summarize(rows: Sequence[Dict[str, Any]], warmup_s: float,
              replay_full_at_s: Optional[float] = None,
              growth_limit_pct: float = GROWTH_LIMIT_PCT,
              tolerance: float = THROUGHPUT_TOLERANCE) -> Dict[str, Any]:
  """The soak's figures and verdicts from its sample rows (module docstring).

  Args:
    rows: samples.csv's rows (elapsed_s, process, rss_mb, anon_mb,
      env_steps, learner_steps, counted_at_s).
    warmup_s: the warm-up window (seconds).
    replay_full_at_s: when the replay filled (None: never).
    growth_limit_pct: the memory criterion (growth % after the warm-up).
    tolerance: the throughput criterion (|after / warm-up - 1|).

  Returns:
    {"warmup_s", "warmup_end_s" (w's elapsed_s), "end_s", "processes":
    {name: {"rss_warmup_mb", "rss_end_mb", "growth_pct", "rss_max_mb",
    "max_growth_pct", "anon_warmup_mb", "anon_end_mb", "anon_growth_pct",
    "pass"}}, "throughput": {"warmup_from_s", "env_steps_per_s_warmup",
    "env_steps_per_s_after", "env_ratio", "learner_steps_per_s_warmup",
    "learner_steps_per_s_after", "learner_ratio"}, "replay_full_at_s",
    "replay_full_before_warmup_end", "memory_pass", "memory_failures"
    (the processes that grew too much, or have no figure), "throughput_pass",
    "pass"}. NaN figures (and False verdicts) where there are too few
    samples: none at or after the end of the warm-up, or no learner step
    before it.
  """
  nan = math.nan
  times = sorted({r["elapsed_s"] for r in rows})
  after = [t for t in times if t >= warmup_s]
  w_s = after[0] if after else None
  end_s = times[-1] if times else None
  by_process: Dict[str, List[Dict[str, Any]]] = {}
  for r in rows:
    by_process.setdefault(r["process"], []).append(r)
  processes = {}
  for name, prows in by_process.items():
    prows = sorted(prows, key=lambda r: r["elapsed_s"])
    at_w = next((r for r in prows if r["elapsed_s"] == w_s), None)
    last = prows[-1]
    later = [r["rss_mb"] for r in prows
             if w_s is not None and r["elapsed_s"] >= w_s
             and math.isfinite(r["rss_mb"])]
    base = at_w["rss_mb"] if at_w is not None else nan
    end = last["rss_mb"] if at_w is not None and last is not at_w else nan
    growth = _growth(end, base)
    peak = max(later) if later else nan
    anon_base = at_w["anon_mb"] if at_w is not None else nan
    anon_end = last["anon_mb"] if math.isfinite(end) else nan
    processes[name] = dict(
        rss_warmup_mb=base, rss_end_mb=end, growth_pct=growth,
        rss_max_mb=peak, max_growth_pct=_growth(peak, base),
        anon_warmup_mb=anon_base, anon_end_mb=anon_end,
        anon_growth_pct=_growth(anon_end, anon_base),
        **{"pass": bool(math.isfinite(growth)
                        and growth < growth_limit_pct)})
  # Throughput: one row per sample (the counts are the sample's).
  samples = {}
  for r in rows:
    samples.setdefault(r["elapsed_s"], r)
  ordered = [samples[t] for t in times]
  w = samples.get(w_s) if w_s is not None else None
  started = next((r for r in ordered if r["learner_steps"] > 0), None)
  last = ordered[-1] if ordered else None
  thr = dict(warmup_from_s=nan if started is None else started["elapsed_s"],
             env_steps_per_s_warmup=nan, env_steps_per_s_after=nan,
             env_ratio=nan, learner_steps_per_s_warmup=nan,
             learner_steps_per_s_after=nan, learner_ratio=nan)
  if w is not None:
    for key, short in (("env_steps", "env"), ("learner_steps", "learner")):
      before = (_rate(started, w, key)
                if started is not None and started["elapsed_s"] < w_s
                else nan)
      later_rate = _rate(w, last, key) if last is not w else nan
      thr[f"{key}_per_s_warmup"] = before
      thr[f"{key}_per_s_after"] = later_rate
      thr[f"{short}_ratio"] = (later_rate / before if before > 0
                               and math.isfinite(later_rate) else nan)
  ratio = thr["env_ratio"]
  throughput_pass = bool(math.isfinite(ratio)
                         and abs(ratio - 1.) <= tolerance)
  memory_pass = bool(processes) and all(p["pass"]
                                        for p in processes.values())
  full_in_time = (replay_full_at_s is not None
                  and replay_full_at_s <= warmup_s)
  return dict(
      warmup_s=warmup_s, warmup_end_s=nan if w_s is None else w_s,
      end_s=nan if end_s is None else end_s, processes=processes,
      throughput=thr,
      replay_full_at_s=(nan if replay_full_at_s is None
                        else replay_full_at_s),
      replay_full_before_warmup_end=full_in_time,
      growth_limit_pct=growth_limit_pct, throughput_tolerance=tolerance,
      memory_pass=memory_pass,
      memory_failures=[n for n, p in processes.items() if not p["pass"]],
      throughput_pass=throughput_pass,
      **{"pass": memory_pass and throughput_pass and full_in_time})


def _yes(ok: bool) -> str:
  return "yes" if ok else "**no**"


def report(summary: Dict[str, Any], settings: Dict[str, Any]) -> List[str]:
  """The printed table of a soak's summary."""
  s = summary
  lines = [
      f"soak: {settings['loop']} loop, {settings['config']} on "
      f"{settings['env']}, "
      + (f"{settings['actors']} actors x " if settings["loop"]
         == "distributed" else "")
      + f"{settings['num_lanes']} lanes, {settings['minutes']:g} min "
      f"(warm-up {settings['warmup_minutes']:g} min, a sample every "
      f"{settings['sample_every_s']:g} s), replay capacity "
      f"{settings['replay_capacity']:,}, {settings['cpu_count']} CPUs"
      + (f" (pinned to {len(settings['cpu_affinity'])})"
         if settings.get("cpu_affinity") and len(settings["cpu_affinity"])
         < settings["cpu_count"] else ""),
      f"replay full at {s['replay_full_at_s'] / 60:.2f} min"
      if math.isfinite(s["replay_full_at_s"]) else "replay never full",
      "",
      f"| process | RSS MB at {s['warmup_end_s'] / 60:.1f} min | RSS MB at "
      f"{s['end_s'] / 60:.1f} min | growth % | max after warm-up MB | "
      f"anon growth % | < {s['growth_limit_pct']:g}% |",
      "| :--- | ---: | ---: | ---: | ---: | ---: | :---: |"]
  for name, p in s["processes"].items():
    lines.append(
        f"| {name} | {_mb(p['rss_warmup_mb'])} | {_mb(p['rss_end_mb'])} | "
        f"{p['growth_pct']:+.2f} | {_mb(p['rss_max_mb'])} | "
        f"{p['anon_growth_pct']:+.2f} | {_yes(p['pass'])} |")
  t = s["throughput"]
  lines += [
      "",
      "| throughput | warm-up (from the first learner step) | after | "
      "after / warm-up |",
      "| :--- | ---: | ---: | ---: |",
      f"| env steps/s | {t['env_steps_per_s_warmup']:,.1f} | "
      f"{t['env_steps_per_s_after']:,.1f} | {t['env_ratio']:.3f} |",
      f"| learner steps/s | {t['learner_steps_per_s_warmup']:,.2f} | "
      f"{t['learner_steps_per_s_after']:,.2f} | "
      f"{t['learner_ratio']:.3f} |",
      "",
      f"memory growth < {s['growth_limit_pct']:g}% (every process): "
      f"{_yes(s['memory_pass'])}"
      + (f" ({', '.join(s['memory_failures'])})" if s["memory_failures"]
         else "")
      + "; env steps/s within "
      f"{100 * s['throughput_tolerance']:g}% of the warm-up's: "
      f"{_yes(s['throughput_pass'])}; replay full before the end of the "
      f"warm-up: {_yes(s['replay_full_before_warmup_end'])}; "
      f"PASS: {_yes(s['pass'])}"]
  if settings.get("quick"):
    lines.append("(--quick: a smoke run; the verdicts need the full soak)")
  return lines


# ------------------------------------------------------------------ plot


def plot(rows: Sequence[Dict[str, Any]], summary: Dict[str, Any],
         png_path: str, title: str) -> Optional[str]:
  """soak.png against minutes, the warm-up shaded: RSS per process, RSS
  relative to the end of the warm-up (the +-5% limits dashed), throughput,
  object store / device memory. None without matplotlib."""
  try:
    # pylint: disable=g-import-not-at-top
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
  except ImportError:
    return None
  samples = list({r["elapsed_s"]: r for r in rows}.values())
  other = [(key, label) for key, label in (
      ("object_store_mb", "object store (MiB)"),
      ("shm_mb", "/dev/shm used (MiB)"),
      ("device_mb", "device memory (MiB)"))
           if any(math.isfinite(r[key]) for r in samples)]
  panels = 4 if other else 3
  fig = Figure(figsize=(9, 2.7 * panels + 0.5))
  FigureCanvasAgg(fig)
  axes = fig.subplots(panels, 1, sharex=True)
  names = list(dict.fromkeys(r["process"] for r in rows))
  w_s = summary["warmup_end_s"]
  shown = []  # Growth % after the warm-up: the panel's range.
  for name in names:
    prows = [r for r in rows if r["process"] == name]
    x = [r["elapsed_s"] / 60 for r in prows]
    axes[0].plot(x, [r["rss_mb"] for r in prows], label=name)
    base = next((r["rss_mb"] for r in prows if r["elapsed_s"] == w_s),
                math.nan)
    if base > 0:
      y = [_growth(r["rss_mb"], base) for r in prows]
      axes[1].plot(x, y, label=name)
      shown.extend(v for r, v in zip(prows, y)
                   if r["elapsed_s"] >= w_s and math.isfinite(v))
  axes[0].set_ylabel("RSS (MiB)")
  axes[0].set_yscale("log")
  axes[0].legend(fontsize=7, ncol=3)
  axes[1].set_ylabel("RSS vs end of warm-up (%)", fontsize=8)
  limit = summary["growth_limit_pct"]
  for y in (limit, -limit):
    axes[1].axhline(y, color="r", ls="--", lw=1)
  axes[1].set_ylim(min([-2 * limit] + shown) - 1, max([2 * limit] + shown) + 1)
  x = [r["elapsed_s"] / 60 for r in samples]
  axes[2].plot(x, [r["env_steps_per_s"] for r in samples],
               label="env steps/s", color="C0")
  axes[2].set_ylabel("env steps/s")
  twin = axes[2].twinx()
  twin.plot(x, [r["learner_steps_per_s"] for r in samples],
            label="learner steps/s", color="C1", ls="--")
  twin.set_ylabel("learner steps/s")
  axes[2].legend(loc="upper left", fontsize=7)
  twin.legend(loc="upper right", fontsize=7)
  for key, label in other:
    axes[3].plot(x, [r[key] for r in samples], label=label)
  if other:
    axes[3].set_ylabel("MiB")
    axes[3].legend(fontsize=7)
  axes[-1].set_xlabel("minutes")
  for ax in axes:
    ax.axvspan(0, summary["warmup_s"] / 60, color="0.9", zorder=0)
    if math.isfinite(summary["replay_full_at_s"]):
      ax.axvline(summary["replay_full_at_s"] / 60, color="0.5", ls=":",
                 lw=1)
  axes[0].set_title(title + " (grey: warm-up; dotted: replay full)",
                    fontsize=9)
  fig.tight_layout()
  tmp = png_path + ".tmp"
  fig.savefig(tmp, format="png", dpi=90)
  os.replace(tmp, png_path)
  return png_path


# ----------------------------------------------------------------- loops


def _node_pids(ray, handles: Dict[str, Any]) -> Dict[str, Optional[int]]:
  """{node name: pid}, asked inside each node (module docstring)."""
  refs = {}
  for name, handle in handles.items():
    if name.startswith("actor_"):
      refs[name] = handle.pid.remote()
    else:
      refs[name] = handle.__ray_call__.remote(lambda self: os.getpid())
  out = {}
  for name, ref in refs.items():
    try:
      out[name] = int(ray.get(ref, timeout=60))
    except Exception as e:  # pylint: disable=broad-except
      sys.stderr.write(f"soak: no process id for {name}: {e}\n")
      out[name] = None
  return out


def run_distributed_soak(config, setting: Dict[str, Any], args,
                         sampler: Sampler, run_dir: str) -> Dict[str, Any]:
  """`run_distributed` with an `on_poll` that samples and stops it."""
  import ray  # pylint: disable=g-import-not-at-top
  from ngu_jax.loops.distributed import launcher  # pylint: disable=g-import-not-at-top
  pids: Dict[str, Optional[int]] = {}
  system = ray_system_pids()
  driver = os.getpid()

  def on_poll(handles, counts):
    now = sampler.now()
    if not pids:
      pids.update(_node_pids(ray, handles))
    if not sampler.replay_full:
      sampler.replay_size(now, ray.get(handles["replay"].info.remote())
                          ["size"])
    if not sampler.due(now):
      return False
    learner_steps = ray.get(handles["learner"].steps.remote())
    if sampler.replay_full:
      sampler.last_replay_size = ray.get(
          handles["replay"].info.remote())["size"]
    actors = [n for n in pids if n.startswith("actor_")]
    try:
      fresh = ray.get([handles[n].pid.remote() for n in actors], timeout=10)
      pids.update(zip(actors, (int(p) for p in fresh)))
    except Exception:  # pylint: disable=broad-except
      pass  # An actor restarting: keep the pids it had.
    processes = {"driver": driver, **pids, **system}
    sampler.take(now, counts["env_steps"], learner_steps, now, processes,
                 object_store=object_store_mb(ray), shm=shm_used_mb())
    return sampler.over(now)

  summary = launcher.run_distributed(
      config, setting["env"], TOTAL_ENV_STEPS, num_actors=args.actors,
      num_lanes=args.num_lanes, seed=args.seed, output_dir=run_dir,
      env_kwargs=setting["env_kwargs"] or None,
      log_every_env_steps=args.log_every_env_steps,
      eval_every_env_steps=args.eval_every_env_steps,
      checkpoint_every_env_steps=args.checkpoint_every_env_steps,
      progress=False, on_poll=on_poll)
  return {"failures": summary["failures"], "replay": summary["replay"],
          "env_steps": summary["env_steps"],
          "learner_steps": summary["learner_steps"]}


class _CsvTail:
  """The last complete row of a CSV file another thread appends to."""

  def __init__(self, path: str):
    self.path = path
    self._file = None
    self._header: Optional[List[str]] = None
    self._partial = ""

  def last(self) -> Optional[Dict[str, str]]:
    """The newest complete row since the last call (None: none)."""
    if self._file is None:
      try:
        self._file = open(self.path, newline="")
      except OSError:
        return None
    text = self._partial + self._file.read()
    lines = text.split("\n")
    self._partial = lines.pop()  # Incomplete (or "").
    row = None
    for line in lines:
      if not line.strip():
        continue
      values = next(csv.reader([line]))
      if self._header is None:
        self._header = values
      else:
        row = dict(zip(self._header, values))
    return row

  def close(self) -> None:
    if self._file is not None:
      self._file.close()


def run_compiled_soak(config, setting: Dict[str, Any], args,
                      sampler: Sampler, run_dir: str) -> Dict[str, Any]:
  """`run_compiled` for the wall time, watched from a thread."""
  from ngu_jax import loops  # pylint: disable=g-import-not-at-top
  metrics_path = os.path.join(run_dir, "metrics.csv")
  if os.path.exists(metrics_path):  # A previous soak's: not this run's.
    os.remove(metrics_path)
  stop = threading.Event()
  failures: List[BaseException] = []
  driver = os.getpid()

  def watch():
    tail = _CsvTail(metrics_path)
    counts = dict(env_steps=0., learner_steps=0., at=0.)
    try:
      while True:
        now = sampler.now()
        row = tail.last()
        if row is not None:
          counts = dict(env_steps=float(row["env_steps"]),
                        learner_steps=float(row["learner_steps"]), at=now)
          sampler.replay_size(now, int(float(row["replay_size"])))
        if sampler.due(now):
          sampler.take(now, counts["env_steps"], counts["learner_steps"],
                       counts["at"], {"driver": driver},
                       device=device_memory_mb())
          if sampler.over(now):
            return
        if stop.wait(COMPILED_POLL_S):
          return
    except BaseException as e:  # pylint: disable=broad-except
      failures.append(e)  # Raised when the run ends.
      sys.stderr.write(f"soak: the watcher failed, no more samples: "
                       f"{e!r}\n")
    finally:
      tail.close()

  thread = threading.Thread(target=watch, name="soak-watch", daemon=True)
  thread.start()
  try:
    summary = loops.run_compiled(
        config, setting["env"], TOTAL_ENV_STEPS, num_lanes=args.num_lanes,
        seeds=(args.seed,), output_dir=run_dir,
        env_kwargs=setting["env_kwargs"] or None,
        log_every_env_steps=args.log_every_env_steps,
        eval_every_env_steps=args.eval_every_env_steps,
        checkpoint_every_env_steps=args.checkpoint_every_env_steps,
        progress=False, max_minutes=args.minutes)
  finally:
    stop.set()
    thread.join()
  if failures:
    raise failures[0]
  return {"env_steps": summary["env_steps"],
          "learner_steps": summary["learner_steps"],
          "replay_size": summary["replay_size"]}


# ------------------------------------------------------------------ main


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--loop", choices=LOOPS, default="distributed")
  parser.add_argument("--minutes", type=float, default=None,
                      help="wall time (default 60; --quick: distributed "
                      "2.5, compiled 2)")
  parser.add_argument("--warmup-minutes", type=float, default=None,
                      help="the reference window (default 10; --quick: "
                      "distributed 1.5, compiled 1.25)")
  parser.add_argument("--sample-every-s", type=float, default=None,
                      help="seconds between samples (default 30; --quick 5)")
  parser.add_argument("--progress-every-s", type=float, default=None,
                      help="seconds between progress lines (default 180; "
                      "--quick 20; 0: none)")
  parser.add_argument("--config", choices=sorted(SETTINGS),
                      default="cartpole")
  parser.add_argument("--actors", type=int, default=4,
                      help="actor processes (distributed)")
  parser.add_argument("--num-lanes", type=int, default=None,
                      help="lanes per actor (default 8), or of the compiled "
                      "loop (default 32: as many as 4 actors)")
  parser.add_argument("--replay-capacity", type=int, default=None,
                      help="replay capacity in sequences (default: the "
                      "setting's, sized to fill well before the warm-up "
                      "ends; --quick: smaller)")
  parser.add_argument("--log-every-env-steps", type=int, default=None,
                      help="the loop's metrics rows (and the compiled "
                      "loop's chunk: this / lanes actor steps; default "
                      "5000; --quick 1000)")
  parser.add_argument("--eval-every-env-steps", type=int, default=0)
  parser.add_argument("--checkpoint-every-env-steps", type=int, default=0)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output-dir", default=None,
                      help="default runs/soak/<loop>")
  parser.add_argument("--quick", action="store_true",
                      help="a 2-2.5-minute smoke run (shorter warm-up, "
                      "smaller replay, a sample every 5 s)")
  parser.add_argument("--json", default=None,
                      help="also write the summary and settings here")
  return parser


def _defaults(args, parser: argparse.ArgumentParser) -> None:
  quick = args.quick
  defaults = (dict(QUICK[args.loop], sample_every_s=5., progress_every_s=20.)
              if quick else
              dict(minutes=60., warmup_minutes=10., sample_every_s=30.,
                   progress_every_s=180.))
  for name, value in defaults.items():
    if getattr(args, name) is None:
      setattr(args, name, value)
  if args.num_lanes is None:
    args.num_lanes = 8 if args.loop == "distributed" else 32
  setting = SETTINGS[args.config]
  if args.replay_capacity is None:
    args.replay_capacity = (setting["quick_replay_capacity"] if quick else
                            setting["replay_capacity"][args.loop])
  if args.log_every_env_steps is None:
    args.log_every_env_steps = 1000 if quick else 5000
  if args.output_dir is None:
    args.output_dir = os.path.join("runs", "soak", args.loop)
  if not 0 < args.warmup_minutes < args.minutes:
    parser.error("--warmup-minutes must be > 0 and below --minutes")
  if args.sample_every_s <= 0:
    parser.error("--sample-every-s must be > 0")


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  """Runs the soak; prints the table; returns the summary and settings.

  Distributed: Ray is initialised here (before JAX is imported by this
  module) unless it already is, and then shut down again; a cluster that
  was already up is kept (it must run on this machine: RSS is read from
  /proc).
  """
  parser = _parser()
  args = parser.parse_args(argv)
  _defaults(args, parser)
  return local_ray.run_and_report(
      lambda: _run(args), args.json,
      ray_cpus=os.cpu_count() if args.loop == "distributed" else None)


def _run(args) -> Dict[str, Any]:
  import jax  # pylint: disable=g-import-not-at-top
  setting = SETTINGS[args.config]
  config = setting["config"]()
  config = config.__class__(**{**config.to_dict(),
                               "replay_capacity": args.replay_capacity})
  if args.loop == "compiled":
    from ngu_jax import envs  # pylint: disable=g-import-not-at-top
    from ngu_jax.loops import compiled  # pylint: disable=g-import-not-at-top
    env = envs.make_functional(setting["env"], **setting["env_kwargs"])
    # What run_compiled trains with (its config.json records this too).
    effective = compiled.fit_memory_to_episodes(config,
                                                env.max_episode_steps)
  else:
    effective = config
  out = args.output_dir
  run_dir = os.path.join(out, "run")
  os.makedirs(run_dir, exist_ok=True)
  settings = dict(
      loop=args.loop, config=args.config, env=setting["env"],
      env_kwargs=setting["env_kwargs"],
      actors=args.actors if args.loop == "distributed" else None,
      num_lanes=args.num_lanes, minutes=args.minutes,
      warmup_minutes=args.warmup_minutes,
      sample_every_s=args.sample_every_s,
      replay_capacity=args.replay_capacity,
      log_every_env_steps=args.log_every_env_steps,
      eval_every_env_steps=args.eval_every_env_steps,
      checkpoint_every_env_steps=args.checkpoint_every_env_steps,
      seed=args.seed, quick=args.quick, output_dir=out,
      cpu_count=os.cpu_count(),
      # The CPUs this process may run on (taskset / cgroups; None where the
      # platform cannot say): a soak pinned to fewer than cpu_count.
      cpu_affinity=(sorted(os.sched_getaffinity(0))
                    if hasattr(os, "sched_getaffinity") else None),
      machine=platform.processor()
      or platform.machine(), jax=jax.__version__,
      backend=jax.default_backend())
  if args.loop == "distributed":
    import ray  # pylint: disable=g-import-not-at-top
    settings["ray"] = ray.__version__
  with open(os.path.join(out, "config.json"), "w") as f:
    json.dump({"soak": settings, "config": effective.to_dict()}, f,
              indent=1, default=str)
  sampler = Sampler(os.path.join(out, "samples.csv"), args.minutes,
                    args.sample_every_s, 60. * args.warmup_minutes,
                    args.replay_capacity, args.progress_every_s,
                    label=f"soak [{args.loop}]")
  sys.stderr.write(
      f"soak [{args.loop}]: {args.config} on {setting['env']} for "
      f"{args.minutes:g} min (warm-up {args.warmup_minutes:g}), replay "
      f"capacity {args.replay_capacity:,}; outputs in {out}\n")
  run = run_distributed_soak if args.loop == "distributed" else (
      run_compiled_soak)
  try:
    loop_summary = run(config, setting, args, sampler, run_dir)
  finally:
    sampler.close()
  summary = summarize(sampler.rows, 60. * args.warmup_minutes,
                      sampler.replay_full_at_s)
  summary["loop"] = loop_summary
  png = plot(sampler.rows, summary, os.path.join(out, "soak.png"),
             f"soak: {args.loop}, {args.config}")
  results = {"settings": settings, "summary": summary,
             "samples_path": os.path.join(out, "samples.csv"),
             "png_path": png}
  results["lines"] = report(summary, settings)
  with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(results, f, indent=1, default=float)
  return results


if __name__ == "__main__":
  main()
