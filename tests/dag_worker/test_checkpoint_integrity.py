"""Checkpoints cannot lie or run code: every file is checked against the sha256 manifest before it is
parsed, tensors are safetensors (never unpickled), and ``resume_mode=auto`` skips damaged checkpoints."""

import json
import logging
import pickle

import pytest
import torch

from siirl.dag_worker.checkpoint import LATEST, CheckpointManager
from siirl.engine.manifest import MANIFEST, write_manifest
from siirl.engine.workers.checkpoint import load_state_into, save_state
from siirl.errors import CheckpointError


@pytest.fixture
def group():
    """A single process: shards are ``rank_0_of_1`` (the multi-rank path runs in test_fsdp_distributed)."""
    yield None


class Tensors:
    """A model worker's checkpoint face over one safetensors shard (what ``CheckpointMixin`` does)."""

    def __init__(self, group, value: float) -> None:
        self.group = group
        self.state = {"model": {"w": torch.full((64, 16), value)}, "step": torch.tensor(3)}

    def save_checkpoint(self, path):
        save_state(self.state, path, self.group)

    def load_checkpoint(self, path):
        load_state_into(self.state, path, self.group)


class Payload:
    """Unpickling this creates ``marker``: proof that a file was unpickled."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _shard(step_dir):
    return step_dir / "actor" / "rank_0_of_1.safetensors"


def _saved(tmp_path, group, steps=(1,)):
    manager = CheckpointManager(tmp_path, rank=0, max_to_keep=0)
    for step in steps:
        manager.save(step, {"actor": Tensors(group, float(step))}, {"step": step})
    return manager


def test_round_trip_and_manifest_lists_every_file(tmp_path, group):
    manager = _saved(tmp_path, group)
    files = json.loads((tmp_path / "global_step_1" / MANIFEST).read_text())["files"]
    assert sorted(files) == ["actor/rank_0_of_1.safetensors", "worker_0.json"]
    restored = Tensors(group, 0.0)
    assert manager.load(manager.resolve("auto"), {"actor": restored}) == {"step": 1}
    assert torch.equal(restored.state["model"]["w"], torch.full((64, 16), 1.0))


def test_flipped_bytes_are_refused_naming_the_file(tmp_path, group):
    manager = _saved(tmp_path, group)
    shard = _shard(tmp_path / "global_step_1")
    data = bytearray(shard.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"{shard} does not match its sha256"):
        manager.resolve(str(tmp_path / "global_step_1"))
    # A worker given the folder checks each file again as it reads it.
    with pytest.raises(CheckpointError, match=f"{shard} does not match its sha256"):
        manager.load(tmp_path / "global_step_1", {"actor": Tensors(group, 0.0)})


def test_pickle_payload_is_refused_and_never_run(tmp_path, group):
    manager = _saved(tmp_path, group)
    step_dir = tmp_path / "global_step_1"
    marker = tmp_path / "payload_ran"
    _shard(step_dir).write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointError, match=f"{_shard(step_dir)} does not match its sha256"):
        manager.resolve(str(step_dir))
    # Even with a manifest rewritten to match, the shard is parsed as safetensors, not unpickled.
    write_manifest(step_dir)
    with pytest.raises(CheckpointError, match=f"{_shard(step_dir)} is not a valid safetensors file"):
        manager.load(manager.resolve(str(step_dir)), {"actor": Tensors(group, 0.0)})
    assert not marker.exists()


def test_planted_unlisted_file_is_refused(tmp_path, group):
    manager = _saved(tmp_path, group)
    planted = tmp_path / "global_step_1" / "actor" / ".metadata"
    planted.write_bytes(pickle.dumps(Payload(tmp_path / "payload_ran")))
    with pytest.raises(CheckpointError, match=f"{planted} is not listed in"):
        manager.resolve("auto")


def test_auto_uses_previous_intact_checkpoint_with_warning(tmp_path, group, caplog):
    manager = _saved(tmp_path, group, steps=(1, 2))
    shard = _shard(tmp_path / "global_step_2")
    shard.write_bytes(shard.read_bytes()[:-8])
    with caplog.at_level(logging.WARNING):
        assert manager.resolve("auto") == tmp_path / "global_step_1"
    assert str(shard) in caplog.text and "previous intact checkpoint" in caplog.text


def test_no_intact_checkpoint_is_an_error(tmp_path, group):
    manager = _saved(tmp_path, group)
    (tmp_path / "global_step_1" / "worker_0.json").write_text("{}")
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        manager.resolve("auto")


def test_dangling_pointer_is_an_error_not_a_restart(tmp_path, group):
    manager = _saved(tmp_path, group, steps=(1, 2))
    assert (tmp_path / LATEST).read_text() == "2"
    for path in (tmp_path / "global_step_2").rglob("*"):
        if path.is_file():
            path.unlink()
    (tmp_path / "global_step_2" / "actor").rmdir()
    (tmp_path / "global_step_2").rmdir()
    with pytest.raises(CheckpointError, match="names step 2 but .*global_step_2 does not exist"):
        manager.resolve("auto")


def test_missing_manifest_is_refused(tmp_path, group):
    manager = _saved(tmp_path, group)
    (tmp_path / "global_step_1" / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match=f"{MANIFEST} is missing"):
        manager.resolve(str(tmp_path / "global_step_1"))


def test_shard_of_another_dp_size_is_named(tmp_path, group):
    _saved(tmp_path, group)
    actor = tmp_path / "global_step_1" / "actor"
    _shard(tmp_path / "global_step_1").rename(actor / "rank_0_of_2.safetensors")
    with pytest.raises(CheckpointError, match="rank_0_of_1.safetensors is missing .*rank_0_of_2"):
        load_state_into(Tensors(group, 0.0).state, actor, group)
