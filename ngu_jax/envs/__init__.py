"""Batched environments behind one interface (issue 4; shared/DESIGN.md).

`make(name, num_envs, seed=0, **overrides)` builds any of them:

* `atari/<Game>`: envpool Atari with the NGU preset (Table 8), e.g.
  `atari/MontezumaRevenge` (`ngu_jax.envs.atari.make_atari`).
* `disco_maze`: Random Disco Maze (Sec. 4.1, Table 7).
* `minigrid/<envpool id>`: envpool MiniGrid, e.g.
  `minigrid/MiniGrid-DoorKey-8x8-v0`.
* `gymnax/<gymnax id>`: a JAX-native gymnax environment, e.g.
  `gymnax/DeepSea-bsuite`.
"""

from typing import Any, Tuple

from ngu_jax.envs.base import Array
from ngu_jax.envs.base import BatchedEnv
from ngu_jax.envs.base import BoundedArray
from ngu_jax.envs.base import check_observation_finite
from ngu_jax.envs.base import check_positive_int
from ngu_jax.envs.base import DiscreteArray
from ngu_jax.envs.base import StepType
from ngu_jax.envs.base import TimeStep
from ngu_jax.envs.base import validate_actions

_PATTERNS = (
    "atari/<Game>  (e.g. atari/MontezumaRevenge, atari/Pong)",
    "disco_maze",
    "minigrid/<envpool id>  (e.g. minigrid/MiniGrid-DoorKey-8x8-v0, "
    "minigrid/MiniGrid-FourRooms-v0)",
    "gymnax/<gymnax id>  (e.g. gymnax/DeepSea-bsuite)",
)


def known_names() -> Tuple[str, ...]:
  """The names `make` accepts (patterns with examples)."""
  return _PATTERNS


def make(name: str, num_envs: int, seed: int = 0,
         **overrides: Any) -> BatchedEnv:
  """Builds a batched environment by name.

  Args:
    name: one of `known_names()`: "atari/<Game>", "disco_maze",
      "minigrid/<envpool id>" or "gymnax/<gymnax id>".
    num_envs: number of lanes B.
    seed: base seed; lanes are seeded deterministically from it.
    **overrides: keyword arguments of the adapter (e.g. `noop_max=1` for
      Atari, `max_episode_steps=500` for Disco Maze).

  Returns:
    A `BatchedEnv` with B lanes.

  Raises:
    ValueError: unknown name (the message lists the known ones), or an
      invalid game / environment id.
  """
  # Adapters are imported lazily: envpool and gymnax load only when used.
  # pylint: disable=g-import-not-at-top
  if not isinstance(name, str):
    raise ValueError(f"make: `name` must be a string, got {name!r}.")
  family, sep, env_id = name.partition("/")
  if family == "atari" and sep and env_id:
    from ngu_jax.envs import atari
    return atari.make_atari(env_id, num_envs, seed, **overrides)
  if name == "disco_maze":
    from ngu_jax.envs import disco_maze
    return disco_maze.DiscoMaze(num_envs, seed=seed, **overrides)
  if family == "minigrid" and sep and env_id:
    from ngu_jax.envs import minigrid
    return minigrid.make_minigrid(env_id, num_envs, seed, **overrides)
  if family == "gymnax" and sep and env_id:
    from ngu_jax.envs import gymnax_adapter
    return gymnax_adapter.GymnaxEnv(env_id, num_envs, seed=seed, **overrides)
  raise ValueError(f"make: unknown environment {name!r}; known names: "
                   + "; ".join(_PATTERNS) + ".")


__all__ = (
    "Array",
    "BatchedEnv",
    "BoundedArray",
    "check_observation_finite",
    "check_positive_int",
    "DiscreteArray",
    "known_names",
    "make",
    "StepType",
    "TimeStep",
    "validate_actions",
)
