"""Workload models: how much compute a sequence of a given length costs.

Balancing by raw token count under-weights long sequences, because attention is quadratic in length.
A model here maps an int64 array of lengths to a float64 array of non-negative costs; the registry lets
callers pick one by name (``"flops"``, ``"tokens"``) or pass any callable of the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from siirl.registry import Registry

WorkloadFn = Callable[[np.ndarray], np.ndarray]

WORKLOADS: Registry[WorkloadFn] = Registry("workload")


@dataclass(frozen=True)
class FlopsProxy:
    """Cost ``linear * L + quadratic * L**2`` of a length-L sequence.

    Per transformer layer a token costs about 24·h² FLOPs in the dense matmuls (forward and backward
    scale together) while causal attention adds about 2·h·L² per sequence, so the quadratic weight
    relative to the linear one is 1 / (12·h). The default assumes hidden size h = 4096; use
    :meth:`for_hidden_size` for another model.
    """

    linear: float = 1.0
    quadratic: float = 1.0 / (12 * 4096)

    @classmethod
    def for_hidden_size(cls, hidden_size: int) -> FlopsProxy:
        """The proxy with the attention weight derived from the model's hidden size."""
        if hidden_size < 1:
            raise ValueError(f"hidden_size must be >= 1, got {hidden_size}")
        return cls(linear=1.0, quadratic=1.0 / (12 * hidden_size))

    def __post_init__(self) -> None:
        for field_name in ("linear", "quadratic"):
            value = getattr(self, field_name)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"FlopsProxy.{field_name} must be finite and >= 0, got {value}")

    def __call__(self, lengths: np.ndarray) -> np.ndarray:
        as_float = lengths.astype(np.float64)
        return self.linear * as_float + self.quadratic * as_float * as_float


WORKLOADS.add("flops", FlopsProxy())


@WORKLOADS.register("tokens")
def token_count(lengths: np.ndarray) -> np.ndarray:
    """Cost equal to the number of tokens (what a token budget constrains)."""
    return lengths.astype(np.float64)


def resolve_workload(workload: str | WorkloadFn) -> WorkloadFn:
    """The workload model named ``workload`` (or the callable itself)."""
    return workload if callable(workload) else WORKLOADS.get(workload)
