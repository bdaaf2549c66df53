"""The test session's local Ray (shared by every test that trains through ``siirl.main_dag``)."""

import os
from pathlib import Path

import ray

REPO = Path(__file__).resolve().parent.parent


def start_local_ray() -> None:
    """4 CPUs, the repo importable in every worker."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    ray.init(address="local", num_cpus=4, runtime_env={"env_vars": {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"}},
             include_dashboard=False, logging_level="ERROR")
