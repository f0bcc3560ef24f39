"""One environment registry for both loops (docs/design.md#environments).

Every environment has one name, and the same name builds it for the Python
loop (`make`: a `BatchedEnv` of B lanes) and for the compiled loop
(`make_functional`: one lane of a pure-JAX `functional.FunctionalEnv`),
wherever it can run there. Names, and the implementation each loop uses
(Python loop / compiled loop):

* `atari/<Game>`: envpool with the NGU preset (`atari.AtariEnv`) / refused,
  naming the Python loop (not pure JAX).
* `disco_maze`: numpy (`disco_maze.DiscoMaze`) /
  `disco_maze_jax.DiscoMazeJax`.
* `minigrid/<MiniGrid id>`: envpool (`minigrid.MiniGridEnv`, all its ids) /
  xland-minigrid (`xminigrid_env.XMiniGrid`, its ids only).
* `gymnax/<gymnax id>`: `gymnax_adapter.GymnaxEnv` /
  `gymnax_functional.GymnaxFunctional` (the same gymnax functions).
* `noisy_grid/<noise>`: `noisy_grid.NoisyGrid` in `FunctionalBatchedEnv`
  lanes / `noisy_grid.NoisyGrid`.

Where a name has both a native batched implementation and a functional one,
the Python loop keeps the native one (the published studies ran on it) and
the compiled loop the functional one; a functional-only environment runs in
the Python loop in `functional.FunctionalBatchedEnv` lanes under its plain
name. Two more forms:

* `jax/<name>`: the functional implementation of `<name>` in the Python loop
  (`FunctionalBatchedEnv` lanes), e.g. `jax/disco_maze`: how the two loops
  are compared on the very same environment. `make_functional` reads it as
  `<name>`.
* `module:factory` (a module path, a colon, an attribute): a user's own
  environment, built by calling the factory; see `make` and
  `make_functional` for the calling convention and what it may return.

`available()` lists the concrete names, `loops_of(name)` the loops that
accept one, `check_name(name, loop)` refuses a name a loop cannot run
(without building anything). Name errors are `EnvironmentNameError`s (a
`ValueError`); errors of the environments themselves (a bad game id, a bad
keyword) are their adapters' `ValueError`s.
"""

import importlib
import inspect
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from ngu_jax.envs import base

LOOPS = ("python", "compiled")
FAMILIES = ("atari", "disco_maze", "minigrid", "gymnax", "noisy_grid")

_BOTH = LOOPS
_PYTHON = ("python",)


class EnvironmentNameError(ValueError):
  """A name that does not build an environment in the loop asked for.

  Unknown names, a name the loop cannot run (Atari in the compiled loop), a
  `module:factory` that cannot be imported, found or called, or whose
  factory returns something that is not an environment of that loop.
  """


class Family(NamedTuple):
  """How a family's names are built in each loop (for `--list`).

  Attributes:
    pattern: its names, e.g. "minigrid/<MiniGrid id>".
    python: the implementation the Python loop uses.
    compiled: the implementation the compiled loop uses; "" if none.
  """
  pattern: str
  python: str
  compiled: str


FAMILY_INFO: Dict[str, Family] = {
    "atari": Family(
        "atari/<Game>", "envpool, NGU preset (atari.AtariEnv)", ""),
    "disco_maze": Family(
        "disco_maze", "numpy (disco_maze.DiscoMaze)",
        "pure JAX (disco_maze_jax.DiscoMazeJax)"),
    "minigrid": Family(
        "minigrid/<MiniGrid id>", "envpool (minigrid.MiniGridEnv)",
        "xland-minigrid (xminigrid_env.XMiniGrid), its ids only"),
    "gymnax": Family(
        "gymnax/<gymnax id>", "gymnax_adapter.GymnaxEnv",
        "gymnax_functional.GymnaxFunctional (the same gymnax functions)"),
    "noisy_grid": Family(
        "noisy_grid/<noise>",
        "noisy_grid.NoisyGrid in functional.FunctionalBatchedEnv lanes",
        "noisy_grid.NoisyGrid"),
}

