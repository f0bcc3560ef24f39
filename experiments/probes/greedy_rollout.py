r"""What does the exploit policy do, step by step, where it fails?

NGU's exploit policy is the mixture j = 0 of the UVFA, acted epsilon-greedy
with Table 6's evaluation epsilon 0.01 (Badia et al., 2020, Sec. 3, App. A
and F). `CompiledLoop.evaluate` reports only its success and return; this
probe replays the same evaluation (one episode per lane from the training
lanes' running statistics, `CompiledLoop.evaluate`'s `_evaluation_actor`)
and records every step: the action, whether the step changed nothing (the
observation and, where the environment reports them, the agent's position
and direction are the same after it: on MiniGrid a turn or a move changes
the egocentric view, a pickup, drop or toggle that does something changes
the view or the carried object shown in the agent's cell, `done` never
does) and the action values Q(x, ., 0) mapped back through h^-1.

Per seed it reports the success and return, the share of each action among
the greedy steps, the share of steps that changed nothing (in all episodes
and in the successful ones), the episodes that ran out of time, and two
scales of Q_0: the network's gap between its two best actions, and
(1 - gamma_0) max_a Q_0, about what a step that changes nothing costs
under Q* (a return one step later, discounted once; MiniGrid's reward
1 - 0.9 t / T adds 0.9 / T). Where the first is not larger than the
second, the greedy choice between moving and doing nothing is decided by
the network's error rather than by the values it should learn.

Usage:
  python -m experiments.probes.greedy_rollout --run-dir RUN_DIR \
      [--seed-index I ...] [--epsilon EPS] [--key-seed 0] [--json OUT.json]

RUN_DIR is a compiled-loop output directory with `checkpoint/`.
"""

import dataclasses
import json
import math
from typing import Any, Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from experiments.probes import exploit_values
from experiments.probes import json_safe
from ngu_jax.agents.ngu import actor as actor_lib
from ngu_jax.envs import base as env_base
from ngu_jax.loops.compiled import loop as compiled

# MiniGrid's actions in MiniGrid's order (`ngu_jax.envs.xminigrid_env`).
MINIGRID_ACTIONS = ("left", "right", "forward", "pickup", "drop", "toggle",
                    "done")


def action_names(num_actions: int) -> List[str]:
  """MiniGrid's names for 7 actions, else "0", "1", ..."""
  if num_actions == len(MINIGRID_ACTIONS):
    return list(MINIGRID_ACTIONS)
  return [str(a) for a in range(num_actions)]


def _make_step(loop: compiled.CompiledLoop, config, params):
  """(env_state, timestep, actor_state) -> (env_state, next timestep,
  actor_state, action, Q(x, ., j) [B, A]), jitted: one evaluation step
  as `CompiledLoop.evaluate` takes it."""

  @jax.jit
  def step(env_state, timestep, actor_state):
    first = timestep.step_type == env_base.StepType.FIRST
    action, actor_state = actor_lib.select_action(
        config, loop.networks, params, actor_state, timestep.observation,
        timestep.reward.astype(jnp.float32), first)
    env_state, next_ts = jax.vmap(loop.env.step)(env_state, action)
    return (env_state, next_ts, actor_state, action,
            actor_state.extras.q_values)

  return step


def _unchanged(before, after) -> np.ndarray:
  """bool [B]: the observation (and position / direction, where reported)
  is the same after the step."""
  same = np.all((np.asarray(before.observation)
                 == np.asarray(after.observation)).reshape(
                     before.observation.shape[0], -1), axis=1)
  for name in ("position", "direction"):
    if name in before.extras and name in after.extras:
      a = np.asarray(before.extras[name]).reshape(same.shape[0], -1)
      b = np.asarray(after.extras[name]).reshape(same.shape[0], -1)
      same &= np.all(a == b, axis=1)
  return same


