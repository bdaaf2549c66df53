"""``actor_rollout_ref.model.use_shm``: read the model from a copy in shared memory (/dev/shm).

Model files on a network or slow disk are read by every worker of a host (actor, rollout engine, ...);
a copy in tmpfs is made once per host and reused. The copy is named after the source folder and the
sizes and modification times of its files, so a changed model gets a new copy; it is written into a
temporary folder and renamed into place, so a worker never sees a half-written one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

SHM = Path("/dev/shm")
COPIES = "siirl-models"


def _fingerprint(source: Path) -> str:
    digest = hashlib.sha256(str(source.resolve()).encode())
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(source)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def shm_copy(source: Path, shm: Path = SHM) -> Path:
    """The folder in ``shm`` holding a copy of ``source`` (made now if missing); ``source`` itself when
    the host has no writable shared memory (with a warning)."""
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        logger.warning("use_shm: %s is not a writable folder; reading %s directly", shm, source)
        return source
    target = shm / COPIES / f"{source.name}-{_fingerprint(source)}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():  # a worker of the same host may have renamed its copy first
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("use_shm: copied %s to %s", source, target)
    return target
