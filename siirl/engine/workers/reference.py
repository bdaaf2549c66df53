"""The frozen reference policy: forward-only log-probs for the KL term, optionally offloaded to the host."""

from __future__ import annotations

import torch
import torch.distributed as dist
from tensordict import TensorDict

from siirl.device import DeviceBackend
from siirl.engine.workers.actor import log_prob_reduce
from siirl.engine.workers.base import FSDPWorker, log_prob_batching
from siirl.engine.workers.model_loading import load_causal_lm
from siirl.params.model import ModelConfig, RefConfig


class ReferenceWorker(FSDPWorker):
    """FSDP2-sharded (or replicated, following the actor's ``strategy``) copy of the initial policy in the
    compute dtype, without gradients or optimizer.

    ``ref_cfg`` is the ``RefConfig`` section: its ``log_prob_*`` keys size the micro-batches and
    ``fsdp_config.param_offload`` shards the model (also under ``strategy=auto``) with its shards in host
    memory (FSDP2 ``CPUOffloadPolicy``): while the actor trains, the reference holds only its shard, on the
    host.
    """

    def __init__(
        self,
        model_cfg: ModelConfig,
        ref_cfg: RefConfig,
        backend: DeviceBackend | str,
        *,
        process_group: dist.ProcessGroup | None = None,
        sp_group: dist.ProcessGroup | None = None,
        local_rank: int = 0,
        temperature: float = 1.0,
        strategy: str = "auto",
    ) -> None:
        super().__init__(
            model_cfg,
            backend,
            load_causal_lm,
            trainable=False,
            process_group=process_group,
            sp_group=sp_group,
            local_rank=local_rank,
            fsdp=ref_cfg.fsdp_config,
            strategy=strategy,
        )
        self.temperature = float(temperature)
        self.batching = log_prob_batching(ref_cfg)

    def compute_ref_log_prob(self, batch: TensorDict) -> torch.Tensor:
        """Reference log-probs of ``responses``: ``(B, R)``, 0 on padding."""
        self.model.eval()
        return self.forward_batch(batch, self.batching, log_prob_reduce(self.temperature, False, self.log_probs_fn))


class BaseModelReference:
    """The reference of a LoRA policy: the actor's own model with its adapters switched off.

    The base weights never train under LoRA, so they are the initial policy; no second copy is loaded and
    the forward runs on the actor's (sharded or replicated) model with the ``RefConfig`` micro-batching.
    """

    def __init__(self, actor: FSDPWorker, ref_cfg: RefConfig, temperature: float = 1.0) -> None:
        if not hasattr(actor.model, "disable_adapter"):
            raise TypeError(f"{type(actor).__name__} has no adapters to disable (LoRA is off)")
        self.actor = actor
        self.temperature = float(temperature)
        self.batching = log_prob_batching(ref_cfg)

    def compute_ref_log_prob(self, batch: TensorDict) -> torch.Tensor:
        """Log-probs of ``responses`` under the base model: ``(B, R)``, 0 on padding."""
        actor = self.actor
        was_training = actor.model.training
        actor.model.eval()
        try:
            with actor.model.disable_adapter():
                reduce = log_prob_reduce(self.temperature, False, actor.log_probs_fn)
                return actor.forward_batch(batch, self.batching, reduce)
        finally:
            actor.model.train(was_training)
