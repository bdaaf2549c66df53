"""The client each DAG worker uses to hand its shard to the next stage's dp layout.

Protocol for one (step, stage key), a reference hand-off:

1. Each producer (the dp-group leader of the producing layout) ``ray.put``s its whole shard ONCE, in its
   own process, in the wire format (numpy byte blocks, which readers map without copying), and sends its
   metadata (uid group keys, token lengths: a few bytes per sample) to every node's buffer, adding the
   shard's ref only at the buffer on its own node. It sends these as one-way messages and returns: a
   producer never waits for peers or buffers (Ray runs one caller's calls to an actor in order and keeps
   a ref alive while a call carries it). A rank published twice marks the entry, and consumers raise.
2. Each consumer makes ONE call to its local buffer, which answers once every producer's metadata is
   there, with the refs held on this node. It computes the same assignment of samples to consumer dp
   ranks as everyone else (``assign_samples``: a pure function of the metadata, so no assignment is ever
   sent), and takes its rows:
   - from producers on its own node (the fast path): ``ray.get`` of the shard ref maps the node's object
     store pages without copying, and the consumer copies just its rows, once, into its batch;
   - from producers on other nodes: the buffer on the producer's node cuts out exactly those rows
     there, so only they cross the network. The per-node buffer touches data only in this case.
   It copies instead of keeping views of the mapped shards because its rows come from several producers'
   objects while each tensor field of a batch is one contiguous, writable block.
3. Each consumer acks every buffer, again one-way; the last ack of an entry drops it, which frees the
   shard objects.

Per hand-off that is one object-store write per producer, one copy per consumer byte and one round trip
per consumer; the driver takes no part (it only created the buffers), so its memory stays flat whatever
the batch size.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from hashlib import blake2b

import numpy as np
import ray
from ray.actor import ActorHandle
from tensordict import TensorDict, TensorDictBase

from siirl.data_coordinator.assignment import ProducerMeta, assign_samples, describe_shard, rows_by_producer
from siirl.data_coordinator.buffer import find_data_buffers
from siirl.data_coordinator.layout import DpLayout, needs_redistribution
from siirl.data_coordinator.tensordict_ops import take_from_wires, to_wire


class DataCoordinatorTimeout(TimeoutError):
    """Some producer never showed up for a (step, stage key) within the coordinator's timeout."""


