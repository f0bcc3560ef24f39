r"""More updates on the same replay: does j = 0's greedy policy improve?

NGU's exploit policy is the greedy policy of the mixture j = 0 (Badia et al.,
2020, Sec. 3; its evaluation epsilon is Table 6's 0.01). Where it misses a
goal the training lanes reach, two readings compete: the learner has seen
too few updates of the rewarded data it holds (an update budget, cured by
more samples per insert), or the exploit head cannot turn that data into a
greedy path however long it trains on it (the action gap, the fit of the
rare goal transition, the representation).

This probe separates them without new env steps. It loads a compiled-loop
checkpoint exactly as `experiments.probes.exploit_values.load_run` does,
and for each seed continues the run's own learner on the run's frozen
replay: `CompiledLoop.learn_on_replay` (prioritised samples of
`config.batch_size` sequences, `learning.sgd_step`, priorities written back,
the target network refreshed every `target_update_period` updates), with
no actor steps and no inserts. Before the first block and after each of
`--blocks` blocks of `--updates` learner steps it measures:

* the greedy success and return of j = 0 over `--rounds` evaluations of
  one episode per lane (`CompiledLoop.evaluate`, the run's evaluations,
  with the training lanes' running statistics);
* at the step onto the goal of the replay's rewarded sequences (k = 1 of
  `exploit_values.probe_seed`): the share whose argmax_a Q(x, a, 0) is the
  action taken there, h^-1(Q_0(x, a_taken)) against the return G_0, and the
  action gap; the mean h^-1(max_a Q_0) on unrewarded sequences.

Usage:
  python -m experiments.probes.replay_refit --run-dir RUN_DIR \
      [--seed-index I ...] [--blocks 4] [--updates 2000] [--rounds 4] \
      [--json OUT.json]

A budget: the run's own learner costs per update what it did in the run
(about 0.1-0.2 s per update and seed for the MiniGrid study's config on one
core); evaluations of a greedy policy that misses last the episode limit.
"""

import functools
import json
import math
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from experiments.probes import exploit_values
from experiments.probes import json_safe
from ngu_jax.loops.compiled import loop as compiled


def make_learn(loop: compiled.CompiledLoop, num_updates: int):
  """state -> state after `num_updates` learner steps on its frozen replay
  (`CompiledLoop.learn_on_replay`: the run's learner step, no env steps),
  jitted; one seed's `TrainState`."""
  if num_updates < 1:
    raise ValueError(f"make_learn: num_updates must be >= 1, got "
                     f"{num_updates!r}.")
  return jax.jit(functools.partial(loop.learn_on_replay, num_updates))


def make_greedy_eval(loop: compiled.CompiledLoop):
  """(state, key) -> (mean success, mean return) of one episode per lane of
  the mixture j = 0 (`CompiledLoop.evaluate`, the run's evaluations),
  jitted."""

  @jax.jit
  def evaluate(state, key):
    result, _ = loop.evaluate(state, key)
    return result["success_j0"], result["return_j0"]

  return evaluate


def measure(loop: compiled.CompiledLoop, state: Any, evaluate, key:
            jax.Array, rounds: int, unroll, max_unrewarded: int
            ) -> Dict[str, Any]:
  """One row: greedy success / return of j = 0 over `rounds` evaluations
  and the k = 1 statistics of `exploit_values.probe_seed`."""
  success, returns = [], []
  for k in jax.random.split(key, rounds):
    s, r = evaluate(state, k)
    success.append(float(s))
    returns.append(float(r))
  numpy_state = jax.tree_util.tree_map(np.asarray, state)
  probe = exploit_values.probe_seed(loop, numpy_state, max_k=1,
                                    max_unrewarded=max_unrewarded,
                                    unroll=unroll)
  k1 = probe["rows"][0]
  return {
      "learner_steps": int(np.asarray(state.counters.learner_steps)),
      "greedy_success": float(np.mean(success)),
      "greedy_return": float(np.mean(returns)),
      "greedy_success_rounds": success,
      "num_rewarded": probe["num_rewarded"],
      "k1_n": k1.get("n", 0),
      "k1_agree": k1.get("agree0", math.nan),
      "k1_taken_q0": k1.get("taken_q0", math.nan),
      "k1_max_q0": k1.get("max_q0", math.nan),
      "k1_return_0": k1.get("return_0", math.nan),
      "k1_gap0": k1.get("gap0", math.nan),
      "unrewarded_max_q0": probe["unrewarded"]["mean_max_q0"],
  }


