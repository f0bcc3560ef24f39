"""NGU's whole training loop as one compiled JAX program.

NGU App. A's actor / replay / learner cycle for a functional (pure-JAX)
environment (`ngu_jax.envs.functional.FunctionalEnv`), written as a
`jax.lax.scan` over actor steps so that XLA compiles environment, acting,
sequence adding, prioritised replay and learning into one program, and
`jax.vmap` runs several seeds in it (as purejaxrl, Stoix and xland-minigrid's
baselines do). The parts are the library's own, as in the Python loop
(`ngu_jax.loops.python.loop`): `actor.select_action` (episodic memory, RND
modulator, UVFA forward), the device sequence adder and prioritised replay
(`ngu_jax.replay.device`, the semantics of `SequenceAdder` /
`PrioritizedReplay`) and `learning.sgd_step`.

One iteration of the scan (one actor step of B lanes) does what one
iteration of the Python loop does, in the same order:

1. episode statistics of the timestep just received (returns, successes,
   episode coverage, grid visits);
2. `select_action` with the parameters the actor holds, then the step goes
   to the adder and the sequences it completes to the replay at maximum
   priority;
3. the actor pulls the learner's parameters after every
   `actor_update_period`-th step (Table 6);
4. the environment steps (auto-reset);
5. once the replay holds `min_replay_size` sequences (checked every actor
   step, as the Python loop does), the learner runs while
   `pacing.learner_step_due` holds (`learner_steps * batch_size <=
   samples_per_env_step * (env_steps - env_steps_when_ready)`): the rule
   every loop shares (`ngu_jax.loops.pacing`; a `lax.while_loop`; sampled
   with `p^0.9`, new priorities written back).

Where the Python loop checks the pacing after every actor step, the
compiled loop checks it after every `learner_period` actor steps (a block:
K actor steps, then the learner catches up), so its learner steps come in
groups of about `learner_period * B * samples_per_env_step / batch_size`
(`learner_period_for` picks K for about 8 per group). The
reason is `vmap` over seeds: seeds reach `min_replay_size` at different
steps, so their learner steps fall on different actor steps, and a batched
`while_loop` runs the learner for all seeds whenever one seed needs it
(measured on the Disco Maze laptop config, 8 seeds: 2.5x the learning
work when checked every step). With blocks, a seed waits at most K actor
steps for its learner steps and wastes at most one per block.

`CompiledLoop.run_chunk` scans `steps_per_chunk` actor steps in blocks of
K (the last one shorter if K does not divide it); the host
(`ngu_jax.loops.compiled.runner`) calls chunks, writes metrics between them
and checkpoints the whole `TrainState` (a pytree of arrays), so resuming is
exact. `evaluate` plays one episode per lane with the exploit (j = 0) and
most exploratory (j = N - 1) mixtures inside the program, from fresh
evaluation actors that start from the training lanes' running statistics
(`actor.with_training_statistics`: without them the network's r^i input is
off its training range for the whole single episode). `make_train`
composes all of it into one `train(key)` function, to jit and vmap over
seeds.

Counters are int32 (exact up to 2^31 env steps); the pacing compares
float32 products, exact while `learner_steps * batch_size` and
`samples_per_insert * env_steps / replay_period` stay below 2^24 (16.7M
sampled sequences), and otherwise off by at most one learner step.
"""

import dataclasses
import functools
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from ngu_jax.agents.ngu import diagnostics
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.agents.ngu import builder as builder_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.envs import base as env_base
from ngu_jax.envs import functional
from ngu_jax.loops import pacing
from ngu_jax.loops.compiled import state as state_lib
from ngu_jax.loops.compiled.state import Counters
from ngu_jax.loops.compiled.state import LEARNER_METRICS
from ngu_jax.loops.compiled.state import TrainState
from ngu_jax.meta import sliding_window_ucb as ucb
from ngu_jax.replay import adder as adder_lib
from ngu_jax.replay import device

