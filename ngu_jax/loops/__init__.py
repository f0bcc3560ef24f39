"""ngu_jax.loops: the ways to run one NGU agent, built by `NGUBuilder`.

* The Python loop (`python_loop.run_experiment`): one process, one batched
  environment, actor, adder, embedded (or Reverb) replay and learner.
* The compiled loop (`compiled`, driven by `compiled_runner`): the whole
  training of a JAX environment as one jitted program, vmapped over seeds.
* The distributed program (`ngu_jax.distributed`, on Ray): actor
  processes, a replay node, a learner, an evaluator and a counter.

The loops share their logging (`metrics_log`: metrics.csv columns and
writer, curves, visit heatmaps, progress bar), evaluation (`evaluation`)
and checkpointing (`checkpointing`: run configuration, resume checks,
state.json metadata, Ctrl-C deferral) instead of re-writing them.
"""

from ngu_jax.loops import checkpointing
from ngu_jax.loops import compiled
from ngu_jax.loops import compiled_runner
from ngu_jax.loops import evaluation
from ngu_jax.loops import metrics_log
from ngu_jax.loops import python_loop
from ngu_jax.loops.checkpointing import CHECKPOINT_DIR
from ngu_jax.loops.checkpointing import DeferInterrupt
from ngu_jax.loops.checkpointing import ResumeError
from ngu_jax.loops.checkpointing import read_checkpoint_meta
from ngu_jax.loops.checkpointing import run_config
from ngu_jax.loops.compiled import make_compiled_loop
from ngu_jax.loops.compiled import make_train
from ngu_jax.loops.compiled_runner import run_compiled
from ngu_jax.loops.evaluation import evaluate
from ngu_jax.loops.metrics_log import COLUMNS
from ngu_jax.loops.metrics_log import CURVES_FILE
from ngu_jax.loops.metrics_log import HEATMAP_DIR
from ngu_jax.loops.metrics_log import METRICS_FILE
from ngu_jax.loops.metrics_log import MetricsWriter
from ngu_jax.loops.metrics_log import ProgressBar
from ngu_jax.loops.python_loop import run_experiment

__all__ = (
    "checkpointing",
    "compiled",
    "compiled_runner",
    "evaluation",
    "metrics_log",
    "python_loop",
    "CHECKPOINT_DIR",
    "COLUMNS",
    "CURVES_FILE",
    "DeferInterrupt",
    "HEATMAP_DIR",
    "METRICS_FILE",
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
