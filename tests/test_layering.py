"""The import graph of ngu_jax points one way (no module imports upward).

Layers, lowest first; a module may import its own layer and those below:

  0 core        _checks, types, threads, npz_io, mixtures
  1 components  networks, losses, intrinsic, replay, envs, meta
  2 agent       agents
  3 analysis    plotting
  4 shared host loops.{acting, checkpointing, evaluation, host, metrics_log,
                pacing}
  5 loops       loops.python, loops.compiled, loops.distributed -- and a
                loop never imports another loop.

Package `__init__` files (re-exports) are left out. Nothing in ngu_jax
imports `experiments`. Imports inside functions count too. And no module
imports itself back through others (no import cycles).
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ngu_jax"

LAYERS = (
    ("ngu_jax._checks", "ngu_jax.types",
     "ngu_jax.threads", "ngu_jax.npz_io", "ngu_jax.mixtures"),
    ("ngu_jax.networks", "ngu_jax.losses", "ngu_jax.intrinsic",
     "ngu_jax.replay", "ngu_jax.envs", "ngu_jax.meta"),
    ("ngu_jax.agents",),
    ("ngu_jax.plotting",),
    ("ngu_jax.loops.acting", "ngu_jax.loops.checkpointing",
     "ngu_jax.loops.evaluation", "ngu_jax.loops.host",
     "ngu_jax.loops.metrics_log", "ngu_jax.loops.pacing"),
    ("ngu_jax.loops.python", "ngu_jax.loops.compiled",
     "ngu_jax.loops.distributed"),
)
LOOPS = LAYERS[-1]


def _module_name(path: pathlib.Path) -> str:
  parts = list(path.relative_to(ROOT).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts = parts[:-1]
  return ".".join(parts)


def _group(name: str):
  """(layer, the layer's prefix) of a module name, or None."""
  for layer, prefixes in enumerate(LAYERS):
    for prefix in prefixes:
      if name == prefix or name.startswith(prefix + "."):
        return layer, prefix
  return None


def _imports(path: pathlib.Path):
  """Absolute names of every ngu_jax / experiments module `path` imports."""
  tree = ast.parse(path.read_text(), str(path))
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      for alias in node.names:
        # `from pkg import sub` imports pkg.sub when it is a module.
        candidate = f"{node.module}.{alias.name}"
        sub = ROOT / candidate.replace(".", "/")
        yield node.lineno, (candidate if sub.is_dir()
                            or sub.with_suffix(".py").exists()
                            else node.module)


def _checked_modules():
  for path in sorted(PACKAGE.rglob("*.py")):
    name = _module_name(path)
    if path.name == "__init__.py":
      continue
    yield name, path


def test_every_module_has_a_layer():
  missing = [name for name, _ in _checked_modules()
             if name != "ngu_jax" and _group(name) is None]
  assert not missing, f"modules without a layer in this test: {missing}"


@pytest.mark.parametrize("name,path", list(_checked_modules()),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_no_upward_import(name, path):
  own = _group(name)
  if own is None:
    pytest.skip("the top-level package")
  bad = []
  for line, imported in _imports(path):
    if imported.split(".")[0] == "experiments":
      bad.append(f"{line}: {imported} (experiments)")
      continue
    if not imported.startswith("ngu_jax"):
      continue
    group = _group(imported)
    if group is None:
      continue  # `ngu_jax` itself.
    if group[0] > own[0]:
      bad.append(f"{line}: {imported} (layer {group[0]} > {own[0]})")
    elif own[1] in LOOPS and group[1] in LOOPS and group[1] != own[1]:
      bad.append(f"{line}: {imported} (another loop)")
  assert not bad, f"{name} imports upward:\n" + "\n".join(bad)


def test_the_check_catches_an_upward_import(tmp_path):
  path = tmp_path / "mod.py"
  path.write_text("from ngu_jax.loops import host\n"
                  "def f():\n  from ngu_jax.agents.ngu import builder\n")
  found = [name for _, name in _imports(path)]
  assert found == ["ngu_jax.loops.host", "ngu_jax.agents.ngu.builder"]
  assert _group(found[0])[0] > _group("ngu_jax.envs.base")[0]


def _cycles(graph):
  """Every strongly connected component of more than one module (Tarjan),
  and every module that imports itself, sorted."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for succ in graph.get(node, ()):
      if succ not in index:
        visit(succ)
        low[node] = min(low[node], low[succ])
      elif succ in on_stack:
        low[node] = min(low[node], index[succ])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1 or node in graph.get(node, ()):
        found.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return sorted(found)


def _import_graph():
  modules = dict(_checked_modules())
  return {name: sorted({imported for _, imported in _imports(path)
                        if imported in modules and imported != name})
          for name, path in modules.items()}


def test_no_import_cycles():
  cycles = _cycles(_import_graph())
  assert not cycles, "import cycles (modules importing each other):\n" + (
      "\n".join(" <-> ".join(c) for c in cycles))


def test_the_cycle_check_finds_a_cycle():
  assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [
      ["a", "b", "c"]]
  assert _cycles({"a": ["b"], "b": []}) == []
