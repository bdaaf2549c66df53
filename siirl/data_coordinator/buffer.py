"""Per-node data buffers: Ray actors holding ObjectRefs and sample metadata, never the samples.

There is one buffer per Ray node, pinned there and named after the node id. A producer's shard ref goes
only to the buffer on its own node, so the bytes stay in that node's object store: consumers on that node
read them zero-copy, consumers elsewhere ask this buffer to ``cut`` out exactly their rows. Metadata (a
few bytes per sample) is replicated to every buffer so each worker plans from its local buffer. There is
deliberately no global buffer: a single actor would be the single controller DistFlow removes.

Buffers are asyncio actors: waiting calls (``wait_entry``) park until a producer's ``publish`` wakes them,
so consumers neither poll nor add latency. See ``coordinator`` for the whole protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
from ray.actor import ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from siirl.data_coordinator.assignment import ProducerMeta
from siirl.data_coordinator.tensordict_ops import wire_take
from siirl.ray_names import job_scoped

logger = logging.getLogger(__name__)

BUFFER_NAME_PREFIX = "siirl_data_buffer_"
EntryKey = tuple[int, str]

# Ray destroys a non-detached actor once no handle to it is left, even a named one: the creating
# process keeps its handles here so the buffers live exactly as long as the job's driver.
_OWNED: dict[str, ActorHandle] = {}


def buffer_name(node_id: str) -> str:
    """The actor name of this job's buffer on ``node_id`` (``siirl.ray_names``)."""
    return job_scoped(f"{BUFFER_NAME_PREFIX}{node_id}")


@dataclass
class _Entry:
    expected_acks: int
    metas: dict[int, ProducerMeta] = field(default_factory=dict)
    #: producer rank -> its whole shard's ref, wrapped in a list; producers on this node only
    shards: dict[int, list[Any]] = field(default_factory=dict)
    acks: int = 0
    #: why the entry cannot be trusted (a producer rank published twice), reported to every consumer
    conflict: str | None = None


