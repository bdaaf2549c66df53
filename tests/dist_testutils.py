"""Tests that need several ranks: a free local port and ``fn`` run in processes joined by a gloo group.

``spawn`` keeps its rank processes between calls (one pool per world size, for the life of the test process):
a new interpreter importing torch, transformers and siirl costs seconds of CPU per rank, a job on a warm rank
almost nothing. Modules that call ``spawn`` carry ``RANKS_GROUP`` so that under xdist they share one pool.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import pickle
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

#: Modules that call ``spawn`` run in one xdist process, so their calls share one warm pool.
RANKS_GROUP = pytest.mark.xdist_group("ranks")

#: How long ``spawn`` waits for every rank to finish ``fn`` before it gives up on the pool.
TIMEOUT_S = 600.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def init_group(rank: int, world_size: int, port: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)


def init_world_of_one() -> None:
    """A gloo group of this process alone, meeting through an in-memory store: no port to pick, so no other
    process on a busy host can take it between picking and binding."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def _rank_loop(rank: int, world_size: int, conn: Connection) -> None:
    """A rank process: runs one job after another until told to stop (``None``) or the parent is gone.

    Each job sees the parent's environment, working directory and ``sys.path`` of its call, as a freshly
    spawned rank would. Its answer is ``None``, or the time and traceback of its failure."""
    torch.set_num_threads(1)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a rank that does not finish shows where it hangs
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent died without saying goodbye
            return
        if job is None:
            return
        env, cwd, path, port, payload = job
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.path[:] = path
        answer = None
        try:
            fn, args = pickle.loads(payload)  # after sys.path: fn's module may be importable only from there
            init_group(rank, world_size, port)
            try:
                fn(rank, world_size, *args)
            except Exception:  # noqa: BLE001 - sent to the parent, which raises it
                answer = (time.monotonic(), traceback.format_exc())  # timed before the peers see this rank leave
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - sent to the parent, which raises it
            answer = answer or (time.monotonic(), traceback.format_exc())
        conn.send(answer)


