"""Explicit beats default for micro-batching: a command that sets a micro-batch size wants micro-batches of
that size, so token-budget batching (siiRL's default) stays on only when the size is not set, or when the
command says ``use_dynamic_bsz=true`` too.

The schema holds ``None`` for "not set"; ``resolve_micro_batches`` fills both fields at load, and
``micro_batching`` gives the same answer to code handed a section built in Python.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError

#: Micro-batch size where none is set (used only with ``use_dynamic_bsz=false``).
DEFAULT_MICRO_BATCH_SIZE = 64

#: (section, micro-batch size key, its dynamic-batching switch).
PAIRS = (
    ("actor_rollout_ref.actor", "ppo_micro_batch_size_per_gpu", "use_dynamic_bsz"),
    ("actor_rollout_ref.rollout", "log_prob_micro_batch_size_per_gpu", "log_prob_use_dynamic_bsz"),
    ("actor_rollout_ref.ref", "log_prob_micro_batch_size_per_gpu", "log_prob_use_dynamic_bsz"),
    ("critic", "ppo_micro_batch_size_per_gpu", "use_dynamic_bsz"),
)


def micro_batching(size: int | None, dynamic: bool | None) -> tuple[int, bool]:
    """``(micro-batch size, use dynamic batching)`` from the values as set (None: not set)."""
    if dynamic is None:
        dynamic = size is None
    return (DEFAULT_MICRO_BATCH_SIZE if size is None else int(size)), bool(dynamic)


def resolve_micro_batches(cfg: DictConfig) -> None:
    """Fill every pair in place; a size below 1 is refused naming its key."""
    for section, size_key, dynamic_key in PAIRS:
        node = OmegaConf.select(cfg, section)
        size, dynamic = node[size_key], node[dynamic_key]
        if size is not None and size < 1:
            raise ConfigError(f"bad config: {section}.{size_key}={size} is invalid; expected > 0")
        node[size_key], node[dynamic_key] = micro_batching(size, dynamic)
