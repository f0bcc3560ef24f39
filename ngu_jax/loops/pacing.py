"""The learner's pacing: one rule for every loop.

NGU App. A runs its learner as fast as it can; this project paces it instead
(as Acme's R2D2 does), so that a run's replay ratio does not depend on how
fast the hardware acts or learns. The rule, written once here and used by
the Python loop, the compiled loop and (through its replay's rate limiter)
the distributed program:

  once the replay holds `min_replay_size` sequences, at env step E_ready,
  the learner may have sampled

    samples_per_env_step * (E - E_ready)   sequences at env step E,

  with samples_per_env_step = samples_per_insert / replay_period
  (`NGUConfig.samples_per_env_step`). Inserts are counted as fresh env steps
  / replay_period: that is the number of sequences for full-length ones
  (each new sequence brings `replay_period` new steps), and it keeps the
  many short, padded sequences at episode ends (e.g. Disco Maze agents
  walking into walls after a few steps) from multiplying the learner's work
  per step of experience. The replay ratio (transitions sampled per
  transition generated) is samples_per_insert * trace_length /
  replay_period.

The single-process loops check `learner_step_due` after every actor step
(the compiled loop after every block of actor steps) and run learner steps
while it holds. The distributed program cannot step the learner from the
actors' loop: its replay node's rate limiter (Reverb's SampleToInsertRatio,
`ngu_jax.replay.prioritized.RateLimiter`) blocks samples and inserts, and it
expresses the same rule by counting each inserted sequence as
`insert_weights` (its fresh env steps / replay_period) and offsetting from
the inserts counted when the replay became ready. What remains different
there: (1) steps still in an actor's adder (less than one window per lane)
count only once inserted, (2) the limiter lets the learner run up to
`error_buffer` sampled sequences ahead or behind (the single-process loops:
at most one batch ahead), and (3) the steps of a window too short to train
on (fewer than burn_in + 2 real steps: dropped by the adder) are never
counted. None grows with the run: learner steps per env step agree
(tests/loops/distributed/test_pacing.py).
"""

from typing import Any

import numpy as np

from ngu_jax.agents.ngu.config import NGUConfig


def samples_per_env_step(config: NGUConfig) -> float:
  """Sampled sequences the learner may take per fresh environment step.

  samples_per_insert / replay_period (module docstring); the same as
  `NGUConfig.samples_per_env_step`.
  """
  return config.samples_per_env_step


def is_ready(config: NGUConfig, replay_size: Any) -> Any:
  """Whether learning may start: the replay holds `min_replay_size` items.

  Works on Python ints and on (traced) JAX arrays alike.
  """
  return replay_size >= config.min_replay_size


def learner_step_due(config: NGUConfig, learner_steps: Any,
                     env_steps_since_ready: Any) -> Any:
  """Whether learner step number `learner_steps` (0-based) is due now.

  The rule of the module docstring: learner_steps * batch_size <=
  samples_per_env_step * (env steps since the replay became ready), so the
  first step runs as soon as the replay is ready. Works on Python numbers
  and on (traced) JAX arrays alike (the compiled loop passes int32 learner
  steps and float32 env steps: the product is float32).

  Args:
    config: the agent's config (batch_size, samples_per_insert,
      replay_period).
    learner_steps: learner steps taken so far.
    env_steps_since_ready: E - E_ready (all lanes, all actors).

  Returns:
    A bool (or a bool array).
  """
  return (learner_steps * config.batch_size
          <= samples_per_env_step(config) * env_steps_since_ready)


def learner_steps_due(config: NGUConfig, env_steps_since_ready: float
                      ) -> int:
  """How many learner steps the rule allows in total by now (0 if not ready).

  The number of n for which `learner_step_due(config, n, ...)` holds:
  floor(samples_per_env_step * E / batch_size) + 1 for E >= 0.
  """
  if env_steps_since_ready < 0:
    return 0
  allowed = samples_per_env_step(config) * env_steps_since_ready
  return int(np.floor(allowed / config.batch_size)) + 1


def insert_weights(mask: np.ndarray, replay_period: int) -> np.ndarray:
  """Each sequence's fresh env steps / replay_period: its pacing weight.

  A window of the `SequenceAdder` starts every `replay_period` (P) steps of
  an episode, so the steps [k P, k P + P) of an episode are new in window k:
  a full window brings P fresh steps (weight 1), a padded one at an episode
  end min(real steps, P).

  Args:
    mask: float [m, W] (or [W]), the items' `mask` (1 on real steps).
    replay_period: P.

  Returns:
    float64 [m] (or a scalar), in (0, 1].
  """
  real = np.sum(np.asarray(mask, np.float64), axis=-1)
  return np.minimum(real, replay_period) / float(replay_period)
