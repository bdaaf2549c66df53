"""Registries: every enum value is served, unknown names fail listing the choices, extension works."""

import pytest
import torch

from siirl.algorithms import (
    ADV_ESTIMATORS,
    POLICY_LOSSES,
    agg_loss,
    compute_advantage,
    compute_policy_loss,
    get_adv_estimator,
    get_policy_loss,
    kl_penalty,
)
from siirl.errors import ConfigError
from siirl.params.enums import AdvantageEstimator
from siirl.registry import Registry


def test_every_enum_estimator_is_registered() -> None:
    for member in AdvantageEstimator:
        assert get_adv_estimator(member) is get_adv_estimator(member.value)
    assert set(ADV_ESTIMATORS.names()) == {m.value for m in AdvantageEstimator}


def test_unknown_names_raise_value_error_listing_choices() -> None:
    x = torch.zeros(1, 2)
    cases = [
        (lambda: compute_advantage("ppo2", token_level_rewards=x, response_mask=x), "grpo, gspo"),
        (lambda: get_policy_loss("ppo"), "cispo, cpgd, geo_mean, gpg, gspo, sapo, vanilla"),
        (
            lambda: compute_policy_loss(
                "ppo", old_log_prob=x, log_prob=x, advantages=x, response_mask=x, loss_agg_mode="token-mean"
            ),
            "vanilla",
        ),
        (lambda: agg_loss(x, x, "mean"), "seq-mean-token-mean, seq-mean-token-sum"),
        (lambda: kl_penalty(x, x, "k9"), "abs, k1, k2, k3, kl, low_var_kl, mse"),
    ]
    for call, listed in cases:
        with pytest.raises(ValueError, match=listed) as info:
            call()
        assert isinstance(info.value, ConfigError)
        assert "\n" not in str(info.value)


def test_new_estimator_is_one_function_and_a_decorator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ADV_ESTIMATORS, "_entries", dict(ADV_ESTIMATORS._entries))
    monkeypatch.setattr(ADV_ESTIMATORS, "_metadata", dict(ADV_ESTIMATORS._metadata))

    @ADV_ESTIMATORS.register("sign")
    def sign(inputs):
        adv = torch.sign(inputs.outcome_scores()).unsqueeze(-1) * inputs.response_mask
        return adv, adv

    adv, _ = compute_advantage(
        "sign", token_level_rewards=torch.tensor([[0.0, -3.0], [2.0, 0.0]]), response_mask=torch.ones(2, 2)
    )
    assert adv.tolist() == [[-1.0, -1.0], [1.0, 1.0]]


def test_registry_rejects_conflicting_names() -> None:
    reg: Registry = Registry("thing")
    reg.register("a", "alias")(len)
    reg.register("a")(len)  # same function again is fine
    with pytest.raises(ValueError, match="'a' is already registered"):
        reg.register("a")(print)
    with pytest.raises(ValueError, match="at least one name"):
        reg.register()
    assert reg.names() == ["a", "alias"] and "alias" in reg and 3 not in reg
    assert "vanilla" in POLICY_LOSSES


