"""The broadcast transport with the rollout engine's own processes as receivers.

Headers (names, dtypes, shapes) travel the DAG workers' :class:`SyncGroup` as in ``broadcast``; the data
travels a second group between the source (rank 0 there) and every engine's ranks
(``engine_group``), in the wire format of the engine's registered receiver (``engine_receivers``).
The receiving DAG worker never holds the weights: it relays each header to its engine's weight-update API,
and its engine's ranks take the bucket onto their devices. Every engine brings ``engine_ranks`` ranks, the
receivers in ``group.members`` order after the source. That data group is flat: NCCL and HCCL route a
broadcast through each node once by their own topology; the DAG workers' hops only carry headers.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from siirl.device.weight_sync.base import WEIGHT_SYNC_BACKENDS
from siirl.device.weight_sync.broadcast import BroadcastSync
from siirl.device.weight_sync.buckets import Loader, TensorMeta
from siirl.device.weight_sync.engine_group import join_group, source_address
from siirl.device.weight_sync.engine_receivers import ENGINE_RECEIVERS, EngineReceiver
from siirl.device.weight_sync.topology import SyncGroup


@WEIGHT_SYNC_BACKENDS.register("engine_broadcast")
class EngineBroadcastSync(BroadcastSync):
    """``engine``: a name in ``ENGINE_RECEIVERS``; ``receiver``: this rank's engine wrapped in that entry (on
    receiving ranks). Built collectively by every member of ``group``: the engines join the data group."""

    def __init__(
        self,
        group: SyncGroup,
        src: int,
        bucket_mb: float,
        engine: str,
        receiver: EngineReceiver | None = None,
        engine_ranks: int = 1,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(group, src, bucket_mb, device=device, dtype=dtype)
        self.wire = ENGINE_RECEIVERS.get(engine)
        self.receiver = receiver
        rank = dist.get_rank()
        if rank not in group.members:
            return
        address, port = self._header(list(source_address()) if rank == self.src else [None, None])
        receivers = [r for r in group.members if r != self.src]
        world_size = 1 + len(receivers) * engine_ranks
        if rank == self.src:
            self.data_group = join_group(address, port, 0, world_size, group.backend)
        elif receiver is None:
            raise ValueError(f"engine_broadcast: rollout rank {rank} needs its engine's receiver")
        else:
            receiver.join(address, port, 1 + receivers.index(rank) * engine_ranks, world_size, group.backend)

    def _give(self, flat: torch.Tensor, metas: list[TensorMeta]) -> None:
        self.wire.transmit(self.data_group, flat, metas)

    def _take(self, size: int, metas: list[TensorMeta], load: Loader | None) -> None:
        self.receiver.receive_bucket(size, metas)  # type: ignore[union-attr]

    def _done(self) -> None:
        self.receiver.finish()  # type: ignore[union-attr]
