"""Tests for ngu_jax.agents.ngu.config (NGU App. F, Tables 6 and 7)."""

import ast
import dataclasses
import json
import pathlib
import re

import numpy as np
import pytest

import ngu_jax
from ngu_jax import mixtures
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu.config import NGUConfig

# Table 6 values, written out from the paper (App. F.2).
TABLE_6 = dict(
    num_mixtures=32, beta=0.3, gamma_max=0.997, gamma_min=0.99,
    learning_rate=1e-4, adam_eps=1e-4, adam_b1=0.9, adam_b2=0.999,
    max_gradient_norm=40.0, rnd_learning_rate=5e-4,
    action_prediction_learning_rate=5e-4, batch_size=64, trace_length=80,
    replay_period=40, retrace_lambda=0.95,
    value_transform="signed_hyperbolic", value_transform_eps=1e-3,
    memory_capacity=30000, kernel_epsilon=1e-4, num_neighbors=10,
    cluster_distance=0.008, pseudo_count_constant=1e-3, max_similarity=8.0,
    priority_exponent=0.9, replay_capacity=5_000_000 // 40,
    min_replay_size=6250, actor_update_period=100, target_update_period=1500,
    action_prediction_l2=1e-5, rnd_clip=5.0, eval_epsilon=0.01,
    target_epsilon=0.01, embedding_params_per_lane=True,
    # App. A / H and docs/design.md#semantics.
    importance_sampling_exponent=0.6, priority_eta=0.9, aux_loss_steps=5,
    burn_in=0, actor_base_epsilon=0.4, actor_epsilon_alpha=7.0,
    memory_wipe_period=1, embedding_dim=32, rnd_output_dim=128,
    inverse_dynamics_hidden=128, lstm_size=512, head_hidden=512,
    use_rnd=True)

# Table 7 (Disco Maze) rows.
TABLE_7 = dict(
    memory_capacity=5000, learning_rate=1e-3,
    action_prediction_learning_rate=1e-3, beta=0.5, trace_length=50,
    replay_period=50, retrace_lambda=0.97, value_transform="identity",
    target_update_period=100, kernel_epsilon=1e-2, eval_epsilon=0.0,
    num_mixtures=1, torso="grid")



def test_defaults_are_table_6():
  c = NGUConfig()
  for name, value in TABLE_6.items():
    assert getattr(c, name) == value, name


def test_presets():
  c = config_lib.disco_maze()
  for name, value in TABLE_7.items():
    assert getattr(c, name) == value, name
  assert c.rnd_learning_rate == 5e-4  # Table 7 changes only R2D2 + action.
  assert config_lib.atari().torso == "atari"
  assert config_lib.atari() == NGUConfig(torso="atari")
  m = config_lib.minigrid()
  assert (m.num_mixtures, m.torso) == (8, "grid")
  assert config_lib.disco_maze(num_mixtures=4).num_mixtures == 4
  assert set(config_lib.PRESETS) == {"atari", "agent57", "disco_maze",
                                     "minigrid", "deep_sea", "dice"}
  dice = config_lib.dice()
  assert (dice.policy.kind, dice.policy.temperature_source,
          dice.loss.kind) == ("boltzmann", "bva", "dice")
  assert (dice.num_mixtures, dice.beta, dice.use_rnd) == (1, 0., False)
  # Table 5: weights 10 / 1 / 10, clips 1.05, M = d = 7, gamma 0.997.
  loss = dice.loss
  assert (loss.dice_q_weight, loss.dice_v_weight, loss.dice_pi_weight,
          loss.dice_c_bar, loss.dice_rho_bar) == (10., 1., 10., 1.05, 1.05)
  assert loss.dice_entropy_weight == 0.              # Table 5: no entropy
  assert config_lib.dice(dice_entropy_weight=1.).loss.dice_entropy_weight == 1.
  with pytest.raises(ValueError, match="loss.dice_entropy_weight"):
    config_lib.dice(dice_entropy_weight=-0.5)
  assert (dice.policy.bva_num_bandits, dice.policy.bva_num_candidates) == (
      7, 7)
  np.testing.assert_allclose(dice.mixture_gammas(), [0.997])
  np.testing.assert_array_equal(dice.mixture_betas(), [0.])
  with pytest.raises(ValueError, match="policy.kind"):
    config_lib.dice(behaviour_policy="epsilon_greedy")
  with pytest.raises(ValueError, match="loss.split_values"):
    config_lib.dice(split_values=True)
  with pytest.raises(ValueError, match="loss.dice_rho_bar"):
    config_lib.dice(**{"loss.dice_rho_bar": 1.01})
  a = config_lib.agent57()
  assert (a.loss.split_values, a.meta.kind, a.discount_schedule) == (
      True, "ucb", "agent57")
  assert (a.trace_length, a.replay_period, a.num_mixtures, a.torso) == (
      160, 80, 32, "atari")
  assert (a.meta.window, a.meta.epsilon, a.meta.beta) == (160, 0.5, 1.0)
  np.testing.assert_array_equal(a.mixture_gammas(),
                                mixtures.agent57_gammas(32))
  np.testing.assert_array_equal(NGUConfig().mixture_gammas(),
                                mixtures.gammas(32))
  np.testing.assert_array_equal(a.mixture_betas(), mixtures.betas(32, 0.3))
  d = config_lib.deep_sea(12)
  assert (d.trace_length, d.replay_period, d.memory_capacity) == (13, 13, 13)
  assert (d.num_mixtures, d.torso) == (8, "mlp")
  assert config_lib.deep_sea(12, beta=0.).beta == 0.
  with pytest.raises(ValueError, match="size"):
    config_lib.deep_sea(1)


