r"""Which intrinsic reward pays the frontier? A probe before any training.

NGU's episodic reward (Sec. 2, Alg. 1) counts visits within the current
episode: its memory is wiped at every episode start, so a cell seen in
earlier episodes is exactly as novel as a cell never seen. NGU leaves the
life-long signal to the RND modulator alpha (Sec. 2), which sees raw
observations. RECODE (003 Sec. 3) replaces both with one never-reset memory
of cluster centres and discounted counts. This probe feeds each reward the
same scripted episodes, in seconds and without training any agent:

* On a fixed `NoisyGrid` maze (`ngu_jax.envs.noisy_grid`), pick a junction
  p reached from the start by the path P, and two of its free neighbours
  other than the one P comes from: `old` and `new`.
* Earlier episodes (E of them): walk P, step onto `old`, and go on down
  `old`'s branch for up to `--tail` cells.
* The final episode: walk P again. Then score two candidate next steps
  from the same state: onto `old` (seen only in earlier episodes, not in
  this one) and onto `new` (never seen). The ratio r(new) / r(old) is the
  reward's preference for the frontier.

Rewards (each with the library's component and the agent's config):

  episodic   `intrinsic.episodic.step`, wiped at every episode start, d_m^2
             kept across episodes (as the actor keeps it);
  rnd        err(x) / sigma of `losses.rnd` (on raw frames, whatever f),
             with a predictor trained by
             Adam (`--rnd-updates` full-batch steps, the agent's RND learning
             rate) on the earlier episodes' frames, inputs whitened with
             their statistics (the learner's normaliser);
  ngu        episodic x min(max(alpha, 1), L) (eq. 1), alpha from the same
             RND errors against the statistics of every frame seen;
  recode     `intrinsic.recode.step` on one memory fed every embedding of
             every episode, never wiped (the agent's RECODE config).

Embeddings f of the episodic and RECODE rewards:

  controllable       a one-hot of the agent's cell: what a perfectly
                     trained inverse-dynamics f keeps (NGU Sec. 2; the
                     ceiling of the learned f);
  random_projection  the agent's embedding network at its random
                     initialisation (NGU Fig. 2's ablation) on the frame.

Noise conditions (`NoisyGrid`): none, disco (wall colours every step, NGU
Sec. 4.1), frame (a uniform-noise frame concatenated to every frame,
RECODE Sec. 5.2). ("tv" only differs when the TV action is taken, which
the scripted episodes never do.)

Expected: the episodic reward cannot prefer `new` (ratio ~ 1) whatever f;
RECODE with the controllable f pays `new` far more; the RND ratio falls
towards 1 under frame noise; and every f-based ratio with the random
projection falls under disco and frame noise (f sees the noise).

Usage:
  python -m experiments.probes.novelty_probe [--output runs/novelty_probe]
      [--mazes 4] [--junctions 4] [--episodes 10] [--tail 5] [--size 15]
      [--rnd-updates 200] [--seed 0] [--recode-actors 1 2 4 8]

`--recode-actors` measures the Ray program's deviation instead: RECODE
alone, with the earlier episodes dealt round robin to A actors that each
keep their own memory (the paper shares one): the final episode's actor
saw only every A-th earlier episode, so `old` looks newer to it.

Writes probe.csv (one row per noise, embedding, reward and scenario) and
probe.md (the summary table: geometric-mean ratio over scenarios, the
fraction of scenarios with ratio > 1, mean rewards) to `--output`.
"""

import argparse
import csv
import functools
import math
import os
import sys
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.envs import disco_maze
from ngu_jax.envs import noisy_grid
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong
from ngu_jax.intrinsic import recode
from ngu_jax.losses import rnd as rnd_losses
from ngu_jax.networks import rnd as rnd_lib
from ngu_jax.agents.ngu.variants import intrinsic as variant_intrinsic

NOISES = ("none", "disco", "frame")
EMBEDDINGS = ("controllable", "random_projection")
REWARDS = ("episodic", "rnd", "ngu", "recode")
# (d_row, d_col) of actions 0..3 (up, down, left, right).
_MOVES = [tuple(int(v) for v in m) for m in disco_maze._MOVES]  # pylint: disable=protected-access


class Scenario(NamedTuple):
  """One probe on one maze (cells are (row, col) tuples)."""
  maze_seed: int
  path: List[Tuple[int, int]]  # start .. junction p
  old: Tuple[int, int]  # seen in earlier episodes only
  new: Tuple[int, int]  # never seen
  tail: List[Tuple[int, int]]  # beyond `old` in the earlier episodes