_PATTERNS = (
    "atari/<Game>  (Python loop only; e.g. atari/MontezumaRevenge, "
    "atari/Pong)",
    "disco_maze",
    "minigrid/<MiniGrid id>  (envpool's ids in the Python loop, "
    "xland-minigrid's in the compiled loop; e.g. "
    "minigrid/MiniGrid-DoorKey-8x8-v0, minigrid/MiniGrid-FourRooms-v0)",
    "gymnax/<gymnax id>  (e.g. gymnax/DeepSea-bsuite)",
    "noisy_grid/<noise>  (noise: none, disco, tv or frame; e.g. "
    "noisy_grid/tv)",
    "jax/<name>  (the pure-JAX implementation of <name> in the Python loop, "
    "e.g. jax/disco_maze)",
    "module:factory  (your own environment, e.g. my_envs:make_env)",
)
_FUNCTIONAL_PATTERNS = (
    "disco_maze",
    "minigrid/<MiniGrid id>  (xland-minigrid; e.g. "
    "minigrid/MiniGrid-DoorKey-8x8-v0, minigrid/MiniGrid-FourRooms-v0)",
    "gymnax/<gymnax id>  (e.g. gymnax/DeepSea-bsuite)",
    "noisy_grid/<noise>  (noise: none, disco, tv or frame; e.g. "
    "noisy_grid/tv)",
    "module:factory  (your own FunctionalEnv, e.g. my_envs:make_env)",
)

_NOT_PURE_JAX = (
    "the compiled loop traces the environment into one jitted JAX program "
    "and needs a pure-JAX ngu_jax.envs.functional.FunctionalEnv "
    "(reset(key) / step(state, action) of one lane)")


def known_names() -> Tuple[str, ...]:
  """The name patterns `make` accepts, with examples."""
  return _PATTERNS


# pylint: disable=g-import-not-at-top
# Adapters are imported lazily: envpool, gymnax and xland-minigrid load only
# when a family needs them.


def _envpool_minigrid_ids() -> Tuple[str, ...]:
  from ngu_jax.envs import minigrid
  return tuple(minigrid.minigrid_ids())


def _xminigrid_ids() -> Tuple[str, ...]:
  from ngu_jax.envs import xminigrid_env
  if xminigrid_env.xminigrid is None:
    return ()
  return xminigrid_env.xminigrid_ids()


def _gymnax_ids() -> Tuple[str, ...]:
  from ngu_jax.envs import gymnax_adapter
  if gymnax_adapter.gymnax is None:
    return ()
  return gymnax_adapter.gymnax_ids()


def listing(family: str) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
  """A family's concrete names, each with the loops that accept it.

  Args:
    family: one of `FAMILIES`.

  Returns:
    ((name, loops), ...), e.g. (("disco_maze", ("python", "compiled")),);
    loops is a sub-tuple of `LOOPS`. Empty for a family whose optional extra
    (gymnax) is not installed; MiniGrid ids have "compiled" only with
    xland-minigrid installed.

  Raises:
    ValueError: unknown family.
  """
  if family == "atari":
    from ngu_jax.envs import atari
    return tuple((f"atari/{game}", _PYTHON) for game in atari.atari_games())
  if family == "disco_maze":
    return (("disco_maze", _BOTH),)
  if family == "minigrid":
    envpool_ids = _envpool_minigrid_ids()
    jax_ids = _xminigrid_ids()
    ids = envpool_ids + tuple(i for i in jax_ids if i not in envpool_ids)
    # Every id runs in the Python loop: envpool's, else xland-minigrid's
    # in lanes.
    return tuple((f"minigrid/{i}", _BOTH if i in jax_ids else _PYTHON)
                 for i in ids)
  if family == "gymnax":
    return tuple((f"gymnax/{i}", _BOTH) for i in _gymnax_ids())
  if family == "noisy_grid":
    from ngu_jax.envs import noisy_grid
    return tuple((f"noisy_grid/{noise}", _BOTH)
                 for noise in noisy_grid.NOISES)
  raise ValueError(f"listing: unknown family {family!r}; expected one of "
                   f"{FAMILIES}.")


def available(family: Optional[str] = None) -> Tuple[str, ...]:
  """The concrete environment names, one per environment.

  Atari: "atari/<Game>" for every game envpool ships a ROM for; "disco_maze";
  MiniGrid: "minigrid/<id>" for envpool's ids (and xland-minigrid's, which
  are among them); gymnax: "gymnax/<id>" for the ids `GymnaxEnv` accepts
  (gymnax's registry minus environments that download data or have
  continuous actions), none when gymnax (an optional extra) is not
  installed; noisy grids: "noisy_grid/<noise>" for every
  `noisy_grid.NOISES`. `loops_of` says which loops run each. Whether an
  agent can train on one is a separate matter (e.g. its networks need an
  encoded observation shape they support).

  Args:
    family: one of `FAMILIES` for that family's names only; None for all,
      in `FAMILIES` order.

  Returns:
    Names such as "atari/Pong", "disco_maze",
    "minigrid/MiniGrid-DoorKey-5x5-v0", "gymnax/DeepSea-bsuite",
    "noisy_grid/tv".

  Raises:
    ValueError: unknown family.
  """
  if family is None:
    return tuple(n for f in FAMILIES for n in available(f))
  if family not in FAMILIES:
    raise ValueError(f"available: unknown family {family!r}; expected one "
                     f"of {FAMILIES} or None.")
  return tuple(name for name, _ in listing(family))


