r"""Does f see the controllable state, and does its reward favour exploring?

NGU's episodic reward (Sec. 2, Alg. 1) counts visits to *controllable
states* f(x): f is trained by inverse dynamics, p(a_t | f(x_t), f(x_{t+1})),
so it should keep what the agent's actions change and drop what they do not.
Random Disco Maze (Sec. 4.1) tests exactly that: every step each wall cell
gets a fresh colour out of five, so an f that encodes the colours makes
every observation novel, including oscillating between two cells, while an
f that ignores them rewards reaching new cells only. Sec. 4.1 explains the
advantage of the learned f over a fixed random projection this way.

For the embedding parameters of trained runs (the compiled loop's
checkpoint) this probe measures, on fresh random mazes:

1. Colour invariance. For a random free position p, a free neighbour q
   (one controllable step) and independent wall colourings a, b, c:
   D_colour = mean ||f(x(p, a)) - f(x(p, b))||^2 (only the distractor
   changed) and D_move = mean ||f(x(p, a)) - f(x(q, c))||^2. The ratio
   D_move / D_colour is the controllable signal over the distractor: about
   1 for a random projection, large for an f that ignores colours.
2. The episodic reward (`ngu_jax.intrinsic.episodic.step`, with the agent's
   `variants.intrinsic.episodic_memory_config`) per step under three scripted policies
   that never hit a wall: `oscillate` (between the start and one free
   neighbour), `explore` (a depth-first traversal of the free cells:
   an unvisited free neighbour if any, else one step back along the path)
   and `random` (uniform over the free neighbours). Each lane keeps ONE
   memory state over E episodes of T observations, each on a new maze, as
   the actor does: the memory is wiped at every episode start
   (`episodic.reset`) but d_m^2 (Alg. 1 line 6) survives, so every policy
   is scored under the distance statistics its own behaviour produces. The
   first episode (d_m^2 warming up) is skipped in the means. If the reward
   of `explore` is not clearly above that of `oscillate`, the reward itself
   does not separate the behaviours; if it is, the bottleneck is the RL.
3. With `--warmup-episodes W`, the same rewards after W episodes of random
   walks on each lane (columns `warm_*`): d_m^2 then starts from a
   behaviour-neutral scale, which a lifetime average
   (`--distance-horizon 0`) keeps and a short moving average forgets. An f
   with residual colour noise (D_colour > 0) shows the difference: under its
   own statistics an oscillating policy normalises its small k-NN distances
   by their own mean and earns about as much as an exploring one.
4. With `--offline-updates U`, a reference row: f trained by inverse
   dynamics alone, with the agent's optimiser and batch, on uniformly
   random legal moves (`train_offline`): how invariant f can become in U
   updates on data that covers the maze evenly.

With `--fresh-f`, runs that learned f also get a reference row with freshly
initialised parameters of the same network (a random projection).

Usage:
  python -m experiments.probes.controllable_state RUN_DIR [RUN_DIR ...] \
      [--output runs/controllable_state_probe] [--mazes 32] [--episodes 8] \
      [--steps 60] [--seed 0] [--size S] [--fresh-f] \
      [--warmup-episodes W] [--distance-horizon H] [--offline-updates U]

A RUN_DIR is a compiled-loop output directory (with `checkpoint/`), or a
`seed_<s>` directory of a multi-seed run (the checkpoint is its parent's).
Writes `probe.csv` and `probe.md` in `--output` and prints the table.
"""

import argparse
import csv
import dataclasses
import os
import sys
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ngu_jax import envs
from ngu_jax import npz_io as ckpt_lib
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.envs import disco_maze
from ngu_jax.intrinsic import episodic
from ngu_jax.loops.compiled import loop as compiled
from ngu_jax.agents.ngu.variants import intrinsic as variant_intrinsic

POLICIES = ("oscillate", "explore", "random")
DEFAULT_SIZE = 11
COLUMNS = ("variant", "seed", "learn_embedding", "f", "horizon", "d_move",
           "d_colour", "ratio", "reward_oscillate", "reward_explore",
           "reward_random", "explore_over_oscillate", "warm_reward_oscillate",
           "warm_reward_explore", "warm_reward_random",
           "warm_explore_over_oscillate")

