"""One per-row reader: every batch helper of the code base reads the same batch the same way."""

import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from siirl.data_coordinator.gen_batches import batch_uids
from siirl.data_coordinator.tensordict_ops import non_tensor_list, row_values
from siirl.engine.reward.batch_fields import get_list
from siirl.user_interface import filters

READERS = {
    "row_values": row_values,
    "non_tensor_list": non_tensor_list,
    "filters.row_values": filters.row_values,
    "reward get_list": get_list,
    "gen_batches batch_uids": batch_uids,
}


def _batch():
    td = TensorDict({"ids": torch.tensor([[1], [2], [3]])}, batch_size=[3])
    td["stack"] = NonTensorStack.from_list(["a", "b", "c"])
    td.set_non_tensor("whole_list", ["x", "y", "z"])
    td.set_non_tensor("shared", "s")
    return td


@pytest.mark.parametrize(
    ("key", "expected"),
    [("stack", ["a", "b", "c"]), ("whole_list", ["x", "y", "z"]), ("shared", ["s"] * 3), ("ids", [[1], [2], [3]])],
)
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_agrees(reader, key, expected):
    values = READERS[reader](_batch(), key)
    if reader == "gen_batches batch_uids":
        expected = [tuple(v) if isinstance(v, list) else v for v in expected]
        values = [tuple(v) if isinstance(v, list) else v for v in values]
    assert values == expected


def test_select_rows_splits_every_storage_form_alike():
    picked = filters.select_rows(_batch(), [2, 0])
    assert [row_values(picked, k) for k in ("stack", "whole_list", "shared")] == [["c", "a"], ["z", "x"], ["s", "s"]]


def test_missing_field_default_and_error():
    assert row_values(_batch(), "absent", None) == [None] * 3
    with pytest.raises(ValueError, match="batch has no field 'absent'"):
        row_values(_batch(), "absent")


def test_batch_uids_read_every_storage() -> None:
    stacked = TensorDict({"x": torch.zeros(2)}, batch_size=[2])
    stacked["uid"] = NonTensorStack("a", "b")
    assert batch_uids(stacked) == ["a", "b"]
    shared = TensorDict({"x": torch.zeros(2)}, batch_size=[2])
    shared.set_non_tensor("uid", ["a", "b"])  # a whole list stored at once reads as one uid per row
    assert batch_uids(shared) == ["a", "b"]
    assert batch_uids(TensorDict({"uid": torch.tensor([4, 4, 9])}, batch_size=[3])) == [4, 4, 9]
    with pytest.raises(ValueError, match="no 'uid' field"):
        batch_uids(TensorDict({"x": torch.zeros(2)}, batch_size=[2]))
