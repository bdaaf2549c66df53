"""LoRA through peft: adapters on the policy, merged weights for engines that take full weights, the adapter
alone for checkpoints and for engines that take adapters (vLLM).

Only the adapters train; the base weights stay frozen, so the reference policy is the same model with its
adapters switched off (``disable_adapter()``) and no second copy is loaded. peft keeps its own module names
(``base_model.model.<hf name>``, ``<layer>.base_layer.weight``, ``<layer>.lora_A.<adapter>.weight``);
``merged_named_parameters`` yields the HF names a plain model of the same architecture has, with every
adapted weight merged (``W + scaling * B @ A``), gathered one parameter at a time as the FSDP sync does.

peft is imported by the functions that use it: a run without LoRA (and the launcher's checks of one) never
pays for its import, about half a second of every DAG worker's start-up.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import save_file
from torch import nn
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel

from siirl.device import DeviceBackend
from siirl.engine.workers.model_loading import (
    ModelLoadError,
    check_model_weights,
    hf_config,
    load_causal_lm,
    policy_auto_class,
)
from siirl.errors import first_line
from siirl.params.lora import LORA_KEYS, lora_enabled, module_names

if TYPE_CHECKING:
    from peft import LoraConfig, PeftModel
    from peft.tuners.lora import Linear as LoraLinear

#: peft's prefix in front of the HF names of the wrapped model.
PEFT_PREFIX = "base_model.model."
ADAPTER = "default"
ADAPTER_CONFIG, ADAPTER_WEIGHTS = "adapter_config.json", "adapter_model.safetensors"


def lora_config(model_cfg: Any) -> LoraConfig:
    """peft's config from verl's keys (rank, alpha, target and excluded modules; no dropout, no bias)."""
    from peft import LoraConfig

    return LoraConfig(
        r=int(model_cfg.lora_rank),
        lora_alpha=int(model_cfg.lora_alpha),
        target_modules=module_names(model_cfg.target_modules, f"{LORA_KEYS}.target_modules"),
        exclude_modules=module_names(model_cfg.exclude_modules, f"{LORA_KEYS}.exclude_modules"),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )


def _check_adapted(model: PeftModel) -> None:
    """Every adapted layer is a plain linear LoRA layer, the only kind the merge below knows."""
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    for name, module in model.named_modules():
        if isinstance(module, LoraLayer) and not isinstance(module, LoraLinear):
            hf_name = name.removeprefix(PEFT_PREFIX)
            raise ModelLoadError(
                f"{LORA_KEYS}.target_modules adapts {hf_name} ({type(module.get_base_layer()).__name__}); "
                "siiRL trains LoRA on linear layers only"
            )


def _linear_names(model: nn.Module) -> list[str]:
    """The distinct last names of the model's linear layers (what ``target_modules`` usually lists)."""
    return sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear)})


def _check_each_target(model: nn.Module, targets: str | list[str] | None, linear: list[str]) -> None:
    """Every listed name matches a module (peft itself only fails when none does), by peft's rule for
    lists: the full module name or its dotted suffix."""
    if not isinstance(targets, list):
        return
    names = [name for name, _ in model.named_modules()]
    unmatched = [t for t in targets if not any(n == t or n.endswith(f".{t}") for n in names)]
    if unmatched:
        raise ModelLoadError(
            f"{LORA_KEYS}.target_modules: {', '.join(unmatched)} match no module of {type(model).__name__} "
            f"(its linear layers: {', '.join(linear)})"
        )


