"""Ray ``worker_process_setup_hook``: a Ray worker process that believes it owns one CUDA GPU.

Only the calls that would reach the chip are faked: torch's device probes and ``set_device`` (recorded),
and NCCL (the CUDA backend's process groups run over gloo). Everything Ray does -- GPU assignment,
``CUDA_VISIBLE_DEVICES``, placement -- is real.
"""

from __future__ import annotations

import os
from typing import Any

CALLS: list[tuple[str, Any]] = []


def install() -> None:
    import torch

    from siirl.device.cuda import CudaBackend

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: len([d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d])
    torch.cuda.set_device = lambda index: CALLS.append(("set_device", index))
    CudaBackend.distributed_backend = lambda self, with_cpu_groups=False: "gloo"


def report(worker: Any) -> dict[str, Any]:
    """What a started DAG worker holds: run inside the actor through ``__ray_call__``."""
    import ray
    import torch.distributed as dist

    return {
        "gpu_ids": ray.get_runtime_context().get_accelerator_ids()["GPU"],
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "local_device": worker.local_device,
        "backend": worker.backend.name,
        "world_size": dist.get_world_size(),
        "rank": dist.get_rank(),
        "calls": list(CALLS),
    }
