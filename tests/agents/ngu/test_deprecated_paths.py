"""The import paths the agent folder's reshaping deprecated still work.

Each old path warns (`DeprecationWarning`, "... will be removed in the next
release") and yields the very objects of the new path, so isinstance checks
and code that stores them keep working; the new paths import without any of
these warnings; checkpoints name leaves by key path, not by module.
"""

import importlib
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ngu_jax
from ngu_jax import npz_io
from ngu_jax.agents import ngu
from ngu_jax.agents.ngu import actor
from ngu_jax.agents.ngu import builder
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import networks
from ngu_jax.agents.ngu import value_loss

_NEXT_RELEASE = "will be removed in the next release"


def _reimport(monkeypatch, name):
  """Imports module `name` afresh (running its top level) and returns it.

  The module that was imported before is put back afterwards, in
  `sys.modules` and as its package's attribute.
  """
  parent_name, _, child = name.rpartition(".")
  parent = importlib.import_module(parent_name)
  monkeypatch.delitem(sys.modules, name, raising=False)
  if child in vars(parent):
    monkeypatch.setattr(parent, child, vars(parent)[child])
  return importlib.import_module(name)


@pytest.mark.parametrize("old, new, names", [
    ("ngu_jax.agents.ngu.losses", "ngu_jax.agents.ngu.value_loss",
     ("FLOAT_STEP_FIELDS", "STEP_FIELDS", "VALUE_TRANSFORMS", "LossExtras",
      "check_batch", "loss", "loss_and_grad")),
    ("ngu_jax.checkpoint", "ngu_jax.npz_io",
     ("atomic_directory", "find_directory", "load_arrays", "load_pytree",
      "read_json", "save_arrays", "save_pytree", "write_json")),
])
def test_shim_module_warns_and_reexports_the_same_objects(monkeypatch, old,
                                                          new, names):
  with pytest.warns(DeprecationWarning) as record:
    shim = _reimport(monkeypatch, old)
  messages = [str(w.message) for w in record]
  assert any(m.startswith(f"{old} is deprecated; use {new};")
             and _NEXT_RELEASE in m for m in messages), messages
  target = importlib.import_module(new)
  assert set(shim.__all__) == set(names)
  for name in names:
    assert getattr(shim, name) is getattr(target, name), name


def test_experiment_shim_warns_and_points_to_loops(monkeypatch):
  from ngu_jax import loops  # pylint: disable=g-import-not-at-top
  with pytest.warns(DeprecationWarning,
                    match=r"ngu_jax\.experiment is deprecated; use "
                          r"ngu_jax\.loops\.run_experiment") as record:
    shim = _reimport(monkeypatch, "ngu_jax.experiment")
  assert any(_NEXT_RELEASE in str(w.message) for w in record)
  assert shim.run_experiment is loops.run_experiment
  assert shim.evaluate is loops.evaluation.evaluate
  assert shim.COLUMNS is loops.metrics_log.COLUMNS
  assert shim.ResumeError is loops.checkpointing.ResumeError


@pytest.mark.parametrize("module, name, new_module", [
    (builder, "Actor", actor),
    (builder, "Learner", learning),
    (builder, "MIN_PRIORITY", learning),
    (actor, "NGUNetworks", networks),
    (actor, "NGUParams", networks),
    (actor, "make_networks", networks),
    (actor, "init_params", networks),
])
def test_moved_name_warns_and_is_the_same_object(module, name, new_module):
  with pytest.warns(DeprecationWarning) as record:
    value = getattr(module, name)
  message = str(record[0].message)
  assert message.startswith(f"{module.__name__}.{name} is deprecated; use "
                            f"{new_module.__name__}.{name};"), message
  assert _NEXT_RELEASE in message
  assert value is getattr(new_module, name)


def test_moved_name_works_with_from_import():
  with pytest.warns(DeprecationWarning):
    from ngu_jax.agents.ngu.builder import Actor  # pylint: disable=g-import-not-at-top
  assert Actor is actor.Actor


def test_unknown_names_still_raise_attribute_error():
  with pytest.raises(AttributeError, match="no_such_name"):
    getattr(builder, "no_such_name")
  with pytest.raises(AttributeError, match="no_such_name"):
    getattr(actor, "no_such_name")
  with pytest.raises(AttributeError, match="no_such_name"):
    getattr(ngu, "no_such_name")


