"""Deprecated compatibility module: the run loops are in `ngu_jax.loops`.

`ngu_jax.experiment` is deprecated; use `ngu_jax.loops.run_experiment`; it
will be removed in the next release. Importing it warns once.

`run_experiment` is `ngu_jax.loops.run_experiment` (the Python loop); its
metrics columns, learning curves and heatmaps are documented in
`ngu_jax.loops.metrics_log`, evaluation in `ngu_jax.loops.evaluation`, and
checkpoints, resume and Ctrl-C in `ngu_jax.loops.checkpointing`. Checkpoints
written before the move resume unchanged (same format and version).
"""

import warnings

from ngu_jax.loops import run_experiment
from ngu_jax.loops.checkpointing import CHECKPOINT_DIR
from ngu_jax.loops.checkpointing import ResumeError
from ngu_jax.loops.checkpointing import run_config
from ngu_jax.loops.evaluation import evaluate
from ngu_jax.loops.metrics_log import COLUMNS
from ngu_jax.loops.metrics_log import CURVES_FILE
from ngu_jax.loops.metrics_log import HEATMAP_DIR
from ngu_jax.loops.metrics_log import METRICS_FILE

warnings.warn(
    "ngu_jax.experiment is deprecated; use ngu_jax.loops.run_experiment "
    "(and ngu_jax.loops.checkpointing, .evaluation, .metrics_log for the "
    "other names); it will be removed in the next release.",
    DeprecationWarning, stacklevel=2)

__all__ = (
    "CHECKPOINT_DIR",
    "COLUMNS",
    "CURVES_FILE",
    "HEATMAP_DIR",
    "METRICS_FILE",
    "ResumeError",
    "evaluate",
    "run_config",
    "run_experiment",
)
