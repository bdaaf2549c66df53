"""Slicing, concatenating and wire-encoding TensorDicts that carry non-tensor fields."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from siirl.data_coordinator.tensordict_ops import (
    concat,
    from_wires,
    non_tensor_list,
    select_rows,
    set_non_tensor_list,
    to_wire,
    wire_take,
)


def sample_batch(n: int = 4, offset: int = 0) -> TensorDict:
    td = TensorDict(
        {
            "x": torch.arange(offset, offset + n * 3, dtype=torch.float32).view(n, 3),
            "mask": torch.arange(n) % 2 == 0,
            "half": torch.full((n, 2), 0.5, dtype=torch.bfloat16),
            "empty": torch.zeros(n, 0),
            "nested": {"y": torch.arange(offset, offset + n)},
        },
        batch_size=[n],
    )
    set_non_tensor_list(td, "uid", [f"u{offset + i}" for i in range(n)])
    set_non_tensor_list(td, ("nested", "gt"), [{"v": offset + i} if i % 2 else None for i in range(n)])
    td.set_non_tensor("source", "shared")
    return td


def test_select_rows_keeps_order_repeats_and_non_tensor_values():
    td = sample_batch()
    out = select_rows(td, [3, 0, 3])
    assert out.batch_size == torch.Size([3])
    assert out["x"][:, 0].tolist() == [9.0, 0.0, 9.0]
    assert non_tensor_list(out, "uid") == ["u3", "u0", "u3"]
    assert non_tensor_list(out, ("nested", "gt")) == [{"v": 3}, None, {"v": 3}]
    assert non_tensor_list(out, "source") == ["shared"] * 3
    assert isinstance(out.get("uid"), NonTensorStack)


def test_select_single_and_no_rows():
    td = sample_batch()
    one = select_rows(td, [2])
    assert non_tensor_list(one, "uid") == ["u2"] and one["nested", "y"].tolist() == [2]
    none = select_rows(td, np.array([], dtype=np.int64))
    assert none.batch_size == torch.Size([0]) and non_tensor_list(none, "uid") == []
    with pytest.raises(IndexError, match="out of range"):
        select_rows(td, [4])


def test_concat_joins_tensors_and_lists():
    a, b = sample_batch(2), sample_batch(3, offset=10)
    out = concat([a, b])
    assert out.batch_size == torch.Size([5])
    assert non_tensor_list(out, "uid") == ["u0", "u1", "u10", "u11", "u12"]
    assert out["nested", "y"].tolist() == [0, 1, 10, 11, 12]
    assert non_tensor_list(out, ("nested", "gt")) == [None, {"v": 1}, None, {"v": 11}, None]


def test_concat_refuses_different_fields():
    a, b = sample_batch(2), sample_batch(2)
    del b["mask"]
    with pytest.raises(ValueError, match=r"TensorDict #1: fields differ from #0 \(\['mask'\]\)"):
        concat([a, b])


def test_set_non_tensor_list_checks_length_and_batch_dims():
    td = sample_batch(2)
    with pytest.raises(ValueError, match="has 3 values for a batch of 2 rows"):
        set_non_tensor_list(td, "uid", ["a", "b", "c"])
    with pytest.raises(ValueError, match="one batch dimension"):
        select_rows(TensorDict({}, batch_size=[2, 2]), [0])


def test_wire_roundtrip_preserves_every_dtype_shape_and_value():
    td = sample_batch(5)
    back = from_wires([to_wire(td)])
    for key in ("x", "mask", "half", "empty", ("nested", "y")):
        assert back[key].dtype == td[key].dtype and torch.equal(back[key], td[key])
    for key in ("uid", ("nested", "gt"), "source"):
        assert non_tensor_list(back, key) == non_tensor_list(td, key)


def test_to_wire_shares_memory_and_wire_take_copies_only_scattered_rows():
    td = sample_batch(12)
    wire = to_wire(td)
    (block,) = wire.tensors["x"][2]
    assert np.shares_memory(block, td["x"].numpy())
    runs = wire_take(wire, np.array([2, 3, 4, 5, 8, 9, 10, 11]))  # two runs of four rows: views
    assert len(runs.tensors["x"][2]) == 2
    assert all(np.shares_memory(b, td["x"].numpy()) for b in runs.tensors["x"][2])
    scattered = wire_take(wire, np.array([7, 1, 0]))  # runs too short: one gathered copy
    (gathered,) = scattered.tensors["x"][2]
    assert not np.shares_memory(gathered, td["x"].numpy())
    out = from_wires([runs, scattered])
    assert non_tensor_list(out, "uid") == [f"u{i}" for i in (2, 3, 4, 5, 8, 9, 10, 11, 7, 1, 0)]
    assert out["x"][:, 0].tolist() == [3.0 * i for i in (2, 3, 4, 5, 8, 9, 10, 11, 7, 1, 0)]
    assert non_tensor_list(out, ("nested", "gt"))[-3:] == [{"v": 7}, {"v": 1}, None]
    out["x"] += 1  # the result owns writable memory
    assert td["x"][2, 0].item() == 6.0


def test_wire_take_of_no_rows():
    out = from_wires([wire_take(to_wire(sample_batch(3)), np.array([], dtype=np.int64))])
    assert out.batch_size == torch.Size([0]) and out["half"].shape == (0, 2)


def test_from_wires_refuses_mismatched_fields():
    a = to_wire(sample_batch(2))
    b = to_wire(sample_batch(2))
    del b.tensors["x"]
    with pytest.raises(ValueError, match="wire batch #1"):
        from_wires([a, b])


@pytest.mark.parametrize("collector_on", [True, False])
def test_setting_a_non_tensor_list_leaves_the_garbage_collector_as_it_was(collector_on):
    td = TensorDict({}, batch_size=[3])
    was = gc.isenabled()
    (gc.enable if collector_on else gc.disable)()
    try:
        set_non_tensor_list(td, "uid", ["a", "b", "c"])
        assert gc.isenabled() is collector_on
    finally:
        (gc.enable if was else gc.disable)()
    assert non_tensor_list(td, "uid") == ["a", "b", "c"]