EmbedFn = Callable[[np.ndarray], Any]  # uint8 [B, S, S, 3] -> [B, p]


# ------------------------------------------------------------- rendering


def render(walls: np.ndarray, positions: np.ndarray,
           rng: np.random.Generator) -> np.ndarray:
  """Disco Maze observations with fresh wall colours (NGU Sec. 4.1).

  Draws what `DiscoMaze._render` draws: pathways black, every wall cell a
  uniformly random colour of `disco_maze.WALL_COLOURS` (per cell and lane),
  the agent green.

  Args:
    walls: bool [B, S, S], True on walls.
    positions: the agent's (row, col), int [B, 2].
    rng: numpy Generator for the colours.

  Returns:
    uint8 [B, S, S, 3].
  """
  walls = np.asarray(walls, bool)
  b, s, _ = walls.shape
  code = rng.integers(1, 1 + len(disco_maze.WALL_COLOURS), (b, s, s),
                      dtype=np.uint8)
  code *= walls.view(np.uint8)
  positions = np.asarray(positions)
  # pylint: disable=protected-access
  code[np.arange(b), positions[:, 0], positions[:, 1]] = (
      disco_maze._AGENT_CODE)
  return np.take(disco_maze._PALETTE, code, axis=0)
  # pylint: enable=protected-access


def free_neighbours(walls: np.ndarray, position) -> List[np.ndarray]:
  """The free cells one move away, in action order (up, down, left, right).

  Args:
    walls: bool [S, S] of one maze.
    position: (row, col).

  Returns:
    A list of int32 [2] positions (a perfect maze's free cell has >= 1).
  """
  out = []
  for move in disco_maze._MOVES:  # pylint: disable=protected-access
    q = np.asarray(position, np.int32) + move
    if (0 <= q[0] < walls.shape[0] and 0 <= q[1] < walls.shape[1]
        and not walls[q[0], q[1]]):
      out.append(q)
  return out


# ---------------------------------------------------- 1. colour invariance


def measure_invariance(embed_fn: EmbedFn, walls: np.ndarray,
                       rng: np.random.Generator,
                       repeats: int = 4) -> Dict[str, float]:
  """D_move, D_colour and their ratio (module docstring, item 1).

  Args:
    embed_fn: f, uint8 observations [N, S, S, 3] -> embeddings [N, p].
    walls: bool [B, S, S], B mazes (each with >= 2 free cells).
    rng: numpy Generator (positions, neighbours, colours).
    repeats: samples (p, q, three colourings) per maze.

  Returns:
    {"d_move", "d_colour", "ratio"}: mean squared distances over B * repeats
    samples; ratio = d_move / d_colour (inf if d_colour is 0 < d_move).
  """
  walls = np.asarray(walls, bool)
  p_list, q_list, maze = [], [], []
  for _ in range(repeats):
    for i, w in enumerate(walls):
      free = np.argwhere(~w)
      p = free[rng.integers(len(free))]
      options = free_neighbours(w, p)
      p_list.append(p)
      q_list.append(options[rng.integers(len(options))])
      maze.append(i)
  w = walls[np.array(maze)]
  p, q = np.array(p_list), np.array(q_list)
  n = len(p)
  obs = np.concatenate([render(w, p, rng), render(w, p, rng),
                        render(w, q, rng)])
  e = np.asarray(embed_fn(obs), np.float64).reshape(3 * n, -1)
  e_a, e_b, e_c = e[:n], e[n:2 * n], e[2 * n:]
  d_colour = float(np.mean(np.sum((e_a - e_b) ** 2, axis=-1)))
  d_move = float(np.mean(np.sum((e_a - e_c) ** 2, axis=-1)))
  return {"d_move": d_move, "d_colour": d_colour,
          "ratio": _ratio(d_move, d_colour)}


def _ratio(a: float, b: float) -> float:
  if b > 0:
    return a / b
  return float("inf") if a > 0 else float("nan")


# ------------------------------------------------------- scripted walks


