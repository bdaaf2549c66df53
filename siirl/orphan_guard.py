"""Ray's local cluster dies with the driver that started it, even when the driver is SIGKILLed.

A driver killed outright runs no cleanup, and the Ray services it started (GCS, raylet, dashboard and
runtime-env agents, workers) would live on. Before starting Ray the driver spawns this watchdog in its own
session; the watchdog keeps a fresh list of the driver's descendants and, when the driver's pipe closes
without the "clean exit" word, terminates that list (then kills what is left).

Run as ``python -m siirl.orphan_guard <driver pid>`` with the driver's pipe as stdin.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys

import psutil

CLEAN_EXIT = b"clean\n"
POLL_S = 0.5
TERMINATE_GRACE_S = 3.0


class OrphanGuard:
    """The driver's side: start the watchdog, tell it when the driver ends cleanly."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "siirl.orphan_guard", str(os.getpid())],
            stdin=subprocess.PIPE, start_new_session=True,
        )

    def release(self) -> None:
        """The driver cleaned up itself: the watchdog leaves."""
        try:
            self.proc.stdin.write(CLEAN_EXIT)
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=10)


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _end(processes: list[psutil.Process]) -> None:
    for proc in processes:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(processes, timeout=TERMINATE_GRACE_S)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass


def watch(driver_pid: int) -> None:
    """Track the driver's descendants until its pipe closes; end them unless it said it exited cleanly."""
    known: dict[int, psutil.Process] = {}
    stdin = sys.stdin.buffer
    while True:
        for proc in _descendants(driver_pid):
            if proc.pid != os.getpid():
                known.setdefault(proc.pid, proc)
        ready, _, _ = select.select([stdin], [], [], POLL_S)
        if ready:
            if stdin.read() == CLEAN_EXIT:
                return
            break
    _end([proc for proc in known.values() if proc.is_running()])


if __name__ == "__main__":
    watch(int(sys.argv[1]))
