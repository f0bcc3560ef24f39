"""Tests of the distributed nodes and their clients (on a local Ray cluster).

Each test launches the nodes it needs as Ray actors (separate processes) on
the session's cluster (`conftest.ray_cluster`) and kills them at the end.
"""

import os
import signal
import time

import jax
import numpy as np
import pytest

from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.loops.distributed import clients
from ngu_jax.loops.distributed import nodes
from ngu_jax.loops.distributed import program as program_lib
from ngu_jax.meta import bandits_vote
from ngu_jax.replay import prioritized
from ngu_jax.agents.ngu.variants import policy as variant_policy

CARTPOLE = "gymnax/CartPole-v1"
SMALL = dict(
    num_mixtures=1, beta=0.0, gamma_max=0.99, gamma_min=0.99, torso="mlp",
    mlp_hidden_sizes=(16,), lstm_size=16, head_hidden=16, trace_length=4,
    replay_period=2, batch_size=4, replay_capacity=64, min_replay_size=4,
    memory_capacity=64, samples_per_insert=2.0)


def _item(i: int):
  return {"x": np.full((3,), i, np.float32), "t": np.int32(i)}


@pytest.fixture
def launched(ray_cluster):
  """launched(program) -> handles; every node is killed after the test."""
  all_handles = []

  def launch(program):
    handles = program_lib.launch(program)
    all_handles.extend(handles.values())
    return handles
  yield launch
  for handle in all_handles:
    ray_cluster.kill(handle)


def _replay_program(rate_limit=True, **overrides):
  program = program_lib.Program("test")
  program.add_node("replay", nodes.ReplayNode,
                   NGUConfig(**{**SMALL, **overrides}), seed=3,
                   rate_limit=rate_limit, num_cpus=0, max_concurrency=6)
  return program


def test_counter_node_counts_and_drains():
  counter = nodes.CounterNode(num_actor_sums=3)
  assert counter.increment(env_steps=8, episodes=1)["env_steps"] == 8
  counter.report(dict(env_steps=4, acked_inserts=2), [1., 2.], [0.5],
                 np.array([1., 2., 3.]), [40.], error_stats="stats")
  counter.report(dict(env_steps=4), [3.], [], np.array([1., 1., 1.]), [],
                 episode_extras={"frontier": [4], "tv_steps": [1]})
  counter.report({}, [2.], [], np.zeros(3), [],
                 episode_extras={"frontier": [6], "tv_steps": [0]})
  assert counter.get_counts()["env_steps"] == 16
  drained = counter.drain()
  assert drained["episode_extras"] == {"frontier": [4, 6],
                                       "tv_steps": [1, 0]}
  assert drained["returns"] == [1., 2., 3., 2.]
  assert drained["coverages"] == [0.5]
  assert drained["staleness"] == [40.]
  np.testing.assert_allclose(drained["actor_sums"], [2., 3., 4.])
  assert drained["error_stats"] == "stats"
  assert drained["counts"]["acked_inserts"] == 2
  again = counter.drain()
  assert again["returns"] == [] and again["actor_sums"].sum() == 0
  assert again["episode_extras"] == {"frontier": [], "tv_steps": []}
  assert again["counts"]["env_steps"] == 16  # Counts are never drained.
  counter.set_counts({"env_steps": 100})
  assert counter.get_counts()["env_steps"] == 100


def test_replay_client_round_trip(launched):
  handles = launched(_replay_program(rate_limit=False))
  client = clients.ReplayClient(handles["replay"])
  keys = client.insert([_item(i) for i in range(6)])
  np.testing.assert_array_equal(keys, np.arange(6))
  assert client.size == 6
  sampled_keys, items, weights = client.sample(5)
  assert items["x"].shape == (5, 3) and weights.shape == (5,)
  np.testing.assert_array_equal(items["t"], sampled_keys)  # item i has t=i
  client.update_priorities(sampled_keys, np.full(5, 2.))
  client.wait_for_updates()
  with pytest.raises(Exception, match="never issued"):
    client.update_priorities(np.array([99]), np.array([1.]))
    client.wait_for_updates()


