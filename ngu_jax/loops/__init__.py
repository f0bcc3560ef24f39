"""ngu_jax.loops: the three ways to run one NGU agent built by `NGUBuilder`.

Three sibling loops:

* `python/`: the Python loop (`run_experiment`): one process, one batched
  environment, actor, adder, embedded (or Reverb) replay and learner.
* `compiled/`: the compiled loop (`make_train`, driven by `run_compiled`):
  the whole training of a JAX environment as one jitted program, vmapped
  over seeds.
* `distributed/`: the distributed program on Ray (`run_distributed`):
  actor processes, a replay node, a learner, an evaluator and a counter
  (imported on demand: `from ngu_jax.loops import distributed`).

What they share, written once:

* `host`: the host skeleton -- argument checks, the log / evaluation /
  checkpoint schedule, the metrics row from one column list, learner-metric
  accumulation, the Ctrl-C message.
* `acting`: the host acting step and episode statistics, the evaluation
  actors and their seeds, coverage from what the environment declares.
* `pacing`: the one rule that paces the learner against fresh env steps.
* `metrics_log` (metrics.csv columns and writer, curves, heatmaps,
  progress bar), `evaluation` (evaluation episodes) and `checkpointing`
  (run configuration, formats, resume checks, Ctrl-C deferral).

A module here may import the shared modules and the agent; a loop never
imports another loop (tests/test_layering.py checks both).
"""

from ngu_jax.loops import acting
from ngu_jax.loops import checkpointing
from ngu_jax.loops import compiled
from ngu_jax.loops import evaluation
from ngu_jax.loops import host
from ngu_jax.loops import metrics_log
from ngu_jax.loops import pacing
from ngu_jax.loops import python
from ngu_jax.loops.checkpointing import CHECKPOINT_DIR
from ngu_jax.loops.checkpointing import DeferInterrupt
from ngu_jax.loops.checkpointing import ResumeError
from ngu_jax.loops.checkpointing import read_checkpoint_meta
from ngu_jax.loops.checkpointing import run_config
from ngu_jax.loops.compiled import make_compiled_loop
from ngu_jax.loops.compiled import make_train
from ngu_jax.loops.compiled import run_compiled
from ngu_jax.loops.evaluation import evaluate
from ngu_jax.loops.metrics_log import COLUMNS
from ngu_jax.loops.metrics_log import CURVES_FILE
from ngu_jax.loops.metrics_log import HEATMAP_DIR
from ngu_jax.loops.metrics_log import METRICS_FILE
from ngu_jax.loops.metrics_log import MetricsRows
from ngu_jax.loops.metrics_log import MetricsWriter
from ngu_jax.loops.metrics_log import ProgressBar
from ngu_jax.loops.python import run_experiment

__all__ = (
    "acting",
    "checkpointing",
    "compiled",
    "evaluation",
    "host",
    "metrics_log",
    "pacing",
    "python",
    "CHECKPOINT_DIR",
    "COLUMNS",
    "CURVES_FILE",
    "DeferInterrupt",
    "HEATMAP_DIR",
    "METRICS_FILE",
    "MetricsRows",
    "MetricsWriter",
    "ProgressBar",
    "ResumeError",
    "evaluate",
    "make_compiled_loop",
    "make_train",
    "read_checkpoint_meta",
    "run_config",
    "run_compiled",
    "run_experiment",
)
