"""Serving a peft LoRA adapter folder the way vLLM does: read ``adapter_config.json`` and
``adapter_model.safetensors``, check the rank against ``max_lora_rank``, and run the model with
``W + (alpha / r) * B @ A`` on every adapted linear layer (weights restored afterwards)."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors.torch import load_file

PREFIX = "base_model.model."


def read_adapter(path: str, max_rank: int) -> tuple[dict, dict[str, torch.Tensor]]:
    folder = Path(path)
    config = json.loads((folder / "adapter_config.json").read_text())
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{path}: not a LoRA adapter ({config.get('peft_type')})")
    if int(config["r"]) > max_rank:
        raise ValueError(f"LoRA rank {config['r']} is greater than max_lora_rank {max_rank}")
    return config, load_file(folder / "adapter_model.safetensors")


def deltas(config: dict, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF weight name -> the adapter's additive update."""
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    scale = alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank
    out = {}
    for name, a in tensors.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name[: -len(".lora_A.weight")]
        b = tensors[f"{module}.lora_B.weight"]
        if b.shape[1] != a.shape[0]:
            raise ValueError(f"{module}: lora_B {tuple(b.shape)} does not follow lora_A {tuple(a.shape)}")
        out[f"{module.removeprefix(PREFIX)}.weight"] = (b.float() @ a.float()) * scale
    if not out:
        raise ValueError("the adapter holds no lora_A / lora_B weights")
    return out


@contextlib.contextmanager
def applied(params: dict[str, torch.nn.Parameter], update: dict[str, torch.Tensor]) -> Iterator[None]:
    saved = {}
    with torch.no_grad():
        for name, delta in update.items():
            if name not in params:
                raise KeyError(f"the adapter targets {name}, which the model does not have")
            if params[name].shape != delta.shape:
                raise ValueError(f"{name}: adapter update {tuple(delta.shape)} != {tuple(params[name].shape)}")
            saved[name] = params[name].detach().clone()
            params[name].add_(delta.to(params[name].dtype))
    try:
        yield
    finally:
        with torch.no_grad():
            for name, value in saved.items():
                params[name].copy_(value)
