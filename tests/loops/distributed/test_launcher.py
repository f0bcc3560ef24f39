"""End-to-end tests of the distributed program (ngu_jax.loops.distributed.launcher)
and of `python -m experiments.launch`, on the session's local Ray cluster.

The fault test kills an actor's process mid-run (twice: restarted, then
given up); the `learning`-marked test (not in `make test`; `make
test-learning`) checks that 2 actor processes learn CartPole (the sanity
check of `experiments.cartpole_sanity`, distributed).
"""

import ast
import csv
import inspect
import os
import signal

import jax
import numpy as np
import pytest

from experiments import cartpole_sanity
from experiments import launch as launch_cli
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import diagnostics
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops import checkpointing
from ngu_jax.loops.distributed import launcher
from ngu_jax.loops.distributed import nodes
from ngu_jax.meta import bandits_vote
from ngu_jax.agents.ngu.variants import policy as variant_policy

CARTPOLE = "gymnax/CartPole-v1"
SMALL = dict(cartpole_sanity.CONFIG, mlp_hidden_sizes=(32,), lstm_size=32,
             head_hidden=32, min_replay_size=50, batch_size=16)


def test_make_program_nodes_and_validation():
  config = NGUConfig(**SMALL)
  program = launcher.make_program(config, CARTPOLE, num_actors=3,
                                  num_lanes=4, eval_lanes=2,
                                  max_restarts=2, actor_cpus=0.5)
  names = [n.name for n in program.nodes]
  assert names == ["counter", "replay", "learner", "actor_0", "actor_1",
                   "actor_2", "evaluator"]
  actor = program.nodes[3]
  assert actor.max_restarts == 2 and actor.num_cpus == 0.5
  assert all(n.max_restarts == 2 for n in program.nodes)  # Every node.
  no_eval = launcher.make_program(config, CARTPOLE, 1, 4)
  assert "evaluator" not in [n.name for n in no_eval.nodes]
  for kwargs in (dict(num_actors=0), dict(num_lanes=0),
                 dict(eval_lanes=-1)):
    args = {**dict(num_actors=1, num_lanes=1), **kwargs}
    with pytest.raises(ValueError, match="must be an int"):
      launcher.make_program(config, CARTPOLE, **args)
  with pytest.raises(ValueError, match="use 'embedded'"):
    launcher.make_program(config, CARTPOLE, 1, 1, replay_backend="reverb")


def test_default_actor_cpus():
  assert launcher.default_actor_cpus(2, 1., 2.) == 0.5
  assert launcher.default_actor_cpus(1, 1., 16.) == 1.
  assert launcher.default_actor_cpus(64, 1., 2.) == 0.1


def test_run_distributed_needs_ray(monkeypatch):
  ray = pytest.importorskip("ray")
  monkeypatch.setattr(ray, "is_initialized", lambda: False)
  with pytest.raises(RuntimeError, match="ray.init"):
    launcher.run_distributed(NGUConfig(**SMALL), CARTPOLE, 100)


def test_run_distributed_rejects_bad_arguments(ray_cluster):
  del ray_cluster
  config = NGUConfig(**SMALL)
  with pytest.raises(ValueError, match="total_env_steps"):
    launcher.run_distributed(config, CARTPOLE, 0)
  with pytest.raises(ValueError, match="output_dir"):
    launcher.run_distributed(config, CARTPOLE, 10, resume=True)
  with pytest.raises(ValueError, match="max_restarts"):
    launcher.run_distributed(config, CARTPOLE, 10, max_restarts=-2)


def _rows(path):
  with open(path) as f:
    return list(csv.DictReader(f))


