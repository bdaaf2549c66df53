"""FSDP2 (``fully_shard``) wrapping and gathering of full parameters, on any device family.

Each transformer block becomes its own FSDP unit (the model's ``_no_split_modules`` names the block
classes), the root module holds the rest (embeddings, final norm, head). Parameters keep their HF names,
so state dicts and weight sync use the same keys as ``save_pretrained``. The model's ``fsdp_config``
(``siirl.params.fsdp``) sets host offload, resharding after forward and forward prefetching.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
from torch.distributed.tensor import DTensor

from siirl.engine.workers.model_loading import DTYPES
from siirl.params.fsdp import FSDPConfig, host_offload

logger = logging.getLogger(__name__)


def gradient_reduce_dtype(fsdp: FSDPConfig) -> torch.dtype:
    """verl's ``mixed_precision.reduce_dtype``: the dtype gradients are averaged across ranks in."""
    name = fsdp.mixed_precision.reduce_dtype
    return torch.float32 if name == "auto" else DTYPES.get(name)


def shard_model(
    model: nn.Module,
    mesh: DeviceMesh,
    compute_dtype: torch.dtype,
    fsdp: FSDPConfig | None = None,
) -> nn.Module:
    """Shard ``model`` in place over ``mesh``; compute in ``compute_dtype``, reduce gradients in
    ``mixed_precision.reduce_dtype`` (fp32 unless set).

    Parameters stay in the dtype they were loaded in (fp32 master weights for training); the mixed
    precision policy casts them to ``compute_dtype`` when FSDP gathers them for a forward pass. With host
    offload the shards (and their gradients, and so the optimizer state) live in host memory, pinned where
    the mesh is an accelerator so the per-unit copies overlap with compute.
    """
    fsdp = fsdp or FSDPConfig()
    param_dtype = next(model.parameters()).dtype
    mp_policy = MixedPrecisionPolicy(
        param_dtype=None if compute_dtype == param_dtype else compute_dtype,
        reduce_dtype=gradient_reduce_dtype(fsdp),
    )
    on_accelerator = mesh.device_type != "cpu"
    offload: OffloadPolicy = CPUOffloadPolicy(pin_memory=on_accelerator) if host_offload(fsdp) else OffloadPolicy()
    block_names = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in block_names]
    if not blocks:
        logger.warning("%s names no transformer block classes: sharding it as one unit", type(model).__name__)
    for block in blocks:
        fully_shard(
            block, mesh=mesh, mp_policy=mp_policy, offload_policy=offload,
            reshard_after_forward=bool(fsdp.reshard_after_forward),
        )
    # The root keeps FSDP's own default: its gathered parameters are needed again at once by backward.
    fully_shard(model, mesh=mesh, mp_policy=mp_policy, offload_policy=offload)
    if fsdp.forward_prefetch:
        for block, following in itertools.pairwise(blocks):
            block.set_modules_to_forward_prefetch([following])
    return model


def reshard_all(model: nn.Module) -> None:
    """Free every gathered parameter of ``model`` (no communication).

    After a no-grad forward FSDP2 leaves the root unit (embeddings, head) and, with
    ``reshard_after_forward=false``, every block gathered, since it expects a backward. A forward-only pass
    (reference, old log-probs) has none, so without this a frozen model would hold those full parameters
    while the other models train.
    """
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def full_named_parameters(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(HF name, unsharded tensor) pairs, one all-gather at a time; a collective on every rank."""
    for name, param in model.named_parameters():
        tensor = param.detach()
        yield name, tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (sharing its storage), or the tensor itself."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def to_local_float(value: torch.Tensor) -> float:
    """A (possibly DTensor) scalar as a Python float."""
    if isinstance(value, DTensor):
        value = value.full_tensor()
    return float(value.item())
