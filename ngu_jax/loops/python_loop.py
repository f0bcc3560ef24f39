"""Deprecated alias of `ngu_jax.loops.python.loop`.

It will be removed in the next release. The three loops are now sibling
packages of `ngu_jax.loops` (`python`, `compiled`, `distributed`);
importing this module warns and returns `ngu_jax.loops.python.loop` itself
(the same module object: same classes and functions).
"""

import importlib
import sys
import warnings

warnings.warn(
    "ngu_jax.loops.python_loop is deprecated; use ngu_jax.loops.python.loop "
    "(run_experiment: ngu_jax.loops.run_experiment); it will be removed in "
    "the next release.", DeprecationWarning,
    stacklevel=2)

sys.modules[__name__] = importlib.import_module("ngu_jax.loops.python.loop")
