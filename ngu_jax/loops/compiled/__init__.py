"""The compiled loop: a whole NGU training as one jitted program, vmapped.

  loop.py    `make_compiled_loop` / `make_train`: environment, actor step,
             device adder and replay, learner in one `lax.scan` program.
  state.py   its state (`TrainState`, `Counters`, `ChunkStats`) and the
             in-program episode statistics.
  runner.py  `run_compiled`: the host driver (chunks, metrics rows,
             evaluation, checkpoints, resume).
"""

from ngu_jax.loops.compiled import loop
from ngu_jax.loops.compiled import runner
from ngu_jax.loops.compiled import state
from ngu_jax.loops.compiled.loop import CompiledLoop
from ngu_jax.loops.compiled.loop import fit_memory_to_episodes
from ngu_jax.loops.compiled.loop import learner_period_for
from ngu_jax.loops.compiled.loop import make_compiled_loop
from ngu_jax.loops.compiled.loop import make_train
from ngu_jax.loops.compiled.runner import compiled_config
from ngu_jax.loops.compiled.runner import run_compiled
from ngu_jax.loops.compiled.state import LEARNER_METRICS
from ngu_jax.loops.compiled.state import ChunkStats
from ngu_jax.loops.compiled.state import Counters
from ngu_jax.loops.compiled.state import TrainState
from ngu_jax.loops.compiled.state import chunk_metrics

__all__ = (
    "loop",
    "runner",
    "state",
    "LEARNER_METRICS",
    "ChunkStats",
    "CompiledLoop",
    "Counters",
    "TrainState",
    "chunk_metrics",
    "compiled_config",
    "fit_memory_to_episodes",
    "learner_period_for",
    "make_compiled_loop",
    "make_train",
    "run_compiled",
)