@pytest.mark.slow  # Two program starts of 2,000 env steps: 3-6 minutes.
def test_run_checkpoint_and_resume_with_agent57_bandits(ray_cluster,
                                                       tmp_path):
  """A run writes metrics and a checkpoint; a resumed run (with another
  number of actors) continues its counts, rows and learner; another
  configuration is refused. With Agent57's switches on (one program start
  for both checks, as Ray start-up dominates): rows carry the actors' arm
  shares and the evaluator bandit's arm; the checkpoint carries the lane
  bandits, and the resumed program (one actor instead of two) continues the
  bandits of the lanes it still has."""
  del ray_cluster
  config = NGUConfig(**{**SMALL, "num_mixtures": 2, "split_values": True,
                        "meta_controller": "ucb"})
  out = str(tmp_path / "run")
  first = launcher.run_distributed(
      config, CARTPOLE, 2000, num_actors=2, num_lanes=2, output_dir=out,
      log_every_env_steps=500, eval_every_env_steps=1000, eval_lanes=2,
      checkpoint_every_env_steps=1000, progress=False)
  assert first["env_steps"] >= 2000
  assert first["failures"] == [0, 0]
  rows = _rows(first["metrics_path"])
  assert len(rows) == len(first["rows"]) >= 2
  assert set(launcher.DISTRIBUTED_COLUMNS) <= set(rows[0])
  assert {"arm_0", "arm_1", "eval_arm", "eval_bandit_return"} <= set(rows[0])
  # Every inserted sequence was acknowledged to its actor and vice versa.
  assert first["acked_inserts"] == first["replay"]["inserted"] > 0
  assert first["replay_sampled"] == first["replay"]["sampled"]
  assert first["learner_steps"] > 0
  assert os.path.isfile(os.path.join(out, "checkpoint", "learner.npz"))
  last = first["rows"][-1]
  assert last["arm_0"] + last["arm_1"] == pytest.approx(1.)
  evaluated = [r["eval_arm"] for r in first["rows"]
               if not np.isnan(r["eval_arm"])]
  assert evaluated[:2] == [0., 1.][:len(evaluated)] and evaluated
  path = os.path.join(out, "checkpoint", launcher.BANDITS_FILE)
  before = ckpt_lib.load_arrays(path)
  assert before["saved"].all() and (before["num_episodes"] > 0).all()

  second = launcher.run_distributed(
      config, CARTPOLE, first["env_steps"] + 1000, num_actors=1,
      num_lanes=2, output_dir=out, log_every_env_steps=500,
      eval_every_env_steps=1000, eval_lanes=2, resume=True, progress=False)
  assert second["env_steps"] >= first["env_steps"] + 1000
  assert second["learner_steps"] > first["learner_steps"]
  # The first run's rows, as its checkpoint kept them (NaN compares equal:
  # the checkpoint's JSON keeps a non-finite value as null).
  np.testing.assert_equal(second["rows"][:len(first["rows"])], first["rows"])
  assert second["replay"]["inserted"] >= first["replay"]["inserted"]
  assert len(_rows(second["metrics_path"])) == len(second["rows"])
  after = ckpt_lib.load_arrays(path)
  assert after["saved"].shape == (2,)  # Lanes of one actor now.
  for lane in range(2):
    n = int(before["num_episodes"][lane])
    assert int(after["num_episodes"][lane]) > n
    # The first run's episodes are still in the window (160 > n): the
    # restored bandit went on from them.
    assert n < config.meta.window
    np.testing.assert_array_equal(after["returns"][lane, :n],
                                  before["returns"][lane, :n])
    np.testing.assert_array_equal(after["arms"][lane, :n],
                                  before["arms"][lane, :n])

  with pytest.raises(checkpointing.ResumeError, match="seed"):
    launcher.run_distributed(config, CARTPOLE, 10**6, num_actors=1,
                             num_lanes=2, seed=1, output_dir=out,
                             log_every_env_steps=500, eval_lanes=2,
                             eval_every_env_steps=1000, resume=True,
                             progress=False)


