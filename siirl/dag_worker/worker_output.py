"""A DAG worker's own output goes to its log file; only siirl's warnings reach the console.

Ray forwards everything a worker process writes to the driver's console. A user's reward function that
prints per call, a library's deprecation warning per generate, a C++ extension's chatter: with several
workers that is thousands of lines per step, and the few lines that matter scroll away. So each worker
points its stdout and stderr (the file descriptors, which child processes such as the ``parallel``
reward pool inherit) at ``<output_dir>/logs/worker_<rank>.log``; siirl's own warnings, already logged once
per kind, still go to the console through a copy of the original stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

#: The console stream siirl's warnings go to, kept from the first diversion.
_CONSOLE = None


def worker_log_path(output_dir: str | Path, rank: int | str) -> Path:
    return Path(output_dir) / "logs" / f"worker_{rank}.log"


def divert_worker_output(path: Path, level: str | int, rank: int) -> None:
    """Send fds 1 and 2 to ``path`` (appending: a resumed run keeps the earlier attempt's output) and log
    at ``level`` there; siirl's WARNING and above also reach the console."""
    global _CONSOLE
    path.parent.mkdir(parents=True, exist_ok=True)
    if _CONSOLE is None:  # the process's own stderr, before the first diversion (a warm worker diverts per job)
        _CONSOLE = open(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115 - lives with the process
    console = _CONSOLE
    sys.stdout.flush()
    sys.stderr.flush()
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    form = logging.Formatter(f"%(asctime)s %(levelname)s [rank {rank}] %(name)s: %(message)s", "%H:%M:%S")
    to_file = logging.StreamHandler(sys.stderr)
    to_console = logging.StreamHandler(console)
    to_console.setLevel(logging.WARNING)
    to_console.addFilter(logging.Filter("siirl"))
    for handler in (to_file, to_console):
        handler.setFormatter(form)
    root = logging.getLogger()
    root.handlers[:] = [to_file, to_console]
    root.setLevel(level)
