"""End-to-end runs of ``siirl.main_dag`` on the embedded model, sharing one local Ray instance."""

import os
from pathlib import Path

import pytest
import ray

REPO = Path(__file__).resolve().parents[2]


def start_local_ray() -> None:
    """The session's local Ray: 4 CPUs, the repo importable in every worker."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    ray.init(address="local", num_cpus=4, runtime_env={"env_vars": {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"}},
             include_dashboard=False, logging_level="ERROR")


@pytest.fixture(scope="session")
def ray_session():
    """The session's Ray, with warm DAG workers that every job of the session borrows (siirl.worker_pool)."""
    from siirl.worker_pool import warm_workers

    if not ray.is_initialized():
        start_local_ray()
    with warm_workers() as pool:
        yield pool
    ray.shutdown()
