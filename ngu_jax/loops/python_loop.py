"""Deprecated alias of `ngu_jax.loops.python.loop` (removed next release).

The three loops are sibling packages of `ngu_jax.loops` now (`python`,
`compiled`, `distributed`); this path is `ngu_jax.loops.python.loop` itself
(`run_experiment` is also `ngu_jax.loops.run_experiment`).
"""

from ngu_jax import _deprecation

_deprecation.alias_module(
    __name__, "ngu_jax.loops.python.loop",
    hint=" (run_experiment: ngu_jax.loops.run_experiment)")