def is_factory_name(name: Any) -> bool:
  """Whether `name` is a `module:factory` name (registry names have no
  colon)."""
  return isinstance(name, str) and ":" in name


def loops_of(name: str) -> Tuple[str, ...]:
  """The loops that accept a registry name, without building it.

  Args:
    name: a name of `available()` (e.g. "disco_maze" -> ("python",
      "compiled"), "atari/Pong" -> ("python",)) or "jax/<name>" (the
      Python loop, and the compiled loop where <name> has a functional
      implementation).

  Returns:
    A sub-tuple of `LOOPS`; () for a name outside the registry, a
    "module:factory" included (what its factory returns decides).
  """
  if not isinstance(name, str) or is_factory_name(name):
    return ()
  family, sep, rest = name.partition("/")
  if family == "jax" and sep:
    return _BOTH if "compiled" in loops_of(rest) else ()
  if family not in FAMILIES:
    return ()
  return dict(listing(family)).get(name, ())


def _unknown(name: str, where: str, patterns: Tuple[str, ...],
             what: str = "environment") -> EnvironmentNameError:
  return EnvironmentNameError(
      f"{where}: unknown {what} {name!r}; known names: "
      + "; ".join(patterns) + " (`python -m experiments.train --list` "
      "prints every name with its loops).")


def _atari_in_compiled(name: str, where: str) -> EnvironmentNameError:
  return EnvironmentNameError(
      f"{where}: {name!r} has no pure-JAX implementation (unknown functional "
      "environment): Atari runs on envpool's C++ emulator, which only the "
      "Python loop runs (`--loop python`, `ngu_jax.envs.make`); "
      f"{_NOT_PURE_JAX}. The compiled loop accepts: "
      + "; ".join(_FUNCTIONAL_PATTERNS) + ".")


def _minigrid_not_in_xminigrid(name: str, where: str) -> EnvironmentNameError:
  if name.partition("/")[2] in _envpool_minigrid_ids():
    jax_ids = _xminigrid_ids()
    why = ("xland-minigrid, the compiled loop's MiniGrid, does not. Its ids: "
           + ", ".join(jax_ids) if jax_ids else
           "the compiled loop's MiniGrid, xland-minigrid, is not installed "
           "(`pip install xminigrid`)")
    return EnvironmentNameError(
        f"{where}: {name!r} runs in the Python loop only (`--loop python`: "
        f"envpool has it; {why}).")
  return _unknown(name, where, _FUNCTIONAL_PATTERNS,
                  "functional environment")


def check_name(name: str, loop: str) -> None:
  """Refuses a name that `loop` cannot run, before anything is built.

  Registry names are checked against `loops_of`; "module:factory" is
  imported and looked up (in the compiled loop, a factory whose `num_envs`
  has no default is refused: it builds a batched environment). What a
  factory returns is checked when `make` / `make_functional` call it.

  Args:
    name: an environment name (module docstring).
    loop: one of `LOOPS`.

  Raises:
    EnvironmentNameError: unknown name, a name of another loop only (the
      message names the loop that accepts it), or a factory that cannot be
      imported, found or called.
    ValueError: unknown loop.
  """
  if loop not in LOOPS:
    raise ValueError(f"check_name: unknown loop {loop!r}; expected one of "
                     f"{LOOPS}.")
  where = "make" if loop == "python" else "make_functional"
  family, sep, rest = _split(name, where)
  if family == "jax" and sep:
    # The functional implementation of `rest`, in either loop.
    check_name(rest, "compiled")
    return
  if is_factory_name(name):
    factory = load_factory(name, where)
    if loop == "compiled":
      _refuse_batched_factory(factory, name, where)
    return
  if loop in loops_of(name):
    return
  if loop == "compiled" and family == "atari" and sep and rest:
    raise _atari_in_compiled(name, where)
  if loop == "compiled" and family == "minigrid" and sep and rest:
    raise _minigrid_not_in_xminigrid(name, where)
  accepted = loops_of(name)
  if accepted:
    raise EnvironmentNameError(
        f"{where}: {name!r} runs in the {' and '.join(accepted)} loop only, "
        f"not the {loop} loop.")
  error = _unknown(name, where,
                   _PATTERNS if loop == "python" else _FUNCTIONAL_PATTERNS)
  if family in FAMILIES and not listing(family):
    error = EnvironmentNameError(f"{error} There are no {family} names: is "
                                 "its optional extra installed?")
  raise error