def _free_neighbours(walls: np.ndarray, cell) -> List[Tuple[int, int]]:
  r, c = cell
  return [(r + dr, c + dc) for dr, dc in _MOVES if not walls[r + dr, c + dc]]


def _bfs_parents(walls: np.ndarray, start) -> Dict[Tuple[int, int], Any]:
  parents = {tuple(start): None}
  frontier = [tuple(start)]
  while frontier:
    nxt = []
    for cell in frontier:
      for nb in _free_neighbours(walls, cell):
        if nb not in parents:
          parents[nb] = cell
          nxt.append(nb)
    frontier = nxt
  return parents


def find_scenarios(env: noisy_grid.NoisyGrid, num: int, tail: int,
                   rng: np.random.Generator) -> List[Scenario]:
  """Up to `num` scenarios on `env`'s maze (module docstring).

  A junction p is a free cell with at least two free neighbours besides
  its parent on the path from the start (the start: two neighbours); its
  path P must fit the episode with room for the tail.
  """
  walls = env.walls
  start = tuple(int(v) for v in env.start)
  parents = _bfs_parents(walls, start)
  candidates = []
  for cell, parent in parents.items():
    children = [nb for nb in _free_neighbours(walls, cell) if nb != parent]
    if len(children) >= 2:
      candidates.append((cell, children))
  rng.shuffle(candidates)
  scenarios = []
  for cell, children in candidates[:num]:
    path = [cell]
    while parents[path[-1]] is not None:
      path.append(parents[path[-1]])
    path.reverse()
    if len(path) + 1 + tail > env.max_episode_steps:
      continue
    old, new = (children[i] for i in rng.permutation(len(children))[:2])
    # The tail: go on from `old` away from p (first unvisited neighbour).
    seen, cur, rest = {cell, old, new}, old, []
    for _ in range(tail):
      nxt = [nb for nb in _free_neighbours(walls, cur) if nb not in seen]
      if not nxt:
        break
      cur = nxt[0]
      seen.add(cur)
      rest.append(cur)
    scenarios.append(Scenario(env.maze_seed, path, old, new, rest))
  return scenarios


def _actions(cells: Sequence[Tuple[int, int]]) -> List[int]:
  return [_MOVES.index((b[0] - a[0], b[1] - a[1]))
          for a, b in zip(cells[:-1], cells[1:])]


@functools.lru_cache(maxsize=None)
def _env_fns(env: noisy_grid.NoisyGrid):
  return jax.jit(env.reset), jax.jit(env.step)


def play(env: noisy_grid.NoisyGrid, scenario: Scenario, episodes: int,
         key: jax.Array) -> Dict[str, Any]:
  """Frames and cells of the scripted episodes (module docstring).

  Returns:
    {"earlier": list of (frames [T, ...] uint8, cells [T, 2]) per earlier
    episode, "final": (frames, cells) of P in the final episode, "old" /
    "new": (frame [1, ...], cell [1, 2]) of the two candidate steps, both
    drawn from the same environment state}.
  """
  reset, step = _env_fns(env)

  def walk(cells, key):
    state, ts = reset(key)
    frames, positions = [ts.observation], [ts.extras["position"]]
    for a in _actions(cells):
      state, ts = step(state, jnp.int32(a))
      frames.append(ts.observation)
      positions.append(ts.extras["position"])
    return state, np.stack(frames), np.stack(positions)

  keys = jax.random.split(key, episodes + 1)
  earlier = []
  full = scenario.path + [scenario.old] + scenario.tail
  for e in range(episodes):
    _, frames, cells = walk(full, keys[e])
    earlier.append((frames, cells))
  state, frames, cells = walk(scenario.path, keys[-1])
  out = {"earlier": earlier, "final": (frames, cells)}
  p = scenario.path[-1]
  for name in ("old", "new"):
    target = getattr(scenario, name)
    a = _MOVES.index((target[0] - p[0], target[1] - p[1]))
    _, ts = step(state, jnp.int32(a))
    assert tuple(int(v) for v in ts.extras["position"]) == target
    out[name] = (np.asarray(ts.observation)[None],
                 np.asarray(ts.extras["position"])[None])
  return out


def _one_hot(cells: np.ndarray, size: int) -> np.ndarray:
  idx = cells[:, 0] * size + cells[:, 1]
  return np.eye(size * size, dtype=np.float32)[idx]


# Jitted once per process (module level: a jit made inside a function that
# runs per scenario would compile again for every scenario).
_EPISODIC_STEP = jax.jit(episodic.step, static_argnums=0)
_RECODE_STEP = jax.jit(recode.step, static_argnums=0)


