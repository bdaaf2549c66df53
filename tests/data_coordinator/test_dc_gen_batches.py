"""Filling a train batch from generation chunks: every rank stops at the same chunk, the kept groups are
verl's (the first ``train_batch_size`` in chunk order), shares are equal, the bound is respected."""

from __future__ import annotations

import itertools
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from dist_testutils import RANKS_GROUP, spawn
from tensordict import TensorDict

from siirl.algorithms import GenerationBudgetExceeded
from siirl.data_coordinator.gen_batches import (
    DistExchange,
    KeptGroupCollector,
    batch_uids,
    first_groups,
    rebalance_moves,
)
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list

pytestmark = [RANKS_GROUP]


class ThreadExchange:
    """``size`` ranks as threads: an all-gather through a shared list and a barrier, like a process group."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.slots: list[object] = [None] * size
        self.barrier = threading.Barrier(size)
        self.calls = 0

    def rank_view(self, rank: int) -> RankExchange:
        return RankExchange(self, rank)


class RankExchange:
    def __init__(self, shared: ThreadExchange, rank: int) -> None:
        self.shared, self.rank, self.size = shared, rank, shared.size

    def all_gather(self, obj: object) -> list[object]:
        self.shared.slots[self.rank] = obj
        self.shared.barrier.wait()
        out = list(self.shared.slots)
        if self.rank == 0:
            self.shared.calls += 1
        self.shared.barrier.wait()
        return out


def _kept(uids: list[str], n: int = 2) -> TensorDict:
    """The kept rows of one rank's chunk: ``n`` responses per uid, a tensor and a non-tensor field."""
    rows = [uid for uid in uids for _ in range(n)]
    batch = TensorDict({"responses": torch.arange(len(rows)).reshape(-1, 1)}, batch_size=[len(rows)])
    set_non_tensor_list(batch, "uid", rows)
    set_non_tensor_list(batch, "data_source", [f"src-{uid}" for uid in rows])
    return batch


def _run_ranks(chunks: list[list[list[str]]], train_groups: int, max_chunks: int = 0):
    """Run one collector per rank over ``chunks[c][r]`` (rank r's kept uids in chunk c) until full.

    Returns per rank: (chunks consumed, its train share or the exception it raised)."""
    size = len(chunks[0])
    shared = ThreadExchange(size)

    def rank_loop(rank: int):
        collector = KeptGroupCollector(train_groups, max_chunks, shared.rank_view(rank))
        try:
            for chunk in chunks:
                if collector.add(_kept(chunk[rank])):
                    return collector.num_gen_batches, collector.take()
        except GenerationBudgetExceeded as exc:
            return collector.num_gen_batches, exc
        return collector.num_gen_batches, None

    with ThreadPoolExecutor(size) as pool:
        return list(pool.map(rank_loop, range(size)))


def _groups(batch: TensorDict) -> list[str]:
    return list(dict.fromkeys(batch_uids(batch)))


def test_first_groups_follow_chunk_then_rank_order():
    assert first_groups([[1, 0], [2, 3], [5, 5]], 4) == [[1, 0], [2, 1], [0, 0]]
    assert first_groups([[4, 4]], 8) == [[4, 4]]


def test_rebalance_moves_latest_groups_from_surplus_to_deficit():
    assert rebalance_moves([4, 4], 4) == []
    assert rebalance_moves([6, 0, 2, 0], 2) == [(0, 1, 2), (0, 3, 2)]
    assert rebalance_moves([0, 3, 3], 2) == [(1, 0, 1), (2, 0, 1)]
    with pytest.raises(ValueError, match="cannot be split into 2 shares of 3"):
        rebalance_moves([4, 1], 3)


def test_kept_groups_fill_the_train_batch_across_chunks():
    chunks = [
        [["a"], []],  # chunk 1: rank 0 keeps a, rank 1 keeps nothing -> 1 of 4
        [["b", "c"], ["d"]],  # chunk 2: 4 of 4 (full)
        [["never"], ["seen"]],
    ]
    results = _run_ranks(chunks, train_groups=4)
    assert [count for count, _ in results] == [2, 2]  # both ranks stop after the same chunk
    shares = [_groups(batch) for _, batch in results]
    assert shares == [["a", "b"], ["d", "c"]]  # rank 0 had a, b, c: its latest (c) moves to rank 1
    assert all(batch.batch_size[0] == 4 for _, batch in results)  # equal shares, n=2 rows per group
    assert batch_uids(results[1][1]) == ["d", "d", "c", "c"]
    assert results[1][1]["responses"].flatten().tolist() == [0, 1, 2, 3]  # d: rows 0-1 of its chunk, c: 2-3


