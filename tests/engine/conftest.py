"""Fixtures of the engine tests: a tiny HF model dir and a one-process gloo group."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch.distributed as dist
from dist_testutils import init_world_of_one
from engine_testutils import save_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny_qwen2"))


@pytest.fixture(scope="module")
def single_process_group():
    """A world of one (gloo), so FSDP2 workers can be built inside the pytest process."""
    created = not dist.is_initialized()
    if created:
        init_world_of_one()
    yield dist.group.WORLD
    if created:
        dist.destroy_process_group()
