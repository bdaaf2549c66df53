"""Learning-rate schedules: linear warmup, then constant or cosine to ``min_lr_ratio``; resumable."""

from __future__ import annotations

import math

import pytest
import torch

from siirl.engine.workers.optim import build_lr_scheduler, restore_lr_scheduler
from siirl.params.model import OptimConfig


def _lrs(steps: int, **optim) -> list[float]:
    cfg = OptimConfig(lr=1.0, **optim)
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    sched = build_lr_scheduler(opt, cfg)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_constant_with_warmup():
    assert _lrs(6, lr_warmup_steps=3) == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0, 1.0, 1.0])


def test_cosine_with_warmup_ratio_reaches_min():
    lrs = _lrs(
        12, lr_scheduler_type="cosine", lr_warmup_steps_ratio=0.2, total_training_steps=10, min_lr_ratio=0.1
    )
    assert lrs[:2] == pytest.approx([0.5, 1.0])
    decay = [0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * k / 8)) for k in range(9)]
    assert lrs[2:11] == pytest.approx(decay)
    assert lrs[11] == pytest.approx(0.1)


def test_restore_puts_lr_back():
    options = {"lr_scheduler_type": "cosine", "total_training_steps": 10, "lr_warmup_steps": 2}
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = build_lr_scheduler(opt, OptimConfig(lr=1.0, **options))
    restore_lr_scheduler(sched, 6)
    assert opt.param_groups[0]["lr"] == pytest.approx(_lrs(7, **options)[6])
    assert sched.last_epoch == 6


def test_fused_adamw_steps_like_the_per_parameter_loop():
    """The CPU backend asks for torch's fused AdamW; it must move the weights as the default loop does."""
    from siirl.device import get_backend
    from siirl.engine.workers.optim import build_optimizer

    assert get_backend("cpu").fused_optimizer
    torch.manual_seed(0)
    models = [torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)]
    models[1].load_state_dict(models[0].state_dict())
    cfg = OptimConfig(lr=1e-2, weight_decay=0.1)
    loop, fused = build_optimizer(models[0], cfg), build_optimizer(models[1], cfg, fused=True)
    assert fused.defaults["fused"] and not loop.defaults["fused"]
    for step in range(3):
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(step))
        for model, opt in zip(models, (loop, fused)):
            model(x).square().sum().backward()
            opt.step()
            opt.zero_grad()
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b)