# User factories: "module:factory".


def load_factory(name: str, where: str = "load_factory") -> Callable[..., Any]:
  """The callable that "module:factory" names (importing the module).

  Args:
    name: "module.path:attribute" (the attribute may be dotted, e.g.
      "my_envs:Maze.make"); the module must be importable (the current
      directory is on the path of `python -m ...`).
    where: the public function, for messages.

  Returns:
    The callable.

  Raises:
    EnvironmentNameError: a malformed name, a module that cannot be imported
      (the import's own error chained), a missing attribute, or an attribute
      that is not callable.
  """
  module_name, _, attribute = name.partition(":")
  if not module_name or not attribute or ":" in attribute:
    raise EnvironmentNameError(
        f"{where}: {name!r} is not 'module:factory' (a module path, a colon, "
        "an attribute), e.g. 'my_envs:make_env'.")
  try:
    module = importlib.import_module(module_name)
  except Exception as e:  # pylint: disable=broad-except
    raise EnvironmentNameError(
        f"{where}: cannot import module {module_name!r} of {name!r} "
        f"({type(e).__name__}: {e}); is it on the Python path (the current "
        "directory is, for `python -m ...`)?") from e
  obj = module
  for i, part in enumerate(attribute.split(".")):
    if not hasattr(obj, part):
      owner = ".".join([module_name] + attribute.split(".")[:i])
      raise EnvironmentNameError(
          f"{where}: {owner!r} has no attribute {part!r} (from {name!r}).")
    obj = getattr(obj, part)
  if not callable(obj):
    raise EnvironmentNameError(
        f"{where}: {name!r} is a {type(obj).__name__}, not callable; expected "
        "a function (or class) that returns the environment.")
  return obj


