"""A small Launchpad-like program description, launched as Ray actors.

NGU App. A runs as a program of nodes (actors, a replay, a learner, an
evaluator). Acme described such programs with Launchpad (`lp.Program`,
`add_node`, handles); Launchpad has no wheels for Python >= 3.11
(docs/design.md#distributed-program), so this module keeps its declarative
shape on Ray:

  program = Program("ngu")
  replay = program.add_node("replay", ReplayNode, args..., num_cpus=0.25)
  learner = program.add_node("learner", LearnerNode, replay, ...)
  actors = [program.add_node(f"actor_{i}", ActorNode, replay, learner, ...,
                             max_restarts=3) for i in range(K)]
  handles = launch(program)      # {name: Ray actor handle}

`add_node` returns a `Handle` (the node's name); a `Handle` among a node's
arguments becomes a `NodeName` at launch (the named Ray actor of that
node), which the receiving node turns into the live actor with `resolve`,
so nodes are wired together before any of them exists. Passing names, not
Ray actor handles, keeps a restarted node's constructor arguments out of
the object store (Ray warns that actor handles there may be lost before a
restart) and lets a restarted node find its peers again. Nodes are launched
in the order they were added (a node may only refer to nodes added before
it).

Every node is a Ray actor with `max_concurrency` threads (a node serves
calls while its long `run` call runs), `max_task_retries=0` (a call that
crashed a node is never re-sent blindly: Ray's `max_task_retries=-1` would
re-send it after every restart), and XLA / BLAS thread pools sized to the
CPUs the node is given (`xla_thread_env`) through the node's runtime
environment, so that several JAX processes share a machine's cores instead
of each starting one thread per core, and `enable_task_events=False`: the
nodes call each other continually (inserts, reports, parameter pulls, the
driver's polls), and Ray's GCS would keep a record of every call for its
state API and dashboard, which the program does not use; that record grew
the GCS 17% over the 50 minutes after minute 10 of the 1-hour soak at Ray's
default cap of 100,000 calls, and 8.5% from minute 10 to 20 at a cap of
10,000 (docs/performance.md#soak). A call's failure still reaches its caller as
an exception. The node's class is imported by the
Ray worker process after Ray is up there, so Ray is initialised before JAX
in every node process.
"""

import dataclasses
import math
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ngu_jax import threads as threads_lib

# Re-exported: the function lives in `ngu_jax.threads` (the compiled loop's
# experiments size their processes with it too).
THREAD_VARIABLES = threads_lib.THREAD_VARIABLES
xla_thread_env = threads_lib.xla_thread_env


@dataclasses.dataclass(frozen=True)
class Handle:
  """A node of a `Program`, before launch (its name)."""
  name: str


@dataclasses.dataclass(frozen=True)
class NodeName:
  """A launched node's Ray actor name, as its peers receive it."""
  name: str


def resolve(node: Any) -> Any:
  """The Ray actor handle of a `NodeName` (anything else unchanged)."""
  if isinstance(node, NodeName):
    import ray  # pylint: disable=g-import-not-at-top
    return ray.get_actor(node.name)
  return node


@dataclasses.dataclass(frozen=True)
class NodeSpec:
  """One node: a class and its arguments, and the resources it runs with.

  Attributes:
    name: unique name in the program (also the Ray actor's name).
    cls: the node's Python class (made a Ray actor at launch).
    args, kwargs: constructor arguments; `Handle`s (also inside lists,
      tuples and dicts) become `NodeName`s of the launched nodes (the
      node's constructor calls `resolve` on them).
    num_cpus: CPUs Ray reserves for the node (fractions allowed).
    threads: XLA / BLAS threads of the node's process
      (`xla_thread_env`); default max(1, ceil(num_cpus)).
    max_restarts: how often Ray restarts the node's process after it dies
      (0: never; -1: always). A restarted node runs its constructor again.
    max_concurrency: threads serving the node's calls at once.
  """
  name: str
  cls: type
  args: Tuple[Any, ...] = ()
  kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
  num_cpus: float = 1.
  threads: Optional[int] = None
  max_restarts: int = 0
  max_concurrency: int = 4

  @property
  def thread_count(self) -> int:
    if self.threads is not None:
      return self.threads
    return max(1, int(math.ceil(self.num_cpus)))