def fit_memory_to_episodes(config: NGUConfig,
                           max_episode_steps: int) -> NGUConfig:
  """The config with the episodic memory no larger than one episode.

  With the memory wiped at every episode (`memory_wipe_period` 1), an
  episode of at most n steps writes at most n + 1 embeddings, so a ring of
  min(capacity, n + 1) slots never overwrites and every k-NN query sees the
  same entries: the results are unchanged, but each step's k-NN scan (over
  all slots, filled or not) costs (n + 1) / capacity as much.
  """
  if config.memory_wipe_period != 1:
    return config
  capacity = min(config.memory_capacity, int(max_episode_steps) + 1)
  return dataclasses.replace(config, memory_capacity=capacity)


class CompiledLoop(NamedTuple):
  """Pure pieces of the compiled loop (build with `make_compiled_loop`).

  Attributes:
    init: key -> TrainState.
    run_chunk: TrainState -> TrainState, `steps_per_chunk` actor steps.
    evaluate: (TrainState, key) -> (dict of float32 scalars "return_j0",
      "success_j0" (the fraction of episodes with a positive return),
      "coverage_j0", "success_jN", "return_jN", "coverage_jN", "intrinsic_j0",
      "intrinsic_jN" (mean r^i of the episodes' steps) and int32 "visits_j0",
      "visits_jN" [H, W] (one episode per lane; module docstring), and with
      Agent57's meta-controller int32 "arm" and float32 "return_bandit"
      (the evaluator bandit's arm and its evaluation), TrainState with the
      evaluator bandit updated).
    reset_stats: TrainState -> TrainState with zeroed `ChunkStats`.
    sample_batch: (TrainState, key) -> a prioritised `SequenceBatch` of
      `config.batch_size` sequences (as the learner samples it).
    learn_on_replay: (num_updates, TrainState) -> TrainState after
      `num_updates` (a Python int) learner steps on the stored replay, with
      no env steps (the learner's own sampling, priorities and target
      refresh; `experiments.probes.replay_refit`).
    config: the config used (episodic memory fitted to the episodes).
    networks: the agent's networks.
    env: the functional environment.
    num_lanes: B.
    steps_per_chunk: actor steps per `run_chunk`.
    learner_period: K, actor steps between two learner phases.
  """
  init: Callable[[jax.Array], TrainState]
  run_chunk: Callable[[TrainState], TrainState]
  evaluate: Callable[[TrainState, jax.Array],
                     Tuple[Dict[str, jax.Array], TrainState]]
  reset_stats: Callable[[TrainState], TrainState]
  sample_batch: Callable[[TrainState, jax.Array], Any]
  learn_on_replay: Callable[[int, TrainState], TrainState]
  config: NGUConfig
  networks: networks_lib.NGUNetworks
  env: functional.FunctionalEnv
  num_lanes: int
  steps_per_chunk: int
  learner_period: int


def learner_period_for(config: NGUConfig, num_lanes: int,
                       learner_steps: float = 8.) -> int:
  """K such that about `learner_steps` learner steps fall due every K actor
  steps at the config's pacing (at least 1)."""
  per_actor_step = (num_lanes * pacing.samples_per_env_step(config)
                    / config.batch_size)
  if per_actor_step <= 0:
    return 1
  return max(1, int(round(learner_steps / per_actor_step)))


def _tree_where(condition: jax.Array, new, old):
  return jax.tree_util.tree_map(lambda n, o: jnp.where(condition, n, o),
                                new, old)


