"""GDPO: each reward component normalised in its group, weighted, summed, whitened; values worked by hand."""

import math

import pytest
import torch

from siirl.algorithms import compute_advantage, estimator_needs
from siirl.params.algorithm import AlgorithmConfig

from .algo_testutils import row_mask

#: Two prompts (uids a, b), two responses each; one valid token per row of width 2.
UIDS = ["a", "a", "b", "b"]
MASK = row_mask([1, 1, 1, 1], 2)
COMPONENTS = {
    "accuracy_reward": torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64),
    "format_reward": torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=torch.float64),
}


def _gdpo(components=COMPONENTS, **options):
    keys = options.pop("keys", ["accuracy_reward", "format_reward"])
    config = AlgorithmConfig(adv_estimator="gdpo", gdpo_reward_keys=keys, **options)
    summed = sum(components.values()) if components else torch.zeros(4, dtype=torch.float64)
    return compute_advantage(
        "gdpo", token_level_rewards=summed.unsqueeze(-1) * MASK, response_mask=MASK, index=UIDS,
        config=config, reward_components=components,
    )


def test_each_component_is_normalised_in_its_group_then_weighted_and_whitened():
    # Per component, a group of two unequal values normalises to +-1/sqrt(2) (unbiased std |x - y| / sqrt 2),
    # an equal pair to 0: accuracy -> [+s, -s, 0, 0], format -> [0, 0, -s, +s], s = 0.7071.
    # Weights [1, 2] sum to [s, -s, -2s, 2s]: mean 0, unbiased variance (0.5 + 0.5 + 2 + 2) / 3 = 5/3,
    # so the whitened values are s / sqrt(5/3) = sqrt(0.3) and 2s / sqrt(5/3) = sqrt(1.2).
    advantages, returns = _gdpo(gdpo_reward_weights=[1.0, 2.0])
    expected = torch.tensor([math.sqrt(0.3), -math.sqrt(0.3), -math.sqrt(1.2), math.sqrt(1.2)], dtype=torch.float64)
    assert torch.allclose(advantages[:, 0], expected, atol=1e-5)
    assert torch.equal(advantages[:, 1], torch.zeros(4, dtype=torch.float64))  # padding stays 0
    assert torch.equal(returns, advantages)


def test_default_weights_are_one_each_and_differ_from_grpo_on_the_sum():
    # Weights 1, 1: [s, -s, -s, s]; variance 4 * 0.5 / 3 = 2/3; whitened s / sqrt(2/3) = sqrt(0.75).
    advantages, _ = _gdpo()
    assert torch.allclose(advantages[:, 0], math.sqrt(0.75) * torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64),
                          atol=1e-5)
    # GRPO on the summed reward (a: 2, 1; b: 1, 2) gives the same signs here; weight format 3x and it does not:
    # accuracy [s, -s, 0, 0] + 3 * format [0, 0, -s, s] -> row 2 three times row 0's magnitude.
    weighted, _ = _gdpo(gdpo_reward_weights=[1.0, 3.0])
    assert weighted[2, 0].item() == pytest.approx(3 * -weighted[0, 0].item(), rel=1e-5)


def test_std_normalisation_off_only_centres_each_component():
    # Centred: accuracy [0.5, -0.5, 0, 0], format [0, 0, -0.5, 0.5]; weights [1, 2] -> [0.5, -0.5, -1, 1];
    # variance (0.25 + 0.25 + 1 + 1) / 3 = 5/6; whitened 0.5 / sqrt(5/6) = sqrt(0.3), 1 / sqrt(5/6) = sqrt(1.2).
    advantages, _ = _gdpo(gdpo_reward_weights=[1.0, 2.0], norm_adv_by_std_in_grpo=False)
    expected = torch.tensor([math.sqrt(0.3), -math.sqrt(0.3), -math.sqrt(1.2), math.sqrt(1.2)], dtype=torch.float64)
    assert torch.allclose(advantages[:, 0], expected, atol=1e-6)


def test_a_component_missing_or_unreported_is_named():
    with pytest.raises(ValueError, match="reward component 'format_reward'.*must return a dict with the key"):
        _gdpo(components={"accuracy_reward": COMPONENTS["accuracy_reward"]})
    holes = dict(COMPONENTS, format_reward=torch.tensor([1.0, math.nan, 0.0, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="1 response\\(s\\) have no value for reward component 'format_reward'"):
        _gdpo(components=holes)


def test_needs_name_the_configured_components_as_batch_reads():
    algo = AlgorithmConfig(adv_estimator="gdpo", gdpo_reward_keys=["accuracy_reward", "format_reward"])
    assert estimator_needs("gdpo").batch_keys(algo) == ("uid", "accuracy_reward", "format_reward")
    assert estimator_needs("grpo").batch_keys(algo) == ("uid",)


GDPO_CONFIG = {"algorithm": {"adv_estimator": "gdpo", "gdpo_reward_keys": ["accuracy_reward", "format_reward"]}}


def test_the_rule_reward_node_writes_the_components_the_advantage_node_reads():
    from config_testutils import typed_config

    from siirl.execution.dag.contract_check import check_contracts
    from siirl.execution.dag.run_pipeline import select_pipeline

    cfg = typed_config(GDPO_CONFIG)
    check_contracts(select_pipeline(cfg), cfg)


def test_a_reward_model_run_has_no_components_and_is_refused_at_plan_time():
    from config_testutils import typed_config

    from siirl.execution.dag.contract_check import ContractError
    from siirl.execution.dag.run_pipeline import select_pipeline
    from siirl.execution.scheduler.planner import plan_from_config

    cfg = typed_config({**GDPO_CONFIG, "reward_model": {"enable": True}})
    with pytest.raises(ContractError, match="'accuracy_reward'"):
        plan_from_config(select_pipeline(cfg), cfg)


@pytest.mark.parametrize(("overrides", "named"), [
    (["algorithm.adv_estimator=gdpo"], "algorithm.adv_estimator=gdpo needs algorithm.gdpo_reward_keys"),
    (["algorithm.adv_estimator=GDPO"], "algorithm.adv_estimator=gdpo needs algorithm.gdpo_reward_keys"),
    (["algorithm.adv_estimator=gdpo", "+algorithm.gdpo_reward_keys=[a,b]", "+algorithm.gdpo_reward_weights=[1.0]"],
     "has 1 weights for 2 gdpo_reward_keys"),
])
def test_bad_gdpo_keys_are_one_line_before_ray(overrides, named):
    from siirl.config_checks import load_config
    from siirl.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    assert named in str(info.value) and "\n" not in str(info.value)
