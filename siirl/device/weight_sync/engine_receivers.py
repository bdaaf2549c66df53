"""Rollout engines whose own processes join the weight-sync group, registered by rollout engine name.

The in-process loaders (``engine_loaders``) hand a bucket that already reached the DAG worker to the
engine; here the engine's ranks take the bucket from the source themselves, so it is copied to the
engine's devices once, by the collective. The DAG worker only relays the bucket's names, dtypes and shapes
through the engine's weight-update API, and each entry also says how the source puts a bucket on the
group, since that wire format is the engine's:

- ``sglang``: ``Engine.init_weights_update_group(master_address, master_port, rank_offset, world_size,
  group_name, backend)``, then per bucket ``Engine.update_weights_from_distributed(names, dtypes, shapes,
  group_name, flush_cache=False)`` (the schedulers receive each tensor by its own broadcast from rank 0);
  ``Engine.flush_cache()`` once at the end;
- ``vllm`` (and vLLM-Ascend): ``LLM.collective_rpc`` runs :mod:`~siirl.device.weight_sync.vllm_worker`'s
  methods in every worker (the LLM is built with ``worker_extension_cls=WORKER_EXTENSION``; with the engine
  core in the DAG worker's process or in one of its own); the bucket travels as one flat buffer; ``collective_rpc("finish_weight_sync")`` (the CPU build's held-back layer and
  tied weights) and ``LLM.reset_prefix_cache()`` once at the end.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
import torch.distributed as dist

from siirl.device.weight_sync.buckets import TensorMeta, unpack
from siirl.device.weight_sync.engine_group import GROUP_NAME
from siirl.device.weight_sync.vllm_worker import wire_metas
from siirl.registry import Registry


class EngineReceiver(ABC):
    """``engine``: the rollout engine object; ``ranks``: how many of its processes join (SGLang's TP size;
    vLLM's workers that ``collective_rpc`` reaches: 1 under the external launcher)."""

    def __init__(self, engine: Any, ranks: int = 1) -> None:
        self.engine, self.ranks = engine, int(ranks)

    @abstractmethod
    def join(self, address: str, port: int, rank_offset: int, world_size: int, backend: str) -> None:
        """Make the engine's ranks join the group at ``rank_offset`` .. ``rank_offset + ranks - 1``."""

    @abstractmethod
    def receive_bucket(self, size: int, metas: list[TensorMeta]) -> None:
        """Have the engine's ranks take one bucket from the source (blocks until they have loaded it)."""

    @abstractmethod
    def finish(self) -> None:
        """After the last bucket: drop what the old weights computed (prefix / radix cache), once."""

    @staticmethod
    @abstractmethod
    def transmit(group: Any, flat: torch.Tensor, metas: list[TensorMeta]) -> None:
        """Source side: put one packed bucket on the group (group rank 0) the way this engine receives it."""


ENGINE_RECEIVERS: Registry[type[EngineReceiver]] = Registry("weight-sync engine receiver")


def _succeeded(result: Any, call: str) -> None:
    """SGLang's weight calls answer ``(success, message)`` rather than raising."""
    if isinstance(result, tuple) and result and not result[0]:
        raise RuntimeError(f"sglang {call} failed: {result[1] if len(result) > 1 else result}")


@ENGINE_RECEIVERS.register("sglang")
class SGLangReceiver(EngineReceiver):
    def join(self, address: str, port: int, rank_offset: int, world_size: int, backend: str) -> None:
        _succeeded(
            self.engine.init_weights_update_group(
                master_address=address,
                master_port=port,
                rank_offset=rank_offset,
                world_size=world_size,
                group_name=GROUP_NAME,
                backend=backend,
            ),
            "init_weights_update_group",
        )

    def receive_bucket(self, size: int, metas: list[TensorMeta]) -> None:
        _succeeded(
            self.engine.update_weights_from_distributed(
                names=[m.name for m in metas],
                dtypes=[m.dtype for m in metas],
                shapes=[list(m.shape) for m in metas],
                group_name=GROUP_NAME,
                flush_cache=False,
            ),
            "update_weights_from_distributed",
        )

    def finish(self) -> None:
        self.engine.flush_cache()

    @staticmethod
    def transmit(group: Any, flat: torch.Tensor, metas: list[TensorMeta]) -> None:
        for _, tensor in unpack(flat, metas):
            dist.broadcast(tensor, src=0, group=group)


@ENGINE_RECEIVERS.register("vllm")
class VLLMReceiver(EngineReceiver):
    def join(self, address: str, port: int, rank_offset: int, world_size: int, backend: str) -> None:
        self.engine.collective_rpc(
            "join_weight_sync_group", args=(address, port, rank_offset, self.ranks, world_size, backend)
        )

    def receive_bucket(self, size: int, metas: list[TensorMeta]) -> None:
        self.engine.collective_rpc("receive_weight_bucket", args=(size, wire_metas(metas)))

    def finish(self) -> None:
        self.engine.collective_rpc("finish_weight_sync")
        self.engine.reset_prefix_cache()

    @staticmethod
    def transmit(group: Any, flat: torch.Tensor, metas: list[TensorMeta]) -> None:
        dist.broadcast(flat, src=0, group=group)
