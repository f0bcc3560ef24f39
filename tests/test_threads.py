"""Tests of ngu_jax.threads (XLA / BLAS thread pools of a process)."""

import pytest

from ngu_jax import threads as threads_lib


def test_xla_thread_env_one_thread():
  env = threads_lib.xla_thread_env(1, base_flags="--foo")
  assert env["XLA_FLAGS"] == ("--foo --xla_cpu_multi_thread_eigen=false "
                              "intra_op_parallelism_threads=1")
  for name in threads_lib.THREAD_VARIABLES:
    assert env[name] == "1"


def test_xla_thread_env_several_threads():
  env = threads_lib.xla_thread_env(3)
  assert env["XLA_FLAGS"] == "intra_op_parallelism_threads=3"
  assert env["OMP_NUM_THREADS"] == "3"


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_xla_thread_env_rejects_bad_threads(threads):
  with pytest.raises(ValueError, match="threads"):
    threads_lib.xla_thread_env(threads)
