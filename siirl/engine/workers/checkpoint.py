"""Model + optimizer + LR-scheduler state as a tensor-only dict, one safetensors file per data-parallel rank.

Only tensors go into the checkpoint (the optimizer's hyper-parameters come from the config, the schedule
position is a tensor). Each rank stores its local shards of the FSDP2 (DTensor) state in
``rank_<r>_of_<n>.safetensors`` and reads them back into the same sharding; nothing is unpickled (safetensors
parses a JSON header and raw bytes), and the file is checked against the checkpoint's sha256 manifest first.
Resuming therefore needs the same data-parallel size as the run that saved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save_file
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.optim.lr_scheduler import LambdaLR

from siirl.engine.manifest import read_verified
from siirl.engine.workers.fsdp import local_tensor
from siirl.engine.workers.optim import restore_lr_scheduler
from siirl.errors import CheckpointError


def _frozen(model: nn.Module) -> bool:
    return any(not p.requires_grad for p in model.parameters())


def training_state(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: LambdaLR) -> dict[str, Any]:
    """Sharded (DTensor) model and optimizer state plus the scheduler position; tensors only. Frozen
    parameters (a LoRA base model, read again from the model dir) are left out: only what trains is saved."""
    model_sd, optim_sd = get_state_dict(model, optimizer, options=StateDictOptions(ignore_frozen_params=True))
    if _frozen(model):  # a tied frozen weight (lm_head = embed_tokens) survives under its second name
        frozen = {name for name, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad}
        model_sd = {name: value for name, value in model_sd.items() if name not in frozen}
    return {
        "model": model_sd,
        "optimizer": optim_sd["state"],
        "lr_scheduler": {"last_epoch": torch.tensor(scheduler.last_epoch, dtype=torch.int64)},
    }


def apply_training_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: LambdaLR, state: dict[str, Any]
) -> None:
    """Load a dict shaped like ``training_state``'s into the model, optimizer and scheduler."""
    missing = {"model", "optimizer", "lr_scheduler"} - set(state)
    if missing:
        raise ValueError(f"training state lacks {sorted(missing)}")
    options = StateDictOptions(ignore_frozen_params=True, strict=not _frozen(model))
    _, current = get_state_dict(model, optimizer, options=options)
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict={"state": state["optimizer"], "param_groups": current["param_groups"]},
        options=options,
    )
    restore_lr_scheduler(scheduler, int(state["lr_scheduler"]["last_epoch"]))


def _flatten(state: dict[str, Any], prefix: str = "") -> dict[str, torch.Tensor]:
    """``{"optimizer": {"w": {"exp_avg": t}}}`` -> ``{"optimizer/w/exp_avg": t}``."""
    flat: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}/"))
        elif isinstance(value, torch.Tensor):
            flat[name] = value
        else:
            raise TypeError(f"checkpoint state entry {name} is a {type(value).__name__}, not a tensor")
    return flat


def shard_file(path: str | Path, group: dist.ProcessGroup | None) -> Path:
    """This rank's file; ``group=None`` is a single process without torch.distributed."""
    rank, size = (dist.get_rank(group), dist.get_world_size(group)) if group is not None else (0, 1)
    return Path(path) / f"rank_{rank}_of_{size}.safetensors"


def save_state(state: dict[str, Any], path: str | Path, group: dist.ProcessGroup | None) -> None:
    """This rank's shards of ``state`` as host copies in one safetensors file."""
    Path(path).mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, tensor in _flatten(state).items():
        local = local_tensor(tensor).detach()
        tensors[name] = torch.empty(local.shape, dtype=local.dtype).copy_(local)
    save_file(tensors, str(shard_file(path, group)), metadata={"format": "siirl-shard-v1"})


def load_state_into(state: dict[str, Any], path: str | Path, group: dist.ProcessGroup | None) -> None:
    """Fill ``state`` (a template with the right shapes and shardings) in place from this rank's file."""
    file = shard_file(path, group)
    if not file.is_file():
        saved = sorted(p.name for p in Path(path).glob("rank_*_of_*.safetensors"))
        found = f"it holds {', '.join(saved)}" if saved else "it holds no shards"
        raise CheckpointError(f"checkpoint file {file} is missing ({found}; resume with the same dp size)")
    try:
        loaded = load_safetensors(read_verified(file))
    except SafetensorError as exc:
        raise CheckpointError(f"checkpoint file {file} is not a valid safetensors file ({exc})") from None
    for name, target in _flatten(state).items():
        if name not in loaded:
            raise CheckpointError(f"checkpoint file {file} lacks {name}")
        local = local_tensor(target)
        if tuple(loaded[name].shape) != tuple(local.shape):
            raise CheckpointError(
                f"checkpoint file {file}: {name} has shape {tuple(loaded[name].shape)}, expected {tuple(local.shape)}"
            )
        with torch.no_grad():
            local.copy_(loaded[name])


class CheckpointMixin:
    """``save_checkpoint(dir)`` / ``load_checkpoint(dir)`` for a worker with ``model``, ``optimizer``,
    ``lr_scheduler`` and a data-parallel group ``dp``; every rank of the group calls them together."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    lr_scheduler: LambdaLR
    dp: Any
    state_offload: Any
    sp_leader: bool

    def state_dict_for_checkpoint(self) -> dict[str, Any]:
        return training_state(self.model, self.optimizer, self.lr_scheduler)

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        apply_training_state(self.model, self.optimizer, self.lr_scheduler, state)
        if self.state_offload is not None:  # loaded onto the device; it waits on the host between updates
            self.state_offload.offload()

    def save_checkpoint(self, path: str | Path) -> None:
        if self.state_offload is not None:  # the state dict is read where the optimizer steps
            self.state_offload.load()
        try:
            state = self.state_dict_for_checkpoint()
            if self.sp_leader:  # the ranks of a sequence-parallel group hold the same shard: one writes it
                save_state(state, path, self.dp.group)
        finally:
            if self.state_offload is not None:
                self.state_offload.offload()

    def load_checkpoint(self, path: str | Path) -> None:
        state = self.state_dict_for_checkpoint()
        load_state_into(state, path, self.dp.group)
        self.load_checkpoint_state(state)
