"""ngu_jax.loops.distributed: NGU's distributed agent (App. A) on Ray.

The third way to run the agent `NGUBuilder` builds (after the Python and
compiled loops): a replay node, a learner node, K actor processes, an
evaluator and a counter, launched as Ray actors from a small Launchpad-like
program description.

  program.py   `Program` / `add_node` / `launch`: nodes, their wiring and
               resources (XLA threads sized to each node's CPUs).
  nodes.py     `CounterNode`, `ReplayNode`, `LearnerNode`, `ActorNode`,
               `EvaluatorNode`.
  clients.py   `ReplayClient` (the replay interface across processes,
               paced by the replay's rate limiter) and `VariableClient`
               (parameters published once per version with `ray.put`).
  launcher.py  `make_program`, `run_distributed` (supervision: metrics,
               evaluations, actor restarts, checkpoints and resume).

Needs the `[distributed]` extra (Ray). This package imports without Ray;
`launch` and `run_distributed` need `ray.init` first, called before JAX
starts in the process (`python -m experiments.launch` does both).
"""

from ngu_jax.loops.distributed import clients
from ngu_jax.loops.distributed import launcher
from ngu_jax.loops.distributed import nodes
from ngu_jax.loops.distributed import program
from ngu_jax.loops.distributed.launcher import make_program
from ngu_jax.loops.distributed.launcher import run_distributed
from ngu_jax.loops.distributed.program import Program
from ngu_jax.loops.distributed.program import launch
from ngu_jax.loops.distributed.program import xla_thread_env

__all__ = (
    "clients",
    "launcher",
    "nodes",
    "program",
    "Program",
    "launch",
    "make_program",
    "run_distributed",
    "xla_thread_env",
)
