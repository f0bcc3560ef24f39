r"""How the benchmarks time: one harness for every benchmark here.

Every figure is wall time (`clock`: `time.perf_counter`). JAX dispatches work
asynchronously, so a timed call of JAX work waits for its result
(`jax.block_until_ready`) before the clock stops; host-only work (numpy,
replay, Ray calls) is timed without that wait (`block=False`), which would
cost a microsecond per leaf of a result that holds no JAX array.

  * `timed`: one call, (seconds, its result);
  * `times`: `repeats` calls after `warmup` untimed ones, the seconds of each
    (the benchmark takes the median, best, mean or percentiles it reports);
  * `median`: the median of `times`;
  * `pipelined`: a loop of calls dispatched back to back and waited for once
    at the end (a throughput: host and device work overlap as in a training
    loop), with the state threaded through the calls;
  * `matmul_peak`: the machine's float32 matmul FLOP/s, best of repeats;
  * `processor`, `jax_line`, `peak_line`, `report`: the lines that say where
    a benchmark ran (`baseline.PEAK_PATTERNS` reads the peak in them) and the
    printing of its report as it is measured.
"""

import os
import platform
import time
from typing import Any, Callable, Iterable, List, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

# The wall clock every figure is read from (seconds; one module attribute,
# so a test can read a fake one).
clock = time.perf_counter


def timed(fn: Callable[..., Any], *args: Any, block: bool = True,
          **kwargs: Any) -> Tuple[float, Any]:
  """Seconds of one call fn(*args, **kwargs), and its result.

  Args:
    fn: the timed function.
    *args: its positional arguments.
    block: wait for the result's JAX arrays before the clock stops.
    **kwargs: its keyword arguments.

  Returns:
    (seconds, fn(*args, **kwargs)).
  """
  start = clock()
  out = fn(*args, **kwargs)
  if block:
    out = jax.block_until_ready(out)
  return clock() - start, out


def times(fn: Callable[..., Any], *args: Any, repeats: int, warmup: int = 1,
          block: bool = True) -> np.ndarray:
  """Seconds of each of `repeats` calls fn(*args), after `warmup` calls.

  The warm-up calls (compilation, caches) are waited for too but not timed.

  Args:
    fn: the timed function.
    *args: its arguments, the same at every call.
    repeats: timed calls.
    warmup: untimed calls before them.
    block: wait for each result's JAX arrays (`timed`).

  Returns:
    float64 seconds, shaped [repeats].
  """
  for _ in range(warmup):
    timed(fn, *args, block=block)
  return np.asarray([timed(fn, *args, block=block)[0]
                     for _ in range(repeats)], np.float64)


def median(fn: Callable[..., Any], *args: Any, repeats: int,
           warmup: int = 1, block: bool = True) -> float:
  """Median seconds of fn(*args) over `repeats` calls (`times`)."""
  return float(np.median(times(fn, *args, repeats=repeats, warmup=warmup,
                               block=block)))


def pipelined(step: Callable[[Any, Any], Any], state: Any, xs: Iterable[Any],
              block: bool = True) -> Tuple[float, Any]:
  """Seconds of `for x in xs: state = step(state, x)`, waited for at the end.

  The calls are dispatched back to back and only the last state is waited
  for, so JAX's asynchronous dispatch overlaps each call's host work with
  the device work of the ones before it: the seconds are those of the whole
  loop (a throughput), not a sum of single-call latencies. The caller warms
  `step` up first.

  Args:
    step: (state, x) -> the next state; a stateless loop ignores `state`
      and returns its result (the last one is waited for).
    state: the first state.
    xs: the inputs, one per call; produced inside the timed loop.
    block: wait for the last state's JAX arrays before the clock stops.

  Returns:
    (seconds of the loop, the last state).
  """
  start = clock()
  for x in xs:
    state = step(state, x)
  if block:
    state = jax.block_until_ready(state)
  return clock() - start, state


def matmul_peak(n: int = 1024, repeats: int = 20) -> float:
  """Measured float32 matmul FLOP/s: jitted n x n @ n x n, best of `repeats`
  (after one warm-up call); 2 n^3 FLOPs a call."""
  a = jnp.ones((n, n), jnp.float32)
  best = times(jax.jit(lambda x: x @ x), a, repeats=repeats).min()
  return 2. * n ** 3 / best


def processor() -> str:
  """The machine's processor name (its architecture when unnamed)."""
  return platform.processor() or platform.machine()


def jax_line() -> str:
  """'jax V on BACKEND, N CPU(s), PROCESSOR; load average L' (1 minute)."""
  return (f"jax {jax.__version__} on {jax.default_backend()}, "
          f"{os.cpu_count()} CPU(s), {processor()}; load average "
          f"{os.getloadavg()[0]:.2f}")


def peak_line(peak: float) -> str:
  """'machine: PROCESSOR, N CPUs, jax V (BACKEND); float32 matmul peak P
  GFLOP/s' for a measured `peak` in FLOP/s (`matmul_peak`)."""
  return (f"machine: {processor()}, {os.cpu_count()} CPUs, jax "
          f"{jax.__version__} ({jax.default_backend()}); float32 matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s")


def report(header: str, sections: Iterable[Sequence[str]]) -> List[str]:
  """Prints `header`, then each section's lines as soon as it is measured.

  Args:
    header: the first line.
    sections: the report's parts (e.g. a generator measuring one setting per
      item), printed and flushed one after the other.

  Returns:
    Every line printed, the header first.
  """
  lines = [header]
  print(header, flush=True)
  for section in sections:
    for line in section:
      print(line, flush=True)
      lines.append(line)
  return lines
