"""Validation logs the score function's extra keys as ``val/reward_extra/<key>``, as training logs them."""

import math

import torch
from tensordict import TensorDict

from siirl.dag_worker.val_reward_extra import add_reward_extra, val_reward_extra


def test_extra_keys_average_over_every_sample_that_reported_them():
    totals: dict = {}
    first = TensorDict({"format_ok": torch.tensor([1.0, 0.0, math.nan])}, batch_size=[3])
    add_reward_extra(totals, {"reward_extra/format_ok": 0.5, "reward/mean": 0.1}, first)
    second = TensorDict({"format_ok": torch.tensor([1.0]), "length": torch.tensor([12.0])}, batch_size=[1])
    add_reward_extra(totals, {"reward_extra/format_ok": 1.0, "reward_extra/length": 12.0}, second)
    assert val_reward_extra(totals) == {"val/reward_extra/format_ok": 2 / 3, "val/reward_extra/length": 12.0}