class Program:
  """A named set of nodes and their wiring (Launchpad's `lp.Program`)."""

  def __init__(self, name: str):
    self.name = name
    self._nodes: Dict[str, NodeSpec] = {}

  @property
  def nodes(self) -> List[NodeSpec]:
    """The nodes, in the order they were added (and are launched)."""
    return list(self._nodes.values())

  def add_node(self, name: str, cls: type, *args, num_cpus: float = 1.,
               threads: Optional[int] = None, max_restarts: int = 0,
               max_concurrency: int = 4, **kwargs) -> Handle:
    """Adds a node; returns its `Handle` for other nodes' arguments.

    Raises:
      ValueError: a duplicate name, a `Handle` to a node not yet added,
        negative CPUs, max_restarts < -1 or max_concurrency < 1.
    """
    if not isinstance(name, str) or not name or name in self._nodes:
      raise ValueError(f"Program.add_node: node names must be unique, "
                       f"non-empty strings; got {name!r}.")
    if not num_cpus >= 0:
      raise ValueError(f"Program.add_node({name!r}): `num_cpus` must be "
                       f">= 0, got {num_cpus!r}.")
    if not (isinstance(max_restarts, int) and max_restarts >= -1):
      raise ValueError(f"Program.add_node({name!r}): `max_restarts` must be "
                       f"an int >= -1, got {max_restarts!r}.")
    if not (isinstance(max_concurrency, int) and max_concurrency >= 1):
      raise ValueError(f"Program.add_node({name!r}): `max_concurrency` must "
                       f"be an int >= 1, got {max_concurrency!r}.")
    for handle in _handles((args, kwargs)):
      if handle.name not in self._nodes:
        raise ValueError(f"Program.add_node({name!r}): refers to node "
                         f"{handle.name!r}, which is not (yet) in the "
                         "program; add the nodes it uses first.")
    spec = NodeSpec(name=name, cls=cls, args=tuple(args), kwargs=dict(kwargs),
                    num_cpus=float(num_cpus), threads=threads,
                    max_restarts=max_restarts,
                    max_concurrency=max_concurrency)
    spec.thread_count  # pylint: disable=pointless-statement
    if threads is not None:
      xla_thread_env(threads)  # Validates.
    self._nodes[name] = spec
    return Handle(name)

  def __repr__(self) -> str:
    nodes = ", ".join(f"{n.name}={n.cls.__name__}" for n in self.nodes)
    return f"Program({self.name!r}: {nodes})"


def _handles(tree) -> List[Handle]:
  """The `Handle`s in nested lists, tuples and dicts."""
  if isinstance(tree, Handle):
    return [tree]
  if isinstance(tree, dict):
    return [h for v in tree.values() for h in _handles(v)]
  if isinstance(tree, (list, tuple)):
    return [h for v in tree for h in _handles(v)]
  return []


def _resolve(tree, handles: Dict[str, Any]):
  """`tree` with every `Handle` replaced by `handles[name]`."""
  if isinstance(tree, Handle):
    return handles[tree.name]
  if isinstance(tree, dict):
    return {k: _resolve(v, handles) for k, v in tree.items()}
  if isinstance(tree, list):
    return [_resolve(v, handles) for v in tree]
  if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
    return tuple(_resolve(v, handles) for v in tree)
  return tree


def actor_name(prefix: str, node: str) -> str:
  """The Ray actor name of node `node` of a program launched as `prefix`."""
  return f"{prefix}.{node}"


def remote_options(spec: NodeSpec, prefix: str) -> Dict[str, Any]:
  """The `ray.remote(...).options(...)` of a node (see the module doc)."""
  return dict(
      name=actor_name(prefix, spec.name), num_cpus=spec.num_cpus,
      max_restarts=spec.max_restarts, max_task_retries=0,
      max_concurrency=spec.max_concurrency, enable_task_events=False,
      runtime_env={"env_vars": xla_thread_env(spec.thread_count)})


def launch(program: Program, prefix: Optional[str] = None
           ) -> Dict[str, Any]:
  """Starts every node of `program` as a named Ray actor (Ray must be up).

  Args:
    program: the program.
    prefix: prefix of the Ray actor names ("<prefix>.<node>"); default
      "<program name>-<random hex>", unique per launch.

  Returns:
    {node name: Ray actor handle}, in launch order. Constructors run
    asynchronously; a node's first call waits for its constructor.

  Raises:
    RuntimeError: Ray is not initialised (call `ray.init` first, before
      JAX starts in the driver).
  """
  import ray  # pylint: disable=g-import-not-at-top
  if not ray.is_initialized():
    raise RuntimeError("launch: Ray is not initialised; call ray.init(...) "
                       "first (before JAX starts in this process).")
  if prefix is None:
    prefix = f"{program.name}-{uuid.uuid4().hex[:8]}"
  names = {spec.name: NodeName(actor_name(prefix, spec.name))
           for spec in program.nodes}
  handles: Dict[str, Any] = {}
  for spec in program.nodes:
    actor_cls = ray.remote(spec.cls).options(**remote_options(spec, prefix))
    handles[spec.name] = actor_cls.remote(*_resolve(spec.args, names),
                                          **_resolve(spec.kwargs, names))
  return handles
