"""KL estimators, KL loss, in-reward penalty and the KL controllers."""

import math

import pytest
import torch

from siirl.algorithms import (
    AdaptiveKLController,
    FixedKLController,
    apply_kl_penalty,
    kl_loss,
    kl_penalty,
    make_kl_controller,
)
from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.params.algorithm import KLControlConfig

LOGP = torch.tensor([[-1.0, -2.0]], dtype=torch.float64)
REF = torch.tensor([[-1.5, -1.0]], dtype=torch.float64)  # d = logp - ref = [0.5, -1.0]


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (("k1", "kl"), [0.5, -1.0]),
        (("abs",), [0.5, 1.0]),
        (("k2", "mse"), [0.125, 0.5]),
        (("k3", "low_var_kl"), [math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1]),
    ],
)
def test_estimators_by_hand(kinds: tuple[str, ...], expected: list[float]) -> None:
    for kind in kinds:
        torch.testing.assert_close(kl_penalty(LOGP, REF, kind), torch.tensor([expected], dtype=torch.float64))


def test_low_var_kl_is_clamped() -> None:
    logp = torch.tensor([-30.0, 0.0, 30.0], dtype=torch.float64)
    out = kl_penalty(logp, torch.zeros(3, dtype=torch.float64), "low_var_kl")
    assert out.tolist() == [10.0, 0.0, 10.0]
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("kind", ["k1", "abs", "k2", "k3"])
def test_kl_gradcheck(kind: str) -> None:
    logp = torch.tensor([[-1.0, -2.0, -0.3]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0, -0.2]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: kl_loss(x, ref, mask, kind, "token-mean"), (logp,))


def test_kl_loss_aggregates_over_valid_tokens() -> None:
    logp = torch.tensor([[-1.0, -2.0, 5.0]], dtype=torch.float64)
    ref = torch.tensor([[-1.5, -1.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0]])
    assert kl_loss(logp, ref, mask, "k2", "token-mean").item() == pytest.approx((0.125 + 0.5) / 2)
    assert kl_loss(
        logp, ref, mask, "k1", "token-mean", global_token_count=4, dp_size=2
    ).item() == pytest.approx(-0.5 / 4 * 2)


def test_apply_kl_penalty_fixed() -> None:
    scores = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    old = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    ctrl = FixedKLController(0.5)
    rewards, metrics = apply_kl_penalty(scores, old, torch.zeros_like(old), mask, ctrl, kind="kl")
    torch.testing.assert_close(rewards, torch.tensor([[-0.05, -0.1, 0.85], [-0.2, 1.75, 0.0]]))
    assert metrics["actor/reward_kl_penalty"] == pytest.approx((0.2 + 0.45) / 2)
    assert metrics["actor/reward_kl_penalty_coeff"] == 0.5
    assert ctrl.value == 0.5


def test_apply_kl_penalty_updates_adaptive_controller() -> None:
    ctrl = AdaptiveKLController(init_kl_coef=0.5, target_kl=0.1, horizon=100)
    old = torch.full((2, 2), 0.325)
    apply_kl_penalty(torch.zeros(2, 2), old, torch.zeros(2, 2), torch.ones(2, 2), ctrl)
    # kl 0.325 vs target 0.1: error clipped to +0.2, n_steps = 2 responses -> x (1 + 0.2 * 2 / 100)
    assert ctrl.value == pytest.approx(0.5 * 1.004)


def test_adaptive_controller_update_rule() -> None:
    ctrl = AdaptiveKLController(init_kl_coef=1.0, target_kl=0.1, horizon=10)
    ctrl.update(current_kl=0.09, n_steps=5)  # error -0.1 -> x (1 - 0.1 * 5 / 10)
    assert ctrl.value == pytest.approx(0.95)
    ctrl.update(current_kl=0.0, n_steps=5)  # error clipped to -0.2 -> x 0.9
    assert ctrl.value == pytest.approx(0.95 * 0.9)


def test_make_kl_controller() -> None:
    fixed = make_kl_controller(KLControlConfig(type="fixed", kl_coef=0.2))
    assert isinstance(fixed, FixedKLController) and fixed.value == 0.2
    adaptive = make_kl_controller(KLControlConfig(type="adaptive", kl_coef=0.3, target_kl=6.0, horizon=1000))
    assert isinstance(adaptive, AdaptiveKLController)
    assert (adaptive.value, adaptive.target, adaptive.horizon) == (0.3, 6.0, 1000.0)
    with pytest.raises(ValueError, match="adaptive, fixed"):
        make_kl_controller(KLControlConfig(type="pid"))
    for bad in ("horizon=0", "target_kl=0"):  # the section's rule, before Ray
        with pytest.raises(ConfigError, match=r"^bad config: algorithm.kl_ctrl.type=adaptive needs target_kl > 0 and "
                           r"horizon > 0, got (0.1 and 0|0.0 and 10000)$"):
            load_config(["algorithm.kl_ctrl.type=adaptive", f"algorithm.kl_ctrl.{bad}"])
    load_config(["algorithm.kl_ctrl.type=fixed", "algorithm.kl_ctrl.target_kl=0"])  # read by adaptive only


def test_bad_kl_inputs() -> None:
    with pytest.raises(ValueError, match="low_var_kl"):
        kl_penalty(LOGP, REF, "k4")
    with pytest.raises(ValueError, match="differ"):
        kl_penalty(LOGP, REF[:, :1], "k1")
