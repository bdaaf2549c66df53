"""Split a (mini-)batch into micro-batches whose cost fits a token budget, equal in count across ranks.

The cost of a micro-batch depends on how it is laid out (see ``padding_free``):

- ``packed``: the sum of its sequence lengths; the token-budget balancer ``rearrange_micro_batches``
  (C++) spreads long and short sequences so every micro-batch carries a similar load.
- ``shared``: a prompt once per micro-batch plus its rows' responses. The rows of a prompt group stay in one
  micro-batch while they fit the budget (a group spread over micro-batches would run its prompt, and a
  vision-language prompt's image, once in each), and the groups are balanced as units.
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
from dataclasses import dataclass, field

from siirl.engine.workers.distributed import DataParallelGroup
from siirl.native import rearrange_micro_batches
from siirl.registry import Registry

MicroBatches = list[list[int]]


@dataclass(frozen=True)
class Rows:
    """What planning needs to know of a (mini-)batch's rows."""

    #: Unpadded length of each row (prompt + response).
    seqlens: list[int]
    #: Padded width of the rows.
    width: int
    #: Prompt group of each row (rows with the same prompt tokens share one id); empty = one group per row.
    groups: list[int] = field(default_factory=list)
    #: Unpadded prompt length of each row (read with ``groups``).
    prompt_lens: list[int] = field(default_factory=list)


#: ``fn(rows, budget, min_count) -> micro-batches`` (row indices)
PlanFn = Callable[[Rows, int, int], MicroBatches]
PLANNERS: Registry[PlanFn] = Registry("micro-batch layout", open=True)


@dataclass(frozen=True)
class Batching:
    """How one phase (training, log-prob, values) cuts its rows into micro-batches."""

    use_dynamic_bsz: bool
    micro_batch_size: int
    max_token_len: int


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


@PLANNERS.register("packed")
def _plan_packed(rows: Rows, budget: int, min_count: int) -> MicroBatches:
    # When re-planning to the agreed count, ask for exactly that many (an error beats a collective hang).
    micro_batches, _ = rearrange_micro_batches(
        rows.seqlens, budget, same_count_across_ranks=min_count if min_count > 1 else None
    )
    return [sorted(mb) for mb in micro_batches]


def group_members(groups: list[int]) -> list[list[int]]:
    """Row indices of each prompt group, groups in order of their first row, rows in order."""
    members: dict[int, list[int]] = {}
    for row, group in enumerate(groups):
        members.setdefault(group, []).append(row)
    return list(members.values())


def _shared_cost(unit: list[int], rows: Rows) -> int:
    """Tokens ``shared`` packs for rows of one group: the prompt once, then each row's response."""
    return rows.seqlens[unit[0]] + sum(rows.seqlens[i] - rows.prompt_lens[i] for i in unit[1:])


def _group_units(rows: Rows, budget: int, min_count: int) -> MicroBatches:
    """Each group's rows as one unit, cut where the unit would pass the budget; the largest units are
    halved until there are ``min_count`` of them."""
    units: MicroBatches = []
    for members in group_members(rows.groups):
        units.append([])
        for row in members:
            if units[-1] and _shared_cost([*units[-1], row], rows) > budget:
                units.append([])
            units[-1].append(row)
    while len(units) < min_count:
        largest = max((u for u in range(len(units)) if len(units[u]) > 1), key=lambda u: len(units[u]))
        unit = units[largest]
        units[largest : largest + 1] = [unit[: len(unit) // 2], unit[len(unit) // 2 :]]
    return units


@PLANNERS.register("shared")
def _plan_shared(rows: Rows, budget: int, min_count: int) -> MicroBatches:
    if not rows.groups:
        return _plan_packed(rows, budget, min_count)
    units = _group_units(rows, budget, min_count)
    costs = [_shared_cost(unit, rows) for unit in units]
    micro_batches, _ = rearrange_micro_batches(
        costs, budget, same_count_across_ranks=min_count if min_count > 1 else None
    )
    return [sorted(row for u in mb for row in units[u]) for mb in micro_batches]


@PLANNERS.register("trimmed")
def _plan_trimmed(rows: Rows, budget: int, min_count: int) -> MicroBatches:
    seqlens = rows.seqlens
    order = sorted(range(len(seqlens)), key=lambda i: (-seqlens[i], i))
    return _contiguous_buckets(order, seqlens, budget, min_count)


@PLANNERS.register("padded")
def _plan_padded(rows: Rows, budget: int, min_count: int) -> MicroBatches:
    count = len(rows.seqlens)
    return _contiguous_buckets(list(range(count)), [rows.width] * count, budget, min_count)


def _fixed_size(num_rows: int, size: int, order: list[int], min_count: int) -> MicroBatches:
    count = max(math.ceil(num_rows / size), min(min_count, num_rows))
    bounds = [round(k * num_rows / count) for k in range(count + 1)]
    return [order[bounds[k] : bounds[k + 1]] for k in range(count)]


def _plan_local(rows: Rows, layout: str, batching: Batching, min_count: int) -> MicroBatches:
    seqlens = rows.seqlens
    if not seqlens:
        return []
    if batching.use_dynamic_bsz:
        if max(seqlens) > batching.max_token_len:
            raise ValueError(
                f"max_token_len_per_gpu={batching.max_token_len} is smaller than the longest sequence "
                f"({max(seqlens)} tokens): raise it to at least max_prompt_length + max_response_length"
            )
        return PLANNERS.get(layout)(rows, batching.max_token_len, min_count)
    order = list(range(len(seqlens)))
    if layout == "trimmed":
        order.sort(key=lambda i: (-seqlens[i], i))
    elif layout == "shared" and rows.groups:
        order = [row for members in group_members(rows.groups) for row in members]
    return _fixed_size(len(seqlens), batching.micro_batch_size, order, min_count)


def plan_micro_batches(
    seqlens: list[int],
    width: int,
    layout: str,
    batching: Batching,
    dp: DataParallelGroup | None,
    groups: list[int] | None = None,
    prompt_lens: list[int] | None = None,
) -> MicroBatches:
    """Row indices of each micro-batch; every rank of ``dp`` gets the same number of micro-batches.

    ``seqlens`` are the unpadded lengths of the rows, ``width`` their padded length; ``groups`` /
    ``prompt_lens`` (``shared`` layout) their prompt groups and prompt lengths. Empty entries are
    dummies for a rank with too few rows. ``dp=None``: no agreement (replicated models run their
    forwards without collectives, so each rank keeps its own count).
    """
    rows = Rows(list(seqlens), width, list(groups or []), list(prompt_lens or []))
    micro_batches = _plan_local(rows, layout, batching, 1)
    if dp is None:
        return micro_batches
    target = dp.max_int(len(micro_batches))
    if len(micro_batches) < target:
        micro_batches = _plan_local(rows, layout, batching, min(target, len(seqlens)))
    return micro_batches + [[] for _ in range(target - len(micro_batches))]
