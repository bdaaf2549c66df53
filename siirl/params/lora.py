"""LoRA keys of ``actor_rollout_ref.model`` (verl's names): when LoRA is on and the shape of its values.

Whether the names in ``target_modules`` match modules of the model is checked before Ray from the model's
config alone (``siirl.engine.workers.lora.check_lora_targets``); this module needs nothing but the config.
"""

from __future__ import annotations

from typing import Any

from omegaconf import ListConfig

from siirl.errors import ConfigError

LORA_KEYS = "actor_rollout_ref.model"  # where the keys live, as messages name them
#: ``target_modules`` value that adapts every linear layer except the output head (peft's spelling).
ALL_LINEAR = "all-linear"


def lora_enabled(model_cfg: Any) -> bool:
    """LoRA trains adapters when a rank is set or a saved adapter is given (as verl decides)."""
    return int(getattr(model_cfg, "lora_rank", 0) or 0) > 0 or bool(getattr(model_cfg, "lora_adapter_path", ""))


def serves_adapters(model_cfg: Any) -> bool:
    """A rollout engine that can serve LoRA adapters gets the adapter (else merged weights): LoRA is on and
    ``lora.merge`` (verl's) is off."""
    merge = bool(getattr(getattr(model_cfg, "lora", None), "merge", False))
    return lora_enabled(model_cfg) and not merge


def module_names(value: Any, key: str) -> str | list[str] | None:
    """``target_modules`` / ``exclude_modules`` as peft takes them: one string, a list of names, or None."""
    if value is None or isinstance(value, str):
        if isinstance(value, str) and not value.strip():
            raise ConfigError(f"bad config: {key} is empty; give module names, e.g. [q_proj,v_proj], or all-linear")
        return value
    if isinstance(value, (list, tuple, ListConfig)):
        names = list(value)
        if not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise ConfigError(f"bad config: {key}={names} must be a non-empty list of module names")
        if ALL_LINEAR in names and len(names) > 1:
            raise ConfigError(f"bad config: {key}={names}: {ALL_LINEAR} stands alone (it already names every linear layer)")
        return ALL_LINEAR if names == [ALL_LINEAR] else names
    raise ConfigError(f"bad config: {key}={value!r} must be a module name, a list of them, or {ALL_LINEAR}")


def check_lora_keys(model: Any, key: str) -> None:
    """Alpha and module lists of the policy's model section ``key`` are well formed (its rank has its rule)."""
    if not lora_enabled(model):
        return
    if int(model.lora_alpha) <= 0:
        raise ConfigError(f"bad config: {key}.lora_alpha={model.lora_alpha} is invalid; expected > 0")
    module_names(model.target_modules, f"{key}.target_modules")
    module_names(model.exclude_modules, f"{key}.exclude_modules")
