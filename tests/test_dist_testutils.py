"""``spawn`` keeps its rank processes between calls, gives each job the caller's environment, and replaces
the whole pool after a rank fails or dies, reporting that rank's traceback or exit code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from dist_testutils import RANKS_GROUP, spawn

pytestmark = [RANKS_GROUP]


def _write_pid(rank: int, world_size: int, out_dir: str, call: str) -> None:
    dist.barrier()
    (Path(out_dir) / f"{call}_{rank}.pid").write_text(str(os.getpid()))


def _pids(out_dir: Path, call: str) -> list[str]:
    return [(out_dir / f"{call}_{rank}.pid").read_text() for rank in range(2)]


def _check_env(rank: int, world_size: int, cwd: str, present: str | None, absent: str) -> None:
    assert os.getcwd() == cwd
    assert os.environ.get("SIIRL_DIST_TESTUTILS_MARK") == present
    assert absent not in os.environ


def _fail_on_rank_1(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("rank 1 broke on purpose")
    dist.barrier()  # rank 0 would wait here forever: spawn must not wait for it


def _die_on_rank_1(rank: int, world_size: int) -> None:
    dist.barrier()
    if rank == 1:
        os._exit(3)
    dist.barrier()  # fails or waits forever: either way the report names rank 1's death


def test_consecutive_calls_reuse_the_rank_processes(tmp_path):
    spawn(_write_pid, 2, str(tmp_path), "first")
    spawn(_write_pid, 2, str(tmp_path), "second")
    assert _pids(tmp_path, "first") == _pids(tmp_path, "second")
    assert str(os.getpid()) not in _pids(tmp_path, "first")


def test_each_call_sees_the_callers_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SIIRL_DIST_TESTUTILS_MARK", "one")
    monkeypatch.setenv("SIIRL_DIST_TESTUTILS_GONE", "soon")
    spawn(_check_env, 2, str(tmp_path), "one", "NOT_SET_ANYWHERE")
    monkeypatch.setenv("SIIRL_DIST_TESTUTILS_MARK", "two")
    monkeypatch.delenv("SIIRL_DIST_TESTUTILS_GONE")
    spawn(_check_env, 2, str(tmp_path), "two", "SIIRL_DIST_TESTUTILS_GONE")


def test_a_failing_rank_raises_its_traceback_and_the_next_call_starts_a_new_pool(tmp_path):
    spawn(_write_pid, 2, str(tmp_path), "before")
    with pytest.raises(mp.ProcessRaisedException) as failed:
        spawn(_fail_on_rank_1, 2)
    assert failed.value.error_index == 1
    assert "Process 1 terminated" in str(failed.value)
    assert "Traceback" in str(failed.value) and "_fail_on_rank_1" in str(failed.value)
    assert "ValueError: rank 1 broke on purpose" in str(failed.value)
    spawn(_write_pid, 2, str(tmp_path), "after")
    assert not set(_pids(tmp_path, "before")) & set(_pids(tmp_path, "after"))


def test_a_rank_that_dies_is_named_with_its_exit_code():
    with pytest.raises(mp.ProcessExitedException, match="process 1 terminated with exit code 3") as died:
        spawn(_die_on_rank_1, 2)
    assert (died.value.error_index, died.value.exit_code) == (1, 3)
