"""verl's divergence-based rejection options (rollout_rs=token_k1,seq_max_k2,...) on hand-worked ratios."""

import pytest
import torch

from siirl.algorithms.rollout_correction import correct_rollout
from siirl.errors import ConfigError
from siirl.params.algorithm import RolloutCorrectionConfig
from siirl.params.divergence_bounds import parse_bounds

from .test_rollout_correction import MASK, OLD, ROLLOUT


def _kept(rollout_rs, threshold):
    result = correct_rollout(OLD, ROLLOUT, MASK, RolloutCorrectionConfig(rollout_rs=rollout_rs, rollout_rs_threshold=threshold))
    return result.response_mask, result.metrics


def test_token_k1_keeps_log_rollout_over_train_within_log_bounds():
    # k1 = -log r: 3 -> -1.10 < log 0.6, 0.5 -> 0.69 > log 1.6, 1e-5 -> 11.5: rejected; 1 and 1.2 kept
    kept, metrics = _kept("token_k1", "0.6_1.6")
    assert torch.equal(kept, torch.tensor([[0.0, 1, 0, 0], [1, 1, 0, 0], [0, 1, 1, 1]]))
    assert metrics["rollout_corr/rollout_rs_token_k1_masked_fraction"] == pytest.approx(3 / 9)


def test_seq_max_k2_rejects_whole_responses_and_ignores_padding():
    # max over valid tokens of (log r)^2 / 2: 0.60, 0.017 (the padded -9 and 9 do not count), 66.3 > 2.5
    kept, metrics = _kept("seq_max_k2", 2.5)
    assert torch.equal(kept, torch.tensor([[1.0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]))
    assert metrics["rollout_corr/rollout_rs_seq_max_k2_max"] == pytest.approx(0.5 * float(torch.log(torch.tensor(1e-5))) ** 2, rel=1e-5)


def test_options_combine_by_and_with_one_bound_each():
    kept, metrics = _kept("token_k1,seq_max_k2", "0.6_1.6,2.5")
    assert torch.equal(kept, torch.tensor([[0.0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]]))
    assert metrics["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(6 / 9)
    assert metrics["rollout_corr/rollout_rs_seq_masked_fraction"] == pytest.approx(2 / 3)


def test_a_k1_upper_alone_implies_its_reciprocal_lower():
    # seq_mean_k1 with 2.0 keeps mean(-log r) in [log 0.5, log 2]: -0.135, -0.091 kept, 2.88 rejected
    kept, _ = _kept("seq_mean_k1", "2.0")
    assert torch.equal(kept, torch.tensor([[1.0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]))


@pytest.mark.parametrize(
    ("rollout_rs", "threshold", "named"),
    [
        ("token_k1,seq_max_k2", "0.6_1.6,2.5,3", "gives 3 bounds for 2 rollout_rs options"),
        ("seq_max_k2", "0.5_2.5", "for seq_max_k2 is one upper bound"),
        ("token_k3", "-1", "for token_k3 must be > 0"),
        ("token_k2", "big", "has 'big' for token_k2"),
        ("token_k1", None, "needs rollout_rs_threshold"),
    ],
)
def test_malformed_bounds_are_one_line(rollout_rs, threshold, named):
    with pytest.raises(ConfigError, match=named) as info:
        parse_bounds(rollout_rs, threshold)
    assert "\n" not in str(info.value)
