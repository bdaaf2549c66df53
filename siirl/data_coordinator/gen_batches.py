"""Filling one train batch from several generation chunks, agreed by every data-parallel rank (verl's
``data.gen_batch_size`` with DAPO's group filter).

verl's single controller generates ``gen_batch_size`` prompts, drops the groups the filter rejects, and
repeats until ``train_batch_size`` groups are kept, then cuts the surplus off the end. Here each rank
generates and filters only its shard of a chunk, so after every chunk the ranks exchange their kept-group
counts (one small all-gather) and all of them make the same decision: stop, go on, or give up
(``max_num_gen_batches``). The train batch is the first ``train_batch_size`` kept groups in verl's order
(chunk, then rank, since a rank's shard is a contiguous slice of the chunk, then position); the surplus
is dropped. Ranks must then train on equal shares, so the ranks holding more than their share pass their
latest groups to those holding fewer: one all-gather of exactly those groups, in the data coordinator's
wire format, computed by every rank from the counts alone.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from tensordict import TensorDict, TensorDictBase

from siirl.algorithms.dapo import GenerationBudgetExceeded
from siirl.algorithms.grouping import hashable_uid
from siirl.data_coordinator.tensordict_ops import WireBatch, from_wires, row_values, select_rows, to_wire


def batch_uids(batch: TensorDictBase, key: str = "uid") -> list[Hashable]:
    """Per-row uids of a TensorDict (read with the one per-row reader), as hashable values: a kept group
    is the rows of one uid."""
    if key not in batch.keys():  # noqa: SIM118 - keys() works on every tensordict release
        raise ValueError(f"batch has no '{key}' field; cannot group responses by prompt")
    return [hashable_uid(uid) for uid in row_values(batch, key)]


class Exchange(Protocol):
    """This rank's place in its data-parallel group and an all-gather of Python objects over it."""

    rank: int
    size: int

    def all_gather(self, obj: Any) -> list[Any]: ...


@dataclass(frozen=True)
class DistExchange:
    """``Exchange`` over a torch.distributed group (``None``: the default group)."""

    group: Any = None

    @property
    def rank(self) -> int:
        import torch.distributed as dist

        return dist.get_rank(self.group) if dist.is_initialized() else 0

    @property
    def size(self) -> int:
        import torch.distributed as dist

        return dist.get_world_size(self.group) if dist.is_initialized() else 1

    def all_gather(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        if self.size == 1:
            return [obj]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj, group=self.group)
        return out


def first_groups(chunk_counts: list[list[int]], target: int) -> list[list[int]]:
    """How many of each (chunk, rank)'s kept groups are among the first ``target`` kept groups, counted in
    chunk order, then rank order."""
    left, taken = target, []
    for counts in chunk_counts:
        row = []
        for count in counts:
            row.append(min(count, left))
            left -= row[-1]
        taken.append(row)
    return taken


def rebalance_moves(held: list[int], share: int) -> list[tuple[int, int, int]]:
    """``(from_rank, to_rank, groups)`` moves after which every rank holds ``share`` groups: ranks above their
    share give their latest groups, lowest rank first, to the ranks below it, lowest rank first."""
    if sum(held) != share * len(held):
        raise ValueError(f"{sum(held)} groups cannot be split into {len(held)} shares of {share}")
    givers = [[rank, count - share] for rank, count in enumerate(held) if count > share]
    moves = []
    for taker, count in enumerate(held):
        need = share - count
        while need > 0:
            giver = givers[0]
            amount = min(need, giver[1])
            moves.append((giver[0], taker, amount))
            need -= amount
            giver[1] -= amount
            if giver[1] == 0:
                givers.pop(0)
    return moves


def _first_group_rows(batch: TensorDictBase, groups: int, uid_key: str) -> np.ndarray:
    """Rows of the first ``groups`` uid groups of ``batch`` (by first appearance), in batch order."""
    uids = batch_uids(batch, uid_key)
    wanted: dict[Hashable, None] = {}
    for uid in uids:
        if len(wanted) == groups:
            break
        wanted.setdefault(uid)
    return np.asarray([i for i, uid in enumerate(uids) if uid in wanted], dtype=np.int64)


