"""Deprecated alias of `ngu_jax.loops.compiled.runner` (removed next release).

The three loops are sibling packages of `ngu_jax.loops` now (`python`,
`compiled`, `distributed`); this path is `ngu_jax.loops.compiled.runner` itself.
"""

from ngu_jax import _deprecation

_deprecation.alias_module(__name__, "ngu_jax.loops.compiled.runner")
