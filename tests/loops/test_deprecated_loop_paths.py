"""The loops' old import paths: each warns once and is the new module itself.

The three loops became sibling packages of `ngu_jax.loops`; the old modules
stay importable for one release as aliases (the same module objects, so
classes, checkpoints and Ray's node classes are unaffected).
"""

import importlib
import subprocess
import sys
import warnings

import pytest

OLD_TO_NEW = {
    "ngu_jax.loops.python_loop": "ngu_jax.loops.python.loop",
    "ngu_jax.loops.python_state": "ngu_jax.loops.python.state",
    "ngu_jax.loops.compiled_runner": "ngu_jax.loops.compiled.runner",
    "ngu_jax.loops.compiled_state": "ngu_jax.loops.compiled.state",
    "ngu_jax.distributed": "ngu_jax.loops.distributed",
    "ngu_jax.distributed.nodes": "ngu_jax.loops.distributed.nodes",
    "ngu_jax.distributed.launcher": "ngu_jax.loops.distributed.launcher",
}


@pytest.mark.parametrize("old,new", sorted(OLD_TO_NEW.items()))
def test_old_path_warns_and_is_the_new_module(old, new):
  # A fresh interpreter: the warning fires at the first import only.
  code = (
      "import importlib, warnings\n"
      "with warnings.catch_warnings(record=True) as caught:\n"
      "  warnings.simplefilter('always')\n"
      f"  old = importlib.import_module({old!r})\n"
      f"assert old is importlib.import_module({new!r}), old\n"
      "messages = [str(w.message) for w in caught\n"
      "            if issubclass(w.category, DeprecationWarning)\n"
      "            and 'is deprecated; use' in str(w.message)]\n"
      "assert len(messages) == 1 and 'next release' in messages[0], "
      "messages\n")
  subprocess.run([sys.executable, "-c", code], check=True)


def test_old_names_resolve_to_the_same_objects():
  with warnings.catch_warnings():  # Warned only if imported first here.
    warnings.simplefilter("ignore", DeprecationWarning)
    python_loop = importlib.import_module("ngu_jax.loops.python_loop")
  from ngu_jax import loops  # pylint: disable=g-import-not-at-top
  assert python_loop.run_experiment is loops.run_experiment
  assert loops.compiled.make_train is importlib.import_module(
      "ngu_jax.loops.compiled.loop").make_train
