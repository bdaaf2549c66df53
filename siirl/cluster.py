"""Ray without hangs: a bounded connect, private defaults, impossible placements refused at once, and a
Ctrl-C that always ends the job and the processes it started.

Ray retries an unreachable address for minutes and, while it does, the interpreter may not run Python
signal handlers. So the address is probed with a plain TCP connect first, and interrupts are also seen
through ``signal.set_wakeup_fd`` by a watcher thread, which can end the process even while the main thread
sits in Ray's C++ code.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any, Self

from siirl.errors import ClusterError, ConfigError

logger = logging.getLogger(__name__)

#: Seconds a TCP connect to ``trainer.ray_address`` may take (env ``SIIRL_RAY_CONNECT_TIMEOUT_S``).
CONNECT_TIMEOUT_S = float(os.environ.get("SIIRL_RAY_CONNECT_TIMEOUT_S", "10"))
#: Seconds the clean shutdown after Ctrl-C may take before Ray's processes are killed outright.
INTERRUPT_GRACE_S = 6.0
EXIT_INTERRUPTED = 130


def gcs_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) to probe for ``host:port`` or ``ray://host:port``; None for ``auto`` / ``local``."""
    if address in ("auto", "local"):
        return None
    bare = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = bare.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterError(f"trainer.ray_address={address!r} is not host:port (or ray://host:port)")
    return host.strip("[]"), int(port)


def probe_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail in one line, within ``timeout_s``, when nothing listens at the Ray address."""
    endpoint = gcs_endpoint(address)
    if endpoint is None:
        return
    try:
        socket.create_connection(endpoint, timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ClusterError(
            f"cannot reach Ray at {address} within {timeout_s:g}s ({reason}); check trainer.ray_address / "
            "RAY_ADDRESS, or leave both empty to start a local Ray"
        ) from None


def ray_init_options(
    address: str | None, runtime_env: dict[str, Any] | None = None, user: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``ray.init`` keyword arguments. A Ray that siiRL starts itself serves only this job, so it runs
    without the dashboard's HTTP server (Ray still starts its per-node agents); to watch a job in the
    dashboard, start Ray yourself (``ray start --head --dashboard-host=<ip>``) and set trainer.ray_address.
    ``runtime_env`` carries the job's environment to a cluster started elsewhere. ``user`` is verl's
    ``ray_kwargs.ray_init``: its keys win, and its ``runtime_env`` is merged over siiRL's, as verl merges it
    over its defaults (``env_vars`` key by key; a null entry means Ray's default)."""
    options: dict[str, Any] = {
        # Without an address: a fresh local instance, never whatever cluster another job left running.
        "address": address or "local",
        "logging_level": logging.WARNING,
        "log_to_driver": True,
    }
    if address is None:
        options["include_dashboard"] = False
    user = dict(user or {})
    merged = _merge_runtime_env(runtime_env or {}, user.pop("runtime_env", None) or {})
    options.update(user)
    if merged:
        options["runtime_env"] = merged
    return options


def check_ray_init_keys(user: Mapping[str, Any]) -> None:
    """Every key of ``ray_kwargs.ray_init`` is a keyword of this Ray's ``ray.init`` (or one of its private
    ``_`` options): a misspelt one is said before the job starts, not as Ray's TypeError once it does."""
    if not user:
        return
    import difflib
    import inspect

    import ray

    params = inspect.signature(ray.init).parameters
    known = sorted(name for name, p in params.items() if p.kind is not p.VAR_KEYWORD)
    for key in sorted(user):
        if key not in known and not key.startswith("_"):
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean ray_kwargs.ray_init.{close[0]}?)" if close else ""
            raise ConfigError(
                f"bad config: ray_kwargs.ray_init.{key} is not an argument of ray.init (Ray {ray.__version__}){hint}"
            )


