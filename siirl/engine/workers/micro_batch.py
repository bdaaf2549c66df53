"""Split a (mini-)batch into micro-batches whose cost fits a token budget, equal in count across ranks.

The cost of a micro-batch depends on how it is laid out (see ``padding_free``):

- ``packed``: the sum of its sequence lengths; the token-budget balancer ``rearrange_micro_batches``
  (C++) spreads long and short sequences so every micro-batch carries a similar load.
- ``trimmed``: rows x its longest sequence; sequences are sorted by length and cut into contiguous
  buckets, so a micro-batch only pads up to lengths close to its own.
- ``padded``: rows x the full padded width, in the original order.

FSDP all-gathers parameters in every forward, so every rank of the data-parallel group must run the same
number of micro-batches: the count is agreed with an all-reduce MAX, then each rank re-plans to it
(replicated models skip this: their forwards involve no peers). A
rank that has fewer rows than that count gets empty micro-batches, which the workers run as zero-weight
dummies.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from siirl.engine.workers.distributed import DataParallelGroup
from siirl.native import rearrange_micro_batches
from siirl.registry import Registry

MicroBatches = list[list[int]]
#: ``fn(seqlens, padded_width, budget, min_count) -> micro-batches`` (row indices)
PlanFn = Callable[[list[int], int, int, int], MicroBatches]
PLANNERS: Registry[PlanFn] = Registry("micro-batch layout", open=True)


@dataclass(frozen=True)
class Batching:
    """How one phase (training, log-prob, values) cuts its rows into micro-batches."""

    use_dynamic_bsz: bool
    micro_batch_size: int
    max_token_len: int

    def __post_init__(self) -> None:
        if self.use_dynamic_bsz and self.max_token_len < 1:
            raise ValueError(
                f"max_token_len_per_gpu must be >= 1 with use_dynamic_bsz, got {self.max_token_len}"
            )
        if not self.use_dynamic_bsz and self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size_per_gpu must be >= 1, got {self.micro_batch_size}")


def _bucket_cost(bucket: list[int], lengths: list[int]) -> int:
    return len(bucket) * max(lengths[i] for i in bucket)


def _contiguous_buckets(order: list[int], lengths: list[int], budget: int, min_count: int) -> MicroBatches:
    """Cut ``order`` into runs whose ``rows x longest`` fits ``budget``, then split until ``min_count``.

    A single row always forms a bucket even when it alone exceeds the budget.
    """
    buckets: MicroBatches = []
    for idx in order:
        if buckets:
            candidate = buckets[-1] + [idx]
            if _bucket_cost(candidate, lengths) <= budget:
                buckets[-1] = candidate
                continue
        buckets.append([idx])
    while len(buckets) < min_count:
        splittable = [b for b in range(len(buckets)) if len(buckets[b]) > 1]
        if not splittable:
            break
        worst = max(splittable, key=lambda b: (_bucket_cost(buckets[b], lengths), -b))
        bucket = buckets[worst]
        half = len(bucket) // 2
        buckets[worst : worst + 1] = [bucket[:half], bucket[half:]]
    return buckets


@PLANNERS.register("packed", "shared")
def _plan_packed(seqlens: list[int], width: int, budget: int, min_count: int) -> MicroBatches:
    # ``shared`` packs fewer tokens than the full lengths counted here: the budget holds with room to spare.
    # When re-planning to the agreed count, ask for exactly that many (an error beats a collective hang).
    micro_batches, _ = rearrange_micro_batches(
        seqlens, budget, same_count_across_ranks=min_count if min_count > 1 else None
    )
    return [sorted(mb) for mb in micro_batches]


@PLANNERS.register("trimmed")
def _plan_trimmed(seqlens: list[int], width: int, budget: int, min_count: int) -> MicroBatches:
    order = sorted(range(len(seqlens)), key=lambda i: (-seqlens[i], i))
    return _contiguous_buckets(order, seqlens, budget, min_count)


@PLANNERS.register("padded")
def _plan_padded(seqlens: list[int], width: int, budget: int, min_count: int) -> MicroBatches:
    return _contiguous_buckets(list(range(len(seqlens))), [width] * len(seqlens), budget, min_count)


def _fixed_size(num_rows: int, size: int, order: list[int], min_count: int) -> MicroBatches:
    count = max(math.ceil(num_rows / size), min(min_count, num_rows))
    bounds = [round(k * num_rows / count) for k in range(count + 1)]
    return [order[bounds[k] : bounds[k + 1]] for k in range(count)]


def _plan_local(
    seqlens: list[int], width: int, layout: str, batching: Batching, min_count: int
) -> MicroBatches:
    if not seqlens:
        return []
    if batching.use_dynamic_bsz:
        if max(seqlens) > batching.max_token_len:
            raise ValueError(
                f"max_token_len_per_gpu={batching.max_token_len} is smaller than the longest sequence "
                f"({max(seqlens)} tokens): raise it to at least max_prompt_length + max_response_length"
            )
        return PLANNERS.get(layout)(seqlens, width, batching.max_token_len, min_count)
    order = list(range(len(seqlens)))
    if layout == "trimmed":
        order.sort(key=lambda i: (-seqlens[i], i))
    return _fixed_size(len(seqlens), batching.micro_batch_size, order, min_count)


def plan_micro_batches(
    seqlens: list[int], width: int, layout: str, batching: Batching, dp: DataParallelGroup | None
) -> MicroBatches:
    """Row indices of each micro-batch; every rank of ``dp`` gets the same number of micro-batches.

    ``seqlens`` are the unpadded lengths of the rows, ``width`` their padded length. Empty entries are
    dummies for a rank with too few rows. ``dp=None``: no agreement (replicated models run their
    forwards without collectives, so each rank keeps its own count).
    """
    micro_batches = _plan_local(seqlens, width, layout, batching, 1)
    if dp is None:
        return micro_batches
    target = dp.max_int(len(micro_batches))
    if len(micro_batches) < target:
        micro_batches = _plan_local(seqlens, width, layout, batching, min(target, len(seqlens)))
    return micro_batches + [[] for _ in range(target - len(micro_batches))]
