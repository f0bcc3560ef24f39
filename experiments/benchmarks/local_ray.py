"""Running a benchmark on a local Ray cluster, and reporting what it measured.

Shared by the benchmarks of the distributed program (`distributed`, `soak`).
It imports neither Ray nor JAX at module level: Ray must be initialised in a
process before JAX starts there (docs/design.md#distributed-program).
"""

import json
import os
from typing import Any, Callable, Dict, Optional


def run_and_report(run: Callable[[], Dict[str, Any]],
                   json_path: Optional[str],
                   ray_cpus: Optional[int] = None) -> Dict[str, Any]:
  """`run()`, then prints its "lines" and writes all of it to `json_path`.

  With `ray_cpus`, `run` runs on a local Ray cluster of that many CPUs
  (loopback only, no dashboard, `launch.LOCAL_CLUSTER_SYSTEM_CONFIG`),
  started here unless Ray is already up and
  shut down again after; a cluster that was already up is kept.

  Args:
    run: returns the results, a JSON-able dict with "lines" (the report).
    json_path: where to write the results (None: nowhere).
    ray_cpus: CPUs of the local Ray cluster; None: no Ray.

  Returns:
    The results.
  """
  started = False
  if ray_cpus is not None:
    import ray  # pylint: disable=g-import-not-at-top
    started = not ray.is_initialized()
    if started:
      from experiments import launch  # pylint: disable=g-import-not-at-top
      ray.init(num_cpus=ray_cpus, include_dashboard=False,
               _node_ip_address="127.0.0.1", log_to_driver=False,
               _system_config=dict(launch.LOCAL_CLUSTER_SYSTEM_CONFIG))
  try:
    results = run()
  finally:
    if started:
      ray.shutdown()
  for line in results["lines"]:
    print(line, flush=True)
  if json_path:
    os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
    with open(json_path, "w") as f:
      json.dump(results, f, indent=1, default=float)
  return results
