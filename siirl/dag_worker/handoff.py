"""Batches crossing placement groups: the producer's ranks put, the consumer's ranks get.

The plan lists every edge between groups (``ExecutionPlan.handoffs``). After a worker runs a producer it
hands the output to each consuming group through the data coordinator (only the dp-group leaders of the
producer's layout put; a put never waits); a worker whose node is fed from another group gets its share,
in the consumer's dp layout, before running it. Entries are keyed ``(step, "<tag><producer>-><consumer>")``
so every (step, edge) is unique, and validation passes use their own tag.
"""

from __future__ import annotations

from typing import Any

from siirl.execution.scheduler.plan import ExecutionPlan, Handoff


class Handoffs:
    """This worker's side of the plan's hand-offs."""

    def __init__(self, plan: ExecutionPlan, rank: int, coordinator: Any) -> None:
        self.plan, self.rank, self.coordinator = plan, rank, coordinator
        mine = set(plan.worker(rank).graph.nodes)
        self.incoming = {h.consumer: h for h in plan.handoffs if h.consumer in mine}
        self.outgoing: dict[str, list[Handoff]] = {}
        for h in plan.handoffs:
            if h.producer in mine and self._is_leader(h.producer_role):
                self.outgoing.setdefault(h.producer, []).append(h)

    def __bool__(self) -> bool:
        return bool(self.plan.handoffs)

    def _dp(self, role: str, rank: int) -> int:
        return self.plan.worker(rank).coords[role].dp_rank

    def _is_leader(self, role: str) -> bool:
        """The lowest rank of this worker's dp group in ``role`` (its tp peers hold the same batch)."""
        mine = self._dp(role, self.rank)
        return min(r for r in self.plan.groups[role].ranks if self._dp(role, r) == mine) == self.rank

    def receives(self, node_id: str) -> bool:
        return node_id in self.incoming

    def fetch(self, step: int, node_id: str, tag: str = "") -> Any:
        """This worker's share of the batch ``node_id`` takes from another placement group."""
        h = self.incoming[node_id]
        return self.coordinator.get(
            step, tag + h.key, consumer_rank=self._dp(h.consumer_role, self.rank),
            num_consumers=self.plan.groups[h.consumer_role].dp_size,
            num_producers=self.plan.groups[h.producer_role].dp_size,
        )

    def send(self, step: int, node_id: str, batch: Any, tag: str = "", only: set[str] | None = None) -> None:
        """Hand ``node_id``'s output to every other group that reads it (``only``: just those consumers)."""
        for h in self.outgoing.get(node_id, []):
            if only is not None and h.consumer not in only:
                continue
            consumers = self.plan.groups[h.consumer_role]
            self.coordinator.put(
                step, tag + h.key, batch, producer_rank=self._dp(h.producer_role, self.rank),
                num_producers=self.plan.groups[h.producer_role].dp_size, num_consumers=consumers.dp_size,
                expected_acks=len(consumers.ranks),
            )
