"""Rollout correction: truncated IS weights, rejection masks, veto, verl's metric names."""

import math

import pytest
import torch

from siirl.algorithms.rollout_correction import correct_rollout
from siirl.params.algorithm import RolloutCorrectionConfig

MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
# log(pi_train / pi_rollout) per token; the padding entries carry garbage that must not count
LOG_RATIO = torch.tensor(
    [[math.log(3.0), 0.0, math.log(0.5), 9.0], [0.0, math.log(1.2), -9.0, 9.0], [math.log(1e-5), 0.0, 0.0, 0.0]]
)
ROLLOUT = torch.full_like(LOG_RATIO, -1.0)
OLD = ROLLOUT + LOG_RATIO


def _correct(**options):
    return correct_rollout(OLD, ROLLOUT, MASK, RolloutCorrectionConfig(**options))


def test_token_weights_truncated_at_threshold_and_zero_on_padding() -> None:
    result = _correct(rollout_is="token", rollout_is_threshold=2.0)
    expected = torch.tensor([[2.0, 1.0, 0.5, 0.0], [1.0, 1.2, 0.0, 0.0], [1e-5, 1.0, 1.0, 1.0]])
    assert torch.allclose(result.weights, expected)
    assert torch.equal(result.response_mask, MASK)  # IS alone rejects nothing
    assert result.metrics["rollout_corr/rollout_is_max"] == pytest.approx(3.0)
    assert result.metrics["rollout_corr/rollout_is_ratio_fraction_high"] == pytest.approx(1 / 9)


def test_sequence_weights_are_the_product_broadcast() -> None:
    result = _correct(rollout_is="sequence", rollout_is_threshold=2.0)
    # products: 3 * 1 * 0.5 = 1.5; 1.2; 1e-5
    assert torch.allclose(result.weights[:, 0], torch.tensor([1.5, 1.2, 1e-5]))
    assert torch.allclose(result.weights, result.weights[:, :1] * MASK)


def test_batch_normalize_gives_mean_one() -> None:
    result = _correct(rollout_is="token", rollout_is_threshold=2.0, rollout_is_batch_normalize=True)
    assert (result.weights * MASK).sum() / MASK.sum() == pytest.approx(1.0)
    raw_mean = (2.0 + 1 + 0.5 + 1 + 1.2 + 1e-5 + 3) / 9
    assert result.metrics["rollout_corr/rollout_is_batch_norm_factor"] == pytest.approx(raw_mean)


def test_geometric_rejection_masks_whole_responses() -> None:
    result = _correct(rollout_rs="geometric", rollout_rs_threshold=1.1, rollout_rs_threshold_lower=0.9)
    # geometric means: 1.5 ** (1/3) = 1.145 (rejected), 1.2 ** (1/2) = 1.095 (kept), 1e-5 ** (1/4) (rejected)
    assert torch.equal(result.response_mask, MASK * torch.tensor([[0.0], [1.0], [0.0]]))
    assert result.metrics["rollout_corr/rollout_rs_seq_masked_fraction"] == pytest.approx(2 / 3)
    assert result.weights is None


def test_token_rejection_default_lower_is_reciprocal() -> None:
    result = _correct(rollout_rs="token", rollout_rs_threshold=2.5)  # keeps [0.4, 2.5]
    expected = MASK.clone()
    expected[0, 0] = 0.0  # 3.0
    expected[2, 0] = 0.0  # 1e-5
    assert torch.equal(result.response_mask, expected)
    assert result.metrics["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(2 / 9)


def test_veto_rejects_a_response_with_one_catastrophic_token() -> None:
    result = _correct(rollout_token_veto_threshold=1e-4)
    assert torch.equal(result.response_mask, MASK * torch.tensor([[1.0], [1.0], [0.0]]))
    assert result.metrics["rollout_corr/rollout_is_veto_fraction"] == pytest.approx(1 / 3)


def test_off_policy_metrics_always_reported() -> None:
    result = _correct()
    assert result.weights is None and torch.equal(result.response_mask, MASK)
    valid = LOG_RATIO[MASK.bool()]
    assert result.metrics["rollout_corr/kl"] == pytest.approx(float(-valid.mean()), rel=1e-5)
    assert result.metrics["rollout_corr/k3_kl"] == pytest.approx(float((valid.exp() - valid - 1).mean()), rel=1e-5)
    assert result.metrics["rollout_corr/rollout_ppl"] == pytest.approx(math.e, rel=1e-5)


def test_identical_policies_change_nothing() -> None:
    result = correct_rollout(ROLLOUT, ROLLOUT, MASK, RolloutCorrectionConfig(
        rollout_is="sequence", rollout_rs="token", rollout_rs_threshold=1.01, rollout_token_veto_threshold=1e-4))
    assert torch.equal(result.response_mask, MASK)
    assert torch.equal(result.weights, MASK)
