"""Deprecated alias of `ngu_jax.loops.distributed`: removed in the next release.

The distributed program is now one of the three sibling loops of
`ngu_jax.loops` (`python`, `compiled`, `distributed`). Importing this
package warns and returns `ngu_jax.loops.distributed` itself;
`ngu_jax.distributed.nodes` etc. are the same module objects as
`ngu_jax.loops.distributed.nodes` (Ray finds the node classes under their
new path).
"""

import importlib
import sys

from ngu_jax import _deprecation

_NEW = "ngu_jax.loops.distributed"
for _name in ("clients", "launcher", "nodes", "program"):
  sys.modules[f"{__name__}.{_name}"] = importlib.import_module(
      f"{_NEW}.{_name}")
_deprecation.alias_module(__name__, _NEW)
