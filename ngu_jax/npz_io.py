"""Safe checkpoint files: pytrees as numpy .npz, metadata as JSON, no pickle.

The file-level I/O under the run-level checkpoints of every loop
(`ngu_jax.loops.checkpointing` decides what a checkpoint holds; this module
only writes and reads it). Nothing here can execute code on load: arrays are
read with `np.load(..., allow_pickle=False)` and everything else is JSON.

* `save_pytree(path, tree)` writes every leaf of a pytree (jax or numpy
  arrays, Python scalars) to one .npz, keyed by its stable key path
  (`jax.tree_util.keystr`, e.g. ".params['q']['linear']['w']").
  `load_pytree(path, template)` reads it back into the structure of a freshly
  built `template` and checks that the key paths, shapes and dtypes match,
  naming the first leaf that does not.
* `save_arrays` / `load_arrays`: a flat {name: array} .npz, for state whose
  layout its owner checks itself (e.g. `SequenceAdder.state_dict`).
* `write_json` / `read_json`: JSON metadata (NaN refused: store None).
* `atomic_directory(path)`: write a checkpoint into a temporary directory
  that replaces `path` only once complete, so a crash mid-write never leaves
  a corrupt checkpoint at `path`; `find_directory(path)` returns the latest
  complete one. The directory's `checksums.json` holds the size and SHA-256
  of every file; `verify_directory(path)` checks them, so a truncated or
  bit-flipped file is refused by name. A write that runs out of space raises
  `CheckpointWriteError` (the space needed, the previous checkpoint kept).

Every file is written to a temporary name and renamed into place. Files
name leaves by their key paths (attribute and dict keys), never by module or
class paths, so a checkpoint does not depend on where a class is defined.
"""

import contextlib
import errno
import hashlib
import json
import os
import shutil
import zipfile
from typing import Any, Dict, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np

_OLD_SUFFIX = ".old"
_TMP_SUFFIX = ".tmp"
CHECKSUMS = "checksums.json"
# The errors of a full disk or an exhausted quota.
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class CheckpointWriteError(OSError):
  """A checkpoint could not be written for lack of space; the previous
  checkpoint at the same path is intact (the message says the space
  needed)."""


def _atomic_file(path: str, write) -> None:
  """Calls `write(f)` on a temporary file, syncs it, renames it to `path`."""
  tmp = path + _TMP_SUFFIX
  with open(tmp, "wb") as f:
    write(f)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def _host_array(x, name: str, where: str) -> np.ndarray:
  x = np.asarray(jax.device_get(x))
  if x.dtype == object or np.dtype(x.dtype.str) != x.dtype:
    raise ValueError(f"{where}: leaf {name} has dtype {x.dtype}, which .npz "
                     "cannot hold without pickle.")
  return x


def save_pytree(path: str, tree: Any) -> None:
  """Saves the leaves of a pytree to the .npz `path`, keyed by key path.

  Args:
    path: the file to write (replaced atomically).
    tree: a pytree of jax / numpy arrays or Python scalars (None subtrees
      hold no leaf and are not saved).

  Raises:
    ValueError: on a leaf of a dtype .npz cannot hold without pickle.
  """
  where = "npz_io.save_pytree"
  leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
  arrays = {}
  for key_path, leaf in leaves:
    name = jax.tree_util.keystr(key_path)
    arrays[name] = _host_array(leaf, name, where)
  save_arrays(path, arrays)


