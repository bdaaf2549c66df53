"""The contract every hardware family implements; the rest of siiRL talks only to this interface."""

from __future__ import annotations

import os
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import torch


class DeviceBackend(ABC):
    """Everything hardware-specific about one device family (CPU, CUDA GPU, Ascend NPU, ...).

    Subclasses fill the class attributes and the few methods whose answer depends on the installed
    software; the generic methods below then work through ``torch_namespace()``.
    """

    name: str = ""
    #: torch.distributed backend used between devices of this family.
    dist_backend: str = "gloo"
    #: Ray's name for this family's accelerator resource, as its accelerator manager reports it ("GPU",
    #: "NPU", ...); also the key of ``get_accelerator_ids()``. None: plain CPU slots.
    ray_resource: str | None = None
    #: Environment variable that restricts a process to its devices.
    visible_devices_env: str | None = None
    #: Rollout engines that run on this family, in order of preference.
    rollout_engines: tuple[str, ...] = ("hf",)
    #: Whether torch's fused AdamW kernel runs here: one kernel over every parameter instead of a Python loop
    #: of small ops per parameter (a fifth of a tiny model's update on the CPU).
    fused_optimizer: bool = False
    #: Whether the HF rollout draws sampled tokens itself, by inverse CDF in float64 (one uniform per row), instead
    #: of ``generate``'s ``torch.multinomial`` (one exponential per vocabulary entry, most of a CPU decode step's
    #: sampling cost). Families without float64 kernels keep multinomial.
    inverse_cdf_sampling: bool = True
    #: Parameter dtype used for training/inference unless the config says otherwise.
    default_dtype: torch.dtype = torch.float32
    #: What to install when the family is missing.
    install_hint: str = ""
    #: What to install for a rollout engine that needs an optional package (engine name -> hint).
    rollout_install_hints: ClassVar[dict[str, str]] = {}

    @abstractmethod
    def is_available(self) -> bool:
        """Whether the software stack is installed and at least one device is visible."""

    @abstractmethod
    def unavailable_reason(self) -> str:
        """One line saying why ``is_available()`` is False and how to fix it."""

    @abstractmethod
    def torch_namespace(self) -> ModuleType | None:
        """``torch.cuda``-like module of this family, or None for the CPU."""

    # ----- generic behaviour built on torch_namespace() -----

    def device_count(self) -> int:
        ns = self.torch_namespace()
        return int(ns.device_count()) if ns is not None else 1

    def device(self, local_rank: int = 0) -> torch.device:
        if self.torch_namespace() is None:
            return torch.device("cpu")
        return torch.device(self.name, local_rank)

    def set_device(self, local_rank: int) -> None:
        ns = self.torch_namespace()
        if ns is not None:
            ns.set_device(local_rank)

    def synchronize(self) -> None:
        ns = self.torch_namespace()
        if ns is not None:
            ns.synchronize()

    def empty_cache(self) -> None:
        ns = self.torch_namespace()
        if ns is not None and hasattr(ns, "empty_cache"):
            ns.empty_cache()

    def memory_stats(self) -> dict[str, float]:
        """Allocated / reserved / peak memory in GiB (process RSS on the CPU)."""
        ns = self.torch_namespace()
        gib = 1024**3
        if ns is None:
            import psutil

            return {"rss_gib": psutil.Process().memory_info().rss / gib}
        return {
            "allocated_gib": ns.memory_allocated() / gib,
            "reserved_gib": ns.memory_reserved() / gib,
            "max_allocated_gib": ns.max_memory_allocated() / gib,
        }

    def manual_seed(self, seed: int) -> None:
        """Seed Python, NumPy, torch and this family's generators together."""
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        ns = self.torch_namespace()
        if ns is not None and hasattr(ns, "manual_seed_all"):
            ns.manual_seed_all(seed)

    def distributed_backend(self, with_cpu_groups: bool = False) -> str:
        """Backend string for ``init_process_group``; the composite form also serves CPU tensors."""
        if with_cpu_groups and self.torch_namespace() is not None:
            return f"cpu:gloo,{self.name}:{self.dist_backend}"
        return self.dist_backend

    def attn_implementation(self) -> str:
        """Hugging Face ``attn_implementation`` preferred on this family."""
        return "sdpa"

    def supports_rollout(self, engine: str) -> bool:
        return engine in self.rollout_engines

    def rollout_unavailable(self, engine: str) -> str | None:
        """One line saying why ``engine``'s package cannot run here, checked on the driver before Ray starts;
        None when it can (or when only the workers' hosts can tell, as on accelerator clusters)."""
        return None

    def rollout_env(self, engine: str, local_device: int) -> dict[str, str]:
        """Environment variables rollout engine ``engine`` needs while it is built in this process.

        After pinning, a worker sees only its own devices, so an engine that starts its device workers
        in-process binds them to ``local_device`` through ``LOCAL_RANK``; the visible-devices variable is
        passed on as pinned. Families add what their build of the engine needs.
        """
        if self.torch_namespace() is None:
            return {}
        env = {"LOCAL_RANK": str(local_device)}
        if self.visible_devices_env and self.visible_devices_env in os.environ:
            env[self.visible_devices_env] = os.environ[self.visible_devices_env]
        return env

    # ----- how a DAG worker asks Ray for its device -----

    def ray_bundle(self) -> dict[str, float]:
        """One placement-group bundle for one DAG worker: a CPU slot plus one device of this family.

        Bundles name every resource by its Ray name, the built-in "CPU"/"GPU" included.
        """
        bundle = {"CPU": 1.0}
        if self.ray_resource:
            bundle[self.ray_resource] = 1.0
        return bundle

    def ray_actor_resources(self) -> dict[str, Any]:
        """The resource keywords of ``ray.remote(...).options()`` matching :meth:`ray_bundle`.

        Accelerators other than Ray's built-in GPU go in ``resources`` under their Ray name (Ray accepts
        e.g. ``resources={"NPU": 1}``); the CUDA backend overrides this with ``num_gpus``, because Ray
        refuses "CPU" and "GPU" inside ``resources``.
        """
        options: dict[str, Any] = {"num_cpus": 1}
        if self.ray_resource:
            options["resources"] = {self.ray_resource: 1}
        return options

    def apply_model_patches(self, model: Any, generation: bool = False) -> list[str]:
        """Swap this family's fused kernels into a built Hugging Face model; the names of those applied.

        ``generation``: the model will decode with a KV cache (rollout), not run packed sequences, so
        kernels that only serve the packed layout are left out.
        """
        return []

    def fused_log_probs(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
        """A fused ``(logits, labels) -> log softmax(logits)[labels]`` kernel, or None (use the portable one)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "available": self.is_available(),
            "dist_backend": self.dist_backend,
            "ray_resource": self.ray_resource,
            "visible_devices_env": self.visible_devices_env,
            "rollout_engines": list(self.rollout_engines),
            "default_dtype": str(self.default_dtype).replace("torch.", ""),
        }
