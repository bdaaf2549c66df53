"""Names of the Ray actors a job creates, unique to the job: two jobs on one cluster (``trainer.ray_address``),
even in one Ray namespace (``ray_kwargs.ray_init.namespace``), never find each other's DAG workers, progress
board or data buffers. The job is the driver's Ray connection; inside an actor Ray reports the job of the
driver that created it, so the driver and its workers (warm ones included) derive the same names."""

from __future__ import annotations

import ray


def job_scoped(name: str) -> str:
    """``name`` with this Ray job's id (unchanged outside Ray, e.g. in a unit test)."""
    if not ray.is_initialized():
        return name
    return f"{name}_job{ray.get_runtime_context().get_job_id()}"