def load_pytree(path: str, template: Any) -> Any:
  """Loads a `save_pytree` file into the structure of `template`.

  Args:
    path: the .npz written by `save_pytree`.
    template: a pytree of the expected structure, shapes and dtypes (e.g.
      freshly initialised state); its leaves are not used otherwise. A leaf
      that is a `jax.Array` comes back as a new jax array (its own buffer),
      any other as a numpy array.

  Returns:
    The saved pytree, with `template`'s structure.

  Raises:
    FileNotFoundError: no file at `path`.
    ValueError: an unreadable file, or leaves missing, extra, or of another
      shape or dtype than the template's (the message names the leaf).
  """
  where = f"npz_io.load_pytree({path})"
  data = load_arrays(path)
  leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
  names = [jax.tree_util.keystr(key_path) for key_path, _ in leaves]
  missing = [n for n in names if n not in data]
  extra = sorted(set(data) - set(names))
  if missing or extra:
    raise ValueError(
        f"{where}: the saved tree does not match the expected structure; "
        f"missing leaves {missing[:8]}, unexpected leaves {extra[:8]}.")
  out = []
  for name, (_, leaf) in zip(names, leaves):
    value = data[name]
    shape, dtype = tuple(np.shape(leaf)), np.dtype(_dtype(leaf))
    if value.shape != shape or value.dtype != dtype:
      raise ValueError(
          f"{where}: leaf {name} is saved with shape {value.shape} and dtype "
          f"{value.dtype}; expected shape {shape} and dtype {dtype}.")
    out.append(jnp.array(value) if isinstance(leaf, jax.Array)
               else value)
  return jax.tree_util.tree_unflatten(treedef, out)


def _dtype(x) -> np.dtype:
  return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


def save_arrays(path: str, arrays: Mapping[str, Any]) -> None:
  """Saves {name: array} to the .npz `path` (atomically, no pickle)."""
  where = "npz_io.save_arrays"
  arrays = {name: _host_array(x, name, where) for name, x in arrays.items()}
  _atomic_file(path, lambda f: np.savez(f, **arrays))


def load_arrays(path: str) -> Dict[str, np.ndarray]:
  """Loads a `save_arrays` / `save_pytree` .npz as {name: numpy array}.

  Raises:
    FileNotFoundError: no file at `path`.
    ValueError: the file is not a readable .npz of plain arrays.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"checkpoint: missing file {path}.")
  try:
    with np.load(path, allow_pickle=False) as data:
      return {name: data[name] for name in data.files}
  except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
    raise ValueError(f"checkpoint: cannot read {path} (corrupt or not a "
                     f".npz of arrays): {e}") from e


def write_json(path: str, obj: Any) -> None:
  """Writes `obj` as JSON to `path` (atomically); NaN / inf are refused."""
  text = json.dumps(obj, indent=1, allow_nan=False)
  _atomic_file(path, lambda f: f.write(text.encode()))


def read_json(path: str) -> Any:
  """Reads a JSON file.

  Raises:
    FileNotFoundError: no file at `path`.
    ValueError: the file is not valid JSON.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"checkpoint: missing file {path}.")
  try:
    with open(path) as f:
      return json.load(f)
  except (ValueError, UnicodeDecodeError) as e:
    raise ValueError(f"checkpoint: cannot read {path} (corrupt JSON): "
                     f"{e}") from e


