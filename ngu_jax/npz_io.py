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
  complete one.

Every file is written to a temporary name and renamed into place. Files
name leaves by their key paths (attribute and dict keys), never by module or
class paths, so a checkpoint does not depend on where a class is defined.
"""

import contextlib
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

  Write the checkpoint's files into the yielded directory. On success the
  previous `path` (if any) is renamed to `path + ".old"`, the new directory
  renamed to `path`, and the old one deleted; an exception in the block
  removes the temporary directory and leaves `path` as it was. A crash
  between the two renames leaves only `path + ".old"`, which
  `find_directory` then returns.
  """
  path = os.path.abspath(path)
  parent = os.path.dirname(path)
  os.makedirs(parent, exist_ok=True)
  tmp = path + _TMP_SUFFIX
  old = path + _OLD_SUFFIX
  if os.path.exists(tmp):  # Left by an earlier crash.
    shutil.rmtree(tmp)
  os.makedirs(tmp)
  try:
    yield tmp
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  if os.path.isdir(path):
    if os.path.exists(old):
      shutil.rmtree(old)
    os.replace(path, old)
  os.replace(tmp, path)
  if os.path.exists(old):
    shutil.rmtree(old)


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
