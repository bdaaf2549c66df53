"""A full disk at any point (metrics, checkpoint, the error log) is one line naming the path and the step,
exit 2 (``OutputWriteError`` / ``CheckpointError``, both ``SiirlUserError``); no partial checkpoint folder; the
metrics of the earlier steps stay whole. Faults are injected: writes raise ``OSError(ENOSPC)``."""

import errno
import json
import os

import pytest
from safetensors import SafetensorError

from siirl.dag_worker.checkpoint import CheckpointManager
from siirl.dag_worker.disk_errors import is_disk_error, write_error
from siirl.dag_worker.metrics import MetricsLogger, RunInfo
from siirl.errors import CheckpointError, OutputWriteError, SiirlUserError
from siirl.worker_errors import write_traceback

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FillsUp:
    """An unbuffered file whose writes fail once ``budget`` bytes were taken (after a short, partial write)."""

    def __init__(self, file, budget: int) -> None:
        self.file, self.budget = file, budget

    def write(self, data: bytes) -> int:
        if len(data) <= self.budget:
            self.budget -= len(data)
            return self.file.write(data)
        written = self.file.write(data[: self.budget])  # the disk takes what it has room for
        self.budget = 0
        if written:
            return written
        raise OSError(ENOSPC.errno, ENOSPC.strerror)

    def __getattr__(self, name):
        return getattr(self.file, name)


@pytest.mark.parametrize("budget", [0, 10], ids=["refused", "short_write"])
def test_metrics_up_to_the_failed_step_are_kept_whole_and_the_file_is_named(tmp_path, budget):
    logger = MetricsLogger(tmp_path, ["jsonl", "file"], enabled=True, run=RunInfo("p", "e"))
    for step in (1, 2):
        logger.log(step, {"reward/mean": 0.5})
    sink = next(s for s in logger.sinks if type(s).__name__ == "JsonlSink")
    sink.file = _FillsUp(sink.file, budget)
    with pytest.raises(OSError) as failure:
        logger.log(3, {"reward/mean": 0.25})
    assert failure.value.errno == errno.ENOSPC and failure.value.filename == str(tmp_path / "metrics.jsonl")
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    line = str(write_error(failure.value, 3, tmp_path))
    assert line.startswith(f"cannot write {tmp_path / 'metrics.jsonl'} at step 3: No space left on device")
    assert "trainer.resume_mode=auto" in line and "\n" not in line
    assert issubclass(OutputWriteError, SiirlUserError)  # exit 2, as every error the user acts on


def test_only_errors_of_the_disk_are_the_users():
    assert is_disk_error(ENOSPC) and is_disk_error(OSError(errno.EDQUOT, "quota")) and is_disk_error(OSError(errno.EROFS, "ro"))
    assert not is_disk_error(OSError(errno.ECONNRESET, "reset")) and not is_disk_error(ValueError("x"))
    assert "under /run before the first step" in str(write_error(ENOSPC, 0, "/run"))


class _SafetensorsFull:
    """A model worker whose safetensors write fails as safetensors reports a full disk."""

    def save_checkpoint(self, path):
        path.mkdir(parents=True, exist_ok=True)
        (path / "rank_0_of_1.safetensors").write_bytes(b"\0" * 64)
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def test_a_full_disk_during_a_save_names_the_step_and_folder_and_leaves_no_partial_folder(tmp_path):
    manager = CheckpointManager(tmp_path, rank=0)
    (tmp_path / ".tmp_global_step_1" / "actor").mkdir(parents=True)  # what a killed run left behind
    with pytest.raises(CheckpointError) as failure:
        manager.save(2, {"actor": _SafetensorsFull()}, {"step": 2})
    message = str(failure.value)
    assert "checkpoint save at step 2 failed, nothing was kept" in message and "No space left on device" in message
    assert str(tmp_path / ".tmp_global_step_2" / "actor") in message and "\n" not in message
    assert not list(tmp_path.glob(".tmp_global_step_*")) and manager.latest() is None


def test_a_full_disk_leaves_no_empty_error_log(tmp_path, monkeypatch):
    def full(self, *args, **kwargs):
        with open(self, "w"):  # the file is created, its text does not fit
            pass
        raise OSError(ENOSPC.errno, ENOSPC.strerror)

    monkeypatch.setattr(type(tmp_path), "write_text", full)
    assert write_traceback(tmp_path, 1, RuntimeError("boom")) is None
    assert not (tmp_path / "logs" / "worker_1_error.log").exists()
