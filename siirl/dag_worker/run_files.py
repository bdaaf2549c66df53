"""Libraries' own files (caches, configs, temporary folders) go under the run directory, so a run writes
nothing into ``$HOME`` or ``$TMPDIR`` (README: everything a run writes lands under ``trainer.output_dir``).
A variable the user set wins. The variables are set while the library starts and reads them, then restored,
so the process (a warm DAG worker serves many jobs) is left as it was."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: A Unix socket's path must fit in 108 bytes; a library that puts one in $TMPDIR (wandb's service: about
#: 45 more bytes) keeps the system's $TMPDIR when the run's folder is deeper than this.
MAX_SOCKET_TMPDIR = 60


@contextmanager
def files_under(folder: Path, variables: Mapping[str, str], temp: bool = False) -> Iterator[None]:
    """Within the block, each unset variable names ``folder/<its sub-folder>``; ``temp``: so do ``$TMPDIR`` and
    Python's ``tempfile`` (when short enough for a socket inside)."""
    wanted = {key: str(folder / sub) for key, sub in variables.items() if not os.environ.get(key)}
    tmp = folder / "tmp"
    if temp and len(str(tmp)) <= MAX_SOCKET_TMPDIR:
        wanted["TMPDIR"] = str(tmp)
    for path in wanted.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    saved = {key: os.environ.get(key) for key in wanted}
    saved_tempdir = tempfile.tempdir
    os.environ.update(wanted)
    if "TMPDIR" in wanted:
        tempfile.tempdir = wanted["TMPDIR"]
    try:
        yield
    finally:
        tempfile.tempdir = saved_tempdir
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: wandb's folders besides the run's own (``wandb.init(dir=...)``).
WANDB_FOLDERS = {"WANDB_CACHE_DIR": "cache", "WANDB_CONFIG_DIR": "config", "WANDB_DATA_DIR": "data",
                 "WANDB_ARTIFACT_DIR": "artifacts"}
#: matplotlib's config and font cache.
MATPLOTLIB_FOLDERS = {"MPLCONFIGDIR": "matplotlib"}
