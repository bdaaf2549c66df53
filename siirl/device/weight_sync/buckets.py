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

NamedTensors = list[tuple[str, torch.Tensor]]
#: Where a receiver hands each bucket: a rollout engine's weight-update call.
Loader = Callable[[NamedTensors], object]
#: Every tensor starts at a multiple of this many bytes in a flat buffer, so it can be viewed in place.
ALIGN = 16


def bucket_bytes(bucket_mb: float) -> int:
    """``rollout.weight_sync_bucket_mb`` in bytes (its field rule keeps it > 0)."""
    return int(bucket_mb * 1024 * 1024)


def tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


#: The engine layer a tensor loads into (a fused ``qkv_proj`` for ``q_proj.weight`` ...); a bucket boundary
#: never falls between two consecutive tensors of one layer.
LayerOf = Callable[[str], str]


def fused_layers(packed_modules: dict[str, list[str]]) -> LayerOf:
    """``LayerOf`` for an engine whose model fuses HF modules (vLLM's ``packed_modules_mapping``, e.g.
    ``{"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}``): a tensor's
    module path with a fused part renamed to its fused module, so weight and bias of q, k and v share a layer."""
    fused_of = {part: fused for fused, parts in packed_modules.items() for part in parts}

    def layer(name: str) -> str:
        module, _, _ = name.rpartition(".")
        parent, _, leaf = module.rpartition(".")
        return f"{parent}.{fused_of[leaf]}" if leaf in fused_of else module

    return layer


def iter_buckets(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    max_bytes: int,
    dtype: torch.dtype | None = None,
    layer_of: LayerOf | None = None,
) -> Iterator[NamedTensors]:
    """Consecutive groups of at most ``max_bytes`` (a larger tensor, or layer, travels alone), cast to ``dtype``.

    With ``layer_of``, consecutive tensors of one engine layer stay in one bucket: an engine that processes a
    layer once its weights are in (vLLM's reload, which re-packs a fused ``qkv_proj``) never sees half of one.
    Casting happens per tensor as it arrives, so the fp32 copy of a parameter never waits in a bucket.
    """
    bucket: NamedTensors = []
    size, open_layer = 0, None
    for name, tensor in named_tensors:
        tensor = tensor.detach()
        if dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        nbytes = tensor_bytes(tensor)
        layer = layer_of(name) if layer_of is not None else None
        same_layer = layer is not None and layer == open_layer
        if bucket and size + nbytes > max_bytes and not same_layer:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += nbytes
        open_layer = layer
    if bucket:
        yield bucket


def stream_weights(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    load: Loader,
    bucket_mb: float,
    dtype: torch.dtype | None = None,
    layer_of: LayerOf | None = None,
) -> int:
    """Feed ``named_tensors`` to ``load`` bucket by bucket; the number of tensors sent."""
    sent = 0
    for bucket in iter_buckets(named_tensors, bucket_bytes(bucket_mb), dtype, layer_of):
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
