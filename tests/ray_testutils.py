"""The test session's local Ray (shared by every test that trains through ``siirl.main_dag``)."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import ray

import siirl.driver

REPO = Path(__file__).resolve().parent.parent


#: Every module that stops the session's Ray for one of its own (``own_ray``) is in this group: they run one after
#: another in one test process, so the other processes' session Ray and warm workers never stop.
OWN_RAY_GROUP = pytest.mark.xdist_group("own_ray")


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


@contextmanager
def ray_start_attempts() -> Iterator[list]:
    """The launcher's attempts to start or join Ray inside the block: a refusal "before Ray" makes none. Counted
    at the launcher's one door to Ray, so the check holds whether or not this process already runs the
    session's Ray (``ray.is_initialized()`` would depend on which tests ran before in the process)."""
    attempts: list = []
    real = siirl.driver._init_ray
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(siirl.driver, "_init_ray", lambda cfg: attempts.append(cfg) or real(cfg))
        yield attempts