def test_replay_client_waits_for_the_rate_limiter(launched):
  """samples_per_insert paces the sampler: a sample beyond the budget is
  refused until inserts arrive, and a stopping client gives up."""
  handles = launched(_replay_program(samples_per_insert=1.0,
                                     min_replay_size=4))
  client = clients.ReplayClient(handles["replay"])
  with pytest.raises(prioritized.ReplayNotReadyError, match="not granted"):
    client.sample(2, timeout=0.2)  # Below min_size.
  client.insert([_item(i) for i in range(4)])
  sampled = 0
  with pytest.raises(prioritized.ReplayNotReadyError):
    while True:  # Within the error buffer, then refused.
      client.sample(1, timeout=0.2)
      sampled += 1
  assert 1 <= sampled <= 10
  stopping = clients.ReplayClient(handles["replay"], should_stop=lambda: True)
  start = time.monotonic()
  with pytest.raises(clients.Stopped):
    stopping.sample(1)  # Would wait forever; stops after one short wait.
  assert time.monotonic() - start < 5
  client.insert([_item(i) for i in range(4, 8)])
  client.sample(1, timeout=5)  # Inserts made room.


def test_replay_client_splits_inserts_the_limiter_never_grants_at_once(
    launched):
  """An actor's lanes can end episodes together and write more sequences
  than one insert may hold (batch_size + samples_per_insert * m <= 2
  error_buffer, so that it cannot deadlock against a waiting learner): the
  client inserts them in order, in as many calls as needed."""
  ray = pytest.importorskip("ray")
  handles = launched(_replay_program(samples_per_insert=4.0,
                                     min_replay_size=20))
  # Error buffer max(0.1 * 20 * 4, 2 * 4) = 8, batch 4: 4 + 4 m <= 16.
  assert ray.get(handles["replay"].max_insert_size.remote()) == 3
  client = clients.ReplayClient(handles["replay"])
  keys = client.insert([_item(i) for i in range(10)],
                       priorities=np.arange(1., 11.))
  np.testing.assert_array_equal(keys, np.arange(10))
  assert client.size == 10
  assert client.insert([]).shape == (0,)


def _learner_program():
  """A learner over a replay without rate limit (the test inserts alone)."""
  program = program_lib.Program("test")
  config = NGUConfig(**SMALL)
  replay = program.add_node("replay", nodes.ReplayNode, config,
                            rate_limit=False, num_cpus=0)
  program.add_node("learner", nodes.LearnerNode, config, CARTPOLE, None,
                   replay, seed=0, num_cpus=0)
  return program


def test_variable_client_pulls_each_version_once(launched, ray_cluster):
  ray = ray_cluster
  handles = launched(_learner_program())
  learner = handles["learner"]
  version, (ref,) = ray.get(learner.get_params_ref.remote())
  again, (ref_again,) = ray.get(learner.get_params_ref.remote())
  assert version == again == 0
  assert ref == ref_again  # One ray.put per version, shared by all actors.
  client = clients.VariableClient(learner)
  assert client.version == -1
  params = client.get_variables()
  assert client.version == 0 and client.pulls == 1
  leaves = [np.asarray(x) for x in
            __import__("jax").tree_util.tree_leaves(params)]
  assert leaves and all(isinstance(x, np.ndarray) for x in leaves)
  assert not any(x.flags.writeable for x in leaves if x.size)  # Read-only.
  assert client.get_variables() is params  # Same version: not fetched.
  assert client.staleness == 0


