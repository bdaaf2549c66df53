"""Sequence balancing and packing for long-tailed RL batches, backed by the C++ extension ``siirl._C``.

``NATIVE_AVAILABLE`` tells whether the extension loaded; without it every function still works through
the pure-Python reference in :mod:`siirl.native.reference` (same results, far slower), after one
warning. Inputs may be lists, numpy arrays or torch tensors; bad input raises ``ValueError``.
"""

from siirl.native._backend import NATIVE_AVAILABLE
from siirl.native.balancing import (
    balanced_partitions,
    greedy_partition,
    group_balanced_partitions,
    karmarkar_karp,
    rearrange_micro_batches,
)
from siirl.native.packing import pack_sequences, unpad_info
from siirl.native.workload import WORKLOADS, FlopsProxy

__all__ = [
    "NATIVE_AVAILABLE",
    "WORKLOADS",
    "FlopsProxy",
    "balanced_partitions",
    "greedy_partition",
    "group_balanced_partitions",
    "karmarkar_karp",
    "pack_sequences",
    "rearrange_micro_batches",
    "unpad_info",
]