class _Pool:
    """``world_size`` rank processes started with the "spawn" method, each reached through its own pipe."""

    def __init__(self, world_size: int) -> None:
        ctx = mp.get_context("spawn")
        self.conns: list[Connection] = []
        self.procs = []
        for rank in range(world_size):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(target=_rank_loop, args=(rank, world_size, theirs), name=f"rank{rank}of{world_size}")
            proc.start()
            theirs.close()
            self.conns.append(ours)
            self.procs.append(proc)

    def run(self, fn: Callable[..., None], args: tuple) -> None:
        """Run one job on every rank; raise as ``mp.spawn`` would if a rank raised, died or did not finish."""
        job = (dict(os.environ), os.getcwd(), list(sys.path), free_port(), bytes(ForkingPickler.dumps((fn, args))))
        for rank, conn in enumerate(self.conns):
            try:
                conn.send(job)
            except OSError:
                raise self._exited(rank) from None
        pending = set(range(len(self.procs)))
        deadline = time.monotonic() + TIMEOUT_S
        while pending:
            handles = [self.conns[r] for r in pending] + [self.procs[r].sentinel for r in pending]
            if not wait(handles, timeout=max(0.0, deadline - time.monotonic())):
                for rank in sorted(pending):  # one at a time, so that their stacks do not interleave
                    os.kill(self.procs[rank].pid, signal.SIGUSR1)
                    time.sleep(0.5)
                raise TimeoutError(f"ranks {sorted(pending)} did not finish {fn.__qualname__} in {TIMEOUT_S:.0f} s "
                                   "(their stacks are on stderr)")
            for rank in sorted(pending):
                if self.conns[rank].poll():  # an answer, or the end of the pipe of a rank that died
                    try:
                        error = self.conns[rank].recv()
                    except (EOFError, OSError):
                        raise self._exited(rank) from None
                    pending.discard(rank)
                    if error is not None:
                        raise self._first_error({rank: error}, pending)
                elif not self.procs[rank].is_alive():
                    raise self._exited(rank)

    def _first_error(self, errors: dict[int, tuple[float, str]], pending: set[int]) -> mp.ProcessException:
        """The failure that came first: peers of a failing rank often fail a moment later (their collective
        lost a member), so they get two seconds to answer; the earliest traceback is the cause, unless a rank
        died meanwhile (a peer's failure raises, it does not kill)."""
        end = time.monotonic() + 2
        while pending and (ready := wait([self.conns[r] for r in pending], timeout=max(0.0, end - time.monotonic()))):
            for rank in [r for r in pending if self.conns[r] in ready]:
                pending.discard(rank)
                try:
                    error = self.conns[rank].recv()
                except (EOFError, OSError):
                    return self._exited(rank)
                if error is not None:
                    errors[rank] = error
        rank = min(errors, key=lambda r: errors[r][0])
        msg = f"\n\n-- Process {rank} terminated with the following error:\n{errors[rank][1]}"
        return mp.ProcessRaisedException(msg, rank, self.procs[rank].pid)

    def alive(self) -> bool:
        return all(proc.is_alive() for proc in self.procs)

    def _exited(self, rank: int) -> mp.ProcessExitedException:
        proc = self.procs[rank]
        proc.join(5)
        code = proc.exitcode
        name = signal.Signals(-code).name if code is not None and code < 0 else None
        how = f"signal {name}" if name else f"exit code {code}"
        return mp.ProcessExitedException(f"process {rank} terminated with {how}", rank, proc.pid, code, name)

    def stop(self) -> None:
        """Ask every rank to finish (they exit once done with their job, if any)."""
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass

    def close(self, grace_s: float) -> None:
        """Wait ``grace_s`` for the ranks to exit, then terminate and kill what is left (a rank blocked in a
        collective whose peer failed would otherwise wait forever)."""
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for stop in ("terminate", "kill"):
            for proc in self.procs:
                if proc.is_alive():
                    getattr(proc, stop)()
            for proc in self.procs:
                proc.join(5)
        for conn in self.conns:
            conn.close()


_pools: dict[int, _Pool] = {}


#: gloo's mesh set-up losing a pair (its pairs listen on ports the OS hands out, which another process on a
#: busy host may take meanwhile): a failure of the set-up, not of ``fn``, so ``spawn`` tries once more.
MESH_SETUP_FAILURE = "connectFullMesh failed"


def spawn(fn: Callable[..., None], world_size: int, *args: Any) -> None:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` processes joined by a gloo group (a new group on a
    new port per call). The processes are reused by later calls; if a rank fails, the whole pool goes and the
    next call starts a new one (once more at once when the group's set-up failed, ``MESH_SETUP_FAILURE``)."""
    try:
        _spawn_on_pool(fn, world_size, args)
    except mp.ProcessRaisedException as failed:
        if MESH_SETUP_FAILURE not in str(failed):
            raise
        _spawn_on_pool(fn, world_size, args)


def _spawn_on_pool(fn: Callable[..., None], world_size: int, args: tuple) -> None:
    pool = _pools.get(world_size)
    if pool is not None and not pool.alive():  # a rank was killed from outside since the last call
        pool.close(grace_s=0)
        pool = None
    if pool is None:
        pool = _pools[world_size] = _Pool(world_size)
    try:
        pool.run(fn, args)
    except BaseException:
        del _pools[world_size]
        pool.close(grace_s=0)
        raise


@atexit.register
def _close_pools() -> None:
    """Rank processes are not daemons (a rank may start processes of its own): stop them before exit, all
    pools at once, as each rank takes a moment to exit."""
    pools = list(_pools.values())
    _pools.clear()
    for pool in pools:
        pool.stop()
    for pool in pools:
        pool.close(grace_s=10)
