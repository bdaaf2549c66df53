"""The driver: starts Ray, reserves one bundle per DAG worker, starts the workers and watches them.

It never sees a batch: workers load their own data shards and exchange samples through the per-node data
buffers. The driver only learns each worker's final summary (a few floats), whether it died, and the
headline numbers rank 0 posts to the progress board, which it draws as one progress bar.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import ray
from omegaconf import DictConfig, OmegaConf
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from siirl.dag_worker.progress import ProgressBar, create_board
from siirl.device import DeviceBackend
from siirl.errors import SiirlUserError
from siirl.execution.scheduler.plan import ExecutionPlan

logger = logging.getLogger(__name__)

PLACEMENT_TIMEOUT_S = 120


def _init_ray(cfg: DictConfig) -> bool:
    """Start or join Ray; True when this call started it (and so must shut it down)."""
    address = cfg.trainer.ray_address or os.environ.get("RAY_ADDRESS") or None
    # Workers import user modules (custom pipelines, reward files) relative to where the job started.
    path = os.pathsep.join(p for p in [os.getcwd(), os.environ.get("PYTHONPATH", "")] if p)
    # Workers draw no progress bars (Ray would forward every redraw as a line): the driver draws the one bar.
    env = {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if os.environ.get("SIIRL_LOG_LEVEL"):
        env["SIIRL_LOG_LEVEL"] = os.environ["SIIRL_LOG_LEVEL"]
    if ray.is_initialized():
        return False
    if not address:
        # Ray starts worker processes at nice 15 (meant for background tasks): the DAG workers ARE the job,
        # and at nice 15 any other busy process on the host would take most of their CPU time.
        os.environ.setdefault("RAY_worker_niceness", "0")
    # No dashboard: it starts a dozen processes (seconds of start-up) that a training job does not use.
    # Without an address, a fresh local instance ("local"), never whatever cluster another job left running.
    ray.init(address=address or "local", runtime_env={"env_vars": env}, logging_level=logging.WARNING,
             log_to_driver=True, include_dashboard=False)
    return True


def _bundle(backend: DeviceBackend) -> dict[str, float]:
    bundle = {"CPU": 1.0}
    if backend.ray_resource:
        bundle[backend.ray_resource] = 1.0
    return bundle


def _reserve(plan: ExecutionPlan, backend: DeviceBackend):
    bundles = [_bundle(backend) for _ in range(plan.world_size)]
    group = placement_group(bundles, strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=PLACEMENT_TIMEOUT_S)
    if not ready:
        remove_placement_group(group)
        raise SiirlUserError(
            f"Ray could not reserve {plan.world_size} bundles of {bundles[0]} within {PLACEMENT_TIMEOUT_S}s; "
            f"cluster has {ray.cluster_resources()} (lower trainer.n_devices_per_node / trainer.nnodes)"
        )
    return group


def _start_workers(cfg: DictConfig, backend: DeviceBackend, plan: ExecutionPlan, group) -> list:
    from siirl.dag_worker.worker import DAGWorker

    cfg_dict = OmegaConf.to_container(cfg, resolve=True)
    remote_cls = ray.remote(DAGWorker)
    workers = []
    for rank in range(plan.world_size):
        options = {
            "num_cpus": 1,
            "resources": {backend.ray_resource: 1} if backend.ray_resource else {},
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=group, placement_group_bundle_index=rank
            ),
            "name": f"siirl_dag_worker_{rank}",
        }
        workers.append(remote_cls.options(**options).remote(cfg_dict, plan, rank, backend.name))
    address, port = ray.get(workers[0].rendezvous_address.remote())
    ray.get([w.init_distributed.remote(address, port) for w in workers])
    return workers


def _watch(refs: list, bar: ProgressBar | None = None) -> dict:
    """Wait for every worker's ``run``; the first failure fails the job, naming the worker.

    A dead worker's ref resolves to an error at once, while its peers may sit in a collective waiting
    for it: failing on the first error (and killing the rest in ``run_job``) bounds the exit time.
    """
    pending = dict(zip(refs, range(len(refs))))
    summaries: dict[int, dict] = {}
    while pending:
        if bar is not None:
            bar.poll()
        done, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        for ref in done:
            rank = pending.pop(ref)
            try:
                summaries[rank] = ray.get(ref)
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise RuntimeError(f"DAG worker rank {rank} (siirl_dag_worker_{rank}) failed: {first}") from exc
    return summaries[0]


def run_job(cfg: DictConfig, backend: DeviceBackend, plan: ExecutionPlan) -> int:
    """Run the planned job to the end; 0 on success, 1 when a worker fails."""
    from siirl.data_coordinator import create_data_buffers

    started = time.perf_counter()
    try:
        owns_ray = _init_ray(cfg)
    except Exception as exc:  # noqa: BLE001  (Ray raises bare Exception/ConnectionError on start-up)
        print(f"siirl: job failed: could not start or join Ray: {str(exc).strip().splitlines()[0]}", file=sys.stderr)
        return 1
    workers: list = []
    group = board = None
    try:
        group = _reserve(plan, backend)
        create_data_buffers()
        board = create_board()
        workers = _start_workers(cfg, backend, plan, group)
        bar = ProgressBar(board)
        try:
            summary = _watch([w.run.remote() for w in workers], bar)
        finally:
            bar.close()
        shown = ", ".join(f"{k}={v:.3f}" for k, v in summary.items())
        logger.info("job finished in %.1fs: %s; outputs in %s", time.perf_counter() - started, shown,
                    cfg.trainer.output_dir)
        return 0
    except RuntimeError as exc:
        print(f"siirl: job failed: {exc}", file=sys.stderr)
        return 1
    finally:
        for worker in workers:
            ray.kill(worker, no_restart=True)
        if board is not None:
            ray.kill(board)
        if group is not None:
            remove_placement_group(group)
        if owns_ray:
            ray.shutdown()
