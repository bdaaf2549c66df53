"""A write the file system refuses (full disk, quota, read-only, file too large) ends the job in one line
naming the path and the step, exit 2: the user frees space and resumes from the last checkpoint. Metrics
written before the failed step are kept whole (the record sink never leaves half a line)."""

from __future__ import annotations

import errno
from pathlib import Path

from siirl.errors import OutputWriteError

#: Error numbers that mean "the disk will not take this write", not a bug in siiRL.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def is_disk_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def write_error(exc: OSError, step: int, output_dir: str | Path) -> OutputWriteError:
    """The one line for ``exc``, raised while writing at ``step`` (0: before the first step)."""
    where = exc.filename or f"under {output_dir}"
    when = f"at step {step}" if step else "before the first step"
    return OutputWriteError(
        f"cannot write {where} {when}: {exc.strerror or exc}; free space (or set trainer.output_dir elsewhere) "
        "and run the command again (trainer.resume_mode=auto goes on from the last checkpoint)"
    )
