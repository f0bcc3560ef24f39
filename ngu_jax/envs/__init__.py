"""Batched and functional environments behind one registry
(docs/design.md#environments).

One name per environment, the same in both loops
(`ngu_jax.envs.registry` has the table):

* `make(name, num_envs, seed=0, **overrides)` builds a `BatchedEnv` of B
  lanes for the Python loop (and the Ray program);
* `make_functional(name, **overrides)` builds ONE lane of a pure-JAX
  `functional.FunctionalEnv` for the compiled loop (vmap its `reset` /
  `step` over lanes).

Names:

* `atari/<Game>`: envpool Atari with the NGU preset (Table 8), e.g.
  `atari/MontezumaRevenge` (`atari.make_atari`). Python loop only: the
  compiled loop refuses it, naming the Python loop.
* `disco_maze`: Random Disco Maze (Sec. 4.1, Table 7); numpy
  (`disco_maze.DiscoMaze`) in the Python loop, `disco_maze_jax.DiscoMazeJax`
  in the compiled loop.
* `minigrid/<MiniGrid id>`, e.g. `minigrid/MiniGrid-DoorKey-8x8-v0`: envpool
  (`minigrid.MiniGridEnv`, all its ids) in the Python loop, xland-minigrid
  (`xminigrid_env.XMiniGrid`, its 11 ids) in the compiled loop.
* `gymnax/<gymnax id>`, e.g. `gymnax/DeepSea-bsuite`: `gymnax_adapter.
  GymnaxEnv` in the Python loop, `gymnax_functional.GymnaxFunctional` in
  the compiled loop (the same gymnax functions).
* `noisy_grid/<noise>`: one fixed maze with noise "none", "disco", "tv" or
  "frame" (`noisy_grid.NoisyGrid`, a noisy-TV test); pure JAX, so the
  Python loop runs it in `functional.FunctionalBatchedEnv` lanes.
* `jax/<name>`: the functional implementation of `<name>` in the Python
  loop (`FunctionalBatchedEnv` lanes), e.g. `jax/disco_maze`: how the two
  loops are compared on the very same environment (`make_functional` reads
  it as `<name>`).
* `module:factory`: a user's own environment. `make` calls
  `factory(**overrides)`, adding `num_envs=` and `seed=` where the factory
  has parameters of those names, and takes a `BatchedEnv`, a
  `FunctionalEnv` (run in lanes) or a `gymnasium.vector.VectorEnv`
  (auto-reset mode NEXT_STEP, `gymnasium_adapter.GymnasiumVectorEnv`);
  `make_functional` calls `factory(**overrides)` and takes a
  `FunctionalEnv` only.

`available()` lists every concrete name once, `loops_of(name)` the loops
that accept it, `check_name(name, loop)` refuses a name a loop cannot run
before anything is built (`python -m experiments.train --list` prints them
by family with their loops). Name errors are `EnvironmentNameError`s (a
`ValueError`). Every environment declares what its observations are
(`BatchedEnv.observation_encoding()`): Atari, Disco Maze and the noisy grids
pixels, MiniGrid symbolic codes, gymnax and gymnasium from their
observation spaces.
"""

from ngu_jax.envs.base import Array
from ngu_jax.envs.base import BatchedEnv
from ngu_jax.envs.base import BoundedArray
from ngu_jax.envs.base import check_observation_finite
from ngu_jax.envs.base import check_positive_int
from ngu_jax.envs.base import DiscreteArray
from ngu_jax.envs.base import StepType
from ngu_jax.envs.base import TimeStep
from ngu_jax.envs.base import validate_actions
from ngu_jax.envs.registry import available
from ngu_jax.envs.registry import check_name
from ngu_jax.envs.registry import EnvironmentNameError
from ngu_jax.envs.registry import FAMILIES
from ngu_jax.envs.registry import known_names
from ngu_jax.envs.registry import LOOPS
from ngu_jax.envs.registry import loops_of
from ngu_jax.envs.registry import make
from ngu_jax.envs.registry import make_functional
from ngu_jax.types import ObservationEncoding


__all__ = (
    "Array",
    "available",
    "BatchedEnv",
    "BoundedArray",
    "check_name",
    "check_observation_finite",
    "check_positive_int",
    "DiscreteArray",
    "EnvironmentNameError",
    "FAMILIES",
    "known_names",
    "LOOPS",
    "loops_of",
    "make",
    "make_functional",
    "ObservationEncoding",
    "StepType",
    "TimeStep",
    "validate_actions",
)
