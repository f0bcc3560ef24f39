"""Tests for ngu_jax.loops.python.loop: checkpoints written by older code,
and damaged or unwritable checkpoints.

The loop's own behaviour (rows, resume, Ctrl-C, every variant) is tested in
tests/loops/test_host.py beside the other loops'.
"""

import errno
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from ngu_jax import npz_io
from ngu_jax import plotting
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.loops import checkpointing
from ngu_jax.loops.python import loop as python_loop

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "pre_variant_families"
TIMES = ("elapsed_s", "env_steps_per_s")


# `make test` resumes the fixture with every family set; NGU's alone is
# `make test-slow`'s.
@pytest.mark.parametrize("variant", [
    pytest.param("ngu", marks=pytest.mark.slow), "all_families"])
def test_a_checkpoint_from_before_the_variant_families_resumes_exactly(
    tmp_path, variant):
  """Its flat config.json builds today's config, its actor state (every
  family's slots) loads, and the resumed run writes the rows of the
  uninterrupted run that the old code wrote."""
  out = tmp_path / variant
  shutil.copytree(FIXTURES / variant / "checkpoint", out / "checkpoint")
  with open(out / "checkpoint" / "config.json") as f:
    saved = json.load(f)
  assert "meta_controller" in saved["agent"]  # The old, flat form.
  config = config_lib.NGUConfig.from_dict(saved["agent"])
  resumed = python_loop.run_experiment(
      config, saved["env_name"], 48, num_lanes=saved["num_lanes"],
      env_kwargs=saved["env_kwargs"], seed=saved["seed"],
      log_every_env_steps=saved["log_every_env_steps"],
      eval_every_env_steps=saved["eval_every_env_steps"],
      output_dir=str(out), resume=True, progress=False)
  expected = plotting.read_metrics(
      os.fspath(FIXTURES / variant / "expected_metrics.csv"))
  rows = resumed["rows"]
  assert [r["env_steps"] for r in rows] == list(expected["env_steps"])
  for column, values in expected.items():
    if column in TIMES:
      continue
    got = np.array([r[column] for r in rows], np.float64)
    np.testing.assert_allclose(got, values, rtol=1e-6, atol=1e-7,
                               err_msg=column)
  assert rows[-1]["learner_steps"] > rows[1]["learner_steps"]
  with open(out / "checkpoint" / "config.json") as f:
    assert json.load(f)["agent"] == config.to_dict()  # Now the nested form.
  if variant == "ngu":
    _check_storage_faults(config, saved, out)


def _check_storage_faults(config, saved, out):
  """Issue 40's storage faults on a real checkpoint: a bit flip is refused
  by name on resume; a full disk stops the run with `CheckpointWriteError`
  and keeps the last checkpoint, which still resumes."""
  checkpoint = out / "checkpoint"
  assert (checkpoint / npz_io.CHECKSUMS).is_file()
  kwargs = dict(num_lanes=saved["num_lanes"], env_kwargs=saved["env_kwargs"],
                seed=saved["seed"],
                log_every_env_steps=saved["log_every_env_steps"],
                eval_every_env_steps=saved["eval_every_env_steps"],
                output_dir=str(out), resume=True, progress=False)
  learner = checkpoint / "learner.npz"
  original = learner.read_bytes()
  flipped = bytearray(original)
  flipped[len(flipped) // 2] ^= 0x10
  learner.write_bytes(bytes(flipped))
  with pytest.raises(checkpointing.ResumeError,
                     match=f"{learner} is corrupt: its SHA-256 differs"):
    python_loop.run_experiment(config, saved["env_name"], 60, **kwargs)
  learner.write_bytes(original)
  kept = {p.name: p.read_bytes() for p in checkpoint.iterdir() if p.is_file()}

  def full_disk(f, **arrays):
    del f, arrays
    raise OSError(errno.ENOSPC, "No space left on device")
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(np, "savez", full_disk)
    with pytest.raises(npz_io.CheckpointWriteError,
                       match=f"cannot write the checkpoint {checkpoint}"):
      python_loop.run_experiment(config, saved["env_name"], 60, **kwargs)
  assert {p.name: p.read_bytes() for p in checkpoint.iterdir()
          if p.is_file()} == kept
  assert sorted(p.name for p in out.iterdir() if "checkpoint" in p.name) == [
      "checkpoint"]
  checkpointing.find_checkpoint(str(checkpoint), str(out))  # Verifies.