@functools.lru_cache(maxsize=None)
def _embed_fn(networks: networks_lib.NGUNetworks):
  return jax.jit(networks.embedding.embed)


@functools.lru_cache(maxsize=None)
def _rnd_fns(networks: networks_lib.NGUNetworks, learning_rate: float):
  """Jitted (update, errors) of the RND predictor; data are arguments (a
  closure over the frames would make XLA constant-fold the convolutions)."""
  opt = optax.adam(learning_rate)

  def loss_fn(p, x, target):
    return rnd_losses.rnd_loss(networks.rnd.predictor(p, x), target)[0]

  @jax.jit
  def update(p, s, x, target):
    grads = jax.grad(loss_fn)(p, x, target)
    u, s = opt.update(grads, s, p)
    return optax.apply_updates(p, u), s

  @jax.jit
  def errors(predictor, target_params, stats, frames):
    z = rnd_lib.normalize_observation(stats, frames)
    return rnd_losses.rnd_error(networks.rnd.predictor(predictor, z),
                                networks.rnd.target(target_params, z))

  @jax.jit
  def targets(target_params, stats, frames):
    x = rnd_lib.normalize_observation(stats, frames)
    return x, networks.rnd.target(target_params, x)
  return opt, update, errors, targets


def _episodic_rewards(config: episodic.EpisodicMemoryConfig,
                      earlier: List[np.ndarray], final: np.ndarray,
                      candidates: Dict[str, np.ndarray]) -> Dict[str, float]:
  """Episodic rewards of the candidates after the scripted episodes."""
  step = _EPISODIC_STEP
  state = episodic.init(config, 1, final.shape[-1])
  for episode in earlier + [final]:
    state = episodic.reset(state, jnp.ones((1,), bool))
    for e in episode:
      _, state = step(config, state, jnp.asarray(e)[None])
  return {name: float(step(config, state, jnp.asarray(e))[0][0])
          for name, e in candidates.items()}


def _recode_rewards(config: recode.RecodeConfig, earlier: List[np.ndarray],
                    final: np.ndarray, candidates: Dict[str, np.ndarray],
                    key: jax.Array, actors: int = 1) -> Dict[str, float]:
  """RECODE rewards of the candidates: one memory, never wiped.

  With `actors` A > 1 the earlier episodes are dealt round robin to A
  actors, each with its own memory (the Ray program's per-actor memories,
  a deviation from the paper's one shared memory), and the final episode is
  played by the actor whose turn it is: its memory saw only every A-th
  earlier episode.
  """
  step = _RECODE_STEP
  state = recode.init(config, final.shape[-1], key)
  turn = len(earlier) % actors  # The final episode's actor.
  mine = [e for i, e in enumerate(earlier) if i % actors == turn]
  for episode in mine + [final]:
    for e in episode:
      _, state = step(config, state, jnp.asarray(e)[None])
  return {name: float(step(config, state, jnp.asarray(e))[0][0])
          for name, e in candidates.items()}


