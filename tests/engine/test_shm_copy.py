"""``use_shm``: one copy of the model folder per host in shared memory, renewed when the model changes."""

from __future__ import annotations

import os

from siirl.engine.workers.shm_copy import shm_copy


def test_copy_is_made_once_and_renewed_when_the_model_changes(tmp_path):
    source, shm = tmp_path / "model", tmp_path / "shm"
    source.mkdir()
    shm.mkdir()
    (source / "config.json").write_text("{}")
    first = shm_copy(source, shm)
    assert first.parent.parent == shm and (first / "config.json").read_text() == "{}"
    assert shm_copy(source, shm) == first  # reused, not copied again
    (source / "config.json").write_text('{"changed": 1}')
    os.utime(source / "config.json", ns=(1, 1))
    second = shm_copy(source, shm)
    assert second != first and (second / "config.json").read_text() == '{"changed": 1}'
    assert not [p for p in second.parent.iterdir() if p.name.startswith(".staging-")]


def test_without_shared_memory_the_source_is_read(tmp_path):
    source = tmp_path / "model"
    source.mkdir()
    assert shm_copy(source, tmp_path / "no_shm") == source
