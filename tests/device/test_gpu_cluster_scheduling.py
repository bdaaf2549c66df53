"""The launcher's scheduling path for device=cuda on a Ray cluster that declares GPUs it does not have.

Real: config -> plan, the driver's placement group and worker actors with their real options, Ray's GPU
assignment and ``CUDA_VISIBLE_DEVICES``, the workers' pinning and process-group rendezvous. Faked (in the
workers, by a Ray setup hook): torch's CUDA probes, ``set_device`` and NCCL.
"""

import os
from pathlib import Path

import pytest
import ray

from siirl.driver import _launch_workers, _rendezvous, _reserve
from siirl.main_dag import prepare
from tests.ray_testutils import OWN_RAY_GROUP, own_ray

pytestmark = [pytest.mark.slow, OWN_RAY_GROUP]

FAKES = Path(__file__).resolve().parent / "worker_fakes"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def gpu_declaring_ray(monkeypatch):
    # the environment is restored before own_ray starts the session's Ray again
    with own_ray(), monkeypatch.context() as patch:
        patch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # Ray checks declared GPUs against this list
        patch.syspath_prepend(str(FAKES))
        yield from _gpu_declaring_ray()


def _gpu_declaring_ray():
    path = os.pathsep.join([str(REPO), str(FAKES), os.environ.get("PYTHONPATH", "")])
    ray.init(
        address="local",  # a cluster of our own, even when another one runs on this host
        num_cpus=2,
        num_gpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={
            "env_vars": {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"},
            "worker_process_setup_hook": "fake_cuda_worker.install",
        },
    )
    yield
    ray.shutdown()


def test_cuda_workers_get_one_gpu_each(fake_cuda, gpu_declaring_ray, tmp_path):
    import fake_cuda_worker

    cfg, backend, _, plan = prepare(["device=cuda", "trainer.n_devices_per_node=2", f"trainer.output_dir={tmp_path}"])
    assert backend.name == "cuda" and plan.world_size == 2
    group = _reserve(plan, backend)
    workers = []
    try:
        workers = _launch_workers(cfg, backend, plan, group)
        _rendezvous(workers, {})
        reports = ray.get([w.__ray_call__.remote(fake_cuda_worker.report) for w in workers])
    finally:
        for worker in workers:
            ray.kill(worker, no_restart=True)
        ray.util.remove_placement_group(group)
    assert sorted(r["rank"] for r in reports) == [0, 1]
    assert all(r["world_size"] == 2 and r["backend"] == "cuda" for r in reports)
    gpu_ids = [r["gpu_ids"] for r in reports]
    assert all(len(ids) == 1 for ids in gpu_ids) and len({ids[0] for ids in gpu_ids}) == 2, gpu_ids
    for r in reports:
        assert r["visible"] == r["gpu_ids"][0], "each worker sees exactly the GPU Ray gave it"
        assert r["local_device"] == 0 and ("set_device", 0) in r["calls"]
