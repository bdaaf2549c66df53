"""NVIDIA GPU backend: NCCL, Ray "GPU" bundles, vLLM/SGLang/HF rollout, flash-attn when installed."""

import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar

import torch

from siirl.device.base import DeviceBackend
from siirl.device.registry import register_backend


@register_backend("cuda", auto_priority=0)
class CudaBackend(DeviceBackend):
    dist_backend = "nccl"
    ray_resource = "GPU"
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    rollout_engines = ("hf", "vllm", "sglang")
    default_dtype = torch.bfloat16
    fused_optimizer = True
    rollout_install_hints: ClassVar[dict[str, str]] = {
        "vllm": "pip install siirl[vllm]",
        "sglang": "pip install siirl[sglang]",
    }
    install_hint = "install a CUDA build of torch (pip install torch --index-url https://download.pytorch.org/whl/cu128)"

    def is_available(self) -> bool:
        return torch.cuda.is_available() and torch.cuda.device_count() > 0

    def unavailable_reason(self) -> str:
        if not torch.backends.cuda.is_built():
            return f"device=cuda requested but this torch build has no CUDA support; fix: {self.install_hint}"
        return "device=cuda requested but no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES and the driver)"

    def torch_namespace(self) -> ModuleType:
        return torch.cuda

    def ray_actor_resources(self) -> dict[str, Any]:
        """Ray's built-in GPU is requested with ``num_gpus`` (it refuses "GPU" inside ``resources``)."""
        return {"num_cpus": 1, "num_gpus": 1}

    def attn_implementation(self) -> str:
        return "flash_attention_2" if importlib.util.find_spec("flash_attn") is not None else "sdpa"

    def apply_model_patches(self, model: Any, generation: bool = False) -> list[str]:
        """Packed training: the best batched varlen attention kernel (see ``kernels.cuda_attention``);
        generation keeps stock attention (flash_attention_2 or SDPA with the padding mask and KV cache)."""
        from siirl.device.kernels import apply_patches

        return apply_patches(model, self.name, generation)

    def fused_log_probs(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
        """flash-attn's Triton cross-entropy when installed."""
        from siirl.device.kernels.logprob import flash_attn_cross_entropy_available, flash_attn_log_probs

        return flash_attn_log_probs if flash_attn_cross_entropy_available() else None
