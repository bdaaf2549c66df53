"""The vLLM side of the ``vllm`` engine receiver: methods vLLM mixes into its worker class when the LLM is
built with ``worker_extension_cls=WORKER_EXTENSION``, so that ``LLM.collective_rpc`` runs them in every
worker process, where the model lives. ``self.rank``, ``self.device`` and ``self.model_runner`` are the
worker's own attributes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from siirl.device.weight_sync.buckets import TensorMeta, unpack
from siirl.device.weight_sync.engine_group import join_group

WORKER_EXTENSION = f"{__name__}.WeightSyncWorkerExtension"


class WeightSyncWorkerExtension:
    def join_weight_sync_group(
        self, address: str, port: int, rank_offset: int, ranks: int, world_size: int, backend: str
    ) -> None:
        """The worker's place among the ``ranks`` workers its LLM drives: its rank in vLLM's world, which
        under the external launcher is the DAG worker's global rank with one worker per LLM."""
        rank = rank_offset + self.rank % ranks  # type: ignore[attr-defined]
        self.weight_sync_group = join_group(address, port, rank, world_size, backend)

    def receive_weight_bucket(self, size: int, metas: list[TensorMeta]) -> None:
        """One flat bucket from group rank 0, loaded through the model's ``load_weights`` (full HF tensors:
        vLLM shards them for this worker's tensor-parallel rank)."""
        flat = torch.empty(size, dtype=torch.uint8, device=self.device)  # type: ignore[attr-defined]
        dist.broadcast(flat, src=0, group=self.weight_sync_group)
        self.model_runner.model.load_weights(weights=unpack(flat, metas))  # type: ignore[attr-defined]