class DataCoordinator:
    """Moves samples between stages with different dp layouts through the per-node buffers."""

    def __init__(
        self,
        buffers: Mapping[str, ActorHandle] | None = None,
        *,
        timeout_s: float = 600.0,
        group_key: str = "uid",
        length_key: str = "attention_mask",
        balance: bool = True,
    ) -> None:
        self._buffers = dict(find_data_buffers() if buffers is None else buffers)
        self._node_id = ray.get_runtime_context().get_node_id()
        if self._node_id not in self._buffers:
            raise RuntimeError(
                f"no data buffer on node {self._node_id}; the driver must call create_data_buffers() after ray.init"
            )
        #: Seconds to wait for late producers before raising ``DataCoordinatorTimeout``.
        self.timeout_s = timeout_s
        self._group_key = group_key
        self._length_key = length_key
        #: Balance the consumers' token loads (verl's ``trainer.balance_batch``), else deal groups out in order.
        self._balance = balance
        self._plan: tuple[tuple[int, str, int, str], list[np.ndarray]] | None = None

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def _timeout(self, step: int, key: str, what: str) -> DataCoordinatorTimeout:
        return DataCoordinatorTimeout(
            f"timed out after {self.timeout_s:.0f}s waiting for step {step} stage {key!r} {what}"
        )

    def _entry(
        self, step: int, key: str, num_producers: int, deadline: float
    ) -> tuple[list[ProducerMeta], dict[int, list]]:
        """Every producer's metadata in rank order, and the shard refs of this node's producers."""
        local = self._buffers[self._node_id]
        remaining = deadline - time.monotonic()
        found, shards, conflict = ray.get(local.wait_entry.remote(step, key, num_producers, remaining))
        if conflict is not None:
            raise ValueError(conflict)
        metas = {m.producer_rank: m for m in found}
        if len(metas) < num_producers:
            missing = sorted(set(range(num_producers)) - set(metas))
            raise self._timeout(step, key, f"metadata of producer ranks {missing}")
        if sorted(metas) != list(range(num_producers)):
            raise ValueError(
                f"step {step} stage {key!r}: producer ranks {sorted(metas)} are not 0..{num_producers - 1}"
            )
        return [metas[r] for r in range(num_producers)], shards

    def _assignment(
        self, step: int, key: str, metas: list[ProducerMeta], num_consumers: int
    ) -> list[np.ndarray]:
        """The consumer partition, remembered for the get that usually follows a put in the same worker.

        The memo is keyed by the metadata's content too, so a re-run step with other data replans.
        """
        digest = blake2b(digest_size=16)
        for meta in metas:
            digest.update(meta.group_keys.tobytes())
            digest.update(meta.lengths.astype(np.int64).tobytes())
        plan_key = (step, key, num_consumers, digest.hexdigest())
        if self._plan is None or self._plan[0] != plan_key:
            self._plan = (plan_key, assign_samples(metas, num_consumers, self._balance))
        return self._plan[1]

    def put(
        self,
        step: int,
        key: str,
        batch: TensorDictBase,
        *,
        producer_rank: int,
        num_producers: int,
        num_consumers: int,
        expected_acks: int,
    ) -> None:
        """Hand this producer's shard over: one ``ray.put`` and one publish per node, sent without waiting
        for any answer (Ray runs one caller's calls to an actor in order, and keeps the ref alive while
        the call carries it). Duplicate ranks are reported to the consumers.

        ``num_producers`` / ``num_consumers`` are part of the call for symmetry with ``get`` (consumers
        plan from the metadata); ``expected_acks`` is the number of consumer workers that will ``get``.
        """
        meta = describe_shard(batch, producer_rank, self._node_id, self._group_key, self._length_key)
        ref = ray.put(to_wire(batch))
        for node, buffer in self._buffers.items():
            buffer.publish.remote(step, key, meta, expected_acks, [ref] if node == self._node_id else None)

    def _remote_buffer(self, meta: ProducerMeta) -> ActorHandle:
        if meta.node_id not in self._buffers:
            raise RuntimeError(f"no data buffer known for node {meta.node_id} of producer {meta.producer_rank}")
        return self._buffers[meta.node_id]

    def get(
        self, step: int, key: str, *, consumer_rank: int, num_consumers: int, num_producers: int
    ) -> TensorDict:
        """Exactly the samples assigned to ``consumer_rank``, ordered by producer rank then shard order."""
        metas, shards = self._entry(step, key, num_producers, self._deadline())
        parts = self._assignment(step, key, metas, num_consumers)
        rows = rows_by_producer(metas, parts[consumer_rank])
        mine = [r for r in range(num_producers) if len(rows[r])]
        if not mine:
            raise ValueError(
                f"step {step} stage {key!r}: consumer dp rank {consumer_rank} was assigned no samples"
            )
        here = [r for r in mine if metas[r].node_id == self._node_id]
        lost = [r for r in here if r not in shards]
        if lost:
            raise RuntimeError(f"step {step} stage {key!r}: no shard ref of local producer ranks {lost}")
        cuts = {
            r: self._remote_buffer(metas[r]).cut.remote(step, key, r, rows[r].tolist(), self.timeout_s)
            for r in mine if r not in here
        }
        local_wires = dict(zip(here, ray.get([shards[r][0] for r in here])))  # mapped, not copied
        remote_wires = dict(zip(cuts, ray.get([ref[0] for ref in ray.get(list(cuts.values()))])))
        pieces = [
            (local_wires[r], rows[r]) if r in local_wires else (remote_wires[r], np.arange(len(rows[r])))
            for r in mine
        ]
        for r, (wire, _) in zip(mine, pieces):
            if wire.num_rows != metas[r].num_samples and r in local_wires:
                raise RuntimeError(f"step {step} stage {key!r}: producer {r} sent {wire.num_rows} rows, "
                                   f"published {metas[r].num_samples}")
        batch = take_from_wires(pieces)
        del pieces, local_wires, remote_wires
        for buffer in self._buffers.values():
            buffer.ack.remote(step, key)  # nothing to wait for: the last ack frees the entry
        return batch

    def redistribute(
        self,
        step: int,
        key: str,
        batch: TensorDictBase | None,
        *,
        worker_rank: int,
        producer_layout: DpLayout,
        consumer_layout: DpLayout,
    ) -> TensorDictBase:
        """The batch this worker needs in the consumer layout; same layout -> the same object, no copy.

        Only dp-group leaders of the producer layout put (their peers hold copies); every worker gets.
        """
        if not needs_redistribution(producer_layout, consumer_layout):
            if batch is None:
                raise ValueError(f"worker {worker_rank} has no batch for step {step} stage {key!r}")
            return batch
        if producer_layout.is_leader(worker_rank):
            if batch is None:
                raise ValueError(
                    f"producer leader worker {worker_rank} has no batch for step {step} stage {key!r}"
                )
            self.put(
                step,
                key,
                batch,
                producer_rank=producer_layout.dp_rank(worker_rank),
                num_producers=producer_layout.dp_size,
                num_consumers=consumer_layout.dp_size,
                expected_acks=consumer_layout.world_size,
            )
        return self.get(
            step,
            key,
            consumer_rank=consumer_layout.dp_rank(worker_rank),
            num_consumers=consumer_layout.dp_size,
            num_producers=producer_layout.dp_size,
        )

    def drop_step(self, step: int) -> int:
        """Forget every entry of ``step`` on all nodes (after an aborted step); returns the count."""
        return sum(ray.get([b.drop_step.remote(step) for b in self._buffers.values()]))