class DataBuffer:
    """Entries keyed by (step, stage key): all producers' metadata, local producers' shard refs."""

    def __init__(self) -> None:
        self._node_id = ray.get_runtime_context().get_node_id()
        self._entries: dict[EntryKey, _Entry] = {}
        self._changed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:  # created inside the actor's event loop
            self._changed = asyncio.Condition()
        return self._changed

    async def _notify(self) -> None:
        async with self._condition():
            self._condition().notify_all()

    async def _wait(self, ready: Callable[[], bool], timeout_s: float) -> None:
        """Return once ``ready()`` holds or ``timeout_s`` has passed (callers check which)."""
        async with self._condition():
            try:
                await asyncio.wait_for(self._condition().wait_for(ready), max(timeout_s, 0.0))
            except asyncio.TimeoutError:
                pass

    async def node_id(self) -> str:
        """The node this actor runs on (read from Ray, not trusted from the caller)."""
        return self._node_id

    async def publish(
        self, step: int, key: str, meta: ProducerMeta, expected_acks: int, wrapped_shard: list[Any] | None = None
    ) -> None:
        """Register a producer's shard metadata (and, on the producer's own node, the shard's ref, wrapped
        in a list so Ray hands over the ref, not the data); ``expected_acks`` consumers will read it.

        Producers do not wait for this call, so a conflict is recorded for the consumers to raise."""
        entry = self._entries.setdefault((step, key), _Entry(expected_acks))
        if meta.producer_rank in entry.metas:
            entry.conflict = f"producer rank {meta.producer_rank} published step {step} stage {key!r} twice"
            logger.error(entry.conflict)
        else:
            entry.metas[meta.producer_rank] = meta
            if wrapped_shard is not None:
                entry.shards[meta.producer_rank] = wrapped_shard
        await self._notify()

    async def wait_entry(
        self, step: int, key: str, num_producers: int, timeout_s: float
    ) -> tuple[list[ProducerMeta], dict[int, list[Any]], str | None]:
        """All producers' metadata, the wrapped shard refs held here and the entry's conflict (if any),
        once ``num_producers`` published or a conflict showed up (what is there on timeout)."""

        def ready() -> bool:
            entry = self._entries.get((step, key))
            return entry is not None and (len(entry.metas) >= num_producers or entry.conflict is not None)

        await self._wait(ready, timeout_s)
        entry = self._entries.get((step, key))
        return ([], {}, None) if entry is None else (list(entry.metas.values()), dict(entry.shards), entry.conflict)

    async def cut(
        self, step: int, key: str, producer_rank: int, rows: list[int], timeout_s: float = 60.0
    ) -> list[Any]:
        """A consumer on another node wants some rows of a shard held here: cut them out on this node (the
        shard is read zero-copy from this node's store) so only those rows cross the network.

        The consumer learnt of the shard from its own node's buffer; the producer's publish to this buffer
        is a separate call that may not have arrived yet, so wait for it (up to ``timeout_s``)."""

        def held() -> bool:
            entry = self._entries.get((step, key))
            return entry is not None and producer_rank in entry.shards

        await self._wait(held, timeout_s)
        entry = self._entries.get((step, key))
        if entry is None or producer_rank not in entry.shards:
            raise ValueError(f"no shard of producer rank {producer_rank} for step {step} stage {key!r} here")
        wire = await entry.shards[producer_rank][0]
        return [ray.put(wire_take(wire, np.asarray(rows, dtype=np.int64)))]

    async def ack(self, step: int, key: str) -> bool:
        """A consumer is done with the entry; the last expected ack drops it. Returns whether it dropped
        (consumers send acks without waiting for this answer)."""
        entry = self._entries.get((step, key))
        if entry is None:
            return False
        entry.acks += 1
        if entry.acks >= entry.expected_acks:
            del self._entries[(step, key)]
            return True
        return False

    async def drop_step(self, step: int) -> int:
        """Forget every entry of ``step`` (e.g. an aborted step); returns how many were dropped."""
        doomed = [k for k in self._entries if k[0] == step]
        for k in doomed:
            del self._entries[k]
        return len(doomed)

    async def stats(self) -> dict[str, Any]:
        """Node id, open entries (published producer ranks) and the ranks whose shard refs live here."""
        return {
            "node_id": self._node_id,
            "entries": {f"{s}/{k}": sorted(e.metas) for (s, k), e in self._entries.items()},
            "pieces": {f"{s}/{k}": sorted(e.shards) for (s, k), e in self._entries.items() if e.shards},
        }


def _alive_node_ids() -> list[str]:
    return [node["NodeID"] for node in ray.nodes() if node.get("Alive")]


def create_data_buffers() -> dict[str, ActorHandle]:
    """Create (or reuse) one pinned buffer actor per alive Ray node; called once by the driver.

    The buffers take no CPU so they never compete with DAG workers for placement. Nodes that join
    later get a buffer when this is called again.
    """
    handles = {}
    for node_id in _alive_node_ids():
        handles[node_id] = (
            ray.remote(DataBuffer)
            .options(
                name=buffer_name(node_id),
                get_if_exists=True,
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            )
            .remote()
        )
    placed = ray.get([handle.node_id.remote() for handle in handles.values()])
    if placed != list(handles):
        raise RuntimeError(f"data buffers landed on nodes {placed}, expected {list(handles)}")
    for node_id, handle in handles.items():  # keep the creating handle: dropping it would end the actor
        _OWNED.setdefault(node_id, handle)
    logger.info("data buffers on %d node(s): %s", len(placed), ", ".join(placed))
    return handles


def shutdown_data_buffers() -> None:
    """Kill the buffers this process created (their entries, and so the objects they pin, go too)."""
    for handle in _OWNED.values():
        ray.kill(handle)
    _OWNED.clear()


def find_data_buffers() -> dict[str, ActorHandle]:
    """The buffers of all alive nodes, looked up by name (nodes without one are skipped)."""
    found = {}
    for node_id in _alive_node_ids():
        try:
            found[node_id] = ray.get_actor(buffer_name(node_id))
        except ValueError:
            continue
    return found
