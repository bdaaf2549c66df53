"""The DAG worker: one Ray actor per device slot, running its planned task graph to the end."""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta
from pathlib import Path

from siirl import user_code
from siirl.dag_worker.disk_errors import is_disk_error, write_error
from siirl.startup_gc import collector_paused

with collector_paused():  # a Ray worker's start-up: torch, transformers, siiRL's engines (siirl.startup_gc)
    import torch
    import torch.distributed as dist

    from siirl.dag_worker.builtin_nodes import BuiltinNodeMethods
    from siirl.dag_worker.worker_output import divert_worker_output, worker_log_path
    from siirl.device import get_backend
    from siirl.device.pinning import pin_process
    from siirl.errors import SiirlUserError
    from siirl.execution.scheduler.plan import ExecutionPlan
    from siirl.params import SiirlConfig
    from siirl.params.root import EXTERNAL_LIB_KEY, external_libs
    from siirl.registry import import_user_modules

logger = logging.getLogger(__name__)


RENDEZVOUS_TIMEOUT = timedelta(minutes=30)


def _listen_on(host: str) -> socket.socket:
    """A listening socket on ``host`` only (the node IP Ray uses), on a free port.

    torch's ``TCPStore`` would bind its port on every interface; handed this socket's descriptor
    (``master_listen_fd``) it serves on this address alone, and no other process can take the port
    between choosing and binding it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(128)
    return sock


def available_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def ray_node_cpus() -> int | None:
    """The CPUs Ray gave this process's node, or None outside a Ray worker.

    Several Ray nodes may share one host (``ray.cluster_utils.Cluster``, containers with a CPU quota); the
    node's resources, not the host's cores, say how many threads its workers may run without fighting."""
    import ray

    if not ray.is_initialized():
        return None
    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == node_id and node.get("Alive", True):
            cpus = node.get("Resources", {}).get("CPU")
            return int(cpus) if cpus else None
    return None


def job_workers_on_ray_node() -> int | None:
    """How many bundles of this worker's placement group (one per DAG worker of the job) Ray put on this
    worker's node, or None outside a placement group. A planned node is not a Ray node: ``separate_async``
    on one host plans the rollout and the trainers as two nodes that share its cores."""
    import ray
    from ray.util import placement_group_table

    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    group = context.get_placement_group_id()
    if not group:
        return None
    table = placement_group_table().get(group, {})
    nodes = table.get("bundles_to_node_id", {})
    here = context.get_node_id()
    return sum(1 for node in nodes.values() if node == here) or None


def worker_threads(
    cfg: SiirlConfig, plan: ExecutionPlan, rank: int, node_cpus: int | None = None, on_node: int | None = None
) -> int:
    """``trainer.cpu_threads_per_worker``, or the node's cores (what Ray gave the node, at most the cores this
    process may use) split evenly among the job's DAG workers on it (``on_node``: counted on the Ray node;
    None: the workers of this rank's planned node)."""
    if int(cfg.trainer.cpu_threads_per_worker) > 0:
        return int(cfg.trainer.cpu_threads_per_worker)
    if on_node is None:
        node = plan.worker(rank).node_index
        on_node = sum(1 for worker in plan.workers if worker.node_index == node)
    cores = available_cores() if node_cpus is None else min(available_cores(), node_cpus)
    return max(1, cores // max(on_node, 1))


class DAGWorker(BuiltinNodeMethods):
    """Owns one rank: its device, its process groups, its model workers, its data shard.

    The built-in node functions are reachable as its static methods (``DAGWorker.generate`` ...).
    """

    def __init__(self, cfg: SiirlConfig, plan: ExecutionPlan, rank: int, device_name: str) -> None:
        self.reset(cfg, plan, rank, device_name)

    def reset(self, cfg: SiirlConfig, plan: ExecutionPlan, rank: int, device_name: str) -> None:
        """Take on a job: a new worker does it once; a warm one (``siirl.worker_pool``) once per job."""
        self.cfg = cfg
        level = os.environ.get("SIIRL_LOG_LEVEL", str(self.cfg.trainer.log_level))
        divert_worker_output(worker_log_path(cfg.trainer.output_dir, rank), level, rank)
        import_user_modules(external_libs(cfg), EXTERNAL_LIB_KEY)  # what they register, before any node
        self.plan, self.rank = plan, rank
        self.me = plan.worker(rank)
        self.backend = get_backend(device_name)
        self.local_device = 0
        self._listener: socket.socket | None = None
        torch.set_num_threads(worker_threads(self.cfg, plan, rank, ray_node_cpus(), job_workers_on_ray_node()))

    def end_job(self) -> None:
        """A warm worker between jobs: the next one reads the user's code afresh, as a new process would."""
        from siirl.dag_worker.warm_reset import forget_user_code

        forget_user_code()

    def ray_node(self) -> tuple[str, str]:
        """(Ray node id, node IP) this worker runs on: the driver names a lost node's ranks with it."""
        import ray

        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()

    def rendezvous_address(self) -> tuple[str, int]:
        """Rank 0 hosts the torch.distributed rendezvous, on the node IP Ray uses (the address peers dial)."""
        import ray

        host = ray.util.get_node_ip_address()
        self._listener = _listen_on(host)
        return host, self._listener.getsockname()[1]

    def _store(self, address: str, port: int) -> dist.TCPStore:
        if self._listener is None:
            return dist.TCPStore(address, port, self.plan.world_size, False, RENDEZVOUS_TIMEOUT)
        listen_fd, self._listener = self._listener.detach(), None  # the store owns the descriptor now
        return dist.TCPStore(
            address, port, self.plan.world_size, True, RENDEZVOUS_TIMEOUT, master_listen_fd=listen_fd
        )

    def init_distributed(self, address: str, port: int) -> None:
        import ray

        assigned = []
        if self.backend.ray_resource:
            assigned = ray.get_runtime_context().get_accelerator_ids().get(self.backend.ray_resource, [])
        self.local_device = pin_process(self.backend, assigned, self.me.local_rank)
        self.backend.set_device(self.local_device)
        os.environ.update(RANK=str(self.rank), WORLD_SIZE=str(self.plan.world_size),
                          LOCAL_RANK=str(self.me.local_rank), MASTER_ADDR=address, MASTER_PORT=str(port))
        dist.init_process_group(
            backend=self.backend.distributed_backend(with_cpu_groups=True),
            store=self._store(address, port),
            rank=self.rank,
            world_size=self.plan.world_size,
            timeout=RENDEZVOUS_TIMEOUT,
        )

    def _write_pid_file(self) -> None:
        """``<output_dir>/workers/rank_<r>.pid``: lets operators (and fault tests) find each worker process."""
        folder = Path(self.cfg.trainer.output_dir) / "workers"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"rank_{self.rank}.pid").write_text(str(os.getpid()), encoding="utf-8")
        except OSError as exc:
            raise SiirlUserError(
                f"trainer.output_dir={self.cfg.trainer.output_dir}: cannot write {folder} ({exc.strerror})"
            ) from None

    def run(self, startup_marks: dict[str, float] | None = None) -> dict[str, float]:
        """Build what this rank's graph needs and train; returns a small summary (never sample data).

        ``startup_marks``: the launcher's and driver's start-up marks (``siirl.startup_timing``), which this
        rank extends up to its first step."""
        from siirl.dag_worker.loop import TrainingLoop
        from siirl.dag_worker.worker_setup import build_context

        self._write_pid_file()
        loop = None
        try:
            user_code.start(self.cfg.trainer.output_dir, self.rank)
            ctx = build_context(self.cfg, self.plan, self.rank, self.backend, self.local_device, dict(startup_marks or {}))
            try:
                loop = TrainingLoop(ctx, self.me.graph)
                return loop.fit()
            finally:
                ctx.close()
                dist.destroy_process_group()
        except OSError as exc:
            if is_disk_error(exc):
                raise write_error(exc, loop.step if loop else 0, self.cfg.trainer.output_dir) from None
            raise
        finally:
            user_code.stop()