def scripted_walk(walls: np.ndarray, start, policy: str, num_steps: int,
                  rng: np.random.Generator) -> np.ndarray:
  """Positions of one scripted episode that never enters a wall.

  Args:
    walls: bool [S, S] of one maze.
    start: (row, col) of a free cell.
    policy: "oscillate" (start <-> one random free neighbour), "explore"
      (depth-first traversal: a random unvisited free neighbour if any, else
      one step back along the path; once every free cell is visited it
      starts a new traversal from where it stands) or "random" (a uniformly
      random free neighbour each step).
    num_steps: T, the number of positions (the start included).
    rng: numpy Generator.

  Returns:
    int32 [T, 2]; consecutive positions are one legal move apart.
  """
  if policy not in POLICIES:
    raise ValueError(f"scripted_walk: `policy` must be one of {POLICIES}, "
                     f"got {policy!r}.")
  position = np.asarray(start, np.int32)
  path = [position]
  if policy == "oscillate":
    options = free_neighbours(walls, position)
    other = options[rng.integers(len(options))]
    return np.array([position if t % 2 == 0 else other
                     for t in range(num_steps)], np.int32)
  visited = {tuple(position)}
  stack = [position]
  while len(path) < num_steps:
    options = free_neighbours(walls, position)
    if policy == "random":
      position = options[rng.integers(len(options))]
    else:
      fresh = [q for q in options if tuple(q) not in visited]
      if fresh:
        position = fresh[rng.integers(len(fresh))]
        stack.append(position)
      elif len(stack) > 1:
        stack.pop()
        position = stack[-1]
      else:  # Traversal complete: start another one from here.
        visited, stack = {tuple(position)}, [position]
        continue
      visited.add(tuple(position))
    path.append(position)
  return np.array(path, np.int32)


def scripted_rewards(embed_fn: EmbedFn,
                     memory_config: episodic.EpisodicMemoryConfig,
                     walls: np.ndarray, starts: np.ndarray,
                     policy: Union[str, Sequence[str]],
                     num_steps: int, rng: np.random.Generator) -> np.ndarray:
  """Episodic rewards of a scripted policy, memory carried as the actor does.

  Every lane b runs E episodes of T observations, episode e on maze
  walls[e, b]; one `episodic` state per lane, wiped at each episode start
  (`episodic.reset`, which keeps d_m^2), queried and written once per
  observation (NGU Alg. 1). The capacity is cut to T when larger: an
  episode writes T embeddings, so nothing is overwritten either way and the
  rewards are the same (`compiled.fit_memory_to_episodes`).

  Args:
    embed_fn: f, uint8 observations [N, S, S, 3] -> embeddings [N, p].
    memory_config: the agent's episodic-memory config.
    walls: bool [E, B, S, S].
    starts: int [E, B, 2], free start cells.
    policy: one of `POLICIES` (`scripted_walk`), or one per episode [E].
    num_steps: T, observations per episode.
    rng: numpy Generator (walks and colours).

  Returns:
    float32 [E, T, B], r_t^episodic of every observation (0 at t = 0: the
    memory is empty).
  """
  walls = np.asarray(walls, bool)
  num_episodes, b = walls.shape[:2]
  policies = ([policy] * num_episodes if isinstance(policy, str)
              else list(policy))
  if len(policies) != num_episodes:
    raise ValueError(f"scripted_rewards: {len(policies)} policies for "
                     f"{num_episodes} episodes.")
  config = dataclasses.replace(
      memory_config, capacity=min(memory_config.capacity, num_steps))
  run_episode = _episode_fn(config)
  state = None
  out = []
  for e in range(num_episodes):
    paths = np.stack([scripted_walk(walls[e, i], starts[e, i], policies[e],
                                    num_steps, rng) for i in range(b)],
                     axis=1)  # [T, B, 2]
    obs = np.concatenate([render(walls[e], paths[t], rng)
                          for t in range(num_steps)])  # [T * B, S, S, 3]
    embeddings = jnp.asarray(embed_fn(obs), jnp.float32)
    embeddings = embeddings.reshape(num_steps, b, -1)
    if state is None:
      state = episodic.init(config, b, embeddings.shape[-1])
    state = episodic.reset(state, jnp.ones((b,), bool))
    rewards, state = run_episode(state, embeddings)
    out.append(np.asarray(rewards))
  return np.stack(out)


