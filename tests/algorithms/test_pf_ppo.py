"""Policy-filtered PPO resampling: verl's weights, deterministic under a seed, batch size kept."""

import pytest
import torch

from siirl.algorithms.pf_ppo import REWEIGHT_METHODS, pf_ppo_sample_indices
from siirl.errors import ConfigError

SCORES = torch.tensor([0.0, 1.0, -2.0, 0.5, 1.0])


def test_weights_by_hand() -> None:
    assert torch.equal(REWEIGHT_METHODS.get("pow")(SCORES, 2.0), torch.tensor([0.0, 1.0, 4.0, 0.25, 1.0]))
    assert torch.equal(REWEIGHT_METHODS.get("max_min")(SCORES, 2.0), torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0]))
    assert torch.allclose(REWEIGHT_METHODS.get("max_random")(SCORES, 2.0), torch.tensor([0.1, 0.4, 0.1, 0.1, 0.4]))


def test_same_seed_same_rows_and_batch_size_kept() -> None:
    scores = SCORES.repeat(20)
    draw = lambda seed: pf_ppo_sample_indices(scores, "pow", 2.0, torch.Generator().manual_seed(seed))
    first, again, other = draw(7), draw(7), draw(8)
    assert first.shape == (100,) and torch.equal(first, again)
    assert not torch.equal(first, other)


def test_zero_weight_rows_are_almost_never_drawn_and_heavy_ones_dominate() -> None:
    rows = pf_ppo_sample_indices(SCORES.repeat(200), "max_min", 2.0, torch.Generator().manual_seed(0))
    picked = SCORES.repeat(200)[rows]
    assert set(picked.tolist()) <= {1.0, -2.0}  # 1e-8 weights vs 1: never drawn in 1000 draws


def test_all_zero_scores_sample_uniformly() -> None:
    rows = pf_ppo_sample_indices(torch.zeros(4), "pow", 2.0, torch.Generator().manual_seed(0))
    assert rows.shape == (4,) and int(rows.max()) < 4


def test_unknown_method_is_one_line() -> None:
    with pytest.raises(ConfigError, match="pf_ppo reweight_method"):
        pf_ppo_sample_indices(SCORES, "softmax", 2.0)