def _rnd_errors(networks: networks_lib.NGUNetworks, params: Any,
                learning_rate: float, updates: int, earlier: np.ndarray,
                queries: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """RND errors of `queries` after training the predictor on `earlier`.

  The inputs are whitened with the statistics of the earlier frames (the
  learner's normaliser), the predictor trained by full-batch Adam.
  """
  opt, update, errors, targets = _rnd_fns(networks, float(learning_rate))
  stats = rnd_lib.observation_normalizer_update(
      rnd_lib.observation_normalizer_init(earlier.shape[1:]),
      jnp.asarray(earlier))
  x, target = targets(params.rnd_target, stats, jnp.asarray(earlier))
  predictor, opt_state = params.rnd_predictor, opt.init(params.rnd_predictor)
  for _ in range(updates):
    predictor, opt_state = update(predictor, opt_state, x, target)
  return {name: np.asarray(errors(predictor, params.rnd_target, stats,
                                  jnp.asarray(frames)))
          for name, frames in queries.items()}


def probe_scenario(env: noisy_grid.NoisyGrid, scenario: Scenario,
                   config: config_lib.NGUConfig, networks, params,
                   episodes: int, rnd_updates: int, key: jax.Array
                   ) -> List[Dict[str, Any]]:
  """Rows (embedding, reward, r_new, r_old) of one scenario."""
  k_play, k_recode = jax.random.split(key)
  played = play(env, scenario, episodes, k_play)
  size = env.size
  earlier_frames = [f for f, _ in played["earlier"]]
  final_frames = played["final"][0]
  embed = _embed_fn(networks)
  embeddings = {
      "controllable": lambda frames, cells: _one_hot(cells, size),
      "random_projection": lambda frames, cells: np.asarray(
          embed(params.embedding, jnp.asarray(frames))),
  }
  # RND: trained on the earlier frames; errors of everything seen and of
  # the candidates. alpha's statistics: every frame seen before the step.
  seen = np.concatenate(earlier_frames + [final_frames])
  errs = _rnd_errors(networks, params, config.rnd_learning_rate, rnd_updates,
                     np.concatenate(earlier_frames),
                     {"seen": seen, "old": played["old"][0],
                      "new": played["new"][0]})
  mu, sigma = float(np.mean(errs["seen"])), float(np.std(errs["seen"]))
  rnd = {name: float(errs[name][0]) / sigma for name in ("old", "new")}
  alpha = {name: 1. + (float(errs[name][0]) - mu) / sigma
           for name in ("old", "new")}
  rows = []
  mem_config = variant_intrinsic.episodic_memory_config(config)
  rec_config = variant_intrinsic.recode_config(config)
  for name, fn in embeddings.items():
    earlier = [fn(f, c) for f, c in played["earlier"]]
    final = fn(*played["final"])
    candidates = {c: fn(*played[c]) for c in ("old", "new")}
    epi = _episodic_rewards(mem_config, earlier, final, candidates)
    rec = _recode_rewards(rec_config, earlier, final, candidates, k_recode)
    ngu = {c: epi[c] * min(max(alpha[c], 1.), config.rnd_clip)
           for c in ("old", "new")}
    for reward, values in (("episodic", epi), ("ngu", ngu),
                           ("recode", rec)):
      rows.append({"embedding": name, "reward": reward,
                   "r_new": values["new"], "r_old": values["old"]})
  # RND reads raw frames, not f: one row.
  rows.append({"embedding": "raw_frame", "reward": "rnd",
               "r_new": rnd["new"], "r_old": rnd["old"]})
  return rows


def sharing_rows(env: noisy_grid.NoisyGrid, scenario: Scenario,
                 config: config_lib.NGUConfig, networks, params,
                 episodes: int, actors: Sequence[int], key: jax.Array
                 ) -> List[Dict[str, Any]]:
  """RECODE rows (embedding, actors, r_new, r_old) of one scenario for each
  number of per-actor memories in `actors` (`_recode_rewards`)."""
  k_play, k_recode = jax.random.split(key)
  played = play(env, scenario, episodes, k_play)
  embed = _embed_fn(networks)
  embeddings = {
      "controllable": lambda frames, cells: _one_hot(cells, env.size),
      "random_projection": lambda frames, cells: np.asarray(
          embed(params.embedding, jnp.asarray(frames))),
  }
  rec_config = variant_intrinsic.recode_config(config)
  rows = []
  for name, fn in embeddings.items():
    earlier = [fn(f, c) for f, c in played["earlier"]]
    final = fn(*played["final"])
    candidates = {c: fn(*played[c]) for c in ("old", "new")}
    for a in actors:
      rec = _recode_rewards(rec_config, earlier, final, candidates, k_recode,
                            actors=a)
      rows.append({"embedding": name, "reward": f"recode, A={a}",
                   "r_new": rec["new"], "r_old": rec["old"]})
  return rows


def probe_config(**overrides) -> config_lib.NGUConfig:
  """The agent config the probe scores with: the Disco Maze preset
  (Table 7: kernel epsilon 1e-2, grid torso) and RECODE's defaults."""
  return config_lib.disco_maze(**overrides)


def run(noises: Sequence[str] = NOISES, mazes: int = 4, junctions: int = 4,
        episodes: int = 10, tail: int = 5, size: int = 15,
        rnd_updates: int = 200, seed: int = 0,
        config: config_lib.NGUConfig = None,
        recode_actors: Sequence[int] = ()) -> List[Dict[str, Any]]:
  """Every (noise, scenario, embedding, reward) row; with `recode_actors`,
  only RECODE's rows for those numbers of per-actor memories
  (`sharing_rows`)."""
  config = probe_config() if config is None else config
  rows = []
  for noise in noises:
    key = jax.random.PRNGKey(seed)
    networks = None
    for m in range(mazes):
      env = noisy_grid.NoisyGrid(noise, size=size, maze_seed=seed + m)
      if networks is None:  # One set of jitted functions per noise.
        networks = networks_lib.make_networks(
            config, env.observation_spec().shape,
            int(env.action_spec().num_values))
      key, k_params = jax.random.split(key)
      params = networks_lib.init_params(networks, k_params)
      rng = np.random.default_rng(seed * 1000 + m)
      for j, scenario in enumerate(find_scenarios(env, junctions, tail, rng)):
        key, k = jax.random.split(key)
        if recode_actors:
          scored = sharing_rows(env, scenario, config, networks, params,
                                episodes, recode_actors, k)
        else:
          scored = probe_scenario(env, scenario, config, networks, params,
                                  episodes, rnd_updates, k)
        for row in scored:
          rows.append({"noise": noise, "maze_seed": env.maze_seed,
                       "scenario": j, "path_length": len(scenario.path) - 1,
                       **row})
  return rows


def _ratio(row: Dict[str, Any]) -> float:
  new, old = row["r_new"], row["r_old"]
  if old > 0:
    return new / old
  return math.inf if new > 0 else 1.


def summarise(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """Per (noise, embedding, reward): geometric-mean ratio r_new / r_old
  over scenarios, the fraction with ratio > 1, mean r_new and r_old."""
  groups: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
  for row in rows:
    key = (row["noise"], row["embedding"], row["reward"])
    groups.setdefault(key, []).append(row)
  out = []
  for (noise, embedding, reward), group in groups.items():
    ratios = np.array([_ratio(r) for r in group])
    finite = ratios[np.isfinite(ratios) & (ratios > 0)]
    out.append({
        "noise": noise, "embedding": embedding, "reward": reward,
        "scenarios": len(group),
        "geomean_ratio": (float(np.exp(np.mean(np.log(finite))))
                          if len(finite) == len(ratios) else math.inf),
        "frac_new_higher": float(np.mean(ratios > 1 + 1e-6)),
        "mean_r_new": float(np.mean([r["r_new"] for r in group])),
        "mean_r_old": float(np.mean([r["r_old"] for r in group]))})
  return out


def format_table(summary: Sequence[Dict[str, Any]]) -> str:
  """A markdown table of `summarise`'s rows."""
  lines = ["| noise | f | reward | r(new) / r(old), geo. mean | "
           "new > old | mean r(new) | mean r(old) |",
           "|---|---|---|---:|---:|---:|---:|"]
  for s in summary:
    lines.append(
        f"| {s['noise']} | {s['embedding']} | {s['reward']} | "
        f"{s['geomean_ratio']:.3g} | {s['frac_new_higher']:.0%} | "
        f"{s['mean_r_new']:.4g} | {s['mean_r_old']:.4g} |")
  return "\n".join(lines)


def _write_csv(path: str, rows: Sequence[Dict[str, Any]]) -> None:
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


def main(argv=None) -> List[Dict[str, Any]]:
  argv = sys.argv[1:] if argv is None else list(argv)
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--output", default="runs/novelty_probe")
  parser.add_argument("--noises", nargs="+", default=list(NOISES),
                      choices=list(NOISES))
  parser.add_argument("--mazes", type=int, default=4)
  parser.add_argument("--junctions", type=int, default=4)
  parser.add_argument("--episodes", type=int, default=10)
  parser.add_argument("--tail", type=int, default=5)
  parser.add_argument("--size", type=int, default=15)
  parser.add_argument("--rnd-updates", type=int, default=200)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
      "--recode-actors", type=int, nargs="+", default=[],
      help="instead of the four rewards: RECODE alone, its earlier episodes "
      "dealt round robin to A actors with a memory each, for each A given "
      "(the cost of the Ray program's per-actor memories)")
  args = parser.parse_args(argv)
  if any(a < 1 for a in args.recode_actors):
    parser.error("--recode-actors must be >= 1")
  for name in ("mazes", "junctions", "episodes"):
    if getattr(args, name) < 1:
      parser.error(f"--{name} must be >= 1")
  if args.tail < 0 or args.rnd_updates < 0:
    parser.error("--tail and --rnd-updates must be >= 0")
  rows = run(args.noises, args.mazes, args.junctions, args.episodes,
             args.tail, args.size, args.rnd_updates, args.seed,
             recode_actors=args.recode_actors)
  if not rows:
    raise SystemExit("novelty_probe: no junction fits the episode; use a "
                     "larger --size or smaller --tail.")
  summary = summarise(rows)
  table = format_table(summary)
  os.makedirs(args.output, exist_ok=True)
  _write_csv(os.path.join(args.output, "probe.csv"), rows)
  command = " ".join(["python -m experiments.probes.novelty_probe"] + argv)
  with open(os.path.join(args.output, "probe.md"), "w") as f:
    f.write(f"{table}\n\nCommand: `{command.strip()}`\n")
  print(table)
  return summary


if __name__ == "__main__":
  main()
