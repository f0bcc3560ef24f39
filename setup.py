"""Packaging for ngu_jax: composable JAX components for Never Give Up (NGU)."""

import os

import setuptools

_HERE = os.path.dirname(os.path.abspath(__file__))


def _version() -> str:
  with open(os.path.join(_HERE, "ngu_jax", "__init__.py")) as f:
    for line in f:
      if line.startswith("__version__"):
        return line.split("=")[1].strip().strip("\"'")
  raise RuntimeError("__version__ not found in ngu_jax/__init__.py")


def _readme() -> str:
  path = os.path.join(_HERE, "README.md")
  return open(path).read() if os.path.exists(path) else ""


# The core must import both on the newest JAX / numpy 2 and on the Reverb
# stack (jax 0.4.30, numpy 1.26, dm-haiku 0.0.13); docs/design.md#dependencies.
_CORE = [
    "jax>=0.4.30",
    "jaxlib>=0.4.30",
    "dm-haiku>=0.0.13",
    "optax>=0.2.3",
    "rlax>=0.1.6",
    "chex>=0.1.86",
    "envpool>=0.8.4",
    "numpy>=1.26",
]

_NOTEBOOK_RUNTIME = ["matplotlib>=3.8", "nbclient>=0.10", "nbformat>=5.9", "ipykernel>=6.29"]

# JAX-native environments (ngu_jax.envs.gymnax_adapter). gymnax >= 1.0 reports
# terminated and truncated separately; it needs jax >= 0.6 and pins
# gymnasium < 1.4 (envpool accepts gymnasium >= 0.26).
_GYMNAX = ["gymnax>=1.0"]

# Pure-JAX MiniGrid tasks for the compiled loop (ngu_jax.envs.xminigrid_env):
# xland-minigrid keeps MiniGrid's layouts and time limits and runs on
# Python 3.11 with the newest jax (navix's current release needs >= 3.12).
_XMINIGRID = ["xminigrid>=0.9.3"]

# Farama MiniGrid itself, the reference the tests step our pure-JAX
# KeyCorridor / MultiRoom generators against (ngu_jax.envs.xminigrid_levels;
# tests/envs/test_xminigrid_levels.py). Tests only: nothing imports it.
_MINIGRID_REFERENCE = ["minigrid>=3.1"]

# Results statistics (experiments.stats, experiments.compare): IQM with
# stratified bootstrap CIs (Agarwal et al. 2021). rliable 1.2.0 pins
# arch < 8, and arch 7.x fails at import under pandas >= 3.
_RESULTS = ["rliable>=1.2", "pandas<3", "matplotlib>=3.8"]

# The distributed program (ngu_jax.loops.distributed, experiments.launch):
# Ray 2.60 (token authentication on by default; wheels for Python 3.11-3.13).
_DISTRIBUTED = ["ray>=2.60"]

# pytest-xdist runs `make test` on every core, one test file per worker
# (tests/conftest.py keeps the Ray cluster's files on one worker);
# pytest-timeout fails a test that hangs (pytest.ini) instead of CI's limit.
_EXTRAS = {
    "test": ["pytest>=7.4", "pytest-xdist>=3.5", "pytest-timeout>=2.2"] + _NOTEBOOK_RUNTIME + _GYMNAX + _XMINIGRID
            + _MINIGRID_REFERENCE + _RESULTS + _DISTRIBUTED,
    "gymnax": _GYMNAX,
    "xminigrid": _XMINIGRID,
    # Everything the compiled loop can run (ngu_jax.loops.compiled).
    "jax-envs": _GYMNAX + _XMINIGRID,
    "notebooks": ["jupyterlab>=4.0"] + _NOTEBOOK_RUNTIME,
    "results": _RESULTS,
    "distributed": _DISTRIBUTED,
    # Reverb only installs beside tensorflow-cpu 2.15 with numpy < 2 and
    # jax <= 0.4.30: use a separate environment (see README).
    "reverb": [
        "dm-reverb==0.14.0",
        "tensorflow-cpu==2.15.1",
        # TFP (needed by rlax via distrax) >= 0.24 refuses TF < 2.18.
        "tensorflow-probability==0.23.0",
        "numpy<2",
        "jax==0.4.30",
        "jaxlib==0.4.30",
        "dm-haiku==0.0.13",
    ],
}

setuptools.setup(
    name="ngu_jax",
    version=_version(),
    description=(
        "Composable JAX components for Never Give Up (NGU): episodic and "
        "life-long novelty, UVFA networks, transformed Retrace, replay."
    ),
    long_description=_readme(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=setuptools.find_packages(include=["ngu_jax", "ngu_jax.*"]),
    python_requires=">=3.10",
    install_requires=_CORE,
    extras_require=_EXTRAS,
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