def apply_lora(model: nn.Module, model_cfg: Any) -> PeftModel:
    """``model`` with trainable adapters: fresh ones from the LoRA keys, or the saved ``lora_adapter_path``."""
    from peft import PeftModel, get_peft_model

    adapter_path = str(model_cfg.lora_adapter_path or "")
    linear = _linear_names(model)
    if not adapter_path:
        _check_each_target(model, module_names(model_cfg.target_modules, f"{LORA_KEYS}.target_modules"), linear)
    try:
        if adapter_path:
            check_adapter_dir(adapter_path)
            peft_model = PeftModel.from_pretrained(model, adapter_path, is_trainable=True)
        else:
            peft_model = get_peft_model(model, lora_config(model_cfg))
    except (ValueError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(
            f"{LORA_KEYS}: cannot add LoRA adapters: {first_line(exc)} "
            f"(its linear layers: {', '.join(linear)})"
        ) from None
    _check_adapted(peft_model)
    return peft_model


def load_policy_lm(model_cfg: Any, backend: DeviceBackend, dtype: torch.dtype) -> PreTrainedModel:
    """The trained policy's causal LM; with LoRA keys set, wrapped with trainable peft adapters."""
    model = load_causal_lm(model_cfg, backend, dtype)
    return apply_lora(model, model_cfg) if lora_enabled(model_cfg) else model


def check_adapter_dir(path: str) -> None:
    folder = Path(path).expanduser()
    if not (folder / ADAPTER_CONFIG).is_file():
        raise ModelLoadError(f"{LORA_KEYS}.lora_adapter_path={path} holds no {ADAPTER_CONFIG} (a saved peft adapter)")


def saved_adapter_config(path: str) -> Any:
    """The saved adapter's peft ``LoraConfig``; a missing folder or a config that does not parse is one line."""
    from peft import LoraConfig

    check_adapter_dir(path)
    try:
        return LoraConfig.from_pretrained(str(Path(path).expanduser()))
    except Exception as exc:  # noqa: BLE001 - json and peft raise their own types
        reason = f"{ADAPTER_CONFIG} does not load ({first_line(exc)})"
        raise ModelLoadError(f"{LORA_KEYS}.lora_adapter_path={path}: {reason}") from None


def configured_rank(model_cfg: Any) -> int:
    """The adapters' rank: the saved adapter's when ``lora_adapter_path`` is set, else ``lora_rank``."""
    if model_cfg.lora_adapter_path:
        return int(saved_adapter_config(str(model_cfg.lora_adapter_path)).r)
    return int(model_cfg.lora_rank)


def check_lora_targets(model_cfg: Any) -> None:
    """Resolve the target modules against the model's architecture before any weight is read: the model is
    built on the meta device from its config.json, so an unknown module name fails in one line up front. A
    saved adapter (``lora_adapter_path``) must load in the workers instead: its config parses (plain LoRA, not
    DoRA) and its weights pass the header check the model weights get."""
    if not lora_enabled(model_cfg):
        return
    if model_cfg.lora_adapter_path:
        path = str(model_cfg.lora_adapter_path)
        if getattr(saved_adapter_config(path), "use_dora", False):  # the LoRA keys never make one; only a saved adapter can be DoRA
            raise ModelLoadError(f"{LORA_KEYS}.lora_adapter_path={path} is a DoRA adapter, which is not supported "
                                 "(merged weight sync needs plain LoRA)")
        check_model_weights(Path(path).expanduser())
        return
    config, trust = hf_config(model_cfg), bool(model_cfg.trust_remote_code)
    with torch.device("meta"):
        skeleton = policy_auto_class(config).from_config(config, trust_remote_code=trust)
    apply_lora(skeleton, model_cfg)


def is_lora_model(model: nn.Module) -> bool:
    peft = sys.modules.get("peft")  # no model is a PeftModel before peft is imported
    return peft is not None and isinstance(model, peft.PeftModel)


def _full(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.detach()
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def _merged_weight(layer: LoraLinear) -> torch.Tensor:
    """``W + scaling * B @ A`` of one adapted linear layer, in the base weight's dtype (gathers 3 tensors)."""
    base = _full(layer.get_base_layer().weight)
    a = _full(layer.lora_A[ADAPTER].weight).to(torch.float32)
    b = _full(layer.lora_B[ADAPTER].weight).to(torch.float32)
    delta = (b @ a) * float(layer.scaling[ADAPTER])
    if layer.fan_in_fan_out:
        delta = delta.T
    return (base.to(torch.float32) + delta).to(base.dtype)


def merged_named_parameters(model: PeftModel) -> Iterator[tuple[str, torch.Tensor]]:
    """(HF name, full tensor) of the model with its adapters merged, in a fixed order (a collective on
    every rank under FSDP); tied weights are sent once, as ``named_parameters`` does."""
    from peft.tuners.lora import Linear as LoraLinear

    seen: set[int] = set()
    inside_lora: tuple[str, ...] = ()
    for module_name, module in model.named_modules():
        if inside_lora and module_name.startswith(inside_lora):
            continue
        if isinstance(module, LoraLinear):
            inside_lora = (*inside_lora, f"{module_name}.")
            base = module.get_base_layer()
            yield f"{module_name.removeprefix(PEFT_PREFIX)}.weight", _merged_weight(module)
            if base.bias is not None:
                yield f"{module_name.removeprefix(PEFT_PREFIX)}.bias", _full(base.bias)
            continue
        for param_name, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            yield f"{module_name}.{param_name}".removeprefix(PEFT_PREFIX), _full(param)


def adapter_tensors(model: PeftModel) -> dict[str, torch.Tensor]:
    """The adapter's full tensors under peft's saved names (what ``adapter_model.safetensors`` holds)."""
    from peft import get_peft_model_state_dict

    trainable = {name: _full(p) for name, p in model.named_parameters() if p.requires_grad}
    return get_peft_model_state_dict(model, state_dict=trainable, adapter_name=ADAPTER)


def adapter_config(model: PeftModel) -> LoraConfig:
    return model.peft_config[ADAPTER]


def write_adapter(config: LoraConfig, tensors: dict[str, torch.Tensor], folder: str | Path) -> Path:
    """A peft adapter folder (``adapter_config.json`` + ``adapter_model.safetensors``) that
    ``lora_adapter_path``, ``PeftModel.from_pretrained`` and vLLM's ``LoRARequest`` all read."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(str(folder))
    host = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    save_file(host, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    return folder