@pytest.mark.slow  # Two process kills and a restart: about 3 minutes.
def test_killed_actor_restarts_then_is_given_up(ray_cluster, tmp_path):
  """Kill actor_0's process mid-run: Ray restarts it with fresh lanes, the
  driver runs it again, the learner keeps training, and every insert that
  was acknowledged to an actor is in the replay. Kill it again once the
  restarted process has inserted: with max_restarts=1 it stays dead and
  the other actor ends the run alone."""
  ray = ray_cluster
  config = NGUConfig(**SMALL)
  seen = {}

  def on_poll(handles, counts):
    if "killed_at" not in seen and counts["env_steps"] >= 1500:
      seen["learner_steps"] = ray.get(handles["learner"].steps.remote())
      seen["acked"] = counts["acked_inserts"]
      os.kill(ray.get(handles["actor_0"].pid.remote()), signal.SIGKILL)
      seen["killed_at"] = counts["env_steps"]
    elif "killed_at" in seen and "restarted_actor_inserted" not in seen:
      try:
        info = ray.get(handles["actor_0"].info.remote(), timeout=5)
      except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return  # Still restarting.
      if info["restarted"] and info["acked_inserts"] > 0:
        seen["restarted_actor_inserted"] = counts["env_steps"]
        os.kill(ray.get(handles["actor_0"].pid.remote()), signal.SIGKILL)

  # Long enough that the restarted process (a new Python, JAX import and
  # compilation: ~15 s) inserts before the other actor ends the run alone.
  summary = launcher.run_distributed(
      config, CARTPOLE, 24000, num_actors=2, num_lanes=4,
      output_dir=str(tmp_path), log_every_env_steps=500, max_restarts=1,
      progress=False, on_poll=on_poll)
  assert "killed_at" in seen
  assert seen.get("restarted_actor_inserted")
  assert summary["failures"] == [2, 0]
  assert summary["actor_restarts"] == 1
  assert summary["actors_alive"] == 1
  assert summary["env_steps"] >= 24000
  assert summary["learner_steps"] > seen["learner_steps"]
  assert summary["acked_inserts"] > seen["acked"]
  replay = summary["replay"]
  # Acknowledged inserts are never lost (a killed actor may have inserted
  # a few it had not reported yet); the replay holds all it may keep.
  assert replay["inserted"] >= summary["acked_inserts"]
  assert replay["size"] == min(replay["inserted"], config.replay_capacity)


@pytest.mark.learning
def test_two_actor_processes_learn_cartpole(ray_cluster, tmp_path):
  """NGU with beta = 0 (R2D2) on 2 actor processes learns CartPole.

  A random policy balances ~22 steps; `experiments.cartpole_sanity` reaches
  ~170 in one process at 40,000 env steps (measured for this config
  distributed: eval 175-180, training 100-140 at 41k env steps).
  """
  del ray_cluster
  summary = launcher.run_distributed(
      NGUConfig(**cartpole_sanity.CONFIG), CARTPOLE, 40_000, num_actors=2,
      num_lanes=8, output_dir=str(tmp_path), log_every_env_steps=4000,
      eval_every_env_steps=20_000, progress=False)
  training = [r["mean_episode_return"] for r in summary["rows"]
              if r["mean_episode_return"] == r["mean_episode_return"]]
  assert max(training) > 60, training
  assert summary["eval_return"] > 80, summary["eval_return"]
  assert summary["failures"] == [0, 0]


# `python -m experiments.launch`'s flags for a small CartPole agent, and the
# same agent as a config.
CLI_SETS = dict(torso="'mlp'", mlp_hidden_sizes="(16,)", lstm_size="16",
                head_hidden="16", trace_length="10", replay_period="5",
                batch_size="8", min_replay_size="20", replay_capacity="1000",
                memory_capacity="200", embedding_dim="8", num_mixtures="2")