def rollout_seed(loop: compiled.CompiledLoop, state: Any, key: jax.Array,
                 epsilon: Optional[float] = None,
                 max_steps: int = 100_000) -> Dict[str, Any]:
  """One evaluation episode per lane of mixture 0 (as
  `CompiledLoop.evaluate`), recorded step by step; `epsilon` replaces the
  config's `eval_epsilon`. Returns the module docstring's statistics and
  the per-lane episodes ("lanes": return, success, timed out, the actions
  as "a0,a1,..." and the steps that changed nothing as "0110...")."""
  config = loop.config
  if epsilon is not None:
    config = dataclasses.replace(config, eval_epsilon=float(epsilon))
  # The evaluator's own pieces (private to the loop): the lanes' reset and
  # the evaluation actor started from the training lanes' statistics.
  parts = compiled._Parts(  # pylint: disable=protected-access
      config, loop.networks, loop.env, loop.num_lanes)
  env_key, actor_key = jax.random.split(key)
  env_state, ts = parts._reset_lanes(env_key)  # pylint: disable=protected-access
  actor_state = parts._evaluation_actor(  # pylint: disable=protected-access
      state.actor, actor_key, 0)
  step = _make_step(loop, config, state.learner.params)
  inverse = exploit_values.value_inverse(config)
  b = loop.num_lanes
  done = np.zeros(b, bool)
  returns = np.zeros(b)
  episodes = [{"actions": [], "unchanged": [], "return": 0.,
               "success": False, "timed_out": False} for _ in range(b)]
  gaps, scales = [], []
  gamma_0 = float(config.mixture_gammas()[0])
  t = 0
  while not done.all():
    if t >= max_steps:
      raise RuntimeError(f"greedy_rollout: episodes longer than {max_steps} "
                         "steps.")
    env_state, next_ts, actor_state, action, q = step(env_state, ts,
                                                      actor_state)
    unchanged = _unchanged(ts, next_ts)
    action = np.asarray(action)
    q = np.asarray(inverse(np.asarray(q, np.float64)))
    top2 = np.sort(q, axis=-1)[:, -2:]
    last = np.asarray(next_ts.step_type) == env_base.StepType.LAST
    reward = np.asarray(next_ts.reward, np.float64)
    for lane in np.flatnonzero(~done):
      episode = episodes[lane]
      episode["actions"].append(int(action[lane]))
      episode["unchanged"].append(bool(unchanged[lane] and not last[lane]))
      gaps.append(top2[lane, 1] - top2[lane, 0])
      scales.append((1 - gamma_0) * top2[lane, 1])
      returns[lane] += reward[lane]
      if last[lane]:
        done[lane] = True
        episode["return"] = float(returns[lane])
        episode["success"] = bool(returns[lane] > 0)
        # A last step with no reward and a non-zero discount: the time limit.
        episode["timed_out"] = bool(reward[lane] <= 0
                                    and float(next_ts.discount[lane]) > 0)
    ts = next_ts
    t += 1
  return summarise(episodes, loop.env.num_actions, gaps, scales)