def test_package_keeps_exporting_the_same_names():
  old_all = (
      "LossExtras", "SequenceBatch", "check_batch", "loss", "loss_and_grad",
      "ActorExtras", "ActorState", "LearnerState", "NGUConfig",
      "NGUNetworks", "NGUParams", "Optimisers", "actor", "aux_losses",
      "auxiliary", "config", "learning", "losses", "init_learner",
      "init_params", "learner_state_from_params", "make_networks",
      "make_optimisers", "sgd_step", "Actor", "EnvironmentSpec", "Learner",
      "NGUBuilder", "NGUPolicy", "builder", "make_environment_spec")
  assert set(old_all) | {"networks", "value_loss"} == set(ngu.__all__)
  assert ngu.Actor is actor.Actor
  assert ngu.Learner is learning.Learner
  assert ngu.NGUNetworks is networks.NGUNetworks
  assert ngu.NGUParams is networks.NGUParams
  assert ngu.make_networks is networks.make_networks
  assert ngu.init_params is networks.init_params
  assert ngu.loss is value_loss.loss
  assert ngu.networks is networks and ngu.value_loss is value_loss


def test_package_losses_attribute_is_the_deprecated_alias():
  with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    losses = ngu.losses
  assert losses.__name__ == "ngu_jax.agents.ngu.losses"
  assert losses.loss is value_loss.loss


def test_new_paths_import_without_our_deprecation_warnings(monkeypatch):
  with warnings.catch_warnings():
    warnings.filterwarnings("error", message="ngu_jax",
                            category=DeprecationWarning)
    for name in ("ngu_jax.agents.ngu.networks", "ngu_jax.agents.ngu.actor",
                 "ngu_jax.agents.ngu.learning", "ngu_jax.agents.ngu.builder",
                 "ngu_jax.agents.ngu.value_loss", "ngu_jax.npz_io"):
      _reimport(monkeypatch, name)
    for name in ngu.__all__:
      if name != "losses":
        getattr(ngu, name)


def test_objects_of_the_old_paths_pass_isinstance_of_the_new():
  with pytest.warns(DeprecationWarning):
    old_params = actor.NGUParams
  params = old_params(q={}, embedding={}, rnd_predictor={}, rnd_target={},
                      rnd_observation_stats=None)
  assert isinstance(params, networks.NGUParams)
  with pytest.warns(DeprecationWarning):
    assert issubclass(builder.Actor, actor.Actor)
    assert issubclass(builder.Learner, learning.Learner)


def test_checkpoint_files_name_leaves_by_key_path_not_module(tmp_path):
  # A pytree saved through the old class path loads into a template built
  # from the new one: the .npz keys are attribute / dict key paths only.
  with pytest.warns(DeprecationWarning):
    old_params = actor.NGUParams
  saved = old_params(
      q={"linear": {"w": np.arange(6., dtype=np.float32).reshape(2, 3)}},
      embedding={"b": np.ones(2, np.float32)}, rnd_predictor={},
      rnd_target={}, rnd_observation_stats=np.int32(4))
  path = str(tmp_path / "params.npz")
  npz_io.save_pytree(path, saved)
  keys = sorted(npz_io.load_arrays(path))
  assert keys == [".embedding['b']", ".q['linear']['w']",
                  ".rnd_observation_stats"]
  assert not any("ngu_jax" in k or "NGUParams" in k for k in keys)
  template = networks.NGUParams(
      q={"linear": {"w": np.zeros((2, 3), np.float32)}},
      embedding={"b": np.zeros(2, np.float32)}, rnd_predictor={},
      rnd_target={}, rnd_observation_stats=np.int32(0))
  loaded = npz_io.load_pytree(path, template)
  assert isinstance(loaded, networks.NGUParams)
  np.testing.assert_array_equal(loaded.q["linear"]["w"],
                                saved.q["linear"]["w"])
  assert int(loaded.rnd_observation_stats) == 4


def test_importing_the_package_emits_none_of_our_deprecations():
  # A fresh interpreter, with our deprecation warnings as errors: `import
  # ngu_jax` and the agent's modules import none of the deprecated paths.
  root = os.path.dirname(os.path.dirname(ngu_jax.__file__))
  env = dict(os.environ, PYTHONPATH=root)
  code = ("import ngu_jax, ngu_jax.npz_io; "
          "from ngu_jax.agents.ngu import (actor, builder, learning, "
          "networks, value_loss); "
          "import sys; assert 'ngu_jax.agents.ngu.losses' not in sys.modules; "
          "assert 'ngu_jax.checkpoint' not in sys.modules")
  subprocess.run(
      [sys.executable, "-W", "error:ngu_jax:DeprecationWarning", "-c", code],
      check=True, env=env, cwd=root, timeout=600)
