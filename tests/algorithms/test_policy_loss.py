"""Policy losses: hand-computed values, metrics, gradients (gradcheck) and config errors."""

import math

import pytest
import torch

from siirl.algorithms import compute_policy_loss
from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.params.model import ActorConfig

CONFIG = ActorConfig(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)


def _loss(mode: str, log_prob, advantages, mask, old=None, agg="token-mean", config=None, **kw):
    old = torch.zeros_like(log_prob) if old is None else old
    return compute_policy_loss(
        mode,
        old_log_prob=old,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=mask,
        loss_agg_mode=agg,
        config=CONFIG if config is None else config,
        **kw,
    )


def test_vanilla_by_hand() -> None:
    # old log-prob 0, so ratio = exp(log_prob)
    ratios = torch.tensor([[1.5, 0.5, 0.5, 4.0, 1.1, 10.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, -2.0, 100.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]], dtype=torch.float64)
    loss, metrics = _loss("vanilla", ratios.log(), adv, mask)
    # per token: -1.28 (clip-higher), -0.5, 0.8 (clipped below), 3.0 (dual clip), 2.2; last is masked
    assert loss.item() == pytest.approx((-1.28 - 0.5 + 0.8 + 3.0 + 2.2) / 5)
    assert metrics["clipfrac_high"] == pytest.approx(0.2)
    assert metrics["clipfrac_low"] == pytest.approx(0.2)
    assert metrics["clipfrac_dual"] == pytest.approx(0.2)
    assert metrics["ppo_kl"] == pytest.approx(-math.log(1.5 * 0.5 * 0.5 * 4.0 * 1.1) / 5)
    assert all(isinstance(v, float) for v in metrics.values())


def test_vanilla_symmetric_clip_ratio_default() -> None:
    log_prob = torch.tensor([[math.log(1.5)]], dtype=torch.float64)
    loss, _ = _loss("vanilla", log_prob, torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1), config=ActorConfig())
    assert loss.item() == pytest.approx(-1.2)  # clip_ratio defaults to 0.2 on both sides


def test_vanilla_gradient_zero_where_clipped() -> None:
    log_prob = torch.tensor(
        [[math.log(1.5), math.log(0.9), math.log(4.0)]], dtype=torch.float64, requires_grad=True
    )
    adv = torch.tensor([[1.0, 1.0, -1.0]], dtype=torch.float64)
    loss, _ = _loss("vanilla", log_prob, adv, torch.ones(1, 3))
    loss.backward()
    # d(-A r)/d log r = -A r / 3 for the unclipped token; clipped and dual-clipped tokens get no gradient
    torch.testing.assert_close(log_prob.grad, torch.tensor([[0.0, -0.9 / 3, 0.0]], dtype=torch.float64))