def summarise(episodes: List[Dict[str, Any]], num_actions: int,
              gaps: Sequence[float], scales: Sequence[float]
              ) -> Dict[str, Any]:
  """The statistics of `rollout_seed` from its recorded episodes."""
  actions = np.concatenate([e["actions"] for e in episodes]).astype(int)
  unchanged = np.concatenate([e["unchanged"] for e in episodes]).astype(bool)
  won = [e for e in episodes if e["success"]]
  counts = np.bincount(actions, minlength=num_actions)
  names = action_names(num_actions)
  if won:
    won_unchanged = np.concatenate([e["unchanged"] for e in won])
    won_share = float(np.mean(won_unchanged))
  else:
    won_share = math.nan
  return {
      "episodes": len(episodes),
      "success": float(np.mean([e["success"] for e in episodes])),
      "return": float(np.mean([e["return"] for e in episodes])),
      "length": float(np.mean([len(e["actions"]) for e in episodes])),
      "length_success": (float(np.mean([len(e["actions"]) for e in won]))
                         if won else math.nan),
      "timed_out": float(np.mean([e["timed_out"] for e in episodes])),
      "action_share": {names[a]: float(counts[a] / max(len(actions), 1))
                       for a in range(num_actions)},
      "unchanged_share": float(np.mean(unchanged)),
      "unchanged_share_success": won_share,
      "q_top2_gap": float(np.mean(gaps)),
      "q_noop_cost": float(np.mean(scales)),
      # Compact per-lane records: actions comma-separated, and a "1" for
      # each step that changed nothing.
      "lanes": [{"return": e["return"], "success": e["success"],
                 "timed_out": e["timed_out"],
                 "actions": ",".join(map(str, e["actions"])),
                 "unchanged": "".join("1" if u else "0"
                                      for u in e["unchanged"])}
                for e in episodes],
  }


def rollout(run_dir: str, seed_indices: Optional[Sequence[int]] = None,
            epsilon: Optional[float] = None, key_seed: int = 0,
            log=print, json_path: Optional[str] = None) -> Dict[str, Any]:
  """The probe on the seeds at `seed_indices` (all when None).

  Returns:
    {"run_dir", "env_name", "epsilon", "seeds": [{"seed", "seed_index",
    **rollout_seed(...)}]}.
  """
  if epsilon is not None and not 0 <= epsilon <= 1:
    raise ValueError(f"greedy_rollout: epsilon must be in [0, 1], got "
                     f"{epsilon!r}.")
  run = exploit_values.load_run(run_dir)
  indices = exploit_values.checked_seed_indices(run, seed_indices,
                                                where="greedy_rollout")
  out = {"run_dir": run_dir, "env_name": run.run_config["env_name"],
         "epsilon": (run.config.eval_epsilon if epsilon is None
                     else epsilon), "seeds": []}
  for i in indices:
    state = jax.tree_util.tree_map(jnp.asarray,
                                   exploit_values.seed_state(run.state, i))
    result = rollout_seed(run.loop, state, jax.random.PRNGKey(key_seed),
                          epsilon)
    out["seeds"].append({"seed": run.seeds[i], "seed_index": i, **result})
    log(format_seed(out["seeds"][-1]))
    if json_path:
      with open(json_path, "w") as f:
        json.dump(json_safe(out), f)
  return out


def _f(x: float) -> str:
  return "nan" if x is None or not math.isfinite(x) else f"{x:.3f}"


def format_seed(row: Dict[str, Any]) -> str:
  shares = ", ".join(f"{name} {share:.2f}"
                     for name, share in row["action_share"].items())
  return (f"seed {row['seed']}: success {_f(row['success'])}, return "
          f"{_f(row['return'])}, length {row['length']:.0f} (successes "
          f"{_f(row['length_success'])}), timed out {_f(row['timed_out'])}; "
          f"steps that change nothing {_f(row['unchanged_share'])} "
          f"(successes {_f(row['unchanged_share_success'])}); actions: "
          f"{shares}; Q_0 top-two gap {_f(row['q_top2_gap'])} vs "
          f"(1 - gamma_0) max Q_0 {_f(row['q_noop_cost'])}")


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  parser = exploit_values.run_dir_parser(__doc__)
  exploit_values.add_seed_indices_argument(parser)
  parser.add_argument("--epsilon", type=float, default=None,
                      help="the evaluation epsilon (default: the run's "
                      "eval_epsilon)")
  parser.add_argument("--key-seed", type=int, default=0)
  parser.add_argument("--json", default=None, help="write the result here")
  args = parser.parse_args(argv)
  try:
    return rollout(args.run_dir, args.seed_index, args.epsilon,
                   args.key_seed, json_path=args.json)
  except ValueError as e:
    raise SystemExit(str(e)) from e


if __name__ == "__main__":
  main()