def _parameters(factory: Callable[..., Any]
                ) -> Optional[Dict[str, inspect.Parameter]]:
  """The factory's keyword-passable parameters by name; None if unknown."""
  try:
    signature = inspect.signature(factory)
  except (TypeError, ValueError):
    return None
  return {p.name: p for p in signature.parameters.values()
          if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _refuse_batched_factory(factory: Callable[..., Any], name: str,
                            where: str) -> None:
  """Refuses, in the compiled loop, a factory that needs `num_envs`."""
  parameter = (_parameters(factory) or {}).get("num_envs")
  if parameter is not None and parameter.default is parameter.empty:
    raise EnvironmentNameError(
        f"{where}: {name!r} needs `num_envs`, so it builds a batched "
        "environment (B lanes stepped from Python), which only the Python "
        f"loop runs (`--loop python`, `ngu_jax.envs.make`); {_NOT_PURE_JAX}, "
        "built by calling the factory with the environment keywords only.")


def _describe(obj: Any) -> str:
  kind = type(obj)
  text = repr(obj)
  if len(text) > 80:
    text = text[:77] + "..."
  return f"a {kind.__module__}.{kind.__qualname__} ({text})"


def _close(obj: Any) -> None:
  close = getattr(obj, "close", None)
  if callable(close):
    close()


_EXPECTED = ("a ngu_jax.envs.BatchedEnv, a ngu_jax.envs.functional."
             "FunctionalEnv (one pure-JAX lane) or a gymnasium.vector."
             "VectorEnv")


def _batched_from_factory(name: str, num_envs: int, seed: int,
                          overrides: Dict[str, Any]) -> base.BatchedEnv:
  """`make` for "module:factory" (its docstring has the convention)."""
  from ngu_jax.envs import functional
  where = "make"
  num_envs = base.check_positive_int(num_envs, "num_envs", where)
  factory = load_factory(name, where)
  parameters = _parameters(factory) or {}
  kwargs = dict(overrides)
  if "num_envs" in parameters:
    kwargs["num_envs"] = num_envs
  if "seed" in parameters:
    kwargs["seed"] = seed
  env = factory(**kwargs)
  if isinstance(env, functional.FunctionalEnv):
    return functional.FunctionalBatchedEnv(env, num_envs, seed=seed)
  if not isinstance(env, base.BatchedEnv):
    from ngu_jax.envs import gymnasium_adapter
    if gymnasium_adapter.is_vector_env(env):
      try:
        env = gymnasium_adapter.GymnasiumVectorEnv(env, seed=seed)
      except ValueError as e:  # Its auto-reset mode, its spaces.
        _close(env)
        raise EnvironmentNameError(f"{where}: {name!r} returned a gymnasium "
                                   f"vector environment this library cannot "
                                   f"run: {e}") from e
    else:
      hint = ""
      if gymnasium_adapter.is_single_env(env):
        hint = (" A single gymnasium.Env: return a vector of num_envs of "
                "them, e.g. gymnasium.make_vec(id, num_envs) or "
                "gymnasium.vector.SyncVectorEnv([make_one] * num_envs).")
      _close(env)
      raise EnvironmentNameError(
          f"{where}: {name!r} returned {_describe(env)}; expected {_EXPECTED}"
          f".{hint}")
  if env.num_envs != num_envs:
    got = env.num_envs
    env.close()
    raise EnvironmentNameError(
        f"{where}: {name!r} returned {got} lanes, expected num_envs = "
        f"{num_envs}: a factory of a batched environment must take "
        "`num_envs` and build that many.")
  return env


def _functional_from_factory(name: str, overrides: Dict[str, Any]):
  """`make_functional` for "module:factory"."""
  from ngu_jax.envs import functional
  from ngu_jax.envs import gymnasium_adapter
  where = "make_functional"
  factory = load_factory(name, where)
  _refuse_batched_factory(factory, name, where)
  env = factory(**overrides)
  if isinstance(env, functional.FunctionalEnv):
    return env
  if isinstance(env, base.BatchedEnv) or gymnasium_adapter.is_vector_env(
      env):
    description = _describe(env)
    _close(env)
    raise EnvironmentNameError(
        f"{where}: {name!r} returned a batched environment, {description}: "
        "B lanes stepped from Python, which only the Python loop runs "
        f"(`--loop python`, `ngu_jax.envs.make`); {_NOT_PURE_JAX}.")
  description = _describe(env)
  _close(env)
  raise EnvironmentNameError(
      f"{where}: {name!r} returned {description}; the compiled loop expects "
      "a ngu_jax.envs.functional.FunctionalEnv (one pure-JAX lane).")


def _split(name: Any, where: str) -> Tuple[str, str, str]:
  """`name.partition("/")` (family, "/", id) of a string name, else an
  `EnvironmentNameError`."""
  if not isinstance(name, str):
    raise EnvironmentNameError(f"{where}: `name` must be a string, got "
                               f"{name!r}.")
  return name.partition("/")


def make(name: str, num_envs: int, seed: int = 0,
         **overrides: Any) -> base.BatchedEnv:
  """Builds B lanes of an environment by name, for the Python loop.

  Registry names use the Python loop's implementation (module docstring):
  "atari/<Game>", "disco_maze" and "minigrid/<envpool id>" their native
  batched ones, "gymnax/<id>" `GymnaxEnv`, "noisy_grid/<noise>" (and any
  name with only a functional implementation) `FunctionalBatchedEnv`
  lanes; "jax/<name>" the functional implementation of <name> in
  `FunctionalBatchedEnv` lanes.

  "module:factory" calls `factory(**overrides)`, adding `num_envs=num_envs`
  if the factory has a parameter named `num_envs` and `seed=seed` if it has
  one named `seed`. It must return a `BatchedEnv` of `num_envs` lanes (used
  as it is), a `functional.FunctionalEnv` (run in `FunctionalBatchedEnv`
  lanes, seeded from `seed`) or a `gymnasium.vector.VectorEnv` of
  `num_envs` sub-environments in auto-reset mode NEXT_STEP (wrapped in
  `gymnasium_adapter.GymnasiumVectorEnv`, reset first with `seed`).

  Args:
    name: a name of `known_names()`, e.g. "disco_maze", "noisy_grid/tv",
      "jax/disco_maze", "my_envs:make_env".
    num_envs: number of lanes B.
    seed: base seed; lanes are seeded deterministically from it.
    **overrides: keyword arguments of the environment (e.g. `noop_max=1`
      for Atari, `max_episode_steps=500` for Disco Maze), or of the factory.

  Returns:
    A `BatchedEnv` with B lanes (fewer rows per step only in envpool's async
    mode, `batch_size=`).

  Raises:
    EnvironmentNameError: (a ValueError) unknown name (the message lists
      the known ones), or a factory that cannot be loaded or returns
      something else than the above.
    ValueError: an invalid game / environment id or keyword.
  """
  where = "make"
  family, sep, env_id = _split(name, where)
  if family == "jax" and sep and env_id:
    from ngu_jax.envs import functional
    return functional.FunctionalBatchedEnv(
        make_functional(env_id, **overrides), num_envs, seed=seed)
  if is_factory_name(name):
    return _batched_from_factory(name, num_envs, seed, overrides)
  if family == "atari" and sep and env_id:
    from ngu_jax.envs import atari
    return atari.make_atari(env_id, num_envs, seed, **overrides)
  if name == "disco_maze":
    from ngu_jax.envs import disco_maze
    return disco_maze.DiscoMaze(num_envs, seed=seed, **overrides)
  if family == "minigrid" and sep and env_id:
    if (env_id not in _envpool_minigrid_ids()
        and env_id in _xminigrid_ids()):
      return make("jax/" + name, num_envs, seed, **overrides)
    from ngu_jax.envs import minigrid
    return minigrid.make_minigrid(env_id, num_envs, seed, **overrides)
  if family == "gymnax" and sep and env_id:
    from ngu_jax.envs import gymnax_adapter
    return gymnax_adapter.GymnaxEnv(env_id, num_envs, seed=seed, **overrides)
  if family == "noisy_grid" and sep and env_id:
    return make("jax/" + name, num_envs, seed, **overrides)
  raise _unknown(name, where, _PATTERNS)


def make_functional(name: str, **overrides: Any):
  """Builds ONE lane of a functional (pure-JAX) environment by name.

  For the compiled loop (module docstring): "disco_maze" (`DiscoMazeJax`),
  "minigrid/<MiniGrid id>" (xland-minigrid's ids), "gymnax/<gymnax id>",
  "noisy_grid/<noise>"; "jax/<name>" is read as <name>. "atari/<Game>"
  and envpool-only MiniGrid ids are refused, naming the Python loop.

  "module:factory" calls `factory(**overrides)` (no `num_envs`, no `seed`:
  the loop draws each lane's keys) and must return a
  `functional.FunctionalEnv`; a factory whose `num_envs` parameter has no
  default is refused without calling it, and a batched environment (a
  `BatchedEnv` or a gymnasium vector environment) is refused, since only
  the Python loop runs those.

  Args:
    name: e.g. "disco_maze", "minigrid/MiniGrid-DoorKey-8x8-v0",
      "gymnax/DeepSea-bsuite", "noisy_grid/tv", "my_envs:make_lane".
    **overrides: keyword arguments of the environment (e.g.
      `max_episode_steps=500`), or of the factory.

  Returns:
    A `functional.FunctionalEnv` (vmap its `reset` / `step` over lanes).

  Raises:
    EnvironmentNameError: (a ValueError) unknown name (the message lists
      the known ones), a name of the Python loop only, or a factory that
      cannot be loaded or returns something else than a FunctionalEnv.
    ValueError: an invalid environment id or keyword.
  """
  where = "make_functional"
  family, sep, env_id = _split(name, where)
  if family == "jax" and sep and env_id:
    return make_functional(env_id, **overrides)
  if is_factory_name(name):
    return _functional_from_factory(name, overrides)
  if name == "disco_maze":
    from ngu_jax.envs import disco_maze_jax
    return disco_maze_jax.DiscoMazeJax(**overrides)
  if family == "minigrid" and sep and env_id:
    from ngu_jax.envs import xminigrid_env
    # xland-minigrid's tasks are ours to list, installed or not: another id
    # is a Python-loop name (and an uninstalled xminigrid an ImportError).
    if env_id not in xminigrid_env.xminigrid_ids():
      raise _minigrid_not_in_xminigrid(name, where)
    return xminigrid_env.XMiniGrid(env_id, **overrides)
  if family == "gymnax" and sep and env_id:
    from ngu_jax.envs import gymnax_functional
    return gymnax_functional.GymnaxFunctional(env_id, **overrides)
  if family == "noisy_grid" and sep and env_id:
    from ngu_jax.envs import noisy_grid
    return noisy_grid.NoisyGrid(env_id, **overrides)
  if family == "atari" and sep and env_id:
    raise _atari_in_compiled(name, where)
  raise _unknown(name, where, _FUNCTIONAL_PATTERNS, "functional environment")