def _merge_runtime_env(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    merged = {**ours, **{key: value for key, value in theirs.items() if value is not None}}
    env_vars = {**ours.get("env_vars", {}), **(theirs.get("env_vars") or {})}
    if env_vars:
        merged["env_vars"] = {key: str(value) for key, value in env_vars.items()}
    return merged


def check_capacity(bundles: list[dict[str, float]]) -> None:
    """Refuse at once when the cluster's totals cannot hold the bundles (no 120 s placement wait)."""
    import ray

    totals = ray.cluster_resources()
    need: dict[str, float] = {}
    for bundle in bundles:
        for resource, amount in bundle.items():
            need[resource] = need.get(resource, 0.0) + amount
    for resource, amount in need.items():
        have = float(totals.get(resource, 0.0))
        if have < amount:
            raise ClusterError(
                f"{len(bundles)} DAG workers need {amount:g} {resource} but the Ray cluster has {have:g} in "
                "total; lower trainer.n_devices_per_node / trainer.nnodes or add nodes"
            )


def local_ray_cpus(cfg: Any) -> int | None:
    """CPUs of the Ray this job will start itself (``ray_kwargs.ray_init.num_cpus``, else what Ray counts on
    this host, cgroup quota included); None when the job joins a Ray that exists (its totals are checked
    once joined, by ``check_capacity``)."""
    import ray

    if cfg.trainer.ray_address or os.environ.get("RAY_ADDRESS") or ray.is_initialized():
        return None
    asked = (cfg.ray_kwargs.ray_init or {}).get("num_cpus")
    if asked is not None:
        return int(asked)
    from ray._private.utils import get_num_cpus

    return int(get_num_cpus())


def check_local_capacity(cfg: Any, bundles: list[dict[str, float]], separate: bool) -> None:
    """Before Ray starts: a local Ray cannot hold more CPU bundles than the host's CPUs, so say which keys
    size the job (the rollout's own, in ``separate_async``) instead of failing after Ray started."""
    have = local_ray_cpus(cfg)
    need = sum(bundle.get("CPU", 0.0) for bundle in bundles)
    if have is None or need <= have:
        return
    keys = "trainer.n_gpus_per_node (or trainer.n_devices_per_node) / trainer.nnodes"
    if separate:
        keys += " and the rollout's rollout.nnodes / rollout.n_gpus_per_node"
    raise ConfigError(
        f"bad config: {len(bundles)} DAG workers need {need:g} CPUs but the local Ray will have {have}; lower "
        f"{keys}, or give Ray more with ray_kwargs.ray_init.num_cpus"
    )


def _kill_local_ray() -> None:
    """SIGKILL every process of the Ray instance this driver started (no-op when it joined one)."""
    try:
        from ray._private import worker as ray_worker

        node = ray_worker._global_node
        if node is not None and node.head:
            node.kill_all_processes(check_alive=False, allow_graceful=False)
    except Exception as exc:  # noqa: BLE001 - last resort on the way out; report, never raise
        logger.warning("could not kill Ray's processes: %s", exc)


class InterruptGuard:
    """Ctrl-C / SIGTERM raise ``KeyboardInterrupt`` so the driver's cleanup runs; if that cleanup has not
    finished ``grace_s`` later, or on a second signal, Ray's processes are killed and the process exits 130."""

    def __init__(self, grace_s: float = INTERRUPT_GRACE_S) -> None:
        self.grace_s = grace_s
        self._signals = 0
        self._raised = False
        self._timer: threading.Timer | None = None
        self._saved: dict[int, Any] = {}
        self._old_fd = -1
        self._pipe: tuple[int, int] | None = None

    def __enter__(self) -> Self:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._saved[signum] = signal.signal(signum, self._raise)
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        self._pipe = (read_fd, write_fd)
        self._old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(read_fd,), name="siirl-interrupt", daemon=True).start()
        return self

    def reclaim(self) -> None:
        """Take SIGINT/SIGTERM back after ``ray.init``: Ray's driver installs a C++ handler that dumps a
        stack trace and exits 1 on SIGTERM, where the documented behaviour is Ctrl-C's (cleanup, exit 130)."""
        if self._pipe is not None:
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, self._raise)

    def __exit__(self, *exc_info: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._pipe is None:
            return
        signal.set_wakeup_fd(self._old_fd)
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        os.close(self._pipe[1])  # the watcher reads EOF and ends

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        """First signal: unwind through the cleanup code; a second one must not abort that cleanup
        half-way (leaving Ray running), so it ends everything at once."""
        if self._raised:
            self.force_exit()
        self._raised = True
        raise KeyboardInterrupt

    def _watch(self, read_fd: int) -> None:
        wanted = {int(signal.SIGINT), int(signal.SIGTERM)}
        while data := os.read(read_fd, 64):
            for _ in (b for b in data if b in wanted):
                self._signals += 1
                if self._signals == 1:
                    self._timer = threading.Timer(self.grace_s, self.force_exit)
                    self._timer.daemon = True
                    self._timer.start()
                else:
                    self.force_exit()
        os.close(read_fd)

    def force_exit(self) -> None:
        print("siirl: interrupted; shutdown did not finish in time, killing Ray's processes", file=sys.stderr)
        sys.stderr.flush()
        _kill_local_ray()
        os._exit(EXIT_INTERRUPTED)