def test_learner_node_trains_saves_and_restores(launched, ray_cluster,
                                                 tmp_path):
  ray = ray_cluster
  handles = launched(_learner_program())
  replay, learner = handles["replay"], handles["learner"]
  # Sequences of the right layout: from an actor node's adder would need a
  # whole program; the learner only needs SequenceItems, so build them with
  # the builder's adder on random steps.
  from ngu_jax.agents.ngu import builder as builder_lib  # pylint: disable=g-import-not-at-top
  from ngu_jax import envs  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  config = NGUConfig(**SMALL)
  env = envs.make(CARTPOLE, 2, seed=0)
  spec = builder_lib.make_environment_spec(env)
  builder = builder_lib.NGUBuilder(config)
  networks = builder.make_networks(spec)
  policy = builder.make_policy(networks, spec)
  writer = clients.ReplayClient(replay)
  adder = builder.make_adder(writer, spec, policy)
  source = clients.VariableClient(learner)
  actor = builder.make_actor(jax.random.PRNGKey(0), policy, spec, source,
                             adder)
  timestep = env.reset()
  for _ in range(40):
    action = actor.select_action(timestep)
    actor.observe(timestep, action)
    actor.update()
    timestep = env.step(action)
  assert ray.get(replay.info.remote())["inserted"] >= 8
  steps = ray.get(learner.run.remote(max_steps=3))
  assert steps == 3
  metrics = ray.get(learner.pop_metrics.remote())
  assert metrics["steps"] == 3 and len(metrics["metrics"]["loss"]) == 3
  version, _ = ray.get(learner.get_params_ref.remote())
  assert version == 3
  ray.get(learner.save.remote(str(tmp_path)))
  assert (tmp_path / nodes.LEARNER_FILE).exists()
  ray.get(learner.run.remote(max_steps=2))
  assert ray.get(learner.restore.remote(str(tmp_path))) == 3
  assert ray.get(learner.steps.remote()) == 3
  assert ray.get(learner.get_params_ref.remote())[0] == 3
  env.close()


def test_learner_stop_unblocks_a_waiting_run(launched, ray_cluster):
  """An empty replay: `run` waits for data and returns once stopped."""
  ray = ray_cluster
  handles = launched(_learner_program())
  learner = handles["learner"]
  ray.get(learner.steps.remote())  # Constructed.
  run = learner.run.remote()
  ready, _ = ray.wait([run], timeout=1.)
  assert not ready  # Waiting for the replay.
  learner.stop.remote()
  assert ray.get(run, timeout=30) == 0


# CI's `make test-faults` kills an actor node the same way
# (test_faults.py::test_actor_kill_restarts_it_fresh_and_loses_no_acked_insert).
@pytest.mark.slow
def test_actor_node_restart_gets_fresh_lanes(launched, ray_cluster):
  """Killing an actor's process: Ray restarts it (max_restarts) and the new
  process knows it was restarted; the counter counts the restart."""
  ray = ray_cluster
  config = NGUConfig(**SMALL)
  program = program_lib.Program("test")
  counter = program.add_node("counter", nodes.CounterNode, num_cpus=0)
  replay = program.add_node("replay", nodes.ReplayNode, config,
                            rate_limit=False, num_cpus=0)
  learner = program.add_node("learner", nodes.LearnerNode, config, CARTPOLE,
                             None, replay, num_cpus=0)
  program.add_node("actor", nodes.ActorNode, config, CARTPOLE, None, 2, 0, 1,
                   replay, learner, counter, num_cpus=0, max_restarts=1)
  handles = launched(program)
  actor = handles["actor"]
  assert ray.get(actor.run.remote(max_steps=5)) == 5
  assert not ray.get(actor.restarted.remote())
  acked = ray.get(actor.info.remote())["acked_inserts"]
  assert ray.get(handles["replay"].info.remote())["inserted"] == acked
  os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
  deadline = time.monotonic() + 60
  while True:
    try:
      assert ray.get(actor.restarted.remote(), timeout=30)
      break
    except ray.exceptions.RayActorError:
      assert time.monotonic() < deadline
      time.sleep(0.5)
  assert ray.get(actor.run.remote(max_steps=3)) == 3
  assert ray.get(handles["counter"].get_counts.remote())[
      "actor_restarts"] == 1


