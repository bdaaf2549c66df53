"""The test session's local Ray (shared by every test that trains through ``siirl.main_dag``)."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ray

REPO = Path(__file__).resolve().parent.parent


def start_local_ray() -> None:
    """4 CPUs, the repo importable in every worker."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    ray.init(address="local", num_cpus=4, runtime_env={"env_vars": {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"}},
             include_dashboard=False, logging_level="ERROR")


@contextmanager
def own_ray() -> Iterator[None]:
    """For a module that needs a Ray of its own (a cluster of several nodes, other resources): the session's
    Ray, when this process runs one, stops meanwhile and starts again after (its warm workers start anew)."""
    was_running = ray.is_initialized()
    ray.shutdown()
    try:
        yield
    finally:
        ray.shutdown()
        if was_running:
            start_local_ray()
