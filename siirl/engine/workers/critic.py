"""The PPO critic: a value per response token from the LM body plus a one-output linear head.

The head is Hugging Face's ``AutoModelForTokenClassification`` with ``num_labels=1`` (dropout off) loaded
from the policy's checkpoint: the body's weights carry over, the head starts fresh, and the result is an
ordinary HF model (``save_pretrained`` / ``from_pretrained`` round-trip, FSDP2 wraps it like the actor,
every architecture with a token-classification class works without a custom module).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from tensordict import TensorDict

from siirl.algorithms import compute_value_loss, masked_mean
from siirl.device import DeviceBackend
from siirl.engine.workers.base import FORWARD_KEYS, FSDPWorker, LossScale, MicroLoss, train_batching
from siirl.engine.workers.checkpoint import CheckpointMixin
from siirl.engine.workers.model_loading import load_value_model
from siirl.engine.workers.optim import build_lr_scheduler, build_optimizer
from siirl.params.model import CriticConfig

UPDATE_KEYS = (*FORWARD_KEYS, "response_mask", "values", "returns")


def _value_reduce(head: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return head[:, 0].float()


class CriticWorker(CheckpointMixin, FSDPWorker):
    """FSDP2 value model trained with the clipped value loss; ``critic_cfg`` is the ``CriticConfig`` section."""

    def __init__(
        self,
        critic_cfg: CriticConfig,
        backend: DeviceBackend | str,
        *,
        process_group: dist.ProcessGroup | None = None,
        sp_group: dist.ProcessGroup | None = None,
        local_rank: int = 0,
        rollout_n: int = 1,
        init_seed: int = 0,
    ) -> None:
        super().__init__(
            critic_cfg.model,
            backend,
            load_value_model,
            trainable=True,
            process_group=process_group,
            sp_group=sp_group,
            local_rank=local_rank,
            init_seed=init_seed,
            strategy=str(critic_cfg.strategy),
            fsdp=critic_cfg.model.fsdp_config,
        )
        self.cfg = critic_cfg
        self.rollout_n = rollout_n
        self.batching = train_batching(critic_cfg)
        self.optimizer = build_optimizer(self.model, critic_cfg.optim, self.backend.fused_optimizer)
        self.offload_optimizer_state(self.optimizer)
        self.lr_scheduler = build_lr_scheduler(self.optimizer, critic_cfg.optim)

    def compute_values(self, batch: TensorDict) -> torch.Tensor:
        """Value of the state before each response token: ``(B, R)``, 0 on padding."""
        self.model.eval()
        return self.forward_batch(batch, self.batching, _value_reduce)

    def _micro_loss(self, micro: TensorDict, scale: LossScale) -> MicroLoss:
        vpreds = self.forward_micro_batch(micro, _value_reduce)
        mask = micro["response_mask"]
        loss, clipfrac = compute_value_loss(
            vpreds,
            micro["returns"],
            micro["values"],
            mask,
            float(self.cfg.cliprange_value),
            str(self.cfg.loss_agg_mode),
            **scale.kwargs(),
            horizon=int(self.cfg.loss_agg_horizon) or None,
        )
        return MicroLoss(
            loss,
            {"vf_loss": loss},
            {"vf_clipfrac": clipfrac, "vpred_mean": masked_mean(vpreds.detach(), mask)},
        )

    def update_critic(self, batch: TensorDict) -> dict[str, float]:
        """Mini-batch steps on the clipped value loss; metrics ``critic/vf_loss``, ``vf_clipfrac``, ..."""
        self.model.train()
        metrics = self.run_updates(
            batch,
            keys=UPDATE_KEYS,
            mini_rows=self.mini_batch_rows(int(self.cfg.ppo_mini_batch_size), self.rollout_n),
            epochs=int(self.cfg.ppo_epochs),
            shuffle=False,
            batching=self.batching,
            optimizer=self.optimizer,
            grad_clip=float(self.cfg.grad_clip),
            micro_loss=self._micro_loss,
            prefix="critic",
        )
        self.lr_scheduler.step()
        return metrics
