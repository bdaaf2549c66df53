"""CPU backend: gloo, plain Ray CPU slots, the Hugging Face rollout engine; always available."""

from types import ModuleType

import torch

from siirl.device.base import DeviceBackend
from siirl.device.registry import register_backend


@register_backend("cpu", auto_priority=100)
class CpuBackend(DeviceBackend):
    dist_backend = "gloo"
    ray_resource = None
    visible_devices_env = None
    rollout_engines = ("hf",)
    default_dtype = torch.float32
    fused_optimizer = True

    def is_available(self) -> bool:
        return True

    def unavailable_reason(self) -> str:
        return "the CPU backend is always available"

    def torch_namespace(self) -> ModuleType | None:
        return None

    def device_count(self) -> int:
        """One 'device' per CPU process slot: parallelism comes from Ray workers, not device indices."""
        return 1