def make_compiled_loop(config: NGUConfig, env: functional.FunctionalEnv,
                       num_lanes: int, steps_per_chunk: int = 100,
                       networks: Optional[networks_lib.NGUNetworks] = None,
                       learner_period: Optional[int] = None
                       ) -> CompiledLoop:
  """Builds the compiled loop's pure pieces (module docstring).

  Args:
    config: the agent's config. Its episodic memory is fitted to the
      environment's episodes (`fit_memory_to_episodes`).
    env: a `FunctionalEnv` (one lane; vmapped over `num_lanes` here).
    num_lanes: B, training lanes (and evaluation lanes).
    steps_per_chunk: actor steps per `run_chunk` (B env steps each): blocks
      of `learner_period` actor steps, the last one shorter if need be.
    networks: the agent's networks; default
      `networks.make_networks(config, observation shape, A, encoding)`.
    learner_period: K, actor steps between learner phases (module
      docstring); default `learner_period_for(config, num_lanes)`, capped at
      `steps_per_chunk`.

  Returns:
    A `CompiledLoop`. Nothing is jitted here: jit (and vmap over seeds)
    `init`, `run_chunk` and `evaluate` as needed (`make_train` does).

  Raises:
    ValueError: bad `num_lanes` / `steps_per_chunk`, or an environment that
      is not a `FunctionalEnv`.
  """
  where = "loops.compiled.make_compiled_loop"
  if not isinstance(env, functional.FunctionalEnv):
    raise ValueError(f"{where}: `env` must be a FunctionalEnv (e.g. from "
                     f"ngu_jax.envs.make_functional), got {type(env).__name__}.")
  num_lanes = env_base.check_positive_int(num_lanes, "num_lanes", where)
  steps_per_chunk = env_base.check_positive_int(steps_per_chunk,
                                                "steps_per_chunk", where)
  if learner_period is None:
    learner_period = min(learner_period_for(config, num_lanes),
                         steps_per_chunk)
  learner_period = env_base.check_positive_int(learner_period,
                                               "learner_period", where)
  config = fit_memory_to_episodes(config, env.max_episode_steps)
  if networks is None:
    networks = networks_lib.make_networks(
        config, env.observation_spec().shape, env.num_actions,
        encoding=env.observation_encoding())
  parts = _Parts(config, networks, env, num_lanes)
  return CompiledLoop(
      init=parts.init,
      run_chunk=functools.partial(parts.run_chunk, learner_period,
                                  steps_per_chunk),
      evaluate=parts.evaluate, reset_stats=parts.reset_stats,
      sample_batch=parts.sample_batch,
      learn_on_replay=parts.learn_on_replay, config=config,
      networks=networks, env=env, num_lanes=num_lanes,
      steps_per_chunk=steps_per_chunk, learner_period=learner_period)


def _learner_carry(state: TrainState) -> state_lib.LearnerCarry:
  """What the learner's loop carries of `state` (the items stay outside)."""
  return state_lib.LearnerCarry(
      learner=state.learner, replay=state.replay._replace(items=None),
      key=state.key, learner_sums=state.stats.learner_sums,
      counters=state.counters)


def _with_learner_carry(state: TrainState, carry: state_lib.LearnerCarry
                        ) -> TrainState:
  """`state` with what the learner's loop changed."""
  return state._replace(
      learner=carry.learner,
      replay=carry.replay._replace(items=state.replay.items),
      key=carry.key, counters=carry.counters,
      stats=state.stats._replace(learner_sums=carry.learner_sums))