def test_frozen():
  with pytest.raises(dataclasses.FrozenInstanceError):
    NGUConfig().beta = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("preset", sorted(config_lib.PRESETS))
def test_dict_round_trip_through_json(preset):
  c = config_lib.PRESETS[preset]()
  d = json.loads(json.dumps(c.to_dict()))
  assert NGUConfig.from_dict(d) == c


def test_from_dict_rejects_unknown_keys():
  with pytest.raises(ValueError, match=re.escape("unknown field 'betta'; did "
                                                 "you mean beta")):
    NGUConfig.from_dict({"betta": 0.3})
  with pytest.raises(ValueError, match=re.escape("unknown field(s) "
                                                 "recode.capacty")):
    NGUConfig.from_dict({"recode": {"capacty": 8}})


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_mixtures=0), "`num_mixtures` must be a positive integer"),
    (dict(num_mixtures=2.0), "`num_mixtures` must be a positive integer"),
    (dict(batch_size=True), "`batch_size` must be a positive integer"),
    (dict(learning_rate=0.0), "`learning_rate` must be a finite number > 0"),
    (dict(learning_rate=float("nan")), "`learning_rate` must be a finite"),
    (dict(beta=-0.1), "`beta` must be a finite number >= 0"),
    (dict(retrace_lambda=1.5), "`retrace_lambda` must be a number in [0, 1]"),
    (dict(adam_b2=1.0), "`adam_b2` must be < 1"),
    (dict(gamma_min=0.999), "need 0 <= gamma_min <= gamma_max < 1"),
    (dict(gamma_max=1.0), "need 0 <= gamma_min <= gamma_max < 1"),
    (dict(burn_in=79), "`burn_in` must be an integer in [0, trace_length - 2]"),
    (dict(trace_length=1), "`trace_length` must be an integer >= 2"),
    (dict(replay_period=81), "`replay_period` must be <= trace_length (80)"),
    (dict(min_replay_size=200_000), "`min_replay_size` must be <= "),
    (dict(rnd_clip=0.5), "`rnd_clip` must be a finite number >= 1"),
    (dict(use_rnd=1), "`use_rnd` must be a bool"),
    (dict(value_transform="log"), "`value_transform` must be one of"),
    (dict(torso="resnet"), "`torso` must be one of"),
    (dict(mlp_hidden_sizes=()), "`mlp_hidden_sizes` must be a non-empty"),
    (dict(mlp_hidden_sizes=(8, 0)), "`mlp_hidden_sizes` must be a non-empty"),
    (dict(grid_filters=(8,)), "`grid_filters` must be two positive integers"),
    (dict(grid_filters=(8, 0)), "`grid_filters` must be two positive"),
    (dict(grid_filters=(8, 2.5)), "`grid_filters` must be two positive"),
    (dict(eval_epsilon=-0.01), "`eval_epsilon` must be a number in [0, 1]"),
    (dict(split_values=1), "`loss.split_values` must be a bool"),
    (dict(meta_controller="thompson"), "`meta.kind` must be one of"),
    (dict(ucb_window=0), "`meta.window` must be a positive integer"),
    (dict(ucb_epsilon=1.5), "`meta.epsilon` must be a number in [0, 1]"),
    (dict(ucb_beta=-1.), "`meta.beta` must be a finite number >= 0"),
    ({"meta.beta": -1.}, "`meta.beta` must be a finite number >= 0"),
    ({"recode.discount": 0.}, "`recode.discount` must be a number in (0, 1]"),
    ({"policy.bva_widths": ()}, "`policy.bva_widths` must be a non-empty"),
    (dict(discount_schedule="r2d2"), "`discount_schedule` must be one of"),
    (dict(retrace_traces="peng"), "`retrace_traces` must be one of"),
    (dict(advantage_learning=1.0), "`advantage_learning` must be a number in "
     "[0, 1)"),
    (dict(advantage_learning=0.9, split_values=True),
     "`advantage_learning` must be 0 with split values"),
    (dict(retrace_traces="uncorrected", target_epsilon=0.),
     "`target_epsilon` must be > 0 with retrace_traces 'uncorrected'"),
    (dict(discount_schedule="agent57", num_mixtures=8),
     "`num_mixtures` must be >= 10 with discount_schedule 'agent57'"),
    (dict(discount_schedule="agent57", agent57_gamma_0=0.99),
     "`agent57_gamma_0` must be in [gamma_max, 1)"),
])
def test_rejects_bad_values(kwargs, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    NGUConfig(**kwargs)


def test_list_sizes_become_tuples():
  assert NGUConfig(mlp_hidden_sizes=[8, 8]).mlp_hidden_sizes == (8, 8)
  config = NGUConfig(grid_filters=[4, 8])
  assert config.grid_filters == (4, 8)
  assert NGUConfig.from_dict(config.to_dict()) == config


def _config_attribute_reads():
  """Names `x` of every `config.x` in the ngu_jax/ modules that use
  NGUConfig (other modules' `config` is another class), config.py aside."""
  root = pathlib.Path(ngu_jax.__file__).parent
  reads = set()
  # The config's own table methods (`mixture_betas`, `mixture_gammas`) read
  # fields as `self.x`; its validation and serialisation do not count.
  config_py = root / "agents" / "ngu" / "config.py"
  for node in ast.walk(ast.parse(config_py.read_text())):
    if isinstance(node, ast.FunctionDef) and node.name.startswith("mixture_"):
      for sub in ast.walk(node):
        if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
            and sub.value.id == "self"):
          reads.add(sub.attr)
  for path in root.rglob("*.py"):
    text = path.read_text()
    if (path.name == "config.py" and path.parent.name == "ngu") or (
        "NGUConfig" not in text):
      continue
    tree = ast.parse(text)
    # Names bound to a family's config: `r = config.recode`.
    aliases = {}
    for node in ast.walk(tree):
      if (isinstance(node, ast.Assign) and len(node.targets) == 1
          and isinstance(node.targets[0], ast.Name)
          and _is_config_attribute(node.value)):
        aliases[node.targets[0].id] = node.value.attr
    for node in ast.walk(tree):
      if _is_config_attribute(node):
        reads.add(node.attr)
      elif isinstance(node, ast.Attribute) and _is_config_attribute(
          node.value) and node.value.attr in config_lib.FAMILIES:
        reads.add(f"{node.value.attr}.{node.attr}")
      elif (isinstance(node, ast.Attribute) and isinstance(node.value,
                                                           ast.Name)
            and node.value.id in aliases):
        reads.add(f"{aliases[node.value.id]}.{node.attr}")
  return reads


def _is_config_attribute(node):
  return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
          and node.value.id == "config")


def test_every_field_is_read():
  """Each field is read as `config.<field>` in library code, and each
  family's field as `config.<family>.<field>` (or through a name bound to
  `config.<family>`) (AST, so docstrings and comments do not count)."""
  fields = {f.name for f in dataclasses.fields(NGUConfig)}
  fields |= {f"{family}.{f.name}"
             for family, cls in config_lib.FAMILIES.items()
             for f in dataclasses.fields(cls)}
  # Every family's kind is read by `variants.compose`, through getattr.
  fields -= {f"{family}.kind" for family in config_lib.FAMILIES}
  reads = _config_attribute_reads()
  unread = fields - reads
  assert not unread, f"fields never read in ngu_jax/: {sorted(unread)}"


@pytest.mark.parametrize("name", ["episodic_distance_horizon",
                                  "rnd_error_horizon"])
def test_horizons_validated(name):
  assert getattr(NGUConfig(), name) == 1000  # Measured choices (README).
  assert getattr(NGUConfig(**{name: 0}), name) == 0  # All-time statistics.
  for bad in (-1, 2.5, True):
    with pytest.raises(ValueError, match=name):
      NGUConfig(**{name: bad})
