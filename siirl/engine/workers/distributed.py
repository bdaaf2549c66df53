"""The data-parallel group a worker trains in, and the few collectives the update loops need.

Every rank of the group must call these in the same order: they are how the ranks agree on the number
of micro-batches (so FSDP's collectives line up) and on the global token counts of the loss.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from siirl.engine.workers.fsdp import local_tensor


class DataParallelGroup:
    """A process group plus the 1-D ``DeviceMesh`` FSDP2 shards over."""

    def __init__(self, process_group: dist.ProcessGroup | None, device: torch.device) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "torch.distributed is not initialised: the DAG worker (or a test) must call "
                "init_process_group before building an engine worker"
            )
        self.group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.size = dist.get_world_size(self.group)
        self.device = device
        self.mesh = DeviceMesh.from_group(self.group, device_type=device.type)

    def _reduce(self, values: list[float], op: dist.ReduceOp, dtype: torch.dtype) -> list[float]:
        # The group's backend decides where collective inputs must live (gloo: host, nccl/hccl: device).
        buffer = torch.tensor(values, dtype=dtype, device=self.device)
        if self.size > 1:
            dist.all_reduce(buffer, op=op, group=self.group)
        return buffer.tolist()

    def max_int(self, value: int) -> int:
        return int(self._reduce([value], dist.ReduceOp.MAX, torch.int64)[0])

    def min_max_int(self, value: int) -> tuple[int, int]:
        low, high = self._reduce([-value, value], dist.ReduceOp.MAX, torch.int64)
        return int(-low), int(high)

    def sum_ints(self, values: list[int]) -> list[int]:
        return [int(v) for v in self._reduce(values, dist.ReduceOp.SUM, torch.int64)]

    def sum_floats(self, values: list[float]) -> list[float]:
        """Sum over ranks (float32: every device family's collectives support it)."""
        if not values:
            return []
        return self._reduce(values, dist.ReduceOp.SUM, torch.float32)


def all_reduce_gradients(
    model: nn.Module, group: dist.ProcessGroup, device: torch.device, dtype: torch.dtype, divide_by: int = 1
) -> None:
    """Sum every trainable parameter's gradient (this rank's shard of it) over ``group`` and divide by
    ``divide_by``, in ONE all-reduce of a flat ``dtype`` buffer on ``device``. A parameter without a gradient
    takes part with zeros, so every rank's buffer lines up."""
    grads = []
    for p in model.parameters():
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(local_tensor(p.grad))
    if not grads:
        return
    flat = torch.cat([g.reshape(-1).to(device, dtype) for g in grads])
    dist.all_reduce(flat, group=group)
    if divide_by != 1:
        flat.div_(divide_by)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
