"""What user code a DAG worker is running, kept where the driver can read it after the process died.

A score function, tool or environment that calls ``os._exit`` (or segfaults, or is killed for memory)
takes its DAG worker's process with it, and Ray only says that the actor died. While a rank runs user code,
its memory-mapped file ``<output_dir>/workers/rank_<r>.running`` holds ``<callable> at step <n>``; the pages
live in the kernel's page cache, so what was written survives the process and the driver names the
callable and the step. An update is a memory copy (no system call), cheap enough to mark every call.
"""

from __future__ import annotations

import itertools
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Bytes of the marker file (longer text is cut).
SIZE = 1024


def marker_path(output_dir: str | Path, rank: int) -> Path:
    return Path(output_dir) / "workers" / f"rank_{rank}.running"


def callable_name(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a function or method (a partial's function), else the object's repr."""
    fn = getattr(fn, "func", fn)
    qualname = getattr(fn, "__qualname__", None)
    return f"{fn.__module__}:{qualname}" if qualname and getattr(fn, "__module__", None) else repr(fn)


class _Marker:
    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, SIZE)  # blocks allocated now: a full disk later cannot fault the mapping
            self.map = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        self.lock = threading.Lock()
        self.running: dict[int, str] = {}  # one entry per call in flight (calls run on several threads)
        self.tokens = itertools.count()
        self.step = 0

    def _show(self) -> None:
        text = "; ".join(dict.fromkeys(self.running.values())).encode("utf-8", "replace")[:SIZE]
        self.map[:] = text.ljust(SIZE, b"\0")

    def enter(self, name: str) -> int:
        with self.lock:
            token = next(self.tokens)
            self.running[token] = f"{name} at step {self.step}"
            self._show()
            return token

    def leave(self, token: int) -> None:
        with self.lock:
            self.running.pop(token, None)
            self._show()

    def close(self) -> None:
        self.map.close()
        self.path.unlink(missing_ok=True)


_marker: _Marker | None = None


def start(output_dir: str | Path, rank: int) -> None:
    """This process is rank ``rank`` of a job writing to ``output_dir`` (a warm worker serves many jobs)."""
    global _marker
    stop()
    path = marker_path(output_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    _marker = _Marker(path)


def stop() -> None:
    """The rank's run ended in Python (returned or raised): nothing is left to explain."""
    global _marker
    if _marker is not None:
        _marker.close()
        _marker = None


def set_step(step: int) -> None:
    if _marker is not None:
        _marker.step = step


@contextmanager
def running(name: str) -> Iterator[None]:
    """Mark ``name`` as running on this rank for the duration of the block (no-op outside a DAG worker)."""
    marker = _marker
    if marker is None:
        yield
        return
    token = marker.enter(name)
    try:
        yield
    finally:
        marker.leave(token)


def last_running(output_dir: str | Path, rank: int) -> str:
    """What rank ``rank`` was running when its process ended, or "" (no user code, or no marker)."""
    try:
        data = marker_path(output_dir, rank).read_bytes()
    except OSError:
        return ""
    return data.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
