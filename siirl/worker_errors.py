"""Turn a DAG worker's failure, as Ray reports it, into what the user should read.

Ray wraps an exception raised in an actor method as ``RayTaskError``; its ``cause`` is the original
exception object. A ``SiirlUserError`` (bad data, bad key, corrupt checkpoint found only inside a worker)
is re-raised as itself so the launcher prints its one line and exits 2. Anything else is an internal
error: one line with the worker's exception type and message, and where the full traceback was written. A
worker whose process died while it ran user code is named with that callable and the step
(``siirl.user_code``).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from ray.exceptions import RayTaskError

from siirl.errors import SiirlUserError
from siirl.ray_names import job_scoped
from siirl.user_code import last_running

logger = logging.getLogger(__name__)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class WorkerFailed(RuntimeError):
    """A DAG worker failed for a reason that is not the user's input; the message is one line."""


def _first_line(text: str, fallback: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else fallback


def original_error(exc: BaseException) -> BaseException:
    """The exception the worker raised (``exc`` itself when Ray did not wrap one)."""
    cause = getattr(exc, "cause", None) if isinstance(exc, RayTaskError) else None
    return cause if isinstance(cause, BaseException) else exc


def ray_logs_dir() -> str | None:
    """This Ray session's log folder on the driver's node (workers' full stderr lives there)."""
    try:
        from ray._private import worker as ray_worker

        node = ray_worker._global_node
        return node.get_logs_dir_path() if node is not None else None
    except Exception:  # noqa: BLE001 - a private API; the pointer is a courtesy, never a new failure
        return None


def write_traceback(output_dir: str | Path, rank: int | None, exc: BaseException) -> Path | None:
    """``<output_dir>/logs/worker_<rank>_error.log`` with Ray's full remote traceback."""
    text = _ANSI.sub("", getattr(exc, "traceback_str", None) or str(exc))
    path = Path(output_dir) / "logs" / f"worker_{'startup' if rank is None else rank}_error.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError:  # a full disk: no pointer to an empty or cut file
        path.unlink(missing_ok=True)
        return None
    return path


def explain(exc: BaseException, rank: int | None, output_dir: str | Path) -> Exception:
    """The exception to raise on the driver for worker ``rank``'s failure ``exc`` (None: start-up)."""
    cause = original_error(exc)
    where_failed = "DAG worker start-up" if rank is None else f"DAG worker rank {rank}"
    if isinstance(cause, SiirlUserError):
        message = f"{_first_line(str(cause), type(cause).__name__)} ({where_failed})"
        try:
            return type(cause)(message)
        except TypeError:  # a subclass with its own constructor
            return SiirlUserError(message)
    name = where_failed if rank is None else f"{where_failed} ({job_scoped(f'siirl_dag_worker_{rank}')})"
    if cause is exc and not isinstance(exc, RayTaskError):
        message = _first_line(str(exc), type(exc).__name__)
        # The process is gone (os._exit, a signal, out of memory): say what user code it was running.
        doing = last_running(output_dir, rank) if rank is not None else ""
        if doing:
            name = f"{name} died while running {doing}"
    else:
        message = f"{type(cause).__name__}: {_first_line(str(cause), '(no message)')}"
    where = [f"traceback: {p}" for p in [write_traceback(output_dir, rank, exc)] if p is not None]
    logs = ray_logs_dir()
    if logs:
        where.append(f"Ray worker logs: {logs}")
    suffix = f" ({'; '.join(where)})" if where else ""
    return WorkerFailed(f"{name} failed: {message}{suffix}")


def pick_failure(failures: list[tuple[int, BaseException]]) -> tuple[int, BaseException]:
    """The failure to report: a user error if any worker raised one (peers then fail only as a
    consequence, e.g. a broken collective), else the first."""
    for rank, exc in failures:
        if isinstance(original_error(exc), SiirlUserError):
            return rank, exc
    return failures[0]