def _episode_fn(config: episodic.EpisodicMemoryConfig):
  """Jitted (state, embeddings [T, B, p]) -> (rewards [T, B], state)."""
  def run(state, embeddings):
    def body(s, x):
      r, s = episodic.step(config, s, x)
      return s, r
    state, rewards = jax.lax.scan(body, state, embeddings)
    return rewards, state
  return jax.jit(run)


def policy_rewards(embed_fn: EmbedFn,
                   memory_config: episodic.EpisodicMemoryConfig,
                   size: int, num_mazes: int, num_episodes: int,
                   num_steps: int, seed: int, warmup_episodes: int = 0,
                   prefix: str = "") -> Dict[str, float]:
  """Mean episodic reward per step of each policy.

  All policies see the same mazes and starts (from `seed`). Without warm-up
  each policy is scored under the d_m^2 its own walks produce, the first
  episode (d_m^2 warming up) skipped. With `warmup_episodes` W > 0 every
  lane first walks W episodes of `random` and each policy is then scored on
  all its E episodes: d_m^2 starts from the scale of a behaviour-neutral
  walk, and how much of it survives depends on the memory's
  `distance_horizon` (a lifetime average keeps it; a 1000-distance moving
  average forgets it within ~100 steps).

  Returns:
    {prefix + "reward_<policy>": mean over the scored episodes, steps and
    lanes} and prefix + "explore_over_oscillate".
  """
  total = warmup_episodes + num_episodes
  walls, starts = disco_maze.generate_mazes(
      np.random.default_rng(seed), total * num_mazes, size)
  walls = walls.reshape(total, num_mazes, size, size)
  starts = starts.reshape(total, num_mazes, 2)
  out = {}
  for i, policy in enumerate(POLICIES):
    rewards = scripted_rewards(
        embed_fn, memory_config, walls, starts,
        ["random"] * warmup_episodes + [policy] * num_episodes, num_steps,
        np.random.default_rng([seed, i]))
    skip = warmup_episodes if warmup_episodes else min(1, num_episodes - 1)
    out[f"{prefix}reward_{policy}"] = float(np.mean(rewards[skip:]))
  out[f"{prefix}explore_over_oscillate"] = _ratio(
      out[f"{prefix}reward_explore"], out[f"{prefix}reward_oscillate"])
  return out


# ---------------------------------------- 4. f trained offline (reference)


def random_transitions(walls: np.ndarray, num: int,
                       rng: np.random.Generator):
  """Uniformly random legal moves in random mazes, freshly coloured.

  Args:
    walls: bool [M, S, S], the mazes to draw from.
    num: N, transitions.
    rng: numpy Generator.

  Returns:
    (x_t uint8 [N, S, S, 3], x_tp1 uint8 [N, S, S, 3], a_t int32 [N]):
    the agent on a uniform free cell of a uniform maze, then one uniform
    move among those that do not hit a wall.
  """
  maze = rng.integers(len(walls), size=num)
  p = np.zeros((num, 2), np.int32)
  q = np.zeros((num, 2), np.int32)
  a = np.zeros((num,), np.int32)
  for i, m in enumerate(maze):
    free = np.argwhere(~walls[m])
    p[i] = free[rng.integers(len(free))]
    legal = [j for j, move in enumerate(disco_maze._MOVES)  # pylint: disable=protected-access
             if not walls[m][tuple(p[i] + move)]]
    a[i] = legal[rng.integers(len(legal))]
    q[i] = p[i] + disco_maze._MOVES[a[i]]  # pylint: disable=protected-access
  return render(walls[maze], p, rng), render(walls[maze], q, rng), a


