"""verl's ``fsdp_config`` section: how one model is sharded, where its state lives and in which dtype.

The same section sits under verl's paths (``actor_rollout_ref.actor``, ``actor_rollout_ref.ref``,
``critic.model``, ``reward_model.model``). Keys with a meaning under FSDP2 are implemented by the engine
(``siirl.engine.workers.fsdp``); keys that only steer verl's FSDP1 engine, or features siiRL lacks, are
accepted at their no-op value and refused otherwise in one line (field rules and ``FSDPConfig.validate``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError
from siirl.params.rules import refused
from siirl.params.trainer import world_size

logger = logging.getLogger(__name__)

#: Where verl puts the section, per model role.
FSDP_SECTIONS = {
    "actor": "actor_rollout_ref.actor.fsdp_config",
    "reference": "actor_rollout_ref.ref.fsdp_config",
    "critic": "critic.model.fsdp_config",
    "reward_model": "reward_model.model.fsdp_config",
}
#: Sections of models without an optimizer: ``optimizer_offload`` has nothing to move there.
FROZEN_ROLES = ("reference", "reward_model")


@dataclass
class WrapPolicyConfig:
    #: FSDP1's size-based auto-wrap; FSDP2 (siiRL, and verl's fsdp2) makes each transformer block a unit.
    min_num_params: int = refused(
        0, lambda v: v != 0,
        "is FSDP1's size-based wrapping; siiRL's FSDP2 makes each transformer block a unit (as verl's fsdp2); use 0",
        early=False,
    )


@dataclass
class MixedPrecisionConfig:
    """verl's ``fsdp_config.mixed_precision`` dict (FSDP's mixed-precision policy)."""

    #: Compute dtype (FSDP2 ``MixedPrecisionPolicy.param_dtype``); set, it is folded into ``dtype`` when the
    #: config loads. auto: ``dtype`` decides.
    param_dtype: str = "auto"
    #: dtype gradients are averaged across ranks in (FSDP2 ``reduce_dtype``; the replicas' all-reduce).
    reduce_dtype: str = "fp32"
    #: FSDP1's buffer dtype; FSDP2 has none (verl's fsdp2 does not read it): buffers keep ``model_dtype``.
    buffer_dtype: str = "fp32"


@dataclass
class FSDPConfig:
    #: Sharded parameters and gradients live in host memory (FSDP2 ``CPUOffloadPolicy``); each unit is
    #: copied to the device for its forward / backward and the optimizer steps on the host.
    param_offload: bool = False
    #: Optimizer state (Adam moments) moved to host memory between updates, back for the next one.
    optimizer_offload: bool = False
    #: verl's FSDP2 name for the same ``CPUOffloadPolicy`` as ``param_offload``.
    offload_policy: bool = False
    #: Free each block's gathered parameters after its forward (re-gather in backward); false keeps them
    #: until backward (less communication, more memory).
    reshard_after_forward: bool = True
    #: Ranks in one shard group; -1 (or the whole world) = one group. Hybrid sharding is not implemented.
    fsdp_size: int = -1
    #: Issue the next block's all-gather while the current block computes.
    forward_prefetch: bool = False
    #: dtype the parameters are kept in (master weights); auto: fp32 for trained models, the compute dtype
    #: for frozen ones.
    model_dtype: str = "auto"
    #: Compute dtype of this model (FSDP mixed-precision param dtype); auto: ``model.dtype``.
    dtype: str = "auto"
    wrap_policy: WrapPolicyConfig = field(default_factory=WrapPolicyConfig)
    mixed_precision: MixedPrecisionConfig = field(default_factory=MixedPrecisionConfig)
    #: Old verl key; gradients follow ``param_offload`` under FSDP2.
    grad_offload: bool = refused(
        False, bool, "was removed from verl; under FSDP2 gradients live with the parameters: set param_offload=true",
        early=False,
    )
    #: verl's FSDP engine version; siiRL's FSDP is always FSDP2, so both names mean it.
    strategy: str = refused(
        "fsdp", lambda v: v not in ("fsdp", "fsdp2"), "is verl's FSDP engine version; siiRL's FSDP is FSDP2, so fsdp or fsdp2",
        early=False,
    )
    #: FSDP1 only; FSDP2 always keeps the original parameters (any value is accepted, as verl's fsdp2 does).
    use_orig_params: bool = False

    def validate(self, cfg: Any, key: str) -> None:
        """One shard group; host offload shards (so no replicas); a frozen model has no optimizer to offload."""
        if self.fsdp_size != -1 and self.fsdp_size < world_size(cfg):
            raise ConfigError(
                f"bad config: {key}.fsdp_size={self.fsdp_size!r} asks for hybrid sharding (shard groups smaller "
                "than the world), which is not implemented; use -1 (one shard group)"
            )
        role = next(role for role, section in FSDP_SECTIONS.items() if section == key)
        offload = next((k for k in ("param_offload", "offload_policy") if getattr(self, k)), None)
        # the reference shards as the actor does
        strategy_key = "actor_rollout_ref.actor.strategy" if role in ("actor", "reference") else f"{role}.strategy"
        if offload and attrgetter(strategy_key)(cfg) == "replicate":
            raise ConfigError(
                f"bad config: {key}.{offload}=true shards the model with FSDP2 and keeps the shards in "
                f"host memory, but {strategy_key}=replicate keeps a whole copy per device; use strategy=auto or fsdp"
            )
        if role in FROZEN_ROLES and self.optimizer_offload:
            # verl's forward-only engines drop it too (its current Qwen3-Next scripts set it on the reference)
            logger.warning(
                "%s.optimizer_offload=true is not read: the %s has no optimizer (param_offload=true offloads "
                "its weights)", key, role.replace("_", " "),
            )


def host_offload(fsdp: FSDPConfig) -> bool:
    """Whether ``fully_shard`` gets ``CPUOffloadPolicy`` (either verl spelling asks for it). A function, not a
    property: sections also arrive as OmegaConf nodes, which carry fields only."""
    return bool(fsdp.param_offload or fsdp.offload_policy)


def fold_mixed_precision(cfg: DictConfig) -> None:
    """``mixed_precision.param_dtype`` is the compute dtype ``dtype`` names: the engine reads only ``dtype``
    (two different values are refused)."""
    for section in FSDP_SECTIONS.values():
        fsdp = OmegaConf.select(cfg, section)
        wanted = fsdp.mixed_precision.param_dtype
        if wanted == "auto":
            continue
        if fsdp.dtype not in ("auto", wanted):
            raise ConfigError(
                f"bad config: {section}.mixed_precision.param_dtype={wanted!r} contradicts "
                f"{section}.dtype={fsdp.dtype!r}; set one of them"
            )
        fsdp.dtype, fsdp.mixed_precision.param_dtype = wanted, "auto"
