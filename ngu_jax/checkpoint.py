"""Deprecated alias of `ngu_jax.npz_io` (the .npz / JSON pytree file I/O).

`ngu_jax.checkpoint` is deprecated; use `ngu_jax.npz_io`; it will be removed
in the next release. Every name here is the `ngu_jax.npz_io` object itself.
The run-level checkpoints are `ngu_jax.loops.checkpointing`.
"""

import warnings

from ngu_jax.npz_io import atomic_directory
from ngu_jax.npz_io import find_directory
from ngu_jax.npz_io import load_arrays
from ngu_jax.npz_io import load_pytree
from ngu_jax.npz_io import read_json
from ngu_jax.npz_io import save_arrays
from ngu_jax.npz_io import save_pytree
from ngu_jax.npz_io import write_json

warnings.warn(
    "ngu_jax.checkpoint is deprecated; use ngu_jax.npz_io; it will be "
    "removed in the next release.", DeprecationWarning, stacklevel=2)

__all__ = (
    "atomic_directory",
    "find_directory",
    "load_arrays",
    "load_pytree",
    "read_json",
    "save_arrays",
    "save_pytree",
    "write_json",
)
