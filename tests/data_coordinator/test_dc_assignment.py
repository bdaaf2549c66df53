"""The deterministic sample -> consumer assignment and dp layouts (no Ray needed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from siirl.data_coordinator import (
    DpLayout,
    ProducerMeta,
    assign_samples,
    describe_shard,
    needs_redistribution,
)
from siirl.data_coordinator.assignment import rows_by_producer, uid_keys
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list


def metas_with_groups(num_producers: int, groups_per_producer: int, group_size: int) -> list[ProducerMeta]:
    rng = np.random.default_rng(0)
    metas = []
    for p in range(num_producers):
        uids = [f"p{p}g{g}" for g in range(groups_per_producer) for _ in range(group_size)]
        metas.append(ProducerMeta(p, "node", uid_keys(uids), rng.integers(1, 200, len(uids))))
    return metas


def uids_of(metas: list[ProducerMeta]) -> list[int]:
    return [int(k) for m in metas for k in m.group_keys]


def test_groups_stay_whole_and_every_sample_goes_to_exactly_one_consumer():
    metas = metas_with_groups(4, 6, 3)
    parts = assign_samples(metas, 2)
    flat = np.concatenate(parts)
    assert sorted(flat.tolist()) == list(range(72))
    uids = uids_of(metas)
    owner = {}
    for c, part in enumerate(parts):
        assert np.all(np.diff(part) > 0)
        for i in part:
            assert owner.setdefault(uids[i], c) == c
    lengths = np.concatenate([m.lengths for m in metas])
    loads = [int(lengths[p].sum()) for p in parts]
    group_loads = {u: sum(int(n) for v, n in zip(uids, lengths) if v == u) for u in set(uids)}
    assert max(loads) - min(loads) <= max(group_loads.values())


def test_assignment_is_independent_of_metadata_arrival_order():
    metas = metas_with_groups(3, 4, 2)
    first = assign_samples(metas, 2)
    again = assign_samples(list(reversed(metas)), 2)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_without_uids_each_sample_is_its_own_group():
    metas = [describe_shard(TensorDict({"x": torch.zeros(3)}, batch_size=[3]), r, "n") for r in range(2)]
    assert len(set(uids_of(metas))) == 6
    parts = assign_samples(metas, 3)
    assert sorted(len(p) for p in parts) == [2, 2, 2]


def test_uid_keys_are_stable_and_tell_types_apart():
    keys = uid_keys(["a", "a", 1, "1"])
    assert keys.dtype == np.uint64 and keys[0] == keys[1] and keys[2] != keys[3]
    assert uid_keys(["a"])[0] == keys[0]  # no per-process salt, unlike hash()
    assert int(keys.max()) < 1 << 63  # never collides with the keys of uid-less samples


def test_rows_by_producer_agree_with_the_partition():
    metas = metas_with_groups(3, 2, 2)
    for part in assign_samples(metas, 2):
        rows = rows_by_producer(metas, part)
        assert np.array_equal(np.concatenate([r + 4 * p for p, r in enumerate(rows)]), part)
        assert all(np.all((r >= 0) & (r < 4)) for r in rows)


def test_assignment_errors():
    metas = metas_with_groups(2, 1, 4)
    with pytest.raises(ValueError, match="2 sample groups cannot be spread over 3 consumer dp ranks"):
        assign_samples(metas, 3)
    with pytest.raises(ValueError, match=r"producer ranks must be exactly 0..0, got \[1\]"):
        assign_samples(metas[1:], 1)


def test_describe_shard_reads_uids_and_mask_lengths():
    td = TensorDict({"attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]])}, batch_size=[2])
    set_non_tensor_list(td, "uid", ["a", "b"])
    meta = describe_shard(td, producer_rank=1, node_id="n1")
    assert np.array_equal(meta.group_keys, uid_keys(["a", "b"]))
    assert meta.lengths.tolist() == [2, 1] and meta.num_samples == 2
    bare = describe_shard(TensorDict({"x": torch.zeros(3)}, batch_size=[3]), 0, "n")
    assert bare.lengths.tolist() == [1, 1, 1]


def test_layouts_and_redistribution_decision():
    tp2 = DpLayout.contiguous(world_size=4, dp_size=2)
    assert tp2.dp_ranks == (0, 0, 1, 1) and tp2.dp_size == 2 and tp2.world_size == 4
    assert [tp2.is_leader(w) for w in range(4)] == [True, False, True, False]
    dp4 = DpLayout.contiguous(4, 4)
    assert needs_redistribution(tp2, dp4) and needs_redistribution(dp4, tp2)
    assert not needs_redistribution(dp4, DpLayout((0, 1, 2, 3)))
    with pytest.raises(ValueError, match="different worker counts"):
        needs_redistribution(dp4, DpLayout.contiguous(2, 2))
    with pytest.raises(ValueError, match=r"dp ranks must be exactly 0..1, got \[0, 2\]"):
        DpLayout((0, 2))
    with pytest.raises(ValueError, match="not a positive multiple"):
        DpLayout.contiguous(4, 3)


def test_balance_batch_off_skips_the_balancer_and_deals_groups_out_in_order(monkeypatch):
    """verl's ``trainer.balance_batch``: on, the consumers' token loads are balanced by the C++ partitioner;
    off, it is never called and each consumer takes a contiguous run of groups, as verl splits the batch."""
    from siirl.data_coordinator import assignment

    calls = []
    balancer = assignment.group_balanced_partitions
    monkeypatch.setattr(
        assignment, "group_balanced_partitions", lambda *a, **k: calls.append(1) or balancer(*a, **k)
    )
    metas = metas_with_groups(2, 3, 2)  # groups p0g0, p0g1, p0g2, p1g0, ... of 2 samples each
    balanced = assign_samples(metas, 2)
    assert calls == [1]
    in_order = assign_samples(metas, 2, balance=False)
    assert calls == [1]
    assert [part.tolist() for part in in_order] == [list(range(6)), list(range(6, 12))]
    assert not all(np.array_equal(a, b) for a, b in zip(balanced, in_order))  # the balancer did move groups


def test_balance_batch_false_loads_and_reaches_the_coordinators_assignment(monkeypatch):
    from types import SimpleNamespace

    from siirl.config_checks import load_config
    from siirl.data_coordinator import coordinator

    monkeypatch.setattr(coordinator.ray, "get_runtime_context", lambda: SimpleNamespace(get_node_id=lambda: "n"))
    monkeypatch.setattr(coordinator, "assign_samples", lambda metas, n, balance: balance)
    metas = metas_with_groups(2, 1, 2)
    for value in (True, False):
        cfg = load_config(["device=cpu", f"trainer.balance_batch={value}"])
        dc = coordinator.DataCoordinator({"n": None}, balance=cfg.trainer.balance_batch)
        assert dc._assignment(1, "stage", metas, 2) is value
