"""XLA and BLAS thread pools of a process, sized before JAX starts in it.

Several JAX processes on one machine (the distributed program's nodes, or
the runs of a comparison launched side by side) would each start one thread
per core; `xla_thread_env` gives a child process the environment variables
that size its pools to the CPUs it is given.
"""

from typing import Dict

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS")


def xla_thread_env(threads: int, base_flags: str = "") -> Dict[str, str]:
  """Environment variables that size XLA's CPU thread pools to `threads`.

  Args:
    threads: CPU threads the process may use (>= 1); 1 also turns off
      Eigen's multi-threading inside XLA's CPU kernels.
    base_flags: XLA_FLAGS to keep (e.g. the caller's).

  Returns:
    {"XLA_FLAGS": ..., "OMP_NUM_THREADS": ..., ...}: merge into a child
    process's environment before JAX starts in it.

  Raises:
    ValueError: `threads` < 1.
  """
  if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
    raise ValueError(f"xla_thread_env: `threads` must be an int >= 1, got "
                     f"{threads!r}.")
  flags = base_flags
  if threads == 1:
    flags += " --xla_cpu_multi_thread_eigen=false"
  env = {"XLA_FLAGS": (flags + f" intra_op_parallelism_threads={threads}"
                       ).strip()}
  env.update({name: str(threads) for name in THREAD_VARIABLES})
  return env
