"""The vLLM side of the ``vllm`` engine receiver: methods vLLM mixes into its worker class when the LLM is
built with ``worker_extension_cls=WORKER_EXTENSION``, so that ``LLM.collective_rpc`` runs them in every
worker process, where the model lives. ``self.rank``, ``self.device`` and ``self.model_runner`` are the
worker's own attributes.

The same methods serve an engine whose core runs in a process of its own (``VLLM_ENABLE_V1_MULTIPROCESSING=1``,
the rollout ranks of ``separate_async``): ``collective_rpc`` then carries its arguments through vLLM's msgpack
encoding, which turns dataclasses into dicts and tensors into untyped tuples, so a bucket crosses as bytes and
its metadata as plain tuples (:func:`wire_metas`), and ``load_weight_bucket`` hands it to the same loader.

On vLLM's CPU build a bucket goes through the model runner's in-place ``reload_weights`` (the packed linear
layers keep no parameter ``load_weights`` could write into), whole layers per call (``LayerwiseReload``), and
``finish_weight_sync`` re-packs tied weights; elsewhere ``load_weights`` writes straight into the parameters.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import astuple
from typing import Any

import torch
import torch.distributed as dist

from siirl.device.weight_sync.buckets import TensorMeta, fused_layers, unpack
from siirl.device.weight_sync.engine_group import join_group
from siirl.device.weight_sync.layerwise_reload import LayerwiseReload

WORKER_EXTENSION = f"{__name__}.WeightSyncWorkerExtension"


def repack_tied_weights(model: torch.nn.Module) -> list[str]:
    """Process again every layer whose weight is shared with another (a tied LM head and embedding): vLLM's
    CPU build packs the head's weight into its GEMM kernel at load time, and a reload that writes the shared
    embedding leaves that packed copy stale (wrong logits, no error). Returns the layers processed."""
    holders: dict[int, list[tuple[str, torch.nn.Module]]] = {}
    for name, module in model.named_modules():
        weight = module._parameters.get("weight")
        if weight is not None:
            holders.setdefault(id(weight), []).append((name, module))
    repacked = []
    for modules in holders.values():
        if len(modules) < 2:
            continue
        for name, module in modules:
            method = getattr(module, "quant_method", None)
            if method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(module)
                repacked.append(name)
    return repacked


#: vLLM's layerwise reload warns "Failed to load weights" for every layer a reload call did not cover: by
#: design here, since a bucket holds part of the model (the rest keeps its weights until its own bucket).
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


@contextlib.contextmanager
def partial_reload() -> Iterator[None]:
    """Quiet the per-layer warnings of a reload that covers one bucket (errors still show)."""
    log = logging.getLogger(RELOAD_LOGGER)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def reloads_weights() -> bool:
    """Whether this vLLM build needs the in-place reload (its CPU build) rather than ``load_weights``."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def wire_metas(metas: list[TensorMeta]) -> list[tuple]:
    """``metas`` as plain tuples, which every ``collective_rpc`` transport carries unchanged in meaning."""
    return [astuple(meta) for meta in metas]


def _metas(raw: list) -> list[TensorMeta]:
    """Metadata as it arrived: ``TensorMeta`` in process, lists (from :func:`wire_metas`) through msgpack."""
    return [meta if isinstance(meta, TensorMeta) else TensorMeta(*meta) for meta in raw]


class WeightSyncWorkerExtension:
    def join_weight_sync_group(
        self, address: str, port: int, rank_offset: int, ranks: int, world_size: int, backend: str
    ) -> None:
        """The worker's place among the ``ranks`` workers its LLM drives: its rank in vLLM's world, which
        under the external launcher is the DAG worker's global rank with one worker per LLM."""
        rank = rank_offset + self.rank % ranks  # type: ignore[attr-defined]
        self.weight_sync_group = join_group(address, port, rank, world_size, backend)

    def _weight_loader(self) -> Any:
        """This worker's bucket loader, made once: it holds the reload's held-back layer between buckets."""
        if getattr(self, "siirl_weight_loader", None) is None:
            self.siirl_weight_loader = self._loader()
        return self.siirl_weight_loader

    def packed_modules(self) -> dict[str, list[str]]:
        """The model's fused layers (``packed_modules_mapping``), so the sender's buckets keep them whole."""
        model = self.model_runner.model  # type: ignore[attr-defined]
        return {name: list(parts) for name, parts in (getattr(model, "packed_modules_mapping", {}) or {}).items()}

    def _loader(self) -> Any:
        runner = self.model_runner  # type: ignore[attr-defined]
        if not reloads_weights():
            return lambda tensors: runner.model.load_weights(weights=tensors)
        layer_of = fused_layers(dict(getattr(runner.model, "packed_modules_mapping", {}) or {}))
        def reload(tensors: list) -> None:
            with partial_reload():
                runner.reload_weights(weights_iterator=iter(tensors))

        return LayerwiseReload(reload, layer_of, lambda: repack_tied_weights(runner.model))

    def receive_weight_bucket(self, size: int, metas: list[TensorMeta]) -> None:
        """One flat bucket from group rank 0, loaded into the model (full HF tensors: vLLM shards them for
        this worker's tensor-parallel rank)."""
        flat = torch.empty(size, dtype=torch.uint8, device=self.device)  # type: ignore[attr-defined]
        dist.broadcast(flat, src=0, group=self.weight_sync_group)
        self._weight_loader()(unpack(flat, _metas(metas)))

    def load_weight_bucket(self, data: bytes, metas: list) -> None:
        """One packed bucket handed over by ``collective_rpc`` itself (an engine in a process of its own)."""
        flat = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)  # type: ignore[attr-defined]
        self._weight_loader()(unpack(flat, _metas(metas)))

    def finish_weight_sync(self) -> None:
        """After the last bucket: the layer held back for the reload, then tied weights re-packed."""
        finish = getattr(self._weight_loader(), "finish", None)
        if finish is not None:
            finish()