def train_offline(config: NGUConfig, size: int, num_updates: int,
                  batch_size: int, seed: int = 0):
  """f and h trained by inverse dynamics on uniform random legal moves.

  The reference for what the agent's f could reach with the same
  optimiser (`learning.make_optimisers`: Adam, clip 40, the config's
  action-prediction learning rate), loss (`losses.inverse_dynamics_loss`
  with the config's L2) and number of transitions per update, on data that
  covers every cell and move evenly (the agent's replay is dominated by
  its own oscillations).

  Args:
    config: the agent's config (networks, learning rate, L2).
    size: S, the maze side.
    num_updates: gradient steps.
    batch_size: transitions per step (the learner uses
      `config.batch_size * config.aux_loss_steps`).
    seed: initial parameters, mazes, moves, colours.

  Returns:
    (params, accuracy on the last batch).
  """
  # pylint: disable=g-import-not-at-top
  from ngu_jax.agents.ngu import learning
  from ngu_jax.losses import inverse_dynamics as id_losses
  # pylint: enable=g-import-not-at-top
  network = make_networks(config, size).embedding
  optimiser = learning.make_optimisers(config).embedding
  params = network.init(jax.random.PRNGKey(seed))
  opt_state = optimiser.init(params)
  rng = np.random.default_rng([seed, 7])
  walls, _ = disco_maze.generate_mazes(rng, 512, size)

  @jax.jit
  def update(params, opt_state, x_t, x_tp1, a_t):
    def loss_fn(p):
      return id_losses.inverse_dynamics_loss(
          network.inverse_logits(p, x_t, x_tp1), a_t, p,
          config.action_prediction_l2)
    (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = optimiser.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, metrics

  accuracy = float("nan")
  for _ in range(num_updates):
    x_t, x_tp1, a_t = random_transitions(walls, batch_size, rng)
    params, opt_state, metrics = update(params, opt_state, x_t, x_tp1, a_t)
    accuracy = float(metrics["accuracy"])
  return params, accuracy


# ------------------------------------------------------------ the probe


def probe_embedding(embed_fn: EmbedFn,
                    memory_config: episodic.EpisodicMemoryConfig, size: int,
                    num_mazes: int = 32, num_episodes: int = 8,
                    num_steps: int = 60, seed: int = 0,
                    warmup_episodes: int = 0) -> Dict[str, float]:
  """Items 1 and 2 of the module docstring for one f.

  Args:
    embed_fn: f, uint8 observations [N, S, S, 3] -> embeddings [N, p].
    memory_config: the agent's episodic-memory config.
    size: S, the maze side (odd, >= 5).
    num_mazes: B, lanes (and mazes per measurement).
    num_episodes: E, episodes per lane for the rewards.
    num_steps: T, observations per episode.
    seed: fixes mazes, walks and colours.
    warmup_episodes: W > 0 adds the rewards after W episodes of `random`
      (`policy_rewards`), keys prefixed "warm_".

  Returns:
    d_move, d_colour, ratio, reward_<policy> and explore_over_oscillate
    (and their "warm_" versions).
  """
  walls, _ = disco_maze.generate_mazes(
      np.random.default_rng([seed, 100]), num_mazes, size)
  row = measure_invariance(embed_fn, walls,
                           np.random.default_rng([seed, 101]))
  row.update(policy_rewards(embed_fn, memory_config, size, num_mazes,
                            num_episodes, num_steps, seed))
  if warmup_episodes:
    row.update(policy_rewards(embed_fn, memory_config, size, num_mazes,
                              num_episodes, num_steps, seed,
                              warmup_episodes=warmup_episodes,
                              prefix="warm_"))
  return row


def network_embed_fn(config: NGUConfig, size: int, params) -> EmbedFn:
  """f of the agent's embedding network with `params`, jitted."""
  networks = make_networks(config, size)
  embed = jax.jit(networks.embedding.embed)
  return lambda obs: embed(params, jnp.asarray(obs))


def make_networks(config: NGUConfig, size: int) -> networks_lib.NGUNetworks:
  return networks_lib.make_networks(config, (size, size, 3),
                                    disco_maze.NUM_ACTIONS)


class RunParams(NamedTuple):
  """The learner's embedding parameters of one seed of a run."""
  variant: str
  seed: str
  config: NGUConfig
  size: int
  params: Any


def _agent_config(d: Dict[str, Any]) -> NGUConfig:
  return NGUConfig.from_dict({k: tuple(v) if isinstance(v, list) else v
                              for k, v in d.items()})


def load_run(run_dir: str, size: Optional[int] = None) -> RunParams:
  """Reads the learner's embedding parameters from a run's checkpoint.

  Rebuilds the run's `CompiledLoop` (as `compiled_runner.run_compiled`
  does) for the shapes of its `TrainState` and loads the checkpoint into
  them (`ckpt_lib.load_pytree`); keeps `state.learner.params.embedding` of
  the run dir's seed.

  Args:
    run_dir: a compiled-loop output dir with `checkpoint/`, or a
      `seed_<s>` dir whose parent has it.
    size: the maze side; default the checkpoint's env_kwargs "size", else
      `DEFAULT_SIZE`.

  Returns:
    A `RunParams` (variant: the parent dir's name, seed: the dir's name).
  """
  run_dir = os.path.normpath(run_dir)
  name = os.path.basename(run_dir)
  ckpt_dir = os.path.join(run_dir, "checkpoint")
  seed_value = None
  if not os.path.isdir(ckpt_dir) and name.startswith("seed_"):
    ckpt_dir = os.path.join(os.path.dirname(run_dir), "checkpoint")
    seed_value = int(name[len("seed_"):])
  ckpt_dir = ckpt_lib.find_directory(ckpt_dir)
  meta = ckpt_lib.read_json(os.path.join(ckpt_dir, "config.json"))
  config = _agent_config(meta["agent"])
  env_kwargs = dict(meta.get("env_kwargs") or {})
  size = int(size or env_kwargs.get("size", DEFAULT_SIZE))
  env_kwargs["size"] = size
  env = envs.make_functional(meta.get("env_name", "disco_maze"),
                             **env_kwargs)
  seeds = list(meta.get("seeds", [meta.get("seed", 0)]))
  loop = compiled.make_compiled_loop(config, env, int(meta["num_lanes"]), 1)
  keys = jnp.stack([jax.random.PRNGKey(int(s)) for s in seeds])
  template = jax.eval_shape(jax.vmap(loop.init), keys)
  index = 0 if seed_value is None else seeds.index(seed_value)
  state = _load_retrying(os.path.join(ckpt_dir, "train_state.npz"), template)
  params = jax.tree_util.tree_map(lambda x: jnp.asarray(x[index]),
                                  state.learner.params.embedding)
  return RunParams(variant=os.path.basename(os.path.dirname(run_dir)),
                   seed=name, config=config, size=size, params=params)


def _load_retrying(path: str, template, tries: int = 3):
  """`load_pytree`, retried: a live run replaces its checkpoint atomically."""
  for attempt in range(tries):
    try:
      return ckpt_lib.load_pytree(path, template)
    except (OSError, ValueError):
      if attempt == tries - 1:
        raise
      time.sleep(2.0)


def probe_run(run: RunParams, fresh_f: bool = False, seed: int = 0,
              distance_horizon: Optional[int] = None,
              **kwargs) -> List[Dict[str, Any]]:
  """Rows of one run: its f, plus a fresh-init f if asked and f was learned.

  Args:
    run: from `load_run` (or built by hand, e.g. with fresh parameters).
    fresh_f: add the random-projection reference row (learned f only).
    seed: probe seed (mazes, walks, colours, fresh parameters).
    distance_horizon: the d_m^2 horizon to score with (None: the run's).
    **kwargs: num_mazes, num_episodes, num_steps, warmup_episodes of
      `probe_embedding`.

  Returns:
    Dicts with the keys of `COLUMNS`.
  """
  memory_config = variant_intrinsic.episodic_memory_config(run.config)
  if distance_horizon is not None:
    memory_config = dataclasses.replace(memory_config,
                                        distance_horizon=distance_horizon)
  learned = bool(run.config.learn_embedding)
  variants = [("learned" if learned else "fixed random", run.params)]
  if fresh_f and learned:
    fresh = make_networks(run.config, run.size).embedding.init(
        jax.random.PRNGKey(seed))
    variants.append(("fresh init", fresh))
  rows = []
  for label, params in variants:
    row = dict(variant=run.variant, seed=run.seed, learn_embedding=learned,
               f=label, horizon=memory_config.distance_horizon)
    row.update(probe_embedding(network_embed_fn(run.config, run.size, params),
                               memory_config, run.size, seed=seed, **kwargs))
    rows.append(row)
  return rows


# ------------------------------------------------------------- outputs


def _fmt(value) -> str:
  if isinstance(value, float):
    return f"{value:.4g}"
  return str(value)


def format_table(rows: Sequence[Dict[str, Any]]) -> str:
  """A markdown table of `rows` over `COLUMNS`."""
  lines = ["| " + " | ".join(COLUMNS) + " |",
           "|" + "|".join("---" for _ in COLUMNS) + "|"]
  lines += ["| " + " | ".join(_fmt(r.get(c, "")) for c in COLUMNS) + " |"
            for r in rows]
  return "\n".join(lines)


def write_outputs(rows: Sequence[Dict[str, Any]], output: str,
                  header: str = "") -> None:
  """Writes `probe.csv` and `probe.md` in `output`."""
  os.makedirs(output, exist_ok=True)
  with open(os.path.join(output, "probe.csv"), "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=COLUMNS)
    writer.writeheader()
    for r in rows:
      writer.writerow({c: r.get(c, "") for c in COLUMNS})
  with open(os.path.join(output, "probe.md"), "w") as f:
    f.write("# Controllable-state probe (NGU Sec. 2, 4.1, Alg. 1)\n\n")
    if header:
      f.write(header + "\n\n")
    f.write(format_table(rows) + "\n")


def offline_row(run: RunParams, args: argparse.Namespace) -> Dict[str, Any]:
  """The probe's row for f trained offline (`train_offline`) with `run`'s
  config, `batch_size * aux_loss_steps` transitions per update."""
  config = run.config
  params, accuracy = train_offline(
      config, run.size, args.offline_updates,
      config.batch_size * config.aux_loss_steps, seed=args.seed)
  offline = RunParams(variant="offline", seed=f"seed{args.seed}",
                      config=config, size=run.size, params=params)
  row = probe_run(offline, seed=args.seed,
                  distance_horizon=args.distance_horizon,
                  num_mazes=args.mazes, num_episodes=args.episodes,
                  num_steps=args.steps,
                  warmup_episodes=args.warmup_episodes)[0]
  row["learn_embedding"] = True
  row["f"] = (f"inverse dynamics on random moves, {args.offline_updates} "
              f"updates (accuracy {accuracy:.2f})")
  return row


def main(argv=None) -> List[Dict[str, Any]]:
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
  parser.add_argument("--output", default="runs/controllable_state_probe")
  parser.add_argument("--mazes", type=int, default=32,
                      help="lanes (mazes per measurement)")
  parser.add_argument("--episodes", type=int, default=8)
  parser.add_argument("--steps", type=int, default=60,
                      help="observations per scripted episode")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--size", type=int, default=None,
                      help="maze side (default: the run's, else 11)")
  parser.add_argument("--warmup-episodes", type=int, default=0,
                      help="also score each policy after this many episodes "
                      "of random walks (columns warm_*)")
  parser.add_argument("--distance-horizon", type=int, default=None,
                      help="d_m^2 horizon to score with (default: the run's "
                      "config; 0 = lifetime average)")
  parser.add_argument("--offline-updates", type=int, default=0,
                      help="add a row for f trained by inverse dynamics on "
                      "uniform random moves for this many updates (the "
                      "first run's config; reference)")
  parser.add_argument("--fresh-f", action="store_true",
                      help="add a fresh-init (random projection) row for "
                      "runs that learned f")
  args = parser.parse_args(argv)
  rows = []
  for run_dir in args.run_dirs:
    run = load_run(run_dir, args.size)
    rows += probe_run(run, fresh_f=args.fresh_f, seed=args.seed,
                      distance_horizon=args.distance_horizon,
                      num_mazes=args.mazes, num_episodes=args.episodes,
                      num_steps=args.steps,
                      warmup_episodes=args.warmup_episodes)
  if args.offline_updates:
    rows.append(offline_row(run, args))
  header = (f"mazes={args.mazes} episodes={args.episodes} "
            f"steps={args.steps} seed={args.seed} warm-up episodes="
            f"{args.warmup_episodes}; rewards: mean episodic reward per step "
            "under each policy's own d_m^2 (first episode skipped), warm_*: "
            "after the warm-up random walks; horizon: d_m^2's (0 = "
            "lifetime); ratio = D_move / D_colour.")
  write_outputs(rows, args.output, header)
  print(header)
  print(format_table(rows))
  return rows


if __name__ == "__main__":
  main(sys.argv[1:])
