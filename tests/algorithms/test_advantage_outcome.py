"""Group-based estimators (grpo, gspo, cpgd, rloo, reinforce++ baseline) on a hand-made batch.

Groups: a = rows 0-2 with scores [1, 0, 2] (mean 1, unbiased std 1), b = rows 3-4 with equal scores
[0.5, 0.5] (std 0), c = row 5 alone with score 3.
"""

import math

import pytest
import torch

from siirl.algorithms import compute_advantage
from siirl.params.algorithm import AlgorithmConfig
from siirl.params.enums import AdvantageEstimator

from .algo_testutils import row_mask

INDEX = ["a", "a", "a", "b", "b", "c"]
MASK = row_mask([2, 3, 1, 3, 2, 2], 3)
REWARDS = torch.zeros(6, 3, dtype=torch.float64)
REWARDS[0, 1] = 1.0
REWARDS[0, 2] = 5.0  # on a masked token: must not count
REWARDS[2, 0] = 2.0
REWARDS[3, 2] = 0.5
REWARDS[4, 1] = 0.5
REWARDS[5, 1] = 3.0
EPS = 1e-6


def _spread(per_row: list[float]) -> torch.Tensor:
    return torch.tensor(per_row, dtype=torch.float64).unsqueeze(-1) * MASK


def _run(name: str, **options: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``name`` on the hand-made batch, with ``options`` set in the algorithm section."""
    return compute_advantage(
        name, token_level_rewards=REWARDS, response_mask=MASK, index=INDEX, config=AlgorithmConfig(**options)
    )


def test_grpo_by_hand() -> None:
    adv, ret = _run("grpo")
    k = 1 / (1 + EPS)
    expected = _spread([0.0, -k, k, 0.0, 0.0, 3.0 * k])  # singleton: baseline 0, scale 1
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected)
    assert not torch.isnan(adv).any()


def test_dr_grpo_only_centres() -> None:
    adv, _ = _run("grpo", norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(adv, _spread([0.0, -1.0, 1.0, 0.0, 0.0, 3.0]))


def test_gspo_advantages_are_grpo_advantages() -> None:
    torch.testing.assert_close(_run(AdvantageEstimator.GSPO)[0], _run("grpo")[0])


def test_cpgd_std_weight_matches_grpo() -> None:
    torch.testing.assert_close(_run("cpgd", weight_factor_in_cpgd="STD_weight")[0], _run("grpo")[0])


def test_cpgd_clip_filter_like_weight() -> None:
    # informative: group a (3 rows, std > 0) and singleton c (score 3 != 0): 4 of 6 -> weight 1.5
    adv, _ = _run("cpgd", weight_factor_in_cpgd="clip_filter_like_weight")
    torch.testing.assert_close(adv, _spread([0.0, -1.5, 1.5, 0.0, 0.0, 4.5]))


def test_cpgd_clip_filter_like_weight_is_capped() -> None:
    # only row 5 is informative: 6 / 1 = 6, capped at 2.5
    rewards = torch.zeros(6, 3, dtype=torch.float64)
    rewards[5, 0] = 1.0
    adv, _ = compute_advantage(
        "cpgd",
        token_level_rewards=rewards,
        response_mask=MASK,
        index=INDEX,
        config=AlgorithmConfig(weight_factor_in_cpgd="clip_filter_like_weight", cpgd_max_weight=2.5),
    )
    torch.testing.assert_close(adv, _spread([0.0, 0.0, 0.0, 0.0, 0.0, 2.5]))


@pytest.mark.parametrize("name", ["naive", "none"])
def test_cpgd_without_weight(name: str) -> None:
    torch.testing.assert_close(
        _run("cpgd", weight_factor_in_cpgd=name)[0], _spread([0.0, -1.0, 1.0, 0.0, 0.0, 3.0])
    )


def test_rloo_by_hand() -> None:
    # a: 1 - (0+2)/2 = 0, 0 - (1+2)/2 = -1.5, 2 - (1+0)/2 = 1.5; b: 0; c alone: 3
    adv, ret = _run("rloo")
    torch.testing.assert_close(adv, _spread([0.0, -1.5, 1.5, 0.0, 0.0, 3.0]))
    torch.testing.assert_close(ret, adv)


def test_reinforce_plus_plus_baseline_whitens_centred_scores() -> None:
    adv, ret = _run("reinforce_plus_plus_baseline")
    centred = _spread([0.0, -1.0, 1.0, 0.0, 0.0, 3.0])
    torch.testing.assert_close(ret, centred)
    valid = [centred[i, t].item() for i in range(6) for t in range(3) if MASK[i, t]]
    mean = sum(valid) / len(valid)
    std = math.sqrt(sum((v - mean) ** 2 for v in valid) / (len(valid) - 1) + 1e-8)
    expected = torch.tensor(
        [[(centred[i, t].item() - mean) / std if MASK[i, t] else 0.0 for t in range(3)] for i in range(6)],
        dtype=torch.float64,
    )
    torch.testing.assert_close(adv, expected)


def test_tensor_and_integer_uids_group_by_value() -> None:
    uids = torch.tensor([7, 7, 7, 8, 8, 9])
    adv, _ = compute_advantage("grpo", token_level_rewards=REWARDS, response_mask=MASK, index=uids)
    torch.testing.assert_close(adv, _run("grpo")[0])


def test_integer_rewards_and_bool_mask_are_accepted() -> None:
    rewards = torch.tensor([[0, 1], [0, 0]])
    mask = torch.tensor([[True, True], [True, False]])
    adv, _ = compute_advantage("grpo", token_level_rewards=rewards, response_mask=mask, index=["u", "u"])
    k = 1 / (math.sqrt(0.5) + EPS)  # scores [1, 0]: mean 0.5, unbiased std sqrt(0.5)
    torch.testing.assert_close(adv, torch.tensor([[0.5 * k, 0.5 * k], [-0.5 * k, 0.0]]))


def test_group_estimators_need_index() -> None:
    for name in ["grpo", "gspo", "cpgd", "rloo", "reinforce_plus_plus_baseline"]:
        with pytest.raises(ValueError, match="needs index"):
            compute_advantage(name, token_level_rewards=REWARDS, response_mask=MASK)
    with pytest.raises(ValueError, match="6 rows"):
        compute_advantage("grpo", token_level_rewards=REWARDS, response_mask=MASK, index=INDEX[:5])


def test_unknown_cpgd_weight_lists_choices() -> None:
    with pytest.raises(ValueError, match="clip_filter_like_weight"):
        _run("cpgd", weight_factor_in_cpgd="sqrt")


@pytest.mark.parametrize("estimator", ["grpo", "gspo", "cpgd"])
def test_constant_group_gives_exactly_zero_in_float32(estimator):
    """16 responses all scoring 2.2: the float32 group mean is not 2.2, the advantages must still be 0."""

    rewards = torch.zeros(16, 3, dtype=torch.float32)
    rewards[:, -1] = 2.2
    mask = torch.ones(16, 3)
    adv, _ = compute_advantage(estimator, token_level_rewards=rewards, response_mask=mask, index=["u"] * 16)
    assert adv.dtype == torch.float32 and torch.equal(adv, torch.zeros_like(adv))
