"""Tests of experiments/benchmarks/timing.py, the benchmarks' one harness.

The clock is replaced by a fake one whose readings are written out, so
every figure is hand-computed; one test runs on the real clock and JAX.
"""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.benchmarks import baseline
from experiments.benchmarks import timing


class _Clock:
  """A clock reading `readings` in turn, counting the reads."""

  def __init__(self, readings):
    self._readings = iter(readings)
    self.reads = 0

  def __call__(self):
    self.reads += 1
    return next(self._readings)


@pytest.fixture
def clock(monkeypatch):
  def install(readings):
    fake = _Clock(readings)
    monkeypatch.setattr(timing, "clock", fake)
    return fake
  return install


def test_timed_returns_the_seconds_and_the_result(clock):
  clock([10., 10.25])
  seconds, out = timing.timed(lambda a, b=0: a + b, 2, b=3)
  assert (seconds, out) == (0.25, 5)


def test_timed_waits_for_jax_results_inside_the_clock(clock, monkeypatch):
  events = []
  fake = clock([0., 1., 2., 3.])
  monkeypatch.setattr(timing.jax, "block_until_ready",
                      lambda x: events.append(("wait", fake.reads)) or x)
  timing.timed(jnp.ones, 3)
  assert events == [("wait", 1)]  # After the first reading, before the 2nd.
  events.clear()
  timing.timed(jnp.ones, 3, block=False)
  assert not events


def test_times_warms_up_untimed_then_times_each_call(clock):
  calls = []
  fake = clock([0., 1., 5., 7., 7., 7.5, 9., 9.125])
  seconds = timing.times(lambda x: calls.append(x), "a", repeats=3, warmup=1)
  # The warm-up's own reading (0 -> 1) is dropped: 7 - 5, 7.5 - 7, 9.125 - 9.
  np.testing.assert_array_equal(seconds, [2., 0.5, 0.125])
  assert seconds.dtype == np.float64
  assert calls == ["a"] * 4 and fake.reads == 8


def test_median_of_the_timed_calls(clock):
  clock([0., 3., 0., 1., 0., 2.])
  assert timing.median(lambda: None, repeats=3, warmup=0) == 2.


def test_pipelined_threads_the_state_and_times_the_whole_loop(clock):
  clock([1., 4.])
  seconds, state = timing.pipelined(lambda s, x: s + x, jnp.float32(0.),
                                    iter([1., 2., 3.]))
  assert seconds == 3. and float(state) == 6.
  clock([0., 0.5])
  assert timing.pipelined(lambda s, x: s * x, 1, [2, 5], block=False) == (
      0.5, 10)


def test_matmul_peak_is_flops_over_the_best_call(clock):
  # Warm-up (0 -> 9), then calls of 0.5 s and 0.25 s: best 0.25.
  clock([0., 9., 0., 0.5, 0., 0.25])
  assert timing.matmul_peak(n=4, repeats=2) == 2. * 4 ** 3 / 0.25


def test_matmul_peak_on_the_real_clock():
  peak = timing.matmul_peak(n=64, repeats=3)
  assert math.isfinite(peak) and peak > 0


def test_lines_name_the_machine_and_the_peak_baseline_reads():
  line = timing.peak_line(460.12e9)
  assert line.startswith(f"machine: {timing.processor()}, ")
  assert f"jax {jax.__version__} ({jax.default_backend()})" in line
  assert baseline.parse_peak(line) == 460.1
  assert re.fullmatch(r"jax \S+ on \w+, \d+ CPU\(s\), .*; load average "
                      r"[\d.]+", timing.jax_line())


def test_report_prints_each_section_before_measuring_the_next(capsys):
  printed = []

  def sections():
    for name in ("a", "b"):
      printed.append(capsys.readouterr().out)  # What came out before.
      yield [f"{name}: 1", f"{name}: 2"]

  lines = timing.report("header", sections())
  assert lines == ["header", "a: 1", "a: 2", "b: 1", "b: 2"]
  assert printed == ["header\n", "a: 1\na: 2\n"]
  assert capsys.readouterr().out == "b: 1\nb: 2\n"
