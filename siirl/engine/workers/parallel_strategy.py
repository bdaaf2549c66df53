"""How a model is spread over its data-parallel group: FSDP2 sharding or plain replication.

- ``fsdp`` (alias ``fsdp2``): ``fully_shard`` per transformer block; parameters are all-gathered in every
  forward and backward and gradients reduce-scattered, so memory per rank shrinks with the group size.
  Every rank must run the same number of micro-batches (the collectives live inside the forward).
- ``replicate``: every rank keeps the whole model; forwards need no communication at all and the
  gradients of an optimizer step are averaged with ONE all-reduce of a flat buffer. For a small model
  this is far cheaper than FSDP's per-block collectives (on gloo each costs a round trip over TCP).
- ``auto`` (the default): ``replicate`` when the data-parallel group has one rank or the model is small
  (at most ``REPLICATE_MAX_PARAMS`` parameters) and no parameter offload is asked for, else ``fsdp``.
  ``fsdp_config.param_offload=true`` is FSDP2's host offload, so it picks ``fsdp`` on every device (on the
  CPU backend that is what keeps a frozen model from holding its full parameters while another trains);
  an explicit ``replicate`` with it is refused when the config loads (``siirl.params.fsdp``).

Both keep fp32 master weights for training; under ``replicate`` a lower compute dtype runs through
``torch.autocast`` (FSDP2 casts with its mixed-precision policy instead).
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator

import torch
from torch import nn

from siirl.engine.workers.distributed import DataParallelGroup, all_reduce_gradients
from siirl.engine.workers.fsdp import (
    full_named_parameters,
    gradient_reduce_dtype,
    reshard_all,
    shard_model,
    to_local_float,
)
from siirl.params.fsdp import FSDPConfig
from siirl.registry import Registry

logger = logging.getLogger(__name__)

#: Largest model ``strategy=auto`` replicates: 100M fp32 parameters + grads + Adam moments are 1.6 GB.
REPLICATE_MAX_PARAMS = 100_000_000


class ParallelStrategy(ABC):
    """What differs between sharded and replicated training, behind one small interface."""

    name = ""
    #: Whether every rank must run the same number of micro-batches (collectives inside the forward).
    lockstep_micro_batches = True

    def __init__(self, dp: DataParallelGroup, compute_dtype: torch.dtype, trainable: bool) -> None:
        self.dp, self.compute_dtype, self.trainable = dp, compute_dtype, trainable

    @abstractmethod
    def wrap(self, model: nn.Module, device: torch.device, fsdp: FSDPConfig) -> nn.Module:
        """Place ``model`` on ``device`` in this strategy's layout (sharded or whole)."""

    def after_forward_only(self, model: nn.Module) -> None:
        """Drop what a no-grad pass left gathered (nothing to drop where the model is whole anyway)."""

    def forward_context(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def reduce_gradients(self, model: nn.Module) -> None:
        """Make every rank's gradients the group mean (a no-op where the backward already did)."""

    def clip_grad_norm(self, model: nn.Module, max_norm: float) -> float:
        return to_local_float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))

    def full_parameters(self, model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
        return full_named_parameters(model)


STRATEGIES: Registry[type[ParallelStrategy]] = Registry(
    "parallel strategy",
    open=True,
    config_keys=("actor_rollout_ref.actor.strategy", "critic.strategy", "reward_model.strategy"),
    also_allowed=("auto",),
)


@STRATEGIES.register("fsdp", "fsdp2")
class FSDPStrategy(ParallelStrategy):
    name = "fsdp"

    def wrap(self, model: nn.Module, device: torch.device, fsdp: FSDPConfig) -> nn.Module:
        return shard_model(model, self.dp.mesh, self.compute_dtype, fsdp)

    def after_forward_only(self, model: nn.Module) -> None:
        reshard_all(model)


@STRATEGIES.register("replicate")
class ReplicateStrategy(ParallelStrategy):
    name = "replicate"
    lockstep_micro_batches = False
    autocast = False
    #: ``mixed_precision.reduce_dtype``: the gradient all-reduce runs in it, as FSDP2's reduce-scatter does.
    reduce_dtype = torch.float32

    def wrap(self, model: nn.Module, device: torch.device, fsdp: FSDPConfig) -> nn.Module:
        self.autocast = next(model.parameters()).dtype != self.compute_dtype
        self.reduce_dtype = gradient_reduce_dtype(fsdp)
        return model.to(device)

    def forward_context(self) -> contextlib.AbstractContextManager:
        if self.autocast:
            return torch.autocast(device_type=self.dp.device.type, dtype=self.compute_dtype)
        return contextlib.nullcontext()

    def reduce_gradients(self, model: nn.Module) -> None:
        if self.dp.size > 1:
            all_reduce_gradients(model, self.dp.group, self.dp.device, self.reduce_dtype, divide_by=self.dp.size)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def choose_strategy(requested: str, num_params: int, dp_size: int, cpu_offload: bool) -> str:
    """The registered strategy name for ``strategy=<requested>`` (``auto`` decides by size)."""
    STRATEGIES.check_config("strategy", requested)
    if requested != "auto":
        return "fsdp" if requested == "fsdp2" else requested
    if cpu_offload:
        return "fsdp"
    return "replicate" if dp_size == 1 or num_params <= REPLICATE_MAX_PARAMS else "fsdp"


def build_strategy(
    requested: str, model: nn.Module, dp: DataParallelGroup, compute_dtype: torch.dtype, trainable: bool,
    cpu_offload: bool,
) -> ParallelStrategy:
    name = choose_strategy(requested, count_parameters(model), dp.size, cpu_offload)
    return STRATEGIES.get(name)(dp, compute_dtype, trainable)

