"""The policy: log-probs of sampled responses, PPO-family updates, weights for the rollout engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict

from siirl.algorithms import agg_loss, compute_policy_loss, entropy_from_logits, kl_loss, logprobs_from_logits
from siirl.algorithms.bypass_loss import compute_bypass_policy_loss
from siirl.algorithms.distillation import TEACHER_LOG_PROB, distillation_loss, with_distillation
from siirl.algorithms.logits import sum_pi_squared_from_logits
from siirl.algorithms.rollout_correction import IS_WEIGHTS_KEY
from siirl.device import DeviceBackend
from siirl.engine.workers.base import (
    FORWARD_KEYS,
    FSDPWorker,
    LossScale,
    MicroLoss,
    log_prob_batching,
    train_batching,
)
from siirl.engine.workers.checkpoint import CheckpointMixin
from siirl.engine.workers.fsdp import full_named_parameters
from siirl.engine.workers.hf_export import HF_MODEL_DIR, save_hf_model
from siirl.engine.workers.lora import (
    adapter_config,
    adapter_tensors,
    is_lora_model,
    merged_named_parameters,
    write_adapter,
)
from siirl.engine.workers.optim import build_lr_scheduler, build_optimizer
from siirl.engine.workers.padding_free import HeadReduce
from siirl.engine.workers.vision import policy_loader
from siirl.params.algorithm import RolloutCorrectionConfig
from siirl.params.checkpoint_contents import saves_hf_model
from siirl.params.distillation import DistillationLossConfig
from siirl.params.model import ActorConfig, ModelConfig, PolicyModelConfig, RefConfig, RolloutConfig

LogProbsFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: Folder of a checkpoint's actor component holding the adapter as peft saves it (LoRA runs).
ADAPTER_DIR = "lora_adapter"

UPDATE_KEYS = (*FORWARD_KEYS, "response_mask", "old_log_probs", "advantages")


def log_prob_reduce(
    temperature: float,
    with_entropy: bool,
    log_probs_fn: LogProbsFn = logprobs_from_logits,
    with_sum_pi_squared: bool = False,
) -> HeadReduce:
    """Head reduce giving the label log-prob of ``logits / temperature``, then (stacked last, in this order)
    the entropy and the sum of squared probabilities when asked for.

    ``log_probs_fn`` is the device's fused kernel where it has one (``DeviceBackend.fused_log_probs``).
    """
    if temperature <= 0:
        raise ValueError(f"log-prob temperature must be > 0, got {temperature}")
    extras = [fn for fn, wanted in ((entropy_from_logits, with_entropy), (sum_pi_squared_from_logits, with_sum_pi_squared)) if wanted]

    def reduce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if temperature != 1.0:
            logits = logits / temperature
        log_probs = log_probs_fn(logits, labels)
        if not extras:
            return log_probs
        return torch.stack([log_probs, *(fn(logits) for fn in extras)], dim=-1)

    return reduce


class ActorWorker(CheckpointMixin, FSDPWorker):
    """FSDP2 policy with AdamW and a warmup + constant/cosine LR schedule.

    ``actor_cfg`` is the ``ActorConfig`` section; ``log_prob_cfg`` (the ``RolloutConfig`` or ``RefConfig``
    section: their ``log_prob_use_dynamic_bsz`` / ``log_prob_micro_batch_size_per_gpu`` /
    ``log_prob_max_token_len_per_gpu``) sizes the micro-batches of ``compute_log_prob`` (default: the training sizes). ``rollout_n`` converts
    ``ppo_mini_batch_size`` from prompts to responses; ``temperature`` is the sampling temperature, so that
    log-probs are those of the distribution the responses were drawn from. With LoRA keys set in
    ``model_cfg`` (``PolicyModelConfig``) only peft adapters train (``siirl.engine.workers.lora``).
    """

    def __init__(
        self,
        model_cfg: ModelConfig | PolicyModelConfig,
        actor_cfg: ActorConfig,
        backend: DeviceBackend | str,
        *,
        process_group: dist.ProcessGroup | None = None,
        sp_group: dist.ProcessGroup | None = None,
        local_rank: int = 0,
        rollout_n: int = 1,
        temperature: float = 1.0,
        log_prob_cfg: RolloutConfig | RefConfig | None = None,
        init_seed: int = 0,
        rollout_correction: RolloutCorrectionConfig | None = None,
        distillation: DistillationLossConfig | None = None,
    ) -> None:
        layout_cfg = model_cfg
        if actor_cfg.use_prefix_grouper:
            layout_cfg = dataclasses.replace(model_cfg, use_remove_padding=True, remove_padding_layout="shared")
        super().__init__(
            layout_cfg,
            backend,
            policy_loader(bool(actor_cfg.freeze_vision_tower)),
            trainable=True,
            process_group=process_group,
            sp_group=sp_group,
            local_rank=local_rank,
            init_seed=init_seed,
            strategy=str(actor_cfg.strategy),
            fsdp=actor_cfg.fsdp_config,
        )
        self.cfg = actor_cfg
        self.model_cfg = model_cfg
        self.rollout_n = rollout_n
        self.temperature = float(temperature)
        self.train_batching = train_batching(actor_cfg)
        self.log_prob_batching = (
            log_prob_batching(log_prob_cfg) if log_prob_cfg is not None else self.train_batching
        )
        self.optimizer = build_optimizer(self.model, actor_cfg.optim, self.backend.fused_optimizer)
        self.offload_optimizer_state(self.optimizer)
        self.lr_scheduler = build_lr_scheduler(self.optimizer, actor_cfg.optim)
        # load_config resolves 'auto' from the estimator; a bare ActorConfig has none, so auto is vanilla.
        mode = str(actor_cfg.policy_loss.loss_mode)
        self.loss_mode = "vanilla" if mode == "auto" else mode
        self.bypass = rollout_correction if rollout_correction is not None and rollout_correction.bypass_mode else None
        #: On-policy distillation's loss term against the teacher's log-probs (``distillation.enabled``).
        self.distillation = distillation

    def compute_log_prob(self, batch: TensorDict, calculate_entropy: bool = True) -> TensorDict:
        """``old_log_probs`` (and ``entropys``; ``sum_pi_squared`` under ``calculate_sum_pi_squared``) of
        ``responses``: ``(B, R)`` each, 0 on padding."""
        self.model.eval()
        with_sum_pi_squared = bool(self.cfg.calculate_sum_pi_squared)
        names = ["old_log_probs", *(["entropys"] if calculate_entropy else []),
                 *(["sum_pi_squared"] if with_sum_pi_squared else [])]
        reduce = log_prob_reduce(self.temperature, calculate_entropy, self.log_probs_fn, with_sum_pi_squared)
        out = self.forward_batch(batch, self.log_prob_batching, reduce)
        fields = {names[0]: out} if len(names) == 1 else {name: out[..., i] for i, name in enumerate(names)}
        return TensorDict(fields, batch_size=batch.batch_size)

    def _micro_loss(self, micro: TensorDict, scale: LossScale) -> MicroLoss:
        cfg = self.cfg
        entropy_coeff = float(cfg.entropy_coeff)
        out = self.forward_micro_batch(
            micro, log_prob_reduce(self.temperature, entropy_coeff != 0, self.log_probs_fn)
        )
        log_prob = out[..., 0] if entropy_coeff != 0 else out
        mask = micro["response_mask"]
        # Every loss term is aggregated alike: same counts and the same seq-mean-token-sum-norm horizon.
        agg = {**scale.kwargs(), "horizon": int(cfg.loss_agg_horizon) or None}
        pg_inputs = {
            "log_prob": log_prob, "advantages": micro["advantages"], "response_mask": mask,
            "loss_agg_mode": cfg.loss_agg_mode, "config": cfg, **scale.kwargs(),
        }
        if self.bypass is not None:
            pg_loss, pg_metrics = compute_bypass_policy_loss(
                self.bypass, rollout_log_prob=micro["old_log_probs"], **pg_inputs
            )
        else:
            pg_loss, pg_metrics = compute_policy_loss(
                self.loss_mode, old_log_prob=micro["old_log_probs"],
                rollout_is_weights=micro.get(IS_WEIGHTS_KEY, None), **pg_inputs,
            )
        loss = pg_loss
        summed: dict[str, torch.Tensor | float] = {"pg_loss": pg_loss}
        if entropy_coeff != 0:
            entropy = agg_loss(out[..., 1], mask.to(out.dtype), cfg.loss_agg_mode, **agg)
            loss = loss - entropy_coeff * entropy
            summed["entropy"] = entropy
        if bool(cfg.use_kl_loss):
            kl = kl_loss(log_prob, micro["ref_log_prob"], mask, cfg.kl_loss_type, cfg.loss_agg_mode, **agg)
            loss = loss + float(cfg.kl_loss_coef) * kl
            summed["kl_loss"] = kl
        distill_metrics: dict[str, torch.Tensor | float] = {}
        if self.distillation is not None:
            term, distill_metrics = distillation_loss(
                self.distillation, log_prob=log_prob, teacher_log_prob=micro[TEACHER_LOG_PROB],
                old_log_prob=micro["old_log_probs"], response_mask=mask, loss_agg_mode=cfg.loss_agg_mode,
                rollout_is_weights=micro.get(IS_WEIGHTS_KEY, None), **agg,
            )
            loss = with_distillation(loss, term, self.distillation)
            summed["distillation/loss"] = term
        averaged: dict[str, torch.Tensor | float] = {
            "pg_clipfrac": pg_metrics.get("clipfrac_low", 0.0) + pg_metrics.get("clipfrac_high", 0.0),
            **{name: value for name, value in pg_metrics.items() if not name.startswith("clipfrac_")},
            **{f"pg_{name}": value for name, value in pg_metrics.items() if name.startswith("clipfrac_")},
            **distill_metrics,
        }
        return MicroLoss(loss, summed, averaged)

    def update_policy(self, batch: TensorDict) -> dict[str, float]:
        """``ppo_epochs`` x mini-batches of optimiser steps; then one LR-scheduler step.

        Metrics (``actor/`` prefix): pg_loss, kl_loss and entropy (mini-batch loss terms), pg_clipfrac,
        ppo_kl and the policy loss's other statistics (micro-batch means), grad_norm and lr; with distillation
        verl's ``distillation/loss``, ``distillation/abs_loss`` (and ``pg_clipfrac``, ``ppo_kl`` of its
        policy-gradient form).
        """
        keys = UPDATE_KEYS + (("ref_log_prob",) if bool(self.cfg.use_kl_loss) else ())
        keys += (TEACHER_LOG_PROB,) if self.distillation is not None else ()
        keys += (IS_WEIGHTS_KEY,) if IS_WEIGHTS_KEY in batch.keys() else ()  # noqa: SIM118 (rollout correction)
        self.model.train()
        metrics = self.run_updates(
            batch,
            keys=keys,
            mini_rows=self.mini_batch_rows(int(self.cfg.ppo_mini_batch_size), self.rollout_n),
            epochs=int(self.cfg.ppo_epochs),
            shuffle=bool(self.cfg.shuffle),
            batching=self.train_batching,
            optimizer=self.optimizer,
            grad_clip=float(self.cfg.grad_clip),
            micro_loss=self._micro_loss,
            prefix="actor",
        )
        self.lr_scheduler.step()
        return metrics

    @property
    def lora(self) -> bool:
        """Whether only peft adapters train (the base model is frozen)."""
        return is_lora_model(self.model)

    def named_parameters_for_sync(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full (unsharded) parameters in HF naming, gathered one at a time; every dp rank must iterate.
        Under LoRA, the base weights with the adapters merged in."""
        if self.lora:
            return merged_named_parameters(self.model)
        return full_named_parameters(self.model)

    def lora_adapter(self) -> tuple[Any, dict[str, torch.Tensor]]:
        """(peft ``LoraConfig``, full adapter tensors) for engines that take adapters; a collective on
        every dp rank."""
        return adapter_config(self.model), adapter_tensors(self.model)

    def save_checkpoint(self, path: str | Path) -> None:
        """The training shards, plus under LoRA the adapter as a peft folder (usable as lora_adapter_path),
        plus with ``checkpoint.save_contents`` naming ``hf_model`` the model as Hugging Face saves it."""
        super().save_checkpoint(path)
        if self.lora:
            tensors = adapter_tensors(self.model)  # gathered on every rank, written by the first
            if self.dp.rank == 0 and self.sp_leader:
                write_adapter(adapter_config(self.model), tensors, Path(path) / ADAPTER_DIR)
        if saves_hf_model(self.cfg):
            hf_model = self.model.get_base_model() if self.lora else self.model
            save_hf_model(
                hf_model, self.named_parameters_for_sync(), self.model_cfg, Path(path) / HF_MODEL_DIR,
                writer=self.dp.rank == 0 and self.sp_leader,
            )
