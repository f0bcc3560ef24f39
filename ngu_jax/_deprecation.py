"""Deprecated module paths: an old path that is the new module itself.

Modules that moved keep their old path for one release as a small module
that calls `alias_module`: importing it warns once (`DeprecationWarning`)
and yields the new module object, so classes, functions, checkpoints and
Ray's node classes are the same whichever path imported them.
"""

import importlib
import sys
import warnings


def alias_module(old: str, new: str, hint: str = "") -> None:
  """Makes module `old` (being imported) the module `new`, with a warning.

  Args:
    old: the deprecated module's name (its `__name__`).
    new: the module it moved to.
    hint: appended to the message after "use `new`" (e.g. a shorter path).
  """
  warnings.warn(f"{old} is deprecated; use {new}{hint}; it will be removed "
                "in the next release.", DeprecationWarning, stacklevel=3)
  sys.modules[old] = importlib.import_module(new)