class _Parts:
  """The loop's functions, closed over config, networks, env and B."""

  def __init__(self, config: NGUConfig, networks: networks_lib.NGUNetworks,
               env: functional.FunctionalEnv, num_lanes: int):
    self.config, self.networks, self.env = config, networks, env
    self.num_lanes = num_lanes
    builder = builder_lib.NGUBuilder(config)
    self.adder = builder.make_device_adder(num_lanes)
    self.replay = builder.make_device_replay()
    self.betas = config.mixture_betas()

  # ------------------------------------------------------------------ init

  def _reset_lanes(self, key: jax.Array):
    keys = jax.random.split(key, self.num_lanes)
    return jax.vmap(self.env.reset)(keys)

  def _adder_template(self, actor_state: actor_lib.ActorState,
                      timestep: env_base.TimeStep) -> adder_lib.AdderStep:
    action = jnp.zeros((self.num_lanes,), jnp.int32)
    return actor_lib.adder_step(
        timestep.observation, action, timestep.reward, timestep.discount,
        timestep.step_type == env_base.StepType.FIRST,
        actor_state.extras._asdict())

  def init(self, key: jax.Array) -> TrainState:
    """A fresh run of one seed: lanes reset, empty replay, new learner."""
    learner_key, actor_key, env_key, key = jax.random.split(key, 4)
    env_state, timestep = self._reset_lanes(env_key)
    learner_state = learning.init_learner(self.config, self.networks,
                                          learner_key)
    actor_state = actor_lib.init(self.config, self.networks, actor_key,
                                 self.num_lanes)
    adder_state = self.adder.init(self._adder_template(actor_state, timestep))
    item_template = jax.eval_shape(
        lambda s, st: jax.tree_util.tree_map(
            lambda x: x[0], self.adder.add(s, st)[1]),
        adder_state, self._adder_template(actor_state, timestep))
    zero = jnp.zeros((), jnp.int32)
    return TrainState(
        env_state=env_state, timestep=timestep,
        episode_return=jnp.zeros((self.num_lanes,), jnp.float32),
        actor=actor_state, actor_params=learner_state.params,
        adder=adder_state, replay=self.replay.init(item_template),
        learner=learner_state, key=key,
        counters=Counters(env_steps=zero, actor_steps=zero,
                          learner_steps=zero, episodes=zero,
                          ready_at=jnp.full((), -1, jnp.int32)),
        stats=state_lib.zero_stats(self.env),
        eval_bandit=(ucb.init(self.config.meta.eval_window)
                     if self.config.has_meta_controller else None))

  def reset_stats(self, state: TrainState) -> TrainState:
    return state._replace(stats=state_lib.zero_stats(self.env))

  # ---------------------------------------------------------------- acting

  def _act(self, state: TrainState) -> TrainState:
    """Steps 2-4 of the module docstring."""
    config, ts = self.config, state.timestep
    first = ts.step_type == env_base.StepType.FIRST
    action, actor_state = actor_lib.select_action(
        config, self.networks, state.actor_params, state.actor,
        ts.observation, ts.reward.astype(jnp.float32), first)
    extras = actor_state.extras
    actor_sums = state.stats.actor_sums + diagnostics.actor_step_sums(
        extras._asdict(), first, self.betas)
    cells = state_lib.add_cells(state.stats.cells, ts, extras._asdict(),
                                action, config.num_mixtures)
    adder_state, items, valid = self.adder.add(
        state.adder, actor_lib.adder_step(
            ts.observation, action, ts.reward, ts.discount, first,
            extras._asdict()))
    replay_state = self.replay.add(state.replay, items, valid)
    actor_steps = state.counters.actor_steps + 1
    pull = actor_steps % config.actor_update_period == 0
    actor_params = _tree_where(pull, state.learner.params,
                               state.actor_params)
    env_state, timestep = jax.vmap(self.env.step)(state.env_state, action)
    counters = state.counters._replace(
        actor_steps=actor_steps,
        env_steps=state.counters.env_steps + self.num_lanes)
    return state._replace(
        env_state=env_state, timestep=timestep, actor=actor_state,
        actor_params=actor_params, adder=adder_state, replay=replay_state,
        counters=counters, stats=state.stats._replace(actor_sums=actor_sums,
                                                      cells=cells))

  # -------------------------------------------------------------- learning

  def _learner_due(self, carry: state_lib.LearnerCarry) -> jax.Array:
    c = carry.counters
    # int32 learner steps against float32 env steps: compared in float32.
    return (c.ready_at >= 0) & pacing.learner_step_due(
        self.config, c.learner_steps,
        (c.env_steps - c.ready_at).astype(jnp.float32))

  def _sample(self, replay_state, key: jax.Array):
    indices, items, weights = self.replay.sample(
        replay_state, key, self.config.batch_size)
    return indices, device.to_sequence_batch(items, weights)

  def sample_batch(self, state: TrainState, key: jax.Array):
    return self._sample(state.replay, key)[1]

  def _learner_step(self, items: Any, carry: state_lib.LearnerCarry
                    ) -> state_lib.LearnerCarry:
    """One `sgd_step` on a prioritised sample; priorities written back."""
    key, sample_key = jax.random.split(carry.key)
    replay_state = carry.replay._replace(items=items)
    indices, batch = self._sample(replay_state, sample_key)
    learner_state, priorities, metrics = learning.sgd_step(
        self.config, self.networks, carry.learner, batch)
    replay_state = self.replay.update_priorities(
        replay_state, indices,
        jnp.maximum(priorities, learning.MIN_PRIORITY))
    # Metrics this config's learner does not report (Agent57's q_extrinsic
    # without split values) sum to 0; `learner_summary` shows them as NaN.
    values = jnp.stack([
        metrics[name].astype(jnp.float32) if name in metrics
        else jnp.float32(0.) for name in LEARNER_METRICS] + [jnp.float32(1.)])
    return state_lib.LearnerCarry(
        learner=learner_state, replay=replay_state._replace(items=None),
        key=key, learner_sums=carry.learner_sums + values,
        counters=carry.counters._replace(
            learner_steps=carry.counters.learner_steps + 1))

  def _mark_ready(self, state: TrainState) -> TrainState:
    """Notes the env steps at which the replay first holds min size."""
    c = state.counters
    size = device.replay_size(state.replay)
    ready = (c.ready_at < 0) & pacing.is_ready(self.config, size)
    return state._replace(counters=c._replace(
        ready_at=jnp.where(ready, c.env_steps, c.ready_at)))

  def _learn(self, state: TrainState) -> TrainState:
    """Step 5 of the module docstring.

    The while loop carries only what learning changes (learner state,
    priorities, key, counters, sums) and reads the stored items from
    outside: under `vmap` a batched loop selects its whole carry at every
    iteration, and copying the replay's storage there would cost more than
    the learning.
    """
    carry = jax.lax.while_loop(
        self._learner_due,
        functools.partial(self._learner_step, state.replay.items),
        _learner_carry(state))
    return _with_learner_carry(state, carry)

  def learn_on_replay(self, num_updates: int, state: TrainState
                      ) -> TrainState:
    """`num_updates` learner steps on the stored replay and no env steps:
    `_learner_step` as `_learn` runs it (prioritised samples, priorities
    written back, the target network on its period), without the pacing
    rule."""
    carry = jax.lax.fori_loop(
        0, num_updates,
        lambda _, c: self._learner_step(state.replay.items, c),
        _learner_carry(state))
    return _with_learner_carry(state, carry)

  def _iteration(self, state: TrainState, _) -> Any:
    state = state_lib.episode_stats(state)
    state = self._act(state)
    return self._mark_ready(state), None

  def _block(self, period: int, state: TrainState, _) -> Any:
    state, _ = jax.lax.scan(self._iteration, state, None, length=period)
    return self._learn(state), None

  def run_chunk(self, period: int, steps: int,
                state: TrainState) -> TrainState:
    """`steps` actor steps: blocks of `period`, then one shorter block."""
    blocks, rest = divmod(steps, period)
    state, _ = jax.lax.scan(functools.partial(self._block, period), state,
                            None, length=blocks)
    if rest:
      state, _ = self._block(rest, state, None)
    return state

  # ------------------------------------------------------------ evaluation

  def _evaluation_actor(self, source: actor_lib.ActorState, key: jax.Array,
                        mixture: Any) -> actor_lib.ActorState:
    """A fresh evaluation actor of mixture j (an int or a traced int32
    scalar) with the training lanes' running statistics
    (`actor.with_training_statistics`)."""
    if isinstance(mixture, int):
      state = actor_lib.init(self.config, self.networks, key, self.num_lanes,
                             evaluation=True, eval_mixture_index=mixture)
    else:
      state = actor_lib.init(self.config, self.networks, key, self.num_lanes,
                             evaluation=True)
      state = state._replace(mixture_index=jnp.full(
          (self.num_lanes,), mixture, jnp.int32))
    return actor_lib.with_training_statistics(state, source)

  def _evaluate_mixture(self, params: networks_lib.NGUParams, key: jax.Array,
                        mixture: Any, source: actor_lib.ActorState
                        ) -> Dict[str, jax.Array]:
    """One episode per lane with mixture j (`loops.evaluation.evaluate`);
    j an int or a traced int32 scalar; `source`: the training lanes' actor
    state, whose running statistics the evaluator starts from."""
    env_key, actor_key = jax.random.split(key)
    env_state, timestep = self._reset_lanes(env_key)
    actor_state = self._evaluation_actor(source, actor_key, mixture)
    b = self.num_lanes
    carry = (env_state, timestep, actor_state, jnp.zeros((b,), bool),
             jnp.zeros((b,), jnp.float32), jnp.full((b,), jnp.nan),
             jnp.zeros(state_lib.visits_shape(self.env), jnp.int32),
             jnp.zeros((2,), jnp.float32))

    def not_done(carry):
      return ~jnp.all(carry[3])

    def body(carry):
      env_state, ts, actor_state, done, ret, cov, visits, intrinsic = carry
      first = ts.step_type == env_base.StepType.FIRST
      last = ts.step_type == env_base.StepType.LAST
      live = ~done & ~first
      ret = ret + jnp.where(live, ts.reward, 0.)
      if "coverage" in ts.extras:
        cov = jnp.where(live & last, ts.extras["coverage"], cov)
      visits = state_lib.add_visits(visits, ts, ~done)
      done = done | last
      action, actor_state = actor_lib.select_action(
          self.config, self.networks, params, actor_state, ts.observation,
          ts.reward.astype(jnp.float32), first)
      # r^i of the episodes' steps after x_0 (x_0's is 0 by definition).
      intrinsic = intrinsic + jnp.stack([
          jnp.sum(jnp.where(live, actor_state.extras.intrinsic_reward, 0.)),
          jnp.sum(live.astype(jnp.float32))])
      env_state, ts = jax.vmap(self.env.step)(env_state, action)
      return env_state, ts, actor_state, done, ret, cov, visits, intrinsic

    _, _, _, _, ret, cov, visits, intrinsic = jax.lax.while_loop(
        not_done, body, carry)
    return {"return": jnp.mean(ret), "success": jnp.mean(ret > 0),
            "coverage": jnp.mean(cov), "visits": visits, "returns": ret,
            "intrinsic": intrinsic[0] / jnp.maximum(intrinsic[1], 1.)}

  def evaluate(self, state: TrainState, key: jax.Array
               ) -> Tuple[Dict[str, jax.Array], TrainState]:
    config = self.config
    last = config.num_mixtures - 1
    key_0, key_n = jax.random.split(key)
    out = {}
    for name, j, k in (("j0", 0, key_0), ("jN", last, key_n)):
      result = self._evaluate_mixture(state.learner.params, k, j, state.actor)
      del result["returns"]
      out.update({f"{field}_{name}": value
                  for field, value in result.items()})
    if state.eval_bandit is not None:
      # Agent57's evaluator bandit (`loops.evaluation.EvaluatorBandit`): one
      # arm for all evaluation lanes, each lane's return one episode of it.
      arm_key, play_key = jax.random.split(jax.random.fold_in(key, 2))
      arm = ucb.select(state.eval_bandit, arm_key, config.num_mixtures,
                       config.meta.eval_epsilon, config.meta.eval_beta,
                       episodes_per_pull=self.num_lanes)
      result = self._evaluate_mixture(state.learner.params, play_key, arm,
                                      state.actor)
      out["arm"] = arm
      out["return_bandit"] = result["return"]
      state = state._replace(eval_bandit=ucb.update_many(
          state.eval_bandit, arm, result["returns"], config.num_mixtures))
    return out, state


