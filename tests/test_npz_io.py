"""Tests for ngu_jax.npz_io (safe .npz + JSON checkpoint files)."""

import errno
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax import npz_io


class Pair(NamedTuple):
  a: object
  b: object


def _tree():
  return {"params": {"linear": {"w": jnp.arange(6., dtype=jnp.float32
                                                ).reshape(2, 3),
                                "b": jnp.zeros(3, jnp.float32)}},
          "state": Pair(a=np.array([1, 2], np.int64), b=None),
          "key": jax.random.PRNGKey(3),
          "step": jnp.int32(7)}


def test_pytree_round_trip_keeps_values_types_and_structure(tmp_path):
  path = str(tmp_path / "t.npz")
  tree = _tree()
  npz_io.save_pytree(path, tree)
  with np.load(path, allow_pickle=False) as data:
    assert sorted(data.files) == sorted(
        ["['key']", "['params']['linear']['b']", "['params']['linear']['w']",
         "['state'].a", "['step']"])
  template = jax.tree_util.tree_map(lambda x: x * 0, tree)
  got = npz_io.load_pytree(path, template)
  assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(
      tree)
  for x, y in zip(jax.tree_util.tree_leaves(got),
                  jax.tree_util.tree_leaves(tree)):
    assert type(x) is type(y) or (isinstance(x, jax.Array)
                                  and isinstance(y, jax.Array))
    assert x.dtype == y.dtype
    np.testing.assert_array_equal(x, y)
  assert got["state"].b is None


@pytest.mark.parametrize("change, match", [
    (lambda t: {**t, "step": jnp.float32(0)}, r"\['step'\].*dtype int32"),
    (lambda t: {**t, "key": jnp.zeros(3, jnp.uint32)},
     r"\['key'\].*shape \(3,\)"),
    (lambda t: {**t, "extra": jnp.zeros(1)}, r"missing leaves \[\"\['extra'\]"),
    (lambda t: {k: v for k, v in t.items() if k != "key"},
     r"unexpected leaves \[\"\['key'\]"),
])
def test_load_pytree_names_the_mismatching_leaf(tmp_path, change, match):
  path = str(tmp_path / "t.npz")
  npz_io.save_pytree(path, _tree())
  with pytest.raises(ValueError, match=match):
    npz_io.load_pytree(path, change(_tree()))


def test_missing_and_corrupt_files(tmp_path):
  with pytest.raises(FileNotFoundError, match="missing file"):
    npz_io.load_arrays(str(tmp_path / "none.npz"))
  bad = tmp_path / "bad.npz"
  bad.write_bytes(b"not a zip file")
  with pytest.raises(ValueError, match="cannot read"):
    npz_io.load_pytree(str(bad), _tree())
  (tmp_path / "bad.json").write_text("{oops")
  with pytest.raises(ValueError, match="corrupt JSON"):
    npz_io.read_json(str(tmp_path / "bad.json"))


def test_object_arrays_are_refused(tmp_path):
  with pytest.raises(ValueError, match="without pickle"):
    npz_io.save_arrays(str(tmp_path / "o.npz"),
                           {"x": np.array([{}, 1], dtype=object)})


def test_json_refuses_nan(tmp_path):
  with pytest.raises(ValueError):
    npz_io.write_json(str(tmp_path / "n.json"), {"x": float("nan")})
  npz_io.write_json(str(tmp_path / "n.json"), {"x": None, "y": [1, 2.5]})
  assert npz_io.read_json(str(tmp_path / "n.json")) == {"x": None,
                                                            "y": [1, 2.5]}


def test_atomic_directory_replaces_only_when_complete(tmp_path):
  path = str(tmp_path / "ckpt")
  with pytest.raises(FileNotFoundError):
    npz_io.find_directory(path)
  with npz_io.atomic_directory(path) as tmp:
    npz_io.write_json(os.path.join(tmp, "v.json"), 1)
  assert npz_io.find_directory(path) == path
  # A failure while writing leaves the previous checkpoint untouched.
  with pytest.raises(RuntimeError):
    with npz_io.atomic_directory(path) as tmp:
      npz_io.write_json(os.path.join(tmp, "v.json"), 2)
      raise RuntimeError("crash")
  assert npz_io.read_json(os.path.join(path, "v.json")) == 1
  assert sorted(os.listdir(tmp_path)) == ["ckpt"]
  with npz_io.atomic_directory(path) as tmp:
    npz_io.write_json(os.path.join(tmp, "v.json"), 3)
  assert npz_io.read_json(os.path.join(path, "v.json")) == 3
  assert sorted(os.listdir(tmp_path)) == ["ckpt"]
  # A crash between the two renames leaves only the old one: it is found.
  os.rename(path, path + ".old")
  assert npz_io.find_directory(path) == path + ".old"