def test_gspo_by_hand_and_sequence_level_gradient() -> None:
    log_prob = torch.tensor([[0.3, -0.1, 0.1], [0.2, 0.0, 5.0]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float64)
    config = ActorConfig(gspo_clip_ratio_low=0.1, gspo_clip_ratio_high=0.1)
    loss, metrics = _loss("gspo", log_prob, adv, mask, agg="seq-mean-token-mean", config=config)
    # both sequences have mean log-ratio 0.1 -> s = e^0.1 = 1.105; row 0 (A > 0) is clipped to 1.1
    s = math.exp(0.1)
    assert loss.item() == pytest.approx((-1.1 + s) / 2)
    assert metrics["clipfrac_high"] == pytest.approx(3 / 5)
    assert metrics["clipfrac_low"] == 0.0
    loss.backward()
    # sequence-level GSPO gradient: d(s_i)/d(log p_t) = s_i / |y_i|, times -A_i / n_seqs
    torch.testing.assert_close(
        log_prob.grad, torch.tensor([[0.0, 0.0, 0.0], [s / 4, s / 4, 0.0]], dtype=torch.float64)
    )


def test_gspo_default_clip_range_is_tiny() -> None:
    log_prob = torch.full((1, 2), 0.01, dtype=torch.float64)  # s = e^0.01 > 1 + 4e-4
    loss, metrics = _loss(
        "gspo", log_prob, torch.ones(1, 2, dtype=torch.float64), torch.ones(1, 2), config=ActorConfig()
    )
    assert loss.item() == pytest.approx(-(1 + 4e-4))
    assert metrics["clipfrac_high"] == 1.0


def test_cpgd_by_hand_without_drift() -> None:
    log_ratio = torch.tensor([[0.5, -0.5, -0.5, 0.1, 7.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, -1.0, -2.0, 5.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.float64)
    config = ActorConfig(clip_ratio_low=0.2, clip_ratio_high=0.2)
    loss, metrics = _loss("cpgd", log_ratio, adv, mask, config=config)
    # -A * clipped log ratio: -log 1.2 (clipped above), 0.5, log 0.8 (clipped below), 0.2
    assert loss.item() == pytest.approx((-math.log(1.2) + 0.5 + math.log(0.8) + 0.2) / 4)
    assert metrics["clipfrac_high"] == pytest.approx(0.25)
    assert metrics["clipfrac_low"] == pytest.approx(0.25)
    drift = [math.exp(x) - 1 - x for x in (0.5, -0.5, -0.5, 0.1)]
    assert metrics["policy_drift"] == pytest.approx(sum(drift) / 4)


def test_cpgd_policy_drift_value_and_capped_gradient() -> None:
    log_ratio = torch.tensor([[0.5, -0.5, -0.5, 0.1]], dtype=torch.float64)
    log_prob = (log_ratio + 0.3).requires_grad_()
    old = torch.full_like(log_ratio, 0.3)
    adv = torch.tensor([[1.0, 1.0, -1.0, -2.0]], dtype=torch.float64)
    config = ActorConfig(policy_drift_coeff=0.1, policy_drift_clip=0.5)
    loss, _ = _loss("cpgd", log_prob, adv, torch.ones(1, 4), old=old, config=config)
    drift = [math.exp(x) - 1 - x for x in (0.5, -0.5, -0.5, 0.1)]
    pg = (-math.log(1.2) + 0.5 + math.log(0.8) + 0.2) / 4
    assert loss.item() == pytest.approx(pg + 0.1 * sum(drift) / 4)
    loss.backward()
    pg_grad = [0.0, -1.0, 0.0, 2.0]  # clipped tokens get none; else -A
    drift_grad = [min(math.exp(x) - 1, 0.5) for x in (0.5, -0.5, -0.5, 0.1)]  # e^0.5 - 1 = 0.65 -> capped
    expected = [(g + 0.1 * d) / 4 for g, d in zip(pg_grad, drift_grad)]
    torch.testing.assert_close(log_prob.grad, torch.tensor([expected], dtype=torch.float64))


@pytest.mark.parametrize("mode", ["vanilla", "gspo", "cpgd"])
@pytest.mark.parametrize(
    "agg", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
)
def test_masked_tokens_do_not_contribute(mode: str, agg: str) -> None:
    gen = torch.Generator().manual_seed(2)
    log_prob = 0.1 * torch.randn(3, 4, generator=gen, dtype=torch.float64)
    adv = torch.randn(3, 1, generator=gen, dtype=torch.float64).expand(3, 4).clone()
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    base, _ = _loss(mode, log_prob, adv, mask, agg=agg, config=ActorConfig(policy_drift_coeff=0.1))
    poisoned_lp, poisoned_adv = log_prob.clone(), adv.clone()
    poisoned_lp[mask == 0] = 30.0
    poisoned_adv[mask == 0] = -1e6
    other, _ = _loss(mode, poisoned_lp, poisoned_adv, mask, agg=agg, config=ActorConfig(policy_drift_coeff=0.1))
    assert other.item() == pytest.approx(base.item(), rel=1e-10)


@pytest.mark.parametrize("mode", ["vanilla", "gspo", "cpgd"])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_gradcheck(mode: str, agg: str) -> None:
    gen = torch.Generator().manual_seed(3)
    old = torch.randn(3, 5, generator=gen, dtype=torch.float64) - 2.0
    # GSPO uses one advantage per sequence (its stop-gradient form is exact only then)
    adv = torch.randn(3, 1, generator=gen, dtype=torch.float64).expand(3, 5).contiguous()
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float64)
    log_prob = (old + 0.3 * torch.randn(3, 5, generator=gen, dtype=torch.float64)).requires_grad_()
    config = ActorConfig(policy_drift_coeff=0.05, gspo_clip_ratio_low=0.5, gspo_clip_ratio_high=0.5)

    def fn(lp: torch.Tensor) -> torch.Tensor:
        return _loss(mode, lp, adv, mask, old=old, agg=agg, config=config)[0]

    assert torch.autograd.gradcheck(fn, (log_prob,))


def test_global_counts_are_passed_to_aggregation() -> None:
    log_prob = torch.tensor([[math.log(1.1), 0.0]], dtype=torch.float64)
    adv = torch.ones(1, 2, dtype=torch.float64)
    local, _ = _loss("vanilla", log_prob, adv, torch.ones(1, 2))
    scaled, _ = _loss("vanilla", log_prob, adv, torch.ones(1, 2), global_token_count=8, dp_size=2)
    assert scaled.item() == pytest.approx(local.item() * 2 / 8 * 2)


@pytest.mark.parametrize(("overrides", "refusal"), [
    (["actor_rollout_ref.actor.clip_ratio_c=1.0"],
     "clip_ratio_c must be > 1 (dual-clip bound on the ratio), got 1.0 (loss_mode=vanilla)"),
    (["algorithm.adv_estimator=cpgd", "actor_rollout_ref.actor.clip_ratio_low=1.0"],
     "clip_ratio_low must be in [0, 1) and clip_ratio_high >= 0, got 1.0 and 0.2 (loss_mode=cpgd)"),
    (["algorithm.adv_estimator=gspo", "actor_rollout_ref.actor.gspo_clip_ratio_high=-1"],
     "gspo_clip_ratio_low must be in [0, 1) and gspo_clip_ratio_high >= 0, got 0.0003 and -1.0 (loss_mode=gspo)"),
])
def test_a_range_the_loss_reads_is_refused_before_ray(overrides, refusal) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    assert str(info.value) == f"bad config: actor_rollout_ref.actor.{refusal}"


def test_a_range_no_loss_reads_is_not_refused() -> None:
    load_config(["algorithm.adv_estimator=cpgd", "actor_rollout_ref.actor.clip_ratio_c=1.0"])  # dual clip: vanilla's
    load_config(["actor_rollout_ref.actor.policy_loss.loss_mode=gpg", "actor_rollout_ref.actor.clip_ratio_low=1.0"])


def test_bad_inputs() -> None:
    one = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="vanilla"):
        _loss("ppo", one, one, one)
    with pytest.raises(ValueError, match="one shape"):
        _loss("vanilla", one, torch.zeros(1, 3), one)
    with pytest.raises(ValueError, match="token-mean"):
        _loss("vanilla", one, one, one, agg="mean")
