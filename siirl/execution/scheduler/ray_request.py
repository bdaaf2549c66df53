"""What the driver asks Ray for: one placement-group bundle and one actor per DAG worker.

Pure functions of the device backend, so tests can build the driver's exact requests for every
registered backend and pass them through Ray's own validation without the hardware.
"""

from __future__ import annotations

from typing import Any

from siirl.device import DeviceBackend
from siirl.ray_names import job_scoped

#: Placement strategy of the worker bundles: fill a node before spilling to the next.
PLACEMENT_STRATEGY = "PACK"


def worker_name(rank: int) -> str:
    """The actor name of DAG worker ``rank`` of this job (``siirl.ray_names``)."""
    return job_scoped(f"siirl_dag_worker_{rank}")


def placement_bundles(backend: DeviceBackend, world_size: int) -> list[dict[str, float]]:
    """One bundle per DAG worker: a CPU slot plus one device of the backend's family."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return [backend.ray_bundle() for _ in range(world_size)]


def worker_actor_options(backend: DeviceBackend, group: Any, rank: int) -> dict[str, Any]:
    """``ray.remote(DAGWorker).options(**...)`` for ``rank``: its device resources, pinned to bundle ``rank``
    of placement group ``group``."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return {
        **backend.ray_actor_resources(),
        "scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=rank
        ),
        "name": worker_name(rank),
    }
