"""Batched environments behind one interface (docs/design.md#environments).

`make(name, num_envs, seed=0, **overrides)` builds any of them:

* `atari/<Game>`: envpool Atari with the NGU preset (Table 8), e.g.
  `atari/MontezumaRevenge` (`ngu_jax.envs.atari.make_atari`).
* `disco_maze`: Random Disco Maze (Sec. 4.1, Table 7).
* `minigrid/<envpool id>`: envpool MiniGrid, e.g.
  `minigrid/MiniGrid-DoorKey-8x8-v0`.
* `gymnax/<gymnax id>`: a JAX-native gymnax environment, e.g.
  `gymnax/DeepSea-bsuite`.

Functional (pure-JAX) environments for the compiled loop
(`ngu_jax.envs.functional`): `make_functional(name, **overrides)` builds one
lane of "disco_maze" (`disco_maze_jax.DiscoMazeJax`),
"minigrid/<MiniGrid id>" (xland-minigrid, `xminigrid_env.XMiniGrid`),
"gymnax/<gymnax id>" (`gymnax_functional.GymnaxFunctional`) or
"noisy_grid/<noise>" (one fixed maze with noise "none", "disco", "tv" or
"frame": `noisy_grid.NoisyGrid`, a noisy-TV test). The Python loop
runs the very same environments under the name "jax/<name>" (`make`
wraps them in `functional.FunctionalBatchedEnv`), which is how the two loops
are compared.

`available()` lists every concrete name `make` accepts (`python -m
experiments.train --list` prints them by family). Every environment declares
what its observations are (`BatchedEnv.observation_encoding()`): Atari,
Disco Maze and the noisy grids pixels, MiniGrid symbolic codes, gymnax from
its observation space.
"""

from typing import Any, Optional, Tuple

from ngu_jax.envs.base import Array
from ngu_jax.envs.base import BatchedEnv
from ngu_jax.envs.base import BoundedArray
from ngu_jax.envs.base import check_observation_finite
from ngu_jax.envs.base import check_positive_int
from ngu_jax.envs.base import DiscreteArray
from ngu_jax.envs.base import StepType
from ngu_jax.envs.base import TimeStep
from ngu_jax.envs.base import validate_actions
from ngu_jax.types import ObservationEncoding

_PATTERNS = (
    "atari/<Game>  (e.g. atari/MontezumaRevenge, atari/Pong)",
    "disco_maze",
    "minigrid/<envpool id>  (e.g. minigrid/MiniGrid-DoorKey-8x8-v0, "
    "minigrid/MiniGrid-FourRooms-v0)",
    "gymnax/<gymnax id>  (e.g. gymnax/DeepSea-bsuite)",
    "jax/<functional name>  (e.g. jax/disco_maze, "
    "jax/minigrid/MiniGrid-DoorKey-8x8-v0, jax/noisy_grid/tv: "
    "`make_functional`'s pure-JAX environments in lanes)",
)
_FUNCTIONAL_PATTERNS = (
    "disco_maze",
    "minigrid/<MiniGrid id>  (xland-minigrid; e.g. "
    "minigrid/MiniGrid-DoorKey-8x8-v0, minigrid/MiniGrid-FourRooms-v0)",
    "gymnax/<gymnax id>  (e.g. gymnax/DeepSea-bsuite)",
    "noisy_grid/<noise>  (noise: none, disco, tv or frame; e.g. "
    "noisy_grid/tv)",
)


FAMILIES = ("atari", "disco_maze", "minigrid", "gymnax", "noisy_grid")


def known_names() -> Tuple[str, ...]:
  """The names `make` accepts (patterns with examples)."""
  return _PATTERNS


