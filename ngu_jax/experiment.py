"""Compatibility module: the single-process run loop moved to `ngu_jax.loops`.

`run_experiment` is `ngu_jax.loops.python_loop.run_experiment`; its metrics
columns, learning curves and heatmaps are documented in
`ngu_jax.loops.metrics_log`, evaluation in `ngu_jax.loops.evaluation`, and
checkpoints, resume and Ctrl-C in `ngu_jax.loops.checkpointing`. Checkpoints
written before the move resume unchanged (same format and version).
"""

from ngu_jax.loops.checkpointing import CHECKPOINT_DIR
from ngu_jax.loops.checkpointing import ResumeError
from ngu_jax.loops.checkpointing import run_config
from ngu_jax.loops.evaluation import evaluate
from ngu_jax.loops.metrics_log import COLUMNS
from ngu_jax.loops.metrics_log import CURVES_FILE
from ngu_jax.loops.metrics_log import HEATMAP_DIR
from ngu_jax.loops.metrics_log import METRICS_FILE
from ngu_jax.loops.python_loop import run_experiment

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
