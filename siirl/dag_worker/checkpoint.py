"""Atomic, verified, resumable checkpoints: every rank writes into a temporary folder, rank 0 seals it.

Layout under ``<output_dir>/checkpoints`` (or verl's ``trainer.default_local_dir`` when set)::

    global_step_12/            complete checkpoints only (renamed from .tmp_global_step_12)
        actor/  critic/         rank_<r>_of_<n>.safetensors: model + optimizer shards + LR-scheduler position
        worker_<rank>.json      dataloader position and RNG states of that DAG worker
        manifest.json           sha256 of every file above, written last
    latest_checkpointed_iteration.txt   written by os.replace after the rename

A crash at any point leaves the previous checkpoint and the pointer to it intact. Nothing is unpickled:
tensors are safetensors, state is JSON, and every file is checked against the manifest before it is parsed.
``resume_mode=auto`` skips (with a warning) checkpoints that fail the check and uses the newest intact one;
a pointer naming a step that is gone is an error, never a silent restart from step 1.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from safetensors import SafetensorError

from siirl.engine.manifest import read_manifest, read_verified, verify_folder, write_manifest
from siirl.errors import CheckpointError
from siirl.params.root import SiirlConfig

logger = logging.getLogger(__name__)

LATEST = "latest_checkpointed_iteration.txt"


def checkpoint_root(trainer: Any) -> Path:
    """Where a run's checkpoints live: ``trainer.default_local_dir`` (verl's key) or ``<output_dir>/checkpoints``."""
    return Path(trainer.default_local_dir or Path(trainer.output_dir) / "checkpoints")


def pin_resume_checkpoint(cfg: SiirlConfig) -> SiirlConfig:
    """``trainer.resume_mode`` resolved on the driver to the verified checkpoint every worker will load
    (``auto``: the newest intact one), so all workers load the same step."""
    mode = str(cfg.trainer.resume_mode)
    if mode == "disable":
        return cfg
    path = CheckpointManager(checkpoint_root(cfg.trainer), rank=0).resolve(mode, verify="all")
    if path is None:
        return cfg
    return dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, resume_mode=str(path)))


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch CPU generator states as JSON-safe values."""
    np_state = np.random.get_state()
    return {
        "python": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "torch": torch.get_rng_state().tolist(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


class CheckpointManager:
    """Save/find/prune checkpoints of one run; all ranks call ``save`` and ``load`` together."""

    def __init__(self, root: Path, rank: int, max_to_keep: int = 2) -> None:
        self.root, self.rank, self.max_to_keep = Path(root), rank, max_to_keep

    def step_dir(self, step: int) -> Path:
        return self.root / f"global_step_{step}"

    def steps(self) -> list[int]:
        """Steps of the complete (renamed) checkpoint folders, newest first."""
        found = [p.name.rsplit("_", 1)[1] for p in self.root.glob("global_step_*") if p.is_dir()]
        return sorted((int(s) for s in found if s.isdigit()), reverse=True)

    def latest(self) -> Path | None:
        """The folder the pointer names; None without a pointer. A pointer to a missing step is an error."""
        pointer = self.root / LATEST
        if not pointer.is_file():
            return None
        text = pointer.read_text(encoding="utf-8", errors="replace").strip()
        if not text.isdigit():
            raise CheckpointError(f"{pointer} holds {text[:40]!r}, not a step number")
        path = self.step_dir(int(text))
        if not path.is_dir():
            raise CheckpointError(
                f"{pointer} names step {text} but {path} does not exist; set trainer.resume_mode to a "
                "checkpoint folder or to disable"
            )
        return path

    def verify(self, path: Path, scope: str = "all") -> None:
        """``all``: every file matches the manifest; ``manifest``: only that the manifest is readable
        (each file is then checked as it is read)."""
        if scope == "all":
            verify_folder(path)
        else:
            read_manifest(path)

    def _auto(self, scope: str) -> Path | None:
        latest = self.latest()
        steps = self.steps()
        if latest is not None:
            newest = int(latest.name.rsplit("_", 1)[1])
            steps = [s for s in steps if s <= newest]
        elif steps:
            logger.warning("%s has checkpoints but no %s; trying the newest", self.root, LATEST)
        refused: list[CheckpointError] = []
        for step in steps:
            path = self.step_dir(step)
            try:
                self.verify(path, scope)
            except CheckpointError as exc:
                logger.warning("checkpoint refused: %s", exc)
                refused.append(exc)
                continue
            if refused:
                logger.warning("resuming from the previous intact checkpoint %s", path)
            return path
        if refused:
            raise CheckpointError(
                f"no intact checkpoint under {self.root}: {refused[0]} (trainer.resume_mode=disable starts afresh)"
            )
        return None

    def resolve(self, resume_mode: str, verify: str = "all") -> Path | None:
        """``auto``: newest intact checkpoint if any; ``disable``: none; anything else: that folder."""
        if resume_mode == "disable":
            return None
        if resume_mode == "auto":
            return self._auto(verify)
        path = Path(resume_mode)
        if not (path.is_dir() and any(path.glob("worker_*.json"))):
            raise CheckpointError(f"trainer.resume_mode={resume_mode}: not a siiRL checkpoint folder")
        self.verify(path, verify)
        return path

    def save(self, step: int, components: dict[str, Any], worker_state: dict[str, Any]) -> Path:
        """Write components (objects with ``save_checkpoint(dir)``) and this worker's JSON state.

        All or nothing: a write that fails on any rank (a full disk) fails the save on every rank (no rank
        waits at a barrier for it), the half-written folder is removed, and one ``CheckpointError`` line says why."""
        tmp = self.root / f".tmp_global_step_{step}"
        error = self._attempt(lambda: self._fresh(tmp) if self.rank == 0 else None)
        if error is None:
            error = self._attempt(lambda: self._write(tmp, components, worker_state))
        final = self.step_dir(step)
        if error is None:  # every rank takes part: the verdict is a collective
            error = self._attempt(lambda: self._publish(tmp, final, step) if self.rank == 0 else None)
        if error is not None:
            if self.rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointError(f"checkpoint save at step {step} failed, nothing was kept: {error}")
        return final

    def _attempt(self, action) -> str | None:
        """Run ``action`` on this rank; every rank learns whether any rank failed (the first reason seen here)."""
        reason = None
        try:
            action()
        except OSError as exc:
            reason = f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
        failed = torch.tensor([0 if reason is None else 1])
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(failed, op=dist.ReduceOp.MAX)
        if failed.item() and reason is None:
            reason = "another worker could not write its part"
        return reason

    def _fresh(self, tmp: Path) -> None:
        """An empty ``tmp``; half-written folders a killed run left behind go too."""
        for stale in self.root.glob(".tmp_global_step_*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp.mkdir(parents=True)

    def _write(self, tmp: Path, components: dict[str, Any], worker_state: dict[str, Any]) -> None:
        for name, component in components.items():
            try:
                component.save_checkpoint(tmp / name)
            except SafetensorError as exc:  # safetensors' own error for a failed write (full disk), without the file
                raise OSError(errno.EIO, str(exc), str(tmp / name)) from exc
        (tmp / f"worker_{self.rank}.json").write_text(json.dumps(worker_state), encoding="utf-8")

    def _publish(self, tmp: Path, final: Path, step: int) -> None:
        write_manifest(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        pointer_tmp = self.root / f".{LATEST}.tmp"
        pointer_tmp.write_text(str(step), encoding="utf-8")
        os.replace(pointer_tmp, self.root / LATEST)
        self._prune()
        logger.info("checkpoint saved: %s", final)

    def load(self, path: Path, components: dict[str, Any]) -> dict[str, Any]:
        """Restore components (each checks its files with ``read_verified``); return this worker's state."""
        state_file = path / f"worker_{self.rank}.json"
        if not state_file.is_file():
            raise CheckpointError(f"checkpoint {path} has no state for worker {self.rank} (different world size?)")
        data = read_verified(state_file)
        try:
            state = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise CheckpointError(f"checkpoint file {state_file} is not valid JSON") from None
        for name, component in components.items():
            component.load_checkpoint(path / name)
        return state

    def _prune(self) -> None:
        if self.max_to_keep <= 0:
            return
        for old in self.steps()[self.max_to_keep :]:
            shutil.rmtree(self.step_dir(old), ignore_errors=True)