def available(family: Optional[str] = None) -> Tuple[str, ...]:
  """The concrete environment names `make` accepts.

  Atari: "atari/<Game>" for every game envpool ships a ROM for; "disco_maze";
  MiniGrid: "minigrid/<id>" for envpool's MiniGrid ids; gymnax:
  "gymnax/<id>" for the ids `GymnaxEnv` accepts (gymnax's registry minus
  environments that download data or have continuous actions), none when
  gymnax (an optional extra) is not installed; noisy grids:
  "jax/noisy_grid/<noise>" for every `noisy_grid.NOISES` (pure JAX, in
  lanes). Whether an agent can train on
  one is a separate matter (e.g. its networks need an encoded observation
  shape they support).

  Args:
    family: one of `FAMILIES` for that family's names only; None for all,
      in `FAMILIES` order.

  Returns:
    Names such as "atari/Pong", "disco_maze",
    "minigrid/MiniGrid-DoorKey-5x5-v0", "gymnax/DeepSea-bsuite",
    "jax/noisy_grid/tv".

  Raises:
    ValueError: unknown family.
  """
  # pylint: disable=g-import-not-at-top
  if family is None:
    return tuple(n for f in FAMILIES for n in available(f))
  if family == "atari":
    from ngu_jax.envs import atari
    return tuple(f"atari/{game}" for game in atari.atari_games())
  if family == "disco_maze":
    return ("disco_maze",)
  if family == "minigrid":
    from ngu_jax.envs import minigrid
    return tuple(f"minigrid/{i}" for i in minigrid.minigrid_ids())
  if family == "gymnax":
    from ngu_jax.envs import gymnax_adapter
    if gymnax_adapter.gymnax is None:
      return ()
    return tuple(f"gymnax/{i}" for i in gymnax_adapter.gymnax_ids())
  if family == "noisy_grid":
    from ngu_jax.envs import noisy_grid
    return tuple(f"jax/noisy_grid/{noise}" for noise in noisy_grid.NOISES)
  raise ValueError(f"available: unknown family {family!r}; expected one of "
                   f"{FAMILIES} or None.")


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
  if family == "jax" and sep and env_id:
    from ngu_jax.envs import functional
    return functional.FunctionalBatchedEnv(
        make_functional(env_id, **overrides), num_envs, seed=seed)
  raise ValueError(f"make: unknown environment {name!r}; known names: "
                   + "; ".join(_PATTERNS) + ".")


def make_functional(name: str, **overrides: Any):
  """Builds ONE lane of a functional (pure-JAX) environment by name.

  Args:
    name: "disco_maze", "minigrid/<MiniGrid id>" (e.g.
      "minigrid/MiniGrid-DoorKey-8x8-v0"), "gymnax/<gymnax id>" or
      "noisy_grid/<noise>" (e.g. "noisy_grid/tv").
    **overrides: keyword arguments of the environment (e.g.
      `max_episode_steps=500`).

  Returns:
    A `functional.FunctionalEnv` (vmap its `reset` / `step` over lanes).

  Raises:
    ValueError: unknown name (the message lists the known ones).
  """
  # pylint: disable=g-import-not-at-top
  if not isinstance(name, str):
    raise ValueError(f"make_functional: `name` must be a string, got "
                     f"{name!r}.")
  family, sep, env_id = name.partition("/")
  if name == "disco_maze":
    from ngu_jax.envs import disco_maze_jax
    return disco_maze_jax.DiscoMazeJax(**overrides)
  if family == "minigrid" and sep and env_id:
    from ngu_jax.envs import xminigrid_env
    return xminigrid_env.XMiniGrid(env_id, **overrides)
  if family == "gymnax" and sep and env_id:
    from ngu_jax.envs import gymnax_functional
    return gymnax_functional.GymnaxFunctional(env_id, **overrides)
  if family == "noisy_grid" and sep and env_id:
    from ngu_jax.envs import noisy_grid
    return noisy_grid.NoisyGrid(env_id, **overrides)
  raise ValueError(f"make_functional: unknown functional environment "
                   f"{name!r}; known names: " + "; ".join(_FUNCTIONAL_PATTERNS)
                   + ".")


__all__ = (
    "Array",
    "available",
    "BatchedEnv",
    "BoundedArray",
    "check_observation_finite",
    "check_positive_int",
    "DiscreteArray",
    "FAMILIES",
    "known_names",
    "make",
    "make_functional",
    "ObservationEncoding",
    "StepType",
    "TimeStep",
    "validate_actions",
)