# 80 s: the Ray CLI's Ctrl-C (its shared part, host.interrupted, is unit
# tested in tests/loops/test_host.py).
@pytest.mark.slow
def test_interrupt_saves_a_checkpoint_that_the_cli_resumes(ray_cluster,
                                                           tmp_path, capsys):
  """Ctrl-C (KeyboardInterrupt in the driver) stops the nodes and saves a
  checkpoint; `python -m experiments.launch --resume` on the running
  cluster (joined, not stopped) takes the run from it to its total."""
  config = config_lib.minigrid(**{k: ast.literal_eval(v)
                                  for k, v in CLI_SETS.items()})
  out = str(tmp_path / "run")

  def on_poll(handles, counts):
    del handles
    if counts["env_steps"] >= 800:
      raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    launcher.run_distributed(config, CARTPOLE, 10**6, num_actors=2,
                             num_lanes=4, output_dir=out,
                             log_every_env_steps=400, progress=False,
                             on_poll=on_poll)
  state = checkpointing.read_checkpoint_meta(
      os.path.join(out, "checkpoint"),
      launcher.distributed_run_config(config, CARTPOLE, 4, 0, None, 400, 0),
      launcher.CHECKPOINT_FORMAT, launcher.CHECKPOINT_VERSION,
      loop="distributed")
  saved = state["counts"]["env_steps"]
  assert saved >= 800
  capsys.readouterr()
  sets = [a for k, v in CLI_SETS.items() for a in ("--set", f"{k}={v}")]
  summary = launch_cli.main([
      "--preset", "minigrid", "--env", CARTPOLE, "--num-actors", "2",
      "--num-lanes", "4", "--total-env-steps", str(saved + 400),
      "--output-dir", out, "--log-every", "400", "--no-progress", "--resume",
      *sets])
  assert ray_cluster.is_initialized()  # Joined, so not shut down.
  assert summary["env_steps"] >= saved + 400
  rows = _rows(os.path.join(out, "metrics.csv"))
  steps = [int(r["env_steps"]) for r in rows]
  assert steps == sorted(steps) and steps[-1] >= saved + 400
  printed = capsys.readouterr().out
  assert "metrics:" in printed and "checkpoint:" in printed
  # Resumed, so the config is the checkpoint's; another one is refused.
  with pytest.raises(SystemExit, match="(?s)--resume.*lstm_size: checkpoint 16, now 32"):
    launch_cli.main([
        "--preset", "minigrid", "--env", CARTPOLE, "--num-lanes", "4",
        "--total-env-steps", str(saved + 800), "--output-dir", out,
        "--log-every", "400", "--no-progress", "--resume", *sets,
        "--set", "lstm_size=32"])
  with pytest.raises(SystemExit, match="--preset"):
    launch_cli.main(["--preset", "nope", "--total-env-steps", "10",
                     "--output-dir", out])
  with pytest.raises(SystemExit, match="--resume"):
    launch_cli.main(["--preset", "minigrid", "--total-env-steps", "10",
                     "--output-dir", str(tmp_path / "empty"), "--resume"])


def _restore_into_fake_actors(path, num_actors, num_lanes):
  """launcher.restore_bandits into `num_actors` stand-ins for the actor
  handles; returns (its result, the calls as (method, actor index, *args)).
  Each call is checked against the ActorNode method it names."""
  calls = []

  class FakeMethod:
    def __init__(self, name, index):
      self.name, self.index = name, index

    def remote(self, *args):
      # The call fits the actor node's method (the handle's name for it).
      inspect.signature(getattr(nodes.ActorNode, self.name)).bind(None, *args)
      calls.append((self.name, self.index) + args)
      return None

  class FakeActor:
    def __init__(self, index):
      self.index = index

    def __getattr__(self, name):
      return FakeMethod(name, self.index)

  fake_ray = type("Ray", (), {"get": staticmethod(lambda refs: refs)})
  out = launcher.restore_bandits(path, [FakeActor(i)
                                        for i in range(num_actors)],
                                 num_lanes=num_lanes, ray=fake_ray)
  return out, calls


def test_bandit_files_round_trip_by_global_lane(tmp_path):
  """save_bandits writes the actors' lane bandits by global lane;
  restore_bandits deals them to another number of actors (lanes beyond the
  checkpoint's stay fresh); lane_controller_columns gives the arm shares."""
  w = 3
  bandits = {
      0: {"first_lane": 0, "arms": np.array([[0, 1, -1], [1, 1, -1]]),
          "returns": np.ones((2, w)), "num_episodes": np.array([2, 3])},
      2: {"first_lane": 2, "arms": np.array([[0, 0, 0], [-1, -1, -1]]),
          "returns": np.full((2, w), 2.), "num_episodes": np.array([3, 0])}}
  config = NGUConfig(num_mixtures=2, meta_controller="ucb")
  shares = diagnostics.lane_controller_columns(config, bandits)
  assert shares == {"arm_0": pytest.approx(4 / 7),  # Of 7 episodes.
                    "arm_1": pytest.approx(3 / 7)}
  assert diagnostics.lane_controller_columns(NGUConfig(), bandits) == {}
  assert np.isnan(diagnostics.lane_controller_columns(config, {})["arm_0"])
  path = str(tmp_path / "bandits.npz")
  launcher.save_bandits(path, {2: bandits[2]}, total_lanes=4)
  out, calls = _restore_into_fake_actors(path, num_actors=3, num_lanes=2)
  # Actor 0 (lanes 0, 1): nothing saved there; actor 1 (lanes 2, 3): lane 2
  # and lane 3 (saved, an empty window); actor 2 (lanes 4, 5): beyond.
  assert [c[:2] for c in calls] == [("restore_bandits", 1)]
  _, _, arms, returns, num_episodes, saved = calls[0]
  np.testing.assert_array_equal(arms, bandits[2]["arms"])
  np.testing.assert_array_equal(returns, bandits[2]["returns"])
  np.testing.assert_array_equal(num_episodes, [3, 0])
  np.testing.assert_array_equal(saved, [True, True])
  assert list(out) == [2]