def make_train(config: NGUConfig, env: functional.FunctionalEnv,
               num_lanes: int, total_env_steps: int,
               steps_per_chunk: int = 100,
               learner_period: Optional[int] = None
               ) -> Callable[[jax.Array], Any]:
  """The whole training run as one function: `train(key) -> (state, metrics)`.

  `train` initialises a run, scans `ceil(total_env_steps / (B
  steps_per_chunk))` chunks and returns the final `TrainState` and the
  per-chunk `chunk_metrics` stacked on a leading [num_chunks] axis (stats
  reset after each chunk). Jit it, and vmap it over keys for seeds:

    train = jax.jit(jax.vmap(make_train(config, env, 16, 100_000)))
    states, metrics = train(jax.random.split(jax.random.PRNGKey(0), 8))

  (`ngu_jax.loops.compiled.runner` drives the same pieces chunk by chunk
  from the host instead, to log, evaluate and checkpoint between chunks.)
  """
  loop = make_compiled_loop(config, env, num_lanes, steps_per_chunk,
                            learner_period=learner_period)
  per_chunk = num_lanes * loop.steps_per_chunk
  num_chunks = -(-int(total_env_steps) // per_chunk)

  def chunk(state, _):
    state = loop.run_chunk(state)
    return loop.reset_stats(state), state_lib.chunk_metrics(state)

  def train(key: jax.Array):
    state = loop.init(key)
    return jax.lax.scan(chunk, state, None, length=num_chunks)

  return train

