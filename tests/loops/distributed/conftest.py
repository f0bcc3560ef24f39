"""One local Ray cluster for the whole test session (2 CPUs, loopback).

`ray.init` costs seconds on 2 cores, so every distributed test shares this
cluster (docs/design.md#dependencies). Token authentication is set explicitly
(Ray 2.60's default), never disabled; Ray reads the mode at import, so it is set
when this file loads, before any test imports Ray. Skipped where Ray is not installed (the
Reverb environment).
"""

import os

import pytest

# Ray reads RAY_AUTH_MODE when it is imported: set it before.
os.environ.setdefault("RAY_AUTH_MODE", "token")


@pytest.fixture(scope="session")
def ray_cluster():
  ray = pytest.importorskip("ray")
  started = not ray.is_initialized()
  if started:
    ray.init(num_cpus=2, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False)
  yield ray
  if started:
    ray.shutdown()
