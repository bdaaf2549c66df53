"""The last hop of every sync: one bucket of ``(hf_name, full tensor)`` into a rollout engine's weights,
through each engine's own weight-update API. Every transport's receiver ends in one of these.

- hf (colocated transformers model): ``Parameter.copy_`` in place, names and shapes checked;
- vLLM, and vLLM-Ascend (the same ``vllm.LLM`` on NPU through the vllm-ascend plugin): the model's
  ``load_weights(bucket)`` (vLLM shards full HF tensors for its tensor-parallel rank) reached through
  ``LLM.apply_model`` (the engine core runs in the DAG worker's process), or on releases before it through
  ``llm_engine.model_executor.driver_worker``; a quantized engine wraps the sync in
  ``collective_rpc("start_weight_update")`` / ``("finish_weight_update")`` (``vllm_engine``);
- SGLang: ``Engine.update_weights_from_tensor(named_tensors=bucket, flush_cache=False)``; the engine flushes
  its radix cache once, before the next generation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from siirl.device.weight_sync.buckets import Loader


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
