"""AdamW and the learning-rate schedules (linear warmup, then constant or cosine decay).

The scheduler steps once per training step (one ``update_policy`` / ``update_critic`` call), so
``total_training_steps`` and the warmup are counted in training steps, as verl users expect.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from siirl.params.model import OptimConfig
from siirl.registry import Registry

#: ``fn(step_after_warmup, decay_steps, min_lr_ratio) -> lr factor``
ScheduleFn = Callable[[int, int, float], float]
LR_SCHEDULES: Registry[ScheduleFn] = Registry(
    "lr_scheduler_type",
    open=True,
    config_keys=("actor_rollout_ref.actor.optim.lr_scheduler_type", "critic.optim.lr_scheduler_type"),
)


@LR_SCHEDULES.register("constant")
def _constant(step: int, decay_steps: int, min_ratio: float) -> float:
    return 1.0


@LR_SCHEDULES.register("cosine")
def _cosine(step: int, decay_steps: int, min_ratio: float) -> float:
    progress = min(1.0, step / max(1, decay_steps))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_optimizer(model: nn.Module, optim_cfg: OptimConfig, fused: bool = False) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; ``fused``: torch's fused kernel (where the device runs it)."""
    # Frozen parameters (a LoRA base model) get no optimizer state. The values passed the section's rules.
    return torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=float(optim_cfg.lr),
        betas=tuple(float(b) for b in optim_cfg.betas),
        eps=float(optim_cfg.eps),
        weight_decay=float(optim_cfg.weight_decay),
        fused=fused or None,
    )


def warmup_steps(optim_cfg: OptimConfig) -> int:
    """``lr_warmup_steps`` when >= 0, else ``lr_warmup_steps_ratio`` of the known total (0 if unknown)."""
    if int(optim_cfg.lr_warmup_steps) >= 0:
        return int(optim_cfg.lr_warmup_steps)
    total = int(optim_cfg.total_training_steps)
    return int(float(optim_cfg.lr_warmup_steps_ratio) * total) if total > 0 else 0


def _lr_factor(step: int, warmup: int, total: int, schedule: ScheduleFn, min_ratio: float) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return schedule(step - warmup, total - warmup, min_ratio)


def build_lr_scheduler(optimizer: torch.optim.Optimizer, optim_cfg: OptimConfig) -> LambdaLR:
    """The schedule over ``optim.total_training_steps``: a decaying one has its length by now (the resolve step,
    siirl.params.resolved, refuses a run without one; the worker fills it from the run's length)."""
    factor = partial(
        _lr_factor, warmup=warmup_steps(optim_cfg), total=int(optim_cfg.total_training_steps),
        schedule=LR_SCHEDULES.get(str(optim_cfg.lr_scheduler_type)),
        min_ratio=float(optim_cfg.min_lr_ratio),  # in [0, 1]: the field's rule, checked before Ray
    )
    return LambdaLR(optimizer, lr_lambda=factor)


def restore_lr_scheduler(scheduler: LambdaLR, last_epoch: int) -> None:
    """Resume the schedule at ``last_epoch`` and set every group's lr to the value it had there."""
    scheduler.last_epoch = last_epoch
    lrs = [base * fn(last_epoch) for base, fn in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    for group, lr in zip(scheduler.optimizer.param_groups, lrs):
        group["lr"] = lr
    scheduler._last_lr = lrs