def _group_rows(batch: TensorDictBase, uid_key: str) -> list[np.ndarray]:
    """The rows of each uid group of ``batch``, groups by first appearance."""
    rows: dict[Hashable, list[int]] = {}
    for i, uid in enumerate(batch_uids(batch, uid_key)):
        rows.setdefault(uid, []).append(i)
    return [np.asarray(r, dtype=np.int64) for r in rows.values()]


class KeptGroupCollector:
    """One rank's side of filling a train batch of ``train_groups`` groups (summed over the ranks) from
    generation chunks; every method is collective over ``exchange``."""

    def __init__(
        self, train_groups: int, max_num_gen_batches: int, exchange: Exchange, uid_key: str = "uid"
    ) -> None:
        if train_groups < 1 or train_groups % exchange.size:
            raise ValueError(
                f"a train batch of {train_groups} groups cannot be split evenly over {exchange.size} ranks"
            )
        self.train_groups = train_groups
        self.max_num_gen_batches = max_num_gen_batches
        self.exchange = exchange
        self.uid_key = uid_key
        self.reset()

    def reset(self) -> None:
        self._parts: list[TensorDictBase] = []
        #: Kept groups per chunk per rank, identical on every rank.
        self.chunk_counts: list[list[int]] = []

    @property
    def num_gen_batches(self) -> int:
        return len(self.chunk_counts)

    @property
    def kept_groups(self) -> int:
        return sum(map(sum, self.chunk_counts))

    def add(self, kept: TensorDictBase) -> bool:
        """Add this rank's kept rows of one chunk; True (on every rank) once the train batch is full.

        Raises ``GenerationBudgetExceeded`` (on every rank) when the ``max_num_gen_batches``-th chunk
        leaves it short; ``max_num_gen_batches <= 0`` sets no bound, as in verl.
        """
        groups = len(dict.fromkeys(batch_uids(kept, self.uid_key))) if kept.batch_size[0] else 0
        self.chunk_counts.append([int(c) for c in self.exchange.all_gather(groups)])
        self._parts.append(kept)
        full = self.kept_groups >= self.train_groups
        if not full and 0 < self.max_num_gen_batches <= self.num_gen_batches:
            raise GenerationBudgetExceeded(
                f"algorithm.filter_groups.max_num_gen_batches={self.max_num_gen_batches} chunks of "
                f"data.gen_batch_size prompts kept {self.kept_groups} of data.train_batch_size="
                f"{self.train_groups} groups whose filter metric varies; raise max_num_gen_batches (<= 0: no "
                "bound) or data.gen_batch_size, or check that the data is neither too easy nor too hard"
            )
        return full

    def take(self) -> TensorDict:
        """This rank's equal share of the first ``train_groups`` kept groups; the surplus is dropped."""
        if self.kept_groups < self.train_groups:
            raise RuntimeError(f"only {self.kept_groups} of {self.train_groups} groups collected; keep generating")
        rank, share = self.exchange.rank, self.train_groups // self.exchange.size
        taken = first_groups(self.chunk_counts, self.train_groups)
        mine = [select_rows(part, _first_group_rows(part, row[rank], self.uid_key))
                for part, row in zip(self._parts, taken)]
        held = [sum(row[r] for row in taken) for r in range(self.exchange.size)]
        moves = rebalance_moves(held, share)
        wires = [to_wire(part) for part in mine if part.batch_size[0]]
        if moves:
            wires = self._exchange(wires, moves)
        if not wires:
            raise RuntimeError(f"rank {rank} holds no kept groups after rebalancing")
        return from_wires(wires)

    def _exchange(self, wires: list[WireBatch], moves: list[tuple[int, int, int]]) -> list[WireBatch]:
        """Send this rank's latest groups where ``moves`` says, and append the groups sent to it."""
        rank = self.exchange.rank
        giving = sum(count for source, _, count in moves if source == rank)
        own = from_wires(wires) if wires else None
        outgoing: dict[int, WireBatch] = {}
        if giving and own is not None:
            groups = _group_rows(own, self.uid_key)
            keep = len(groups) - giving
            wires = [to_wire(select_rows(own, np.concatenate(groups[:keep])))] if keep else []
            at = keep
            for source, target, count in moves:
                if source == rank:
                    outgoing[target] = to_wire(select_rows(own, np.concatenate(groups[at : at + count])))
                    at += count
        received = self.exchange.all_gather(outgoing)
        incoming = [received[source][target] for source, target, _ in moves if target == rank]
        return wires + incoming
