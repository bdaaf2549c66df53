"""One job per ``trainer.output_dir``: a second job on a running job's folder would resume from, overwrite
and interleave with the first one's checkpoints and metrics.

The lock is an advisory ``flock`` on ``<output_dir>/.siirl.lock``: the kernel drops it when its owner exits,
however it exits (SIGKILL included), so a crashed job never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from siirl.errors import SiirlUserError

LOCK_NAME = ".siirl.lock"


@contextmanager
def output_dir_lock(output_dir: str | Path) -> Iterator[None]:
    """Hold the folder's lock for the ``with`` block, or refuse in one line naming the job that holds it."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole block
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            raise SiirlUserError(
                f"trainer.output_dir={folder} is in use by a running job (pid {owner}); "
                "wait for it to end or choose another trainer.output_dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()