def test_surplus_beyond_the_train_batch_is_dropped_like_verl():
    """The kept groups are exactly verl's: the first train_batch_size of the chunks laid end to end."""
    rng = random.Random(7)
    for trial in range(20):
        size = rng.choice([1, 2, 3, 4])
        train_groups = size * rng.randint(1, 4)
        chunks = [
            [[f"c{c}r{r}g{g}" for g in range(rng.randint(0, 3))] for r in range(size)] for c in range(12)
        ]
        flat = [uid for chunk in chunks for rank_uids in chunk for uid in rank_uids]
        if len(flat) < train_groups:
            continue
        results = _run_ranks(chunks, train_groups)
        totals = itertools.accumulate(sum(map(len, chunk)) for chunk in chunks)
        used = next(c + 1 for c, total in enumerate(totals) if total >= train_groups)
        assert {count for count, _ in results} == {used}, trial
        kept = [uid for _, batch in results for uid in _groups(batch)]
        assert sorted(kept) == sorted(flat[:train_groups]), trial
        assert {len(_groups(batch)) for _, batch in results} == {train_groups // size}, trial


def test_the_bound_stops_every_rank_with_the_keys_named():
    chunks = [[["a"], []], [[], []], [["b"], ["c"]]]
    results = _run_ranks(chunks, train_groups=4, max_chunks=2)
    for count, error in results:
        assert count == 2 and isinstance(error, GenerationBudgetExceeded)
        message = str(error)
        assert "algorithm.filter_groups.max_num_gen_batches=2" in message and "kept 1 of" in message
        assert "data.train_batch_size=4" in message and "\n" not in message


@pytest.mark.parametrize("bound", [0, -1])
def test_a_non_positive_bound_means_no_bound(bound):
    chunks = [[[], []]] * 25 + [[["a", "b"], ["c", "d"]]]
    results = _run_ranks(chunks, train_groups=4, max_chunks=bound)
    assert [count for count, _ in results] == [26, 26]


def test_a_rank_that_kept_nothing_gets_its_share():
    results = _run_ranks([[["a", "b", "c", "d"], []]], train_groups=4)
    assert [_groups(batch) for _, batch in results] == [["a", "b"], ["c", "d"]]
    assert batch_uids(results[1][1]) == ["c", "c", "d", "d"]


def test_one_process_needs_no_collective():
    collector = KeptGroupCollector(2, 3, DistExchange())
    assert not collector.add(_kept(["a"]))
    assert collector.add(_kept(["b", "c"]))
    assert _groups(collector.take()) == ["a", "b"]
    collector.reset()
    assert (collector.num_gen_batches, collector.kept_groups) == (0, 0)


def test_bad_usage():
    with pytest.raises(ValueError, match="3 groups cannot be split evenly over 2 ranks"):
        KeptGroupCollector(3, 0, ThreadExchange(2).rank_view(0))
    collector = KeptGroupCollector(2, 0, DistExchange())
    collector.add(_kept(["a"]))
    with pytest.raises(RuntimeError, match="only 1 of 2 groups collected"):
        collector.take()


def _gloo_rank(rank: int, world_size: int, out_dir: str) -> None:
    import json

    collector = KeptGroupCollector(4, 5, DistExchange())
    chunks = [[["a"], []], [["b", "c"], ["d"]]]
    for count, chunk in enumerate(chunks, start=1):
        if collector.add(_kept(chunk[rank])):
            break
    result = {"chunks": count, "uids": batch_uids(collector.take())}
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(result, f)


def test_ranks_agree_over_torch_distributed(tmp_path):
    import json

    spawn(_gloo_rank, 2, str(tmp_path))
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert results == [
        {"chunks": 2, "uids": ["a", "a", "b", "b"]},
        {"chunks": 2, "uids": ["d", "d", "c", "c"]},
    ]
