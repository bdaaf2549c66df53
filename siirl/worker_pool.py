"""Warm DAG workers kept between jobs of one driver process.

A fresh job pays, before its first step, for new worker processes: the Python start, ``import torch`` and
transformers, siiRL's own modules. On a small job that is most of its wall time. A process that runs many
jobs back to back (a test session, an option sweep in a notebook) can instead keep one
:class:`WarmWorkerPool` for its Ray and let ``run_job`` borrow the workers: a job that asks for the same
device family and world size as the last one gets the same actors, each ``reset`` for the new config and
plan (log file, threads, user code forgotten), and only pays for what is really its own (model, data,
process groups). A failed job never hands its workers back: they are killed, and the next job starts
fresh ones. Without an installed pool ``run_job`` starts and ends its own workers, as a launch from the
command line always does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.placement_group import remove_placement_group

logger = logging.getLogger(__name__)

#: The pool ``run_job`` borrows from (None: each job starts and ends its own workers).
_ACTIVE: WarmWorkerPool | None = None


class WarmWorkerPool:
    """One placement group and its DAG worker actors, kept alive between the jobs that fit them."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._group: Any = None
        self._workers: list = []
        #: Jobs that ran on warm workers (what a job started is counted by ``siirl.job_ledger``).
        self.reused = 0

    def borrow(self, cfg, backend, plan, reserve, launch) -> tuple[list, int]:
        """(workers, how many were started) for this job: the warm ones reset for it, or new ones from
        ``reserve(plan, backend)`` and ``launch(cfg, backend, plan, group)`` when the last job's do not fit
        (or did not survive)."""
        # The driver's Ray node names the cluster: workers of a Ray that was shut down since are gone with it.
        # Workers fit a job placed the same way: as many, spread over the nodes alike.
        nodes = tuple(plan.worker(rank).node_index for rank in range(plan.world_size))
        key = (ray.get_runtime_context().get_node_id(), backend.name, plan.world_size, nodes)
        if key == self._key and self._workers:
            try:
                ray.get([w.reset.remote(cfg, plan, rank, backend.name) for rank, w in enumerate(self._workers)])
                self.reused += 1
                return list(self._workers), 0
            except RayError as exc:
                logger.info("warm DAG workers unusable (%s); starting new ones", type(exc).__name__)
        self.close()
        self._group = reserve(plan, backend)
        self._workers = launch(cfg, backend, plan, self._group)
        self._key = key
        return list(self._workers), len(self._workers)

    def give_back(self, succeeded: bool) -> None:
        """After a job: a failed job's workers may sit in a broken collective or hold a half-built state, so
        they end; a finished job's forget its user code and wait for the next."""
        if succeeded:
            try:
                ray.get([worker.end_job.remote() for worker in self._workers])
                return
            except RayError:
                pass
        self.close()

    def close(self) -> None:
        """End the workers (those of a Ray since shut down ended with it)."""
        if self._key is not None and ray.is_initialized() and self._key[0] == ray.get_runtime_context().get_node_id():
            for worker in self._workers:
                ray.kill(worker, no_restart=True)
            if self._group is not None:
                remove_placement_group(self._group)
        self._key, self._group, self._workers = None, None, []


def active_pool() -> WarmWorkerPool | None:
    return _ACTIVE


@contextmanager
def pooled_jobs(pool: WarmWorkerPool | None) -> Iterator[WarmWorkerPool | None]:
    """Jobs run inside this block borrow from ``pool`` (None: each starts and ends its own workers)."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, pool
    try:
        yield pool
    finally:
        _ACTIVE = previous


@contextmanager
def warm_workers() -> Iterator[WarmWorkerPool]:
    """Jobs run inside this block share one new pool; on leaving, its workers end."""
    pool = WarmWorkerPool()
    try:
        with pooled_jobs(pool):
            yield pool
    finally:
        pool.close()