@contextlib.contextmanager
def atomic_directory(path: str) -> Iterator[str]:
  """Yields a temporary directory that replaces `path` once the block ends.

  Write the checkpoint's files into the yielded directory. On success their
  sizes and SHA-256 digests are written to `checksums.json` in it, the
  previous `path` (if any) is renamed to `path + ".old"`, the new directory
  renamed to `path`, and the old one deleted; an exception in the block
  removes the temporary directory and leaves `path` as it was. A crash
  between the two renames leaves only `path + ".old"`, which
  `find_directory` then returns.

  Raises:
    CheckpointWriteError: the disk (or quota) filled while writing; the
      message names `path`, the space free and about how much the
      checkpoint needs, and `path` keeps the previous checkpoint.
  """
  path = os.path.abspath(path)
  parent = os.path.dirname(path)
  os.makedirs(parent, exist_ok=True)
  tmp = path + _TMP_SUFFIX
  old = path + _OLD_SUFFIX
  if os.path.exists(tmp):  # Left by an earlier crash.
    shutil.rmtree(tmp)
  try:
    os.makedirs(tmp)
    yield tmp
    write_checksums(tmp)
  except BaseException as e:
    written = _directory_size(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    if isinstance(e, OSError) and e.errno in _NO_SPACE:
      raise _no_space_error(path, written) from e
    raise
  if os.path.isdir(path):
    if os.path.exists(old):
      shutil.rmtree(old)
    os.replace(path, old)
  os.replace(tmp, path)
  if os.path.exists(old):
    shutil.rmtree(old)


def _directory_size(path: str) -> int:
  """Bytes of the files under `path` (0 if there is none)."""
  total = 0
  for root, _, files in os.walk(path):
    for name in files:
      try:
        total += os.path.getsize(os.path.join(root, name))
      except OSError:
        pass
  return total


def _mb(n: float) -> str:
  return f"{n / 2**20:,.0f} MB" if n >= 2**20 else f"{n / 2**10:,.0f} KB"


def _no_space_error(path: str, written: int) -> CheckpointWriteError:
  """The one-line error of a checkpoint that ran out of space."""
  previous = _directory_size(path)
  needed = max(previous, written)
  free = shutil.disk_usage(os.path.dirname(path)).free
  kept = (f"the previous checkpoint at {path} is intact" if previous
          else "no earlier checkpoint existed")
  basis = ("the size of the last one" if previous >= written
           else "what was written before the failure")
  return CheckpointWriteError(
      errno.ENOSPC,
      f"cannot write the checkpoint {path}: no space left on the device "
      f"({_mb(free)} free; it needs about {_mb(needed)}, {basis}); {kept}. "
      "Free space and resume.")


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def _files(directory: str) -> Iterator[str]:
  """Paths relative to `directory` of its files, checksums.json aside."""
  for root, _, files in os.walk(directory):
    for name in sorted(files):
      rel = os.path.relpath(os.path.join(root, name), directory)
      if rel != CHECKSUMS:
        yield rel.replace(os.sep, "/")


def write_checksums(directory: str) -> None:
  """Writes `checksums.json` into `directory`: {"files": {relative path:
  {"bytes": size, "sha256": hex digest}}} of every other file in it."""
  files = {}
  for rel in _files(directory):
    full = os.path.join(directory, rel)
    files[rel] = {"bytes": os.path.getsize(full), "sha256": _sha256(full)}
  write_json(os.path.join(directory, CHECKSUMS), {"files": files})


def verify_directory(path: str) -> None:
  """Checks every file of a checkpoint directory against its checksums.json.

  A directory without checksums.json (written before checksums existed) is
  not checked.

  Raises:
    ValueError: a listed file is missing, of another size (truncated) or
      with another SHA-256 (corrupt); the message names the file.
  """
  listed = os.path.join(path, CHECKSUMS)
  if not os.path.isfile(listed):
    return
  try:
    files = read_json(listed)["files"]
    items = [(rel, int(v["bytes"]), str(v["sha256"]))
             for rel, v in files.items()]
  except (ValueError, KeyError, TypeError, AttributeError) as e:
    raise ValueError(f"checkpoint: {listed} is corrupt: {e}") from e
  for rel, size, digest in items:
    full = os.path.join(path, rel)
    if not os.path.isfile(full):
      raise ValueError(f"checkpoint: {full} is missing (listed in "
                       f"{CHECKSUMS}).")
    got = os.path.getsize(full)
    if got != size:
      raise ValueError(f"checkpoint: {full} is truncated or altered: "
                       f"{got} bytes, {CHECKSUMS} says {size}.")
    if _sha256(full) != digest:
      raise ValueError(f"checkpoint: {full} is corrupt: its SHA-256 differs "
                       f"from the one in {CHECKSUMS}.")


def find_directory(path: str) -> str:
  """The latest complete checkpoint directory written at `path`.

  Returns `path` if it exists, else `path + ".old"` (a crash interrupted the
  swap in `atomic_directory`).

  Raises:
    FileNotFoundError: neither exists.
  """
  for candidate in (path, path + _OLD_SUFFIX):
    if os.path.isdir(candidate):
      return candidate
  raise FileNotFoundError(f"checkpoint: no checkpoint at {path}.")
