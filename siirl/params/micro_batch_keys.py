"""Explicit beats default for micro-batching: a command that sets a micro-batch size wants micro-batches of
that size, so token-budget batching (siiRL's default) stays on only when the size is not set, or when the
command says ``use_dynamic_bsz=true`` too.

The schema holds ``None`` for "not set"; ``resolve_micro_batches`` fills both fields at load, and
``micro_batching`` gives the same answer to code handed a section built in Python.

verl's older global sizes (``ppo_micro_batch_size``, ``log_prob_micro_batch_size``: micro-batch size summed
over the data-parallel ranks) are folded into the per-device key at load by dividing by the data-parallel size,
as verl's FSDP workers do; setting both forms is refused as in verl.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError
from siirl.params.trainer import world_size

#: Micro-batch size where none is set (used only with ``use_dynamic_bsz=false``).
DEFAULT_MICRO_BATCH_SIZE = 64

#: Section -> the stem of its keys: ``<stem>_micro_batch_size_per_gpu``, verl's global form
#: ``<stem>_micro_batch_size`` and the switch ``use_dynamic_bsz`` (``log_prob_use_dynamic_bsz`` for log-probs).
STEMS = {
    "actor_rollout_ref.actor": "ppo",
    "actor_rollout_ref.rollout": "log_prob",
    "actor_rollout_ref.ref": "log_prob",
    "critic": "ppo",
}


def micro_batching(size: int | None, dynamic: bool | None) -> tuple[int, bool]:
    """``(micro-batch size, use dynamic batching)`` from the values as set (None: not set)."""
    if dynamic is None:
        dynamic = size is None
    return (DEFAULT_MICRO_BATCH_SIZE if size is None else int(size)), bool(dynamic)


def _fold_global_size(node: DictConfig, section: str, size_key: str, global_key: str, dp_size: int) -> None:
    """verl's global micro-batch size becomes the per-device one (divided by the data-parallel size)."""
    total = node[global_key]
    if total is None:
        return
    if node[size_key] is not None:
        raise ConfigError(
            f"bad config: both {section}.{global_key} and {section}.{size_key} are set; "
            f"remove {global_key} (verl's deprecated global form)"
        )
    if total < dp_size:
        raise ConfigError(
            f"bad config: {section}.{global_key}={total} is smaller than the data-parallel size {dp_size}; "
            f"expected >= {dp_size} (or set {size_key})"
        )
    node[size_key], node[global_key] = total // dp_size, None


def resolve_micro_batches(cfg: DictConfig) -> None:
    """Fill every pair in place (a size below 1 is refused by its field's rule)."""
    dp_size = world_size(cfg)
    for section, stem in STEMS.items():
        size_key, global_key = f"{stem}_micro_batch_size_per_gpu", f"{stem}_micro_batch_size"
        dynamic_key = "use_dynamic_bsz" if stem == "ppo" else "log_prob_use_dynamic_bsz"
        node = OmegaConf.select(cfg, section)
        _fold_global_size(node, section, size_key, global_key, dp_size)
        node[size_key], node[dynamic_key] = micro_batching(node[size_key], node[dynamic_key])
