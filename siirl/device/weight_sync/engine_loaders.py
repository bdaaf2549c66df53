"""The last hop of every sync: one bucket of ``(hf_name, full tensor)`` into a rollout engine's weights,
through each engine's own weight-update API. Every transport's receiver ends in one of these.

- hf (colocated transformers model): ``Parameter.copy_`` in place, names and shapes checked;
- vLLM, and vLLM-Ascend (the same ``vllm.LLM`` on NPU through the vllm-ascend plugin): the model's
  ``load_weights(bucket)`` (vLLM shards full HF tensors for its tensor-parallel rank) reached through
  ``LLM.apply_model`` (the engine core runs in the DAG worker's process), or on releases before it through
  ``llm_engine.model_executor.driver_worker``;
- vLLM's CPU build, which packs every linear weight into its GEMM kernel after loading (the parameter left
  behind is empty, so ``load_weights`` cannot write into it), and a quantized engine (its layers refuse
  ``load_weights`` after start-up and must be quantized again): ``collective_rpc("reload_weights",
  kwargs={"weights_iterator": ...})``, vLLM's in-place reload, which processes (re-packs) each layer once all
  its tensors are in. A layer must therefore arrive within one reload: ``LayerwiseReload`` holds back the
  last layer of each bucket until the next bucket or the end of the sync, then re-packs tied weights;
- vLLM with its engine core in a process of its own (the rollout ranks of ``separate_async``): the bucket is
  packed into one host buffer and crosses by ``collective_rpc("load_weight_bucket", args=(bytes, metas))``
  to the worker extension (``vllm_worker``), which loads it as above inside the engine's worker (reload on
  the CPU build, whole layers, tied weights re-packed by ``collective_rpc("finish_weight_sync")``);
- SGLang: ``Engine.update_weights_from_tensor(named_tensors=bucket, flush_cache=False)``; the engine flushes
  its radix cache once, before the next generation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from siirl.device.weight_sync.buckets import LayerOf, Loader, NamedTensors, pack
from siirl.device.weight_sync.layerwise_reload import LayerwiseReload
from siirl.errors import ConfigError


def hf_loader(params: dict[str, torch.Tensor]) -> Callable[[Iterable[tuple[str, torch.Tensor]]], int]:
    """Copy into ``params`` (``model.named_parameters(remove_duplicate=False)``) from a bucket or any stream of
    pairs (the colocated trainer's, one full parameter at a time); a foreign name or shape is a ``ValueError``
    naming it. Returns the number of tensors copied."""

    @torch.no_grad()
    def load(bucket: Iterable[tuple[str, torch.Tensor]]) -> int:
        copied = 0
        for name, tensor in bucket:
            target = params.get(name)
            if target is None:
                raise ValueError(f"sync_weights: the rollout model has no parameter '{name}'")
            if target.shape != tensor.shape:
                raise ValueError(
                    f"sync_weights: '{name}' has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}"
                )
            target.copy_(tensor)
            copied += 1
        return copied

    return load


def vllm_loader(llm: Any) -> Loader:
    """``load(bucket)`` calling the vLLM model's ``load_weights`` (HF names, full tensors)."""
    if hasattr(llm, "apply_model"):
        return lambda bucket: llm.apply_model(lambda model: model.load_weights(bucket))
    worker = llm.llm_engine.model_executor.driver_worker
    return getattr(worker, "worker", worker).model_runner.model.load_weights


def sglang_loader(engine: Any) -> Loader:
    """``load(bucket)`` through SGLang's in-memory update (tensors travel to its scheduler process by
    SGLang's own serialisation: CUDA IPC handles on GPU)."""
    return lambda bucket: engine.update_weights_from_tensor(named_tensors=bucket, flush_cache=False)


def vllm_reload(llm: Any, layer_of: LayerOf) -> LayerwiseReload:
    """vLLM's CPU build: each bucket through the worker's in-place ``reload_weights``; tied weights re-packed
    at the end (:func:`~siirl.device.weight_sync.vllm_worker.repack_tied_weights`)."""
    from siirl.device.weight_sync.vllm_worker import partial_reload, repack_tied_weights

    def reload(tensors: NamedTensors) -> None:
        try:
            with partial_reload():
                llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(tensors)})
        except AttributeError as exc:
            if "reload_weights" not in str(exc):
                raise
            raise ConfigError(
                "this vLLM build (packed CPU kernels or a quantized rollout) takes new weights only through "
                f"vLLM's in-place reload, and this release has none; it needs vLLM's in-place reload_weights "
                f"(vLLM 0.32 has it): {exc}"
            ) from None

    return LayerwiseReload(reload, layer_of, lambda: llm.apply_model(repack_tied_weights))


class EngineProcessLoader:
    """``load(bucket)`` / ``finish()`` into a vLLM engine whose core runs in another process: vLLM's msgpack
    carries bytes and plain tuples (not tensors) as ``collective_rpc`` arguments, so each bucket goes packed."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def __call__(self, bucket: NamedTensors) -> None:
        from siirl.device.weight_sync.vllm_worker import wire_metas

        flat, metas = pack(bucket, device="cpu")
        self.llm.collective_rpc("load_weight_bucket", args=(memoryview(flat.numpy()), wire_metas(metas)))

    def finish(self) -> None:
        self.llm.collective_rpc("finish_weight_sync")
