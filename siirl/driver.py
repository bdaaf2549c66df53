"""The driver: starts Ray, reserves one bundle per DAG worker, starts the workers and watches them.

It never sees a batch: workers load their own data shards and exchange samples through the per-node data
buffers. The driver only learns each worker's final summary (a few floats), whether it died, and the
headline numbers rank 0 posts to the progress board, which it draws as one progress bar.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import time

import ray
from ray.exceptions import ActorUnavailableError, RayError
from ray.util.placement_group import placement_group, remove_placement_group

from siirl import startup_gc, startup_timing
from siirl.cluster import InterruptGuard, check_capacity, probe_address, ray_init_options
from siirl.dag_worker.layouts import moves_samples
from siirl.dag_worker.progress import ProgressBar, StallWatch, create_board
from siirl.dag_worker.worker_output import worker_log_path
from siirl.device import DeviceBackend
from siirl.earlier_run import set_aside_earlier_run
from siirl.errors import ClusterError, first_line
from siirl.execution.scheduler.plan import ExecutionPlan
from siirl.execution.scheduler.ray_request import PLACEMENT_STRATEGY, placement_bundles, worker_actor_options
from siirl.job_ledger import record_job
from siirl.orphan_guard import OrphanGuard
from siirl.params import SiirlConfig
from siirl.run_lock import output_dir_lock
from siirl.worker_errors import WorkerFailed, explain, pick_failure
from siirl.worker_pool import active_pool

logger = logging.getLogger(__name__)

PLACEMENT_TIMEOUT_S = 120
#: After the first worker failure, how long to wait for the others' errors (a user error raised on one
#: rank usually makes its peers fail too, with less telling errors).
FAILURE_GRACE_S = 3.0
#: How long a worker that Ray cannot reach may take to show up as on a dead node (Ray's node health checks).
NODE_LOSS_WAIT_S = 40.0


def _init_ray(cfg: SiirlConfig) -> tuple[bool, OrphanGuard | None]:
    """Start or join Ray; True when this call connected (and so must shut down), and the watchdog that
    ends a Ray started here should the driver die without cleaning up."""
    address = cfg.trainer.ray_address or os.environ.get("RAY_ADDRESS") or None
    # Workers import user modules (custom pipelines, reward files) relative to where the job started.
    path = os.pathsep.join(p for p in [os.getcwd(), os.environ.get("PYTHONPATH", "")] if p)
    # Workers draw no progress bars (Ray would forward every redraw as a line): the driver draws the one bar.
    env = {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if os.environ.get("SIIRL_LOG_LEVEL"):
        env["SIIRL_LOG_LEVEL"] = os.environ["SIIRL_LOG_LEVEL"]
    if ray.is_initialized():
        return False, None
    if address:
        probe_address(address)
        ray.init(**ray_init_options(address, {"env_vars": env}, cfg.ray_kwargs.ray_init))
        return True, None
    # Ray starts worker processes at nice 15 (meant for background tasks): the DAG workers ARE the job,
    # and at nice 15 any other busy process on the host would take most of their CPU time.
    os.environ.setdefault("RAY_worker_niceness", "0")
    _token_auth()
    # A Ray started here inherits this environment down to every worker, so the job needs no runtime_env:
    # with one, Ray could not hand the actors its pre-started workers and would start fresh ones.
    os.environ.update(env)
    guard = OrphanGuard()
    try:
        ray.init(**ray_init_options(None, None, cfg.ray_kwargs.ray_init))
    except BaseException:
        guard.release()
        raise
    return True, guard


def _token_auth() -> None:
    """Ray turns token authentication on for a cluster it starts and says so in a WARNING on every run; asking
    for it explicitly keeps it on without the console line (a user's RAY_AUTH_MODE still wins). The token is
    this job's own, passed in the environment Ray's processes inherit: Ray would otherwise keep one in
    ``~/.ray/auth_token``, outside the run, which a job starting at the same time on a shared HOME could
    rewrite under this one. A user's token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``) wins."""
    from ray._raylet import AuthenticationTokenLoader, Config

    os.environ.setdefault("RAY_AUTH_MODE", "token")
    if os.environ["RAY_AUTH_MODE"] == "token" and not (
        os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
    ):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    # Ray read its config when imported: this process must see the mode and token too (Ray's own switch does this).
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _reserve(plan: ExecutionPlan, backend: DeviceBackend):
    bundles = placement_bundles(backend, plan.world_size)
    check_capacity(bundles)
    group = placement_group(bundles, strategy=PLACEMENT_STRATEGY)
    ready, _ = ray.wait([group.ready()], timeout=PLACEMENT_TIMEOUT_S)
    if not ready:
        remove_placement_group(group)
        raise ClusterError(
            f"Ray could not reserve {plan.world_size} bundles of {bundles[0]} within {PLACEMENT_TIMEOUT_S}s; "
            f"cluster has {ray.cluster_resources()} (lower trainer.n_devices_per_node / trainer.nnodes)"
        )
    return group


def _launch_workers(cfg: SiirlConfig, backend: DeviceBackend, plan: ExecutionPlan, group) -> list:
    """Ask Ray for the DAG worker actors without waiting: their processes start (and import torch)
    while the driver brings up the data buffers."""
    from siirl.dag_worker.worker import DAGWorker

    remote_cls = ray.remote(DAGWorker)
    return [
        remote_cls.options(**worker_actor_options(backend, group, rank)).remote(cfg, plan, rank, backend.name)
        for rank in range(plan.world_size)
    ]


def _rendezvous(workers: list, marks: dict[str, float]) -> dict[int, tuple[str, str]]:
    """torch.distributed across the workers, hosted by rank 0; where each rank runs (Ray node id, IP)."""
    address, port = ray.get(workers[0].rendezvous_address.remote())
    startup_timing.mark("workers", marks)
    ray.get([w.init_distributed.remote(address, port) for w in workers])
    placement = dict(enumerate(ray.get([w.ray_node.remote() for w in workers])))
    startup_timing.mark("rendezvous", marks)
    return placement


def lost_node(placement: dict[int, tuple[str, str]]) -> str | None:
    """The line for a Ray node that died under the job (its ranks die with it), or None if every node the
    job uses is alive: a lost node is said as such, not as the first of its workers' errors."""
    alive = {node["NodeID"] for node in ray.nodes() if node.get("Alive")}
    dead: dict[tuple[str, str], list[int]] = {}
    for rank, node in sorted(placement.items()):
        if node[0] not in alive:
            dead.setdefault(node, []).append(rank)
    if not dead:
        return None
    (node_id, ip), ranks = next(iter(dead.items()))
    return (f"Ray node {ip} ({node_id[:12]}) was lost with DAG worker ranks {ranks}; restart it (or drop it: "
            "trainer.nnodes) and run again with trainer.resume_mode=auto to go on from the last checkpoint")


def _wait_for_lost_node(placement: dict[int, tuple[str, str]], failures: list) -> str | None:
    """A worker Ray cannot reach (``ActorUnavailableError``) may sit on a node that died; Ray's control plane
    marks the node dead only after its health checks fail, so give it up to ``NODE_LOSS_WAIT_S`` to say so
    before reporting the workers' errors (its peers' connection resets say nothing of the cause)."""
    unreachable = any(isinstance(exc, ActorUnavailableError) for _, exc in failures)
    deadline = time.monotonic() + (NODE_LOSS_WAIT_S if unreachable else 0.0)
    while True:
        lost = lost_node(placement)
        if lost or time.monotonic() >= deadline:
            return lost
        time.sleep(0.5)


def _watch(refs: list, output_dir: str, bar: ProgressBar | None = None, stall: StallWatch | None = None,
           placement: dict[int, tuple[str, str]] | None = None) -> dict:
    """Wait for every worker's ``run``; the first failure fails the job, naming the worker.

    A dead worker's ref resolves to an error at once, while its peers may sit in a collective waiting
    for it: failing on the first error (and killing the rest in ``run_job``) bounds the exit time. A live
    worker that stopped (stopped process, endless user code) is caught by ``stall``.
    """
    pending = dict(zip(refs, range(len(refs))))
    summaries: dict[int, dict] = {}
    failures: list[tuple[int, BaseException]] = []
    deadline = None
    while pending and (deadline is None or time.monotonic() < deadline):
        if bar is not None:
            bar.poll()
        stalled = stall.poll() if stall is not None and not failures else None
        if stalled:
            raise WorkerFailed(stalled)
        done, _ = ray.wait(list(pending), num_returns=1, timeout=0.5 if deadline is None else 0.2)
        for ref in done:
            rank = pending.pop(ref)
            try:
                summaries[rank] = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - Ray wraps whatever the worker raised
                failures.append((rank, exc))
                deadline = deadline or time.monotonic() + FAILURE_GRACE_S
    if failures:
        lost = _wait_for_lost_node(placement, failures) if placement else None
        if lost:
            raise WorkerFailed(lost)
        rank, exc = pick_failure(failures)
        raise explain(exc, rank, output_dir)
    return summaries[0]


def closing_line(summary: dict, started: float, output_dir: str) -> str:
    """The job's last console line. Both of its times count from ``started``, the job's first start-up mark (the
    launcher's process start when it came through main()), from which the workers' first-step total counts too."""
    summary = dict(summary)
    first_step = summary.pop(startup_timing.TOTAL, None)
    shown = ", ".join(f"{k}={v:.3f}" for k, v in summary.items())
    began = "" if first_step is None else f" (first step after {first_step:.1f}s)"
    return f"job finished in {time.time() - started:.1f}s{began}: {shown}; outputs in {output_dir}"


def run_job(cfg: SiirlConfig, backend: DeviceBackend, plan: ExecutionPlan) -> int:
    """Run the planned job to the end; 0 on success, 1 when a worker fails for an internal reason.

    User errors (``SiirlUserError``, also those raised inside a worker) propagate to the launcher (exit 2).
    """
    from siirl.data_coordinator import create_data_buffers

    job_start = time.time()
    marks = startup_timing.take_launcher_marks()
    with output_dir_lock(cfg.trainer.output_dir), InterruptGuard() as guard:
        set_aside_earlier_run(cfg)  # under the lock: a running job's records are never moved
        try:
            owns_ray, orphan_guard = _init_ray(cfg)
            guard.reclaim()
            startup_timing.mark("ray", marks)
        except ClusterError:
            raise
        except Exception as exc:  # noqa: BLE001  (Ray raises bare Exception/ConnectionError on start-up)
            print(f"siirl: job failed: could not start or join Ray: {first_line(exc)}", file=sys.stderr)
            return 1
        workers: list = []
        group = board = None
        # A pool lives in the Ray it was filled in: a job that starts its own Ray starts its own workers.
        pool = None if owns_ray else active_pool()
        succeeded = False
        try:
            if pool is not None:
                workers, started = pool.borrow(cfg, backend, plan, _reserve, _launch_workers)
            else:
                group = _reserve(plan, backend)
                workers = _launch_workers(cfg, backend, plan, group)
                started = len(workers)
            startup_timing.mark("placement", marks)
            startup_gc.settle()  # the driver's start-up is over: it now waits on the workers
            record_job(world_size=plan.world_size, workers_started=started, started_ray=owns_ray)
            # Workers look both up only in ``run``, after the rendezvous. A plan whose stages all share one
            # layout and one placement group never moves samples between workers: no buffer actors.
            if moves_samples(plan):
                create_data_buffers()
            board = create_board()
            try:
                placement = _rendezvous(workers, marks)
            except RayError as exc:  # worker start-up / process groups
                raise explain(exc, None, str(cfg.trainer.output_dir)) from None
            logger.info("worker output (prints, library warnings): %s", worker_log_path(cfg.trainer.output_dir, "<rank>"))
            bar = ProgressBar(board)
            try:
                stall = StallWatch(board, cfg.trainer.stall_timeout_s)
                summary = _watch([w.run.remote(marks) for w in workers], str(cfg.trainer.output_dir), bar, stall,
                                 placement)
            finally:
                bar.close()
            logger.info("%s", closing_line(summary, min(marks.values(), default=job_start), cfg.trainer.output_dir))
            succeeded = True
            return 0
        except WorkerFailed as exc:
            print(f"siirl: job failed: {exc}", file=sys.stderr)
            return 1
        finally:
            if pool is not None:
                pool.give_back(succeeded)
            else:
                for worker in workers:
                    ray.kill(worker, no_restart=True)
            if board is not None:
                ray.kill(board)
            if group is not None:
                remove_placement_group(group)
            if owns_ray:
                ray.shutdown()
            if orphan_guard is not None:
                orphan_guard.release()