def test_actor_and_evaluator_nodes_track_disco_maze_coverage(launched,
                                                              ray_cluster):
  """Coverage is what the environment declares: an actor node on Disco
  Maze reports one coverage per finished episode, and the evaluator's
  coverage columns are numbers (NaN elsewhere)."""
  ray = ray_cluster
  maze = "disco_maze"
  maze_kwargs = dict(size=7, max_episode_steps=8)
  config = NGUConfig(**{**SMALL, "torso": "auto", "num_mixtures": 2,
                        "actor_update_period": 5, "grid_output_size": 16,
                        "embedding_dim": 8, "rnd_output_dim": 8,
                        "inverse_dynamics_hidden": 16})
  program = program_lib.Program("test")
  counter = program.add_node("counter", nodes.CounterNode, num_cpus=0)
  replay = program.add_node("replay", nodes.ReplayNode, config,
                            rate_limit=False, num_cpus=0)
  learner = program.add_node("learner", nodes.LearnerNode, config, maze,
                             maze_kwargs, replay, num_cpus=0)
  program.add_node("actor", nodes.ActorNode, config, maze, maze_kwargs, 3, 0,
                   1, replay, learner, counter, num_cpus=0)
  program.add_node("evaluator", nodes.EvaluatorNode, config, maze,
                   maze_kwargs, 2, learner, num_cpus=0)
  handles = launched(program)
  assert ray.get(handles["actor"].run.remote(max_steps=30)) == 30
  drained = ray.get(handles["counter"].drain.remote())
  episodes = drained["counts"]["episodes"]
  assert episodes > 0 and drained["counts"]["env_steps"] == 90
  assert len(drained["returns"]) == len(drained["coverages"]) == episodes
  assert all(0 < c <= 1 for c in drained["coverages"])
  assert len(drained["staleness"]) >= 1  # A pull every 5 steps (SMALL).
  row = ray.get(handles["evaluator"].evaluate.remote())
  assert 0 < row["eval_coverage"] <= 1
  assert 0 < row["eval_explore_coverage"] <= 1


@pytest.mark.parametrize("jit", [False, True])
def test_restore_bva_lanes_takes_saved_lanes_and_redraws_their_x(jit):
  """The saved lanes get the restored ensembles and a temperature drawn
  from them (bandits_vote.sample_x with that lane's key); the other lanes
  keep their ensembles and temperatures."""
  config = NGUConfig(behaviour_policy="boltzmann", bva_num_bandits=2,
                     bva_num_candidates=3)
  cfg = variant_policy.bva_config(config)
  init = jax.vmap(lambda k: bandits_vote.init(k, cfg))
  current = init(jax.random.split(jax.random.PRNGKey(0), 3))
  restored = init(jax.random.split(jax.random.PRNGKey(1), 3))
  restored = restored._replace(w=restored.w + 5.)  # argmax tiles move
  x = np.array([0.1, 0.2, 0.3], np.float32)
  saved = np.array([True, False, True])
  key = jax.random.PRNGKey(7)
  fn = jax.jit(nodes.restore_bva_lanes, static_argnums=0) if jit else (
      nodes.restore_bva_lanes)
  ensembles, new_x = fn(config, current,
                        x, {f: np.asarray(getattr(restored, f))
                            for f in bandits_vote.BVAState._fields},
                        saved, key)
  keys = jax.random.split(key, 3)
  for lane in range(3):
    source = restored if saved[lane] else current
    for field in bandits_vote.BVAState._fields:
      np.testing.assert_array_equal(getattr(ensembles, field)[lane],
                                    getattr(source, field)[lane])
    lane_state = jax.tree_util.tree_map(lambda a: a[lane], restored)
    want = (bandits_vote.sample_x(lane_state, keys[lane], cfg)
            if saved[lane] else x[lane])
    np.testing.assert_allclose(new_x[lane], want, rtol=1e-6)
