"""How the trainer's parameters are grouped and laid out on the wire, whatever carries them.

The trainer yields full parameters one at a time (each an all-gather of its FSDP shards). Every transport
moves them in buckets of at most ``rollout.weight_sync_bucket_mb`` (verl's
``rollout.checkpoint_engine.update_weights_bucket_megabytes``): that bounds the extra memory of a sync to
about one bucket while keeping the number of transfers small. Off the process a bucket is one flat byte
buffer plus its :class:`TensorMeta` list, so a sync costs one transfer per bucket, not one per tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

from siirl.errors import ConfigError

NamedTensors = list[tuple[str, torch.Tensor]]
#: Where a receiver hands each bucket: a rollout engine's weight-update call.
Loader = Callable[[NamedTensors], object]
#: Every tensor starts at a multiple of this many bytes in a flat buffer, so it can be viewed in place.
ALIGN = 16


def bucket_bytes(bucket_mb: float) -> int:
    if not bucket_mb or bucket_mb <= 0:
        raise ConfigError(f"rollout.weight_sync_bucket_mb must be > 0, got {bucket_mb}")
    return int(bucket_mb * 1024 * 1024)


def tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def iter_buckets(
    named_tensors: Iterable[tuple[str, torch.Tensor]], max_bytes: int, dtype: torch.dtype | None = None
) -> Iterator[NamedTensors]:
    """Consecutive groups of at most ``max_bytes`` (a larger tensor travels alone), cast to ``dtype``.

    Casting happens per tensor as it arrives, so the fp32 copy of a parameter never waits in a bucket.
    """
    bucket: NamedTensors = []
    size = 0
    for name, tensor in named_tensors:
        tensor = tensor.detach()
        if dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        nbytes = tensor_bytes(tensor)
        if bucket and size + nbytes > max_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += nbytes
    if bucket:
        yield bucket


def stream_weights(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    load: Loader,
    bucket_mb: float,
    dtype: torch.dtype | None = None,
) -> int:
    """Feed ``named_tensors`` to ``load`` bucket by bucket; the number of tensors sent."""
    sent = 0
    for bucket in iter_buckets(named_tensors, bucket_bytes(bucket_mb), dtype):
        load(bucket)
        sent += len(bucket)
    if sent == 0:
        raise ValueError("sync_weights received no tensors: the trainer yielded an empty parameter list")
    return sent


@dataclass(frozen=True)
class TensorMeta:
    """One tensor's place in a flat bucket buffer."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def pack(bucket: NamedTensors, device: torch.device | str | None = None) -> tuple[torch.Tensor, list[TensorMeta]]:
    """One uint8 buffer holding every tensor of ``bucket`` (on ``device``, default the first tensor's)."""
    metas, offset = [], 0
    for name, tensor in bucket:
        dtype = str(tensor.dtype).removeprefix("torch.")
        metas.append(TensorMeta(name, dtype, tuple(tensor.shape), offset, tensor_bytes(tensor)))
        offset = _aligned(offset + tensor_bytes(tensor))
    flat = torch.empty(offset, dtype=torch.uint8, device=device if device is not None else bucket[0][1].device)
    for meta, (_, tensor) in zip(metas, bucket, strict=True):
        flat[meta.offset : meta.offset + meta.nbytes].copy_(tensor.contiguous().reshape(-1).view(torch.uint8))
    return flat, metas


def unpack(flat: torch.Tensor, metas: list[TensorMeta]) -> NamedTensors:
    """Views of ``flat`` (no copy) with the names, dtypes and shapes :func:`pack` recorded."""
    return [
        (m.name, flat[m.offset : m.offset + m.nbytes].view(getattr(torch, m.dtype)).view(m.shape)) for m in metas
    ]


def payload_bytes(metas: list[TensorMeta]) -> int:
    """The tensors' own bytes (alignment padding excluded)."""
    return sum(m.nbytes for m in metas)
