"""The Python loop: one process, one batched environment, the builder's parts.

  loop.py   `run_experiment` (NGU App. A in one process: act, add, replay,
            learn at the shared pacing rule, log, evaluate, checkpoint).
  state.py  its parts (`build_parts`), its state between iterations
            (`LoopState`) and its checkpoint.
"""

from ngu_jax.loops.python import loop
from ngu_jax.loops.python import state
from ngu_jax.loops.python.loop import run_experiment

__all__ = ("loop", "state", "run_experiment")