# ------------------------------------------------ storage faults (issue 40)

def _write_checkpoint(path, value, size=4096):
  with npz_io.atomic_directory(path) as tmp:
    npz_io.write_json(os.path.join(tmp, "state.json"), {"v": value})
    os.makedirs(os.path.join(tmp, "replay"))
    npz_io.save_arrays(os.path.join(tmp, "replay", "replay.npz"),
                       {"x": np.full(size, value, np.float32)})


def test_checksums_list_every_file_and_verify(tmp_path):
  path = str(tmp_path / "ckpt")
  _write_checkpoint(path, 1)
  listed = npz_io.read_json(os.path.join(path, npz_io.CHECKSUMS))["files"]
  assert sorted(listed) == ["replay/replay.npz", "state.json"]
  size = os.path.getsize(os.path.join(path, "replay", "replay.npz"))
  assert listed["replay/replay.npz"]["bytes"] == size
  npz_io.verify_directory(path)
  # A directory written before checksums existed is not checked.
  os.remove(os.path.join(path, npz_io.CHECKSUMS))
  npz_io.verify_directory(path)


@pytest.mark.parametrize("damage, match", [
    ("truncate", "replay.npz is truncated or altered: .* bytes, "
                 "checksums.json says"),
    ("flip", "replay.npz is corrupt: its SHA-256 differs"),
    ("remove", "replay.npz is missing"),
])
def test_a_damaged_file_is_named(tmp_path, damage, match):
  path = str(tmp_path / "ckpt")
  _write_checkpoint(path, 1)
  target = os.path.join(path, "replay", "replay.npz")
  if damage == "truncate":
    with open(target, "r+b") as f:
      f.truncate(os.path.getsize(target) // 2)
  elif damage == "flip":
    with open(target, "r+b") as f:
      f.seek(os.path.getsize(target) - 100)
      byte = f.read(1)
      f.seek(-1, os.SEEK_CUR)
      f.write(bytes([byte[0] ^ 0x01]))
  else:
    os.remove(target)
  with pytest.raises(ValueError, match=match):
    npz_io.verify_directory(path)


def test_a_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
  """ENOSPC midway through a write: `CheckpointWriteError` names the path
  and the space needed, and the previous checkpoint is intact."""
  path = str(tmp_path / "ckpt")
  _write_checkpoint(path, 1, size=300_000)
  before = {rel: open(os.path.join(path, rel), "rb").read()
            for rel in ("state.json", "replay/replay.npz",
                        npz_io.CHECKSUMS)}
  real_savez = np.savez

  def savez_until_full(f, **arrays):
    real_savez(f, **{k: v[:10] for k, v in arrays.items()})  # Partly...
    raise OSError(errno.ENOSPC, "No space left on device")  # ...then full.
  monkeypatch.setattr(np, "savez", savez_until_full)
  with pytest.raises(npz_io.CheckpointWriteError) as raised:
    _write_checkpoint(path, 2, size=300_000)
  message = str(raised.value.strerror)
  assert "\n" not in message
  assert f"cannot write the checkpoint {path}: no space left" in message
  assert "it needs about 1 MB, the size of the last one" in message
  assert f"the previous checkpoint at {path} is intact" in message
  assert raised.value.errno == errno.ENOSPC
  assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # No temporary left.
  for rel, content in before.items():
    assert open(os.path.join(path, rel), "rb").read() == content
  npz_io.verify_directory(path)
  # Other failures are not disguised as a full disk.
  monkeypatch.setattr(np, "savez", lambda f, **a: (_ for _ in ()).throw(
      OSError(errno.EACCES, "Permission denied")))
  with pytest.raises(OSError) as raised:
    _write_checkpoint(path, 3)
  assert not isinstance(raised.value, npz_io.CheckpointWriteError)
