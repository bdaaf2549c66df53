"""Checkpoints are atomic: a crash mid-write leaves the previous one loadable and pointed to."""

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from dist_testutils import RANKS_GROUP, spawn

from siirl.dag_worker.checkpoint import CheckpointManager, rng_state, set_rng_state
from siirl.engine.manifest import read_verified
from siirl.errors import CheckpointError, SiirlUserError

pytestmark = [RANKS_GROUP]


class Component:
    """Stands in for a model worker: writes/reads one JSON file, can be told to crash mid-write."""

    def __init__(self, value: int, crash: bool = False) -> None:
        self.value, self.crash = value, crash

    def save_checkpoint(self, path):
        path.mkdir(parents=True, exist_ok=True)
        (path / "part0.json").write_text(json.dumps(self.value))
        if self.crash:
            raise OSError("disk full")
        (path / "part1.json").write_text(json.dumps(self.value))

    def load_checkpoint(self, path):
        self.value = json.loads(read_verified(path / "part0.json"))
        assert json.loads(read_verified(path / "part1.json")) == self.value


def test_save_then_load_round_trip(tmp_path):
    manager = CheckpointManager(tmp_path, rank=0)
    manager.save(3, {"actor": Component(42)}, {"step": 3, "loader": [1, 2]})
    assert manager.latest() == tmp_path / "global_step_3"
    restored = Component(0)
    state = manager.load(manager.resolve("auto"), {"actor": restored})
    assert restored.value == 42 and state == {"step": 3, "loader": [1, 2]}


def test_crash_mid_write_keeps_previous_checkpoint(tmp_path):
    manager = CheckpointManager(tmp_path, rank=0)
    manager.save(2, {"actor": Component(7)}, {"step": 2})
    with pytest.raises(CheckpointError) as failure:
        manager.save(4, {"actor": Component(9, crash=True)}, {"step": 4})
    assert "step 4 failed" in str(failure.value) and "disk full" in str(failure.value)
    assert "\n" not in str(failure.value)
    assert not (tmp_path / "global_step_4").exists()
    assert not list(tmp_path.glob(".tmp*"))  # no half-written folder left behind
    assert manager.latest() == tmp_path / "global_step_2"
    restored = Component(0)
    assert manager.load(manager.latest(), {"actor": restored}) == {"step": 2}
    assert restored.value == 7


def test_prunes_to_max_to_keep(tmp_path):
    manager = CheckpointManager(tmp_path, rank=0, max_to_keep=2)
    for step in (1, 2, 3):
        manager.save(step, {}, {"step": step})
    assert sorted(p.name for p in tmp_path.glob("global_step_*")) == ["global_step_2", "global_step_3"]


def test_resume_modes(tmp_path):
    manager = CheckpointManager(tmp_path, rank=0)
    assert manager.resolve("auto") is None
    manager.save(1, {}, {"step": 1})
    assert manager.resolve("disable") is None
    assert manager.resolve(str(tmp_path / "global_step_1")) == tmp_path / "global_step_1"
    with pytest.raises(SiirlUserError, match="not a siiRL checkpoint"):
        manager.resolve(str(tmp_path / "nowhere"))


def test_rng_state_round_trips_through_json():
    state = json.loads(json.dumps(rng_state()))
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def _save_where_rank_1_fails(rank: int, world_size: int, root: str) -> None:
    manager = CheckpointManager(Path(root), rank=rank)
    manager.save(1, {"actor": Component(rank)}, {"step": 1})
    try:
        manager.save(2, {"actor": Component(rank, crash=rank == 1)}, {"step": 2})
    except CheckpointError as exc:
        (Path(root) / f"error_{rank}.txt").write_text(str(exc))


def test_one_rank_failing_fails_the_save_on_every_rank_without_hanging(tmp_path):
    spawn(_save_where_rank_1_fails, 2, str(tmp_path))
    assert "disk full" in (tmp_path / "error_1.txt").read_text()
    assert "another worker" in (tmp_path / "error_0.txt").read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["global_step_1"]
