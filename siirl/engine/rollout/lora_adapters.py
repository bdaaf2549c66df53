"""Adapter folders for engines that serve LoRA adapters by path (vLLM's ``LoRARequest``).

Each sync writes the adapter into a new folder (under /dev/shm when the host has it, so nothing reaches a
disk) and removes the previous one: an engine caches adapters by id, so a new id and a new folder is how
it learns that the weights changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from siirl.engine.workers.lora import write_adapter

SHARED_MEMORY = Path("/dev/shm")


def adapter_root() -> Path:
    """A fresh private folder, in shared memory where the host has a writable one."""
    base = SHARED_MEMORY if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="siirl-lora-", dir=base))


class AdapterFolders:
    """Version ``k`` of the adapter lives in ``<root>/v<k>``; only the newest is kept."""

    def __init__(self) -> None:
        self.root = adapter_root()
        self.version = 0

    def write(self, config: Any, tensors: dict[str, torch.Tensor]) -> tuple[int, str]:
        """(version, folder) of the adapter just written; versions count from 1 (vLLM ids must be > 0)."""
        self.version += 1
        folder = write_adapter(config, tensors, self.root / f"v{self.version}")
        shutil.rmtree(self.root / f"v{self.version - 1}", ignore_errors=True)
        return self.version, str(folder)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
