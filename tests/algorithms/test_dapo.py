"""DAPO: zero-variance group filter, dynamic-sampling accumulator, overlong penalty."""

import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from siirl.algorithms import (
    DynamicSamplingAccumulator,
    GenerationBudgetExceeded,
    batch_uids,
    filter_zero_variance_groups,
    overlong_reward_penalty,
)

UIDS = ["a", "a", "b", "b", "c", "d", "d", "d"]
SCORES = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 0.0, 1.0]


def test_filter_drops_constant_groups() -> None:
    kept, stats = filter_zero_variance_groups(UIDS, SCORES)
    assert kept == [0, 1, 4, 5, 6, 7]  # b is constant; singleton c is kept
    assert stats == {"groups_kept": 3, "groups_total": 4, "samples_kept": 6, "samples_total": 8}


def test_filter_can_drop_singletons_and_takes_tensors() -> None:
    kept, stats = filter_zero_variance_groups(UIDS, torch.tensor(SCORES), keep_singletons=False)
    assert kept == [0, 1, 5, 6, 7]
    assert stats["groups_kept"] == 2


def test_filter_bad_inputs() -> None:
    with pytest.raises(ValueError, match="8 uids but the batch has 7"):
        filter_zero_variance_groups(UIDS, SCORES[:7])
    with pytest.raises(ValueError, match="finite"):
        filter_zero_variance_groups(UIDS, [float("nan")] + SCORES[1:])


def _gen_batch(uids: list[str], scores: list[float]) -> TensorDict:
    batch = TensorDict(
        {"scores": torch.tensor(scores), "responses": torch.arange(len(uids)).unsqueeze(-1).repeat(1, 2)},
        batch_size=[len(uids)],
    )
    batch["uid"] = NonTensorStack(*uids)
    return batch


def _add_filtered(acc: DynamicSamplingAccumulator, batch: TensorDict) -> bool:
    kept, _ = filter_zero_variance_groups(batch_uids(batch), batch["scores"])
    return acc.add(batch, kept)


def test_accumulator_collects_until_target_and_trims() -> None:
    acc = DynamicSamplingAccumulator(target_groups=3, max_num_gen_batches=5)
    assert not _add_filtered(acc, _gen_batch(["p", "p", "q", "q"], [1, 0, 1, 1]))  # keeps p
    assert not _add_filtered(acc, _gen_batch(["r", "r", "s", "s"], [0, 0, 0, 0]))  # keeps nothing
    assert _add_filtered(acc, _gen_batch(["t", "t", "u", "u", "v", "v"], [1, 0, 0, 1, 0, 1]))
    assert (acc.num_groups, acc.num_gen_batches, acc.is_full) == (4, 3, True)
    batch = acc.get_batch()
    assert batch_uids(batch) == ["p", "p", "t", "t", "u", "u"]  # first 3 groups, arrival order
    assert batch["scores"].tolist() == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert batch["responses"][:, 0].tolist() == [0, 1, 0, 1, 2, 3]
    acc.reset()
    assert (acc.num_groups, acc.num_gen_batches, acc.is_full) == (0, 0, False)


def test_accumulator_raises_when_budget_is_spent() -> None:
    acc = DynamicSamplingAccumulator(target_groups=2, max_num_gen_batches=2)
    _add_filtered(acc, _gen_batch(["p", "p"], [1, 0]))
    with pytest.raises(GenerationBudgetExceeded, match="2 generation batches kept only 1 of 2 groups"):
        _add_filtered(acc, _gen_batch(["q", "q"], [1, 1]))


def test_accumulator_zero_budget_is_unlimited() -> None:
    acc = DynamicSamplingAccumulator(target_groups=1, max_num_gen_batches=0)
    for _ in range(20):
        _add_filtered(acc, _gen_batch(["q", "q"], [1, 1]))
    assert not acc.is_full
    assert _add_filtered(acc, _gen_batch(["p", "p"], [0, 1]))


def test_accumulator_bad_usage() -> None:
    with pytest.raises(ValueError, match="target_groups"):
        DynamicSamplingAccumulator(target_groups=0)
    with pytest.raises(ValueError, match="max_num_gen_batches"):
        DynamicSamplingAccumulator(target_groups=1, max_num_gen_batches=-1)
    acc = DynamicSamplingAccumulator(target_groups=1)
    with pytest.raises(RuntimeError, match="0 of 1 groups"):
        acc.get_batch()
    shared = TensorDict({"x": torch.zeros(2)}, batch_size=[2])
    shared.set_non_tensor("uid", ["a", "b"])  # a whole list stored at once reads as one uid per row
    assert batch_uids(shared) == ["a", "b"]
    with pytest.raises(ValueError, match="no 'uid' field"):
        acc.add(TensorDict({"x": torch.zeros(2)}, batch_size=[2]))


def test_accumulator_accepts_tensor_uids() -> None:
    acc = DynamicSamplingAccumulator(target_groups=2)
    batch = TensorDict({"uid": torch.tensor([4, 4, 9])}, batch_size=[3])
    assert acc.add(batch)
    assert batch_uids(acc.get_batch()) == [4, 4, 9]


def test_overlong_penalty_by_hand() -> None:
    # soft zone starts at 10 - 4 = 6 tokens; -1/4 per token beyond it, floor at -penalty_factor
    out = overlong_reward_penalty([0, 6, 7, 8, 10, 12], max_response_length=10, overlong_buffer_len=4)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0]))
    half = overlong_reward_penalty(torch.tensor([8]), 10, 4, penalty_factor=0.5)
    torch.testing.assert_close(half, torch.tensor([-0.25]))


def test_overlong_penalty_bad_inputs() -> None:
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        overlong_reward_penalty([1], 10, 0)
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        overlong_reward_penalty([1], 10, 11)
    with pytest.raises(ValueError, match="penalty_factor"):
        overlong_reward_penalty([1], 10, 4, penalty_factor=-1)
    with pytest.raises(ValueError, match="response_lengths"):
        overlong_reward_penalty([-1], 10, 4)
