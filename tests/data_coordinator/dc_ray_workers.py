"""A stand-in DAG worker for the buffer tests: makes a deterministic shard, puts it, gets its part."""

from __future__ import annotations

import time

import ray
import torch
from tensordict import TensorDict

from siirl.data_coordinator import DataCoordinator, DpLayout, non_tensor_list, set_non_tensor_list


def make_shard(producer_rank: int, n: int, group_size: int) -> TensorDict:
    """Sample i of producer p: x = 1000 p + i, uid ``p<p>-g<i // group_size>``, length 1 + (7 i mod 5)."""
    base = producer_rank * 1000
    lengths = torch.tensor([1 + (7 * i) % 5 for i in range(n)])
    td = TensorDict(
        {
            "x": (base + torch.arange(n, dtype=torch.float32)).unsqueeze(-1).repeat(1, 4),
            "attention_mask": (torch.arange(6).unsqueeze(0) < lengths.unsqueeze(-1)).long(),
        },
        batch_size=[n],
    )
    set_non_tensor_list(td, "uid", [f"p{producer_rank}-g{i // group_size}" for i in range(n)])
    set_non_tensor_list(td, "sample", [{"producer": producer_rank, "i": i} for i in range(n)])
    return td


def entries_once_settled(buffers: dict, expected: dict, timeout_s: float = 10.0) -> dict:
    """Each buffer's open entries, polled until they equal ``expected`` or ``timeout_s`` passes.

    Producers publish and consumers ack without waiting, so the buffers catch up a moment after the
    workers' calls return.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {node: ray.get(b.stats.remote())["entries"] for node, b in buffers.items()}
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.01)


def summary(batch: TensorDict) -> dict:
    return {
        "x": batch["x"][:, 0].tolist(),
        "uid": non_tensor_list(batch, "uid"),
        "sample": non_tensor_list(batch, "sample"),
        "node_id": ray.get_runtime_context().get_node_id(),
    }


class Worker:
    def __init__(self, timeout_s: float = 60.0) -> None:
        self.coordinator = DataCoordinator(timeout_s=timeout_s)

    def set_timeout(self, timeout_s: float) -> None:
        self.coordinator.timeout_s = timeout_s

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def produce(
        self,
        step: int,
        key: str,
        producer_rank: int,
        num_producers: int,
        num_consumers: int,
        expected_acks: int,
        n: int,
        group_size: int = 1,
    ) -> str:
        self.coordinator.put(
            step,
            key,
            make_shard(producer_rank, n, group_size),
            producer_rank=producer_rank,
            num_producers=num_producers,
            num_consumers=num_consumers,
            expected_acks=expected_acks,
        )
        return self.node_id()

    def consume(
        self, step: int, key: str, consumer_rank: int, num_consumers: int, num_producers: int
    ) -> dict:
        batch = self.coordinator.get(
            step, key, consumer_rank=consumer_rank, num_consumers=num_consumers, num_producers=num_producers
        )
        return summary(batch)

    def redistribute(
        self,
        step: int,
        worker_rank: int,
        producer_ranks: tuple,
        consumer_ranks: tuple,
        n: int,
        group_size: int,
    ) -> dict:
        producer, consumer = DpLayout(producer_ranks), DpLayout(consumer_ranks)
        batch = make_shard(producer.dp_rank(worker_rank), n, group_size)
        out = self.coordinator.redistribute(
            step,
            "stage",
            batch if producer.is_leader(worker_rank) else None,
            worker_rank=worker_rank,
            producer_layout=producer,
            consumer_layout=consumer,
        )
        return {**summary(out), "same_object": out is batch}

    def hand_over(
        self, step: int, worker_rank: int, batch: TensorDict | None, producer_ranks: tuple, consumer_ranks: tuple
    ) -> dict:
        """Move a given batch (None on a producer dp group's non-leaders) to this worker's consumer share;
        returns the share's rows as plain values."""
        out = self.coordinator.redistribute(
            step,
            "handover",
            batch,
            worker_rank=worker_rank,
            producer_layout=DpLayout(producer_ranks),
            consumer_layout=DpLayout(consumer_ranks),
        )
        return {key: out[key] if isinstance(out[key], torch.Tensor) else non_tensor_list(out, key) for key in out.keys()}  # noqa: SIM118 (a TensorDict iterates its batch)