def refit(run_dir: str, seed_indices: Optional[Sequence[int]] = None,
          blocks: int = 4, updates: int = 2000, rounds: int = 4,
          max_unrewarded: int = 500, key_seed: int = 0,
          log=print, json_path: Optional[str] = None) -> Dict[str, Any]:
  """The probe (module docstring) on the seeds at `seed_indices` (all when
  None); with `json_path`, the result so far is written there after every
  row (a long probe stopped early keeps what it measured).

  Returns:
    {"run_dir", "env_name", "blocks", "updates", "rounds", "lanes",
    "seeds": [{"seed", "seed_index", "rows": [measure(...) before the first
    block, then after each]}]}.
  """
  for name, value, low in (("blocks", blocks, 1), ("updates", updates, 1),
                           ("rounds", rounds, 1),
                           ("max_unrewarded", max_unrewarded, 0)):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
      raise ValueError(f"replay_refit: {name} must be an integer >= {low}, "
                       f"got {value!r}.")
  run = exploit_values.load_run(run_dir)
  indices = exploit_values.checked_seed_indices(run, seed_indices,
                                                where="replay_refit")
  learn = make_learn(run.loop, updates)
  evaluate = make_greedy_eval(run.loop)
  unroll = exploit_values.make_unroll(run.loop)
  out = {"run_dir": run_dir, "env_name": run.run_config["env_name"],
         "blocks": blocks, "updates": updates, "rounds": rounds,
         "lanes": run.loop.num_lanes, "seeds": []}
  for i in indices:
    state = jax.tree_util.tree_map(jnp.asarray,
                                   exploit_values.seed_state(run.state, i))
    key = jax.random.PRNGKey(key_seed)
    rows = []
    out["seeds"].append({"seed": run.seeds[i], "seed_index": i,
                         "rows": rows})
    for b in range(blocks + 1):
      if b:
        start = time.time()
        state = learn(state)
        jax.block_until_ready(state.learner)
        seconds = time.time() - start
      else:
        seconds = 0.
      row = measure(run.loop, state, evaluate, jax.random.fold_in(key, b),
                    rounds, unroll, max_unrewarded)
      row["block_seconds"] = seconds
      rows.append(row)
      log(f"seed {run.seeds[i]}: {format_row(row)}")
      if json_path:
        with open(json_path, "w") as f:
          json.dump(json_safe(out), f, indent=1)
  return out


def _f(x: float) -> str:
  return "nan" if x is None or not math.isfinite(x) else f"{x:.3f}"


def format_row(row: Dict[str, Any]) -> str:
  return (f"learner steps {row['learner_steps']}: greedy success "
          f"{_f(row['greedy_success'])}, return {_f(row['greedy_return'])}; "
          f"k = 1 (n {row['k1_n']}): argmax_0 = a_taken "
          f"{_f(row['k1_agree'])}, h^-1 Q_0(a_taken) "
          f"{_f(row['k1_taken_q0'])} / max {_f(row['k1_max_q0'])} / G_0 "
          f"{_f(row['k1_return_0'])}, gap {_f(row['k1_gap0'])}; "
          f"unrewarded max Q_0 {_f(row['unrewarded_max_q0'])} "
          f"({row['block_seconds']:.0f} s)")


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  parser = exploit_values.run_dir_parser(__doc__)
  exploit_values.add_seed_indices_argument(parser)
  parser.add_argument("--blocks", type=int, default=4)
  parser.add_argument("--updates", type=int, default=2000,
                      help="learner steps per block")
  parser.add_argument("--rounds", type=int, default=4,
                      help="evaluations (one episode per lane) per row")
  parser.add_argument("--max-unrewarded", type=int, default=500)
  parser.add_argument("--json", default=None, help="write the result here")
  args = parser.parse_args(argv)
  try:
    return refit(args.run_dir, args.seed_index, args.blocks, args.updates,
                 args.rounds, args.max_unrewarded, json_path=args.json)
  except ValueError as e:
    raise SystemExit(str(e)) from e


if __name__ == "__main__":
  main(sys.argv[1:])
