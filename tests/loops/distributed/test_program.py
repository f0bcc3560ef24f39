"""Tests of ngu_jax.loops.distributed.program (the program description)."""

import pytest

from ngu_jax import threads as threads_lib
from ngu_jax.loops.distributed import program as program_lib


class _Node:

  def __init__(self, *args, **kwargs):
    self.args, self.kwargs = args, kwargs


def test_xla_thread_env_is_the_threads_module_function():
  assert program_lib.xla_thread_env is threads_lib.xla_thread_env


def test_add_node_returns_handles_in_order():
  program = program_lib.Program("p")
  a = program.add_node("a", _Node)
  b = program.add_node("b", _Node, a, key=[a, {"x": a}])
  assert a == program_lib.Handle("a") and b == program_lib.Handle("b")
  assert [n.name for n in program.nodes] == ["a", "b"]
  assert "a=_Node" in repr(program)


def test_add_node_rejects_duplicates_and_forward_references():
  program = program_lib.Program("p")
  program.add_node("a", _Node)
  with pytest.raises(ValueError, match="unique"):
    program.add_node("a", _Node)
  with pytest.raises(ValueError, match="not \\(yet\\) in the program"):
    program.add_node("b", _Node, program_lib.Handle("c"))
  with pytest.raises(ValueError, match="num_cpus"):
    program.add_node("b", _Node, num_cpus=-1)
  with pytest.raises(ValueError, match="max_restarts"):
    program.add_node("b", _Node, max_restarts=-2)
  with pytest.raises(ValueError, match="max_concurrency"):
    program.add_node("b", _Node, max_concurrency=0)
  with pytest.raises(ValueError, match="threads"):
    program.add_node("b", _Node, threads=0)


def test_resolve_replaces_handles_everywhere():
  handles = {"a": "HANDLE_A"}
  a = program_lib.Handle("a")
  tree = (a, [a, 1], {"k": (a, "s")})
  assert program_lib._resolve(tree, handles) == (
      "HANDLE_A", ["HANDLE_A", 1], {"k": ("HANDLE_A", "s")})


def test_remote_options_never_retry_calls_record_no_events_and_size_threads():
  program = program_lib.Program("p")
  program.add_node("actor", _Node, num_cpus=0.5, max_restarts=3)
  program.add_node("learner", _Node, num_cpus=2, threads=4)
  actor, learner = program.nodes
  options = program_lib.remote_options(actor, prefix="ns")
  assert options["max_task_retries"] == 0
  assert options["max_restarts"] == 3
  assert options["num_cpus"] == 0.5
  assert options["name"] == "ns.actor"
  assert options["enable_task_events"] is False  # GCS flat in a soak.
  assert options["runtime_env"]["env_vars"]["OMP_NUM_THREADS"] == "1"
  env = program_lib.remote_options(learner, "ns")["runtime_env"]["env_vars"]
  assert env["OMP_NUM_THREADS"] == "4"


def test_launch_needs_ray_initialised(monkeypatch):
  ray = pytest.importorskip("ray")
  monkeypatch.setattr(ray, "is_initialized", lambda: False)
  with pytest.raises(RuntimeError, match="ray.init"):
    program_lib.launch(program_lib.Program("p"))


class _Echo:
  """A node that reports its arguments and environment."""

  def __init__(self, value, other=None):
    self.value, self.other = value, other

  def get(self):
    import os  # pylint: disable=g-import-not-at-top
    return self.value, os.environ.get("XLA_FLAGS")

  def other_value(self):
    import ray  # pylint: disable=g-import-not-at-top
    return ray.get(program_lib.resolve(self.other).get.remote())[0]


def test_launch_wires_handles_and_sets_threads(ray_cluster):
  ray = ray_cluster
  program = program_lib.Program("p")
  a = program.add_node("a", _Echo, 7, num_cpus=0)
  program.add_node("b", _Echo, 8, other=a, num_cpus=0)
  handles = program_lib.launch(program)
  try:
    value, flags = ray.get(handles["a"].get.remote())
    assert value == 7
    assert "intra_op_parallelism_threads=1" in flags
    assert ray.get(handles["b"].other_value.remote()) == 7
    assert program_lib.resolve(5) == 5
    # Each launch has its own names: a second launch does not collide.
    again = program_lib.launch(program)
    assert ray.get(again["b"].other_value.remote()) == 7
    for handle in again.values():
      ray.kill(handle)
  finally:
    for handle in handles.values():
      ray.kill(handle)