def test_temperature_columns_from_the_actors_reports(tmp_path):
  """DiCE's Boltzmann lanes: the temperature columns pool every actor's
  latest lanes; NaN before any report; no bandit file without bandits."""
  config = NGUConfig(behaviour_policy="boltzmann")
  reports = {0: {"first_lane": 0, "temperature_x": np.log1p([1., 1 / 3]),
                 "q_values": np.zeros((2, 3))},
             2: {"first_lane": 2, "temperature_x": np.log1p([1 / 5]),
                 "q_values": np.zeros((1, 3))}}
  out = diagnostics.lane_controller_columns(config, reports)
  assert out["tau_median"] == pytest.approx(3.)
  assert out["policy_entropy"] == pytest.approx(np.log(3.))
  assert np.isnan(diagnostics.lane_controller_columns(config, {})["tau_median"])
  assert set(launcher.columns_for(config)) >= set(out)
  path = tmp_path / "bandits.npz"
  launcher.save_bandits(str(path), reports, total_lanes=3)
  assert not path.exists()
  # Without ensembles in the reports no curve; with them, one per lane.
  assert not launcher.write_bva_curve(config, reports, str(tmp_path), 10)
  bva_config = variant_policy.bva_config(config)
  for first, lanes in ((0, 2), (2, 1)):
    reports[first]["bva"] = jax.tree_util.tree_map(
        np.asarray, jax.vmap(lambda k: bandits_vote.init(k, bva_config))(
            jax.random.split(jax.random.PRNGKey(first), lanes)))._asdict()
  assert launcher.write_bva_curve(config, reports, str(tmp_path), 10)
  curve = ckpt_lib.load_arrays(str(tmp_path / "bva" / "bva_10.npz"))
  assert curve["values"].shape == (3, curve["x"].shape[0])


def test_bva_ensembles_round_trip_by_global_lane(tmp_path):
  """DiCE's Bandits Vote ensembles in the checkpoint: save_bandits writes
  them by global lane (only lanes an actor reported are marked saved);
  restore_bandits hands each actor its lanes' ensembles
  (restore_temperatures) and reports them for the counter."""
  config = NGUConfig(behaviour_policy="boltzmann", bva_num_bandits=2,
                     bva_num_candidates=2)
  assert config.keeps_lane_controllers
  assert not NGUConfig(behaviour_policy="boltzmann",
                       temperature_source="fixed").keeps_lane_controllers
  assert NGUConfig(meta_controller="ucb").keeps_lane_controllers
  assert not NGUConfig().keeps_lane_controllers
  cfg = variant_policy.bva_config(config)
  ensembles = jax.tree_util.tree_map(np.asarray, jax.vmap(
      lambda k: bandits_vote.init(k, cfg))(
          jax.random.split(jax.random.PRNGKey(0), 2)))
  ensembles = ensembles._replace(w=ensembles.w + np.arange(2)[:, None, None])
  reports = {2: {"first_lane": 2, "temperature_x": np.ones(2),
                 "q_values": np.zeros((2, 3)), "bva": ensembles._asdict()}}
  path = str(tmp_path / "bandits.npz")
  launcher.save_bandits(path, reports, total_lanes=5)
  saved = ckpt_lib.load_arrays(path)
  assert "saved" not in saved                   # no UCB bandits
  np.testing.assert_array_equal(saved["bva_saved"],
                                [False, False, True, True, False])
  np.testing.assert_array_equal(saved["bva/w"][2:4], ensembles.w)
  out, calls = _restore_into_fake_actors(path, num_actors=3, num_lanes=2)
  # Actor 1 has lanes 2, 3 (both saved); actor 2 lanes 4 (not), 5 (beyond).
  assert [c[:2] for c in calls] == [("restore_temperatures", 1)]
  _, _, part, mask = calls[0]
  np.testing.assert_array_equal(mask, [True, True])
  for field in bandits_vote.BVAState._fields:
    np.testing.assert_array_equal(part[field], getattr(ensembles, field))
  assert list(out) == [2] and set(out[2]) == {"bva", "first_lane"}
