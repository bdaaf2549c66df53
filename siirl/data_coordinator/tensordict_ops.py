"""Row selection, concatenation and a zero-copy wire format for 1-D TensorDicts with non-tensor fields.

Non-tensor fields (uids, data sources, ground truths) live in ``NonTensorStack`` leaves. Indexing a
TensorDict holding large stacks is slow and pickling them is slower still, so these helpers treat
non-tensor leaves as plain Python lists and tensors as byte matrices that Ray stores without pickling.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import torch
from tensordict import NonTensorStack, TensorDict, TensorDictBase, is_non_tensor

Key = str | tuple[str, ...]


def _check_one_dim(td: TensorDictBase) -> int:
    if td.batch_dims != 1:
        raise ValueError(
            f"expected a TensorDict with one batch dimension, got batch_size={tuple(td.batch_size)}"
        )
    return td.batch_size[0]


def _leaves(td: TensorDictBase) -> tuple[dict[Key, torch.Tensor], dict[Key, Any]]:
    """Split the leaves of ``td`` into tensors and non-tensor values (nested keys as tuples)."""
    tensors: dict[Key, torch.Tensor] = {}
    others: dict[Key, Any] = {}
    for key, value in td.items(include_nested=True, leaves_only=False):
        if is_non_tensor(value):
            others[key] = value
        elif isinstance(value, torch.Tensor):
            tensors[key] = value
    return tensors, others


_MISSING: Any = object()


def row_values(td: TensorDictBase, key: Key, default: Any = _MISSING) -> list:
    """One Python value per row for ``key``: the single per-row reader every batch helper uses.

    - ``NonTensorStack`` (``td[key] = [...]``, ``set_non_tensor_list``): its per-row values;
    - ``NonTensorData`` (``td.set_non_tensor(key, v)``): a list or tuple as long as the batch is read as
      per-row values, anything else is one value shared by every row;
    - a tensor: its rows as Python values.

    A missing field gives ``[default] * rows`` when a default is given, else ``ValueError``.
    """
    n = _check_one_dim(td)
    if key not in td.keys(include_nested=isinstance(key, tuple)):
        if default is _MISSING:
            fields = ", ".join(sorted(map(str, td.keys())))
            raise ValueError(f"batch has no field {key!r}; fields: {fields}")
        return [default] * n
    value = td.get(key)
    if isinstance(value, NonTensorStack):
        return list(value.tolist())
    if is_non_tensor(value):
        data = value.data
        return list(data) if isinstance(data, (list, tuple)) and len(data) == n else [data] * n
    if isinstance(value, torch.Tensor):
        return value.tolist()
    raise ValueError(f"field {key!r} holds a nested TensorDict, not one value per row")


#: Historical name of ``row_values`` (data coordinator code).
non_tensor_list = row_values


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects at once.

    ``NonTensorStack.from_list`` makes one ``NonTensorData`` per row; with the collector on, its young
    generation fills again and again and each pass rescans them, which made 16k rows take 0.5 s instead
    of 0.04 s. Nothing built here is garbage, so pausing loses nothing.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def set_non_tensor_list(td: TensorDictBase, key: Key, values: Sequence) -> None:
    """Store one Python value per row under ``key`` as a ``NonTensorStack``."""
    n = _check_one_dim(td)
    if len(values) != n:
        raise ValueError(f"non-tensor field {key!r} has {len(values)} values for a batch of {n} rows")
    with _collector_paused():
        td.set(key, NonTensorStack.from_list(list(values)))


def _build(num_rows: int, tensors: dict[Key, torch.Tensor], others: dict[Key, list]) -> TensorDict:
    out = TensorDict({}, batch_size=[num_rows])
    for key, tensor in tensors.items():
        out.set(key, tensor)
    for key, values in others.items():
        set_non_tensor_list(out, key, values)
    return out


def select_rows(td: TensorDictBase, indices: Sequence[int] | np.ndarray | torch.Tensor) -> TensorDict:
    """A new TensorDict with the given rows, in the given order (repeats allowed)."""
    n = _check_one_dim(td)
    index = torch.as_tensor(np.asarray(indices, dtype=np.int64)).reshape(-1)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
        raise IndexError(f"row index out of range for a batch of {n} rows")
    tensors, others = _leaves(td)
    picked = index.tolist()
    values = {key: non_tensor_list(td, key) for key in others}
    return _build(
        len(picked),
        {key: t.index_select(0, index.to(t.device)) for key, t in tensors.items()},
        {key: [vals[i] for i in picked] for key, vals in values.items()},
    )


def concat(tds: Sequence[TensorDictBase]) -> TensorDict:
    """Concatenate along the batch dimension; all inputs must have the same fields."""
    if not tds:
        raise ValueError("concat needs at least one TensorDict")
    split = [_leaves(td) for td in tds]
    ref_t, ref_o = set(split[0][0]), set(split[0][1])
    for i, (tensors, others) in enumerate(split[1:], start=1):
        if set(tensors) != ref_t or set(others) != ref_o:
            diff = (set(tensors) | set(others)) ^ (ref_t | ref_o)
            raise ValueError(
                f"cannot concatenate TensorDict #{i}: fields differ from #0 ({sorted(map(str, diff))})"
            )
    num_rows = sum(_check_one_dim(td) for td in tds)
    return _build(
        num_rows,
        {key: torch.cat([tensors[key] for tensors, _ in split]) for key in ref_t},
        {key: [v for td in tds for v in non_tensor_list(td, key)] for key in ref_o},
    )


#: Below this many rows per contiguous run on average, gathering rows with one copy beats shipping runs.
MIN_AVG_RUN_ROWS = 4


@dataclass
class WireBatch:
    """A TensorDict as blocks of numpy byte rows plus lists: Ray stores the blocks without pickling.

    ``ray.get`` of a ``WireBatch`` maps the blocks from the object store without copying, so a
    consumer pays exactly one copy, the final concatenation in :func:`from_wires`.
    """

    num_rows: int
    #: key -> (dtype, per-sample shape, row blocks: uint8 arrays of shape [rows, bytes per sample])
    tensors: dict[Key, tuple[torch.dtype, tuple[int, ...], list[np.ndarray]]]
    non_tensors: dict[Key, list]


def to_wire(td: TensorDictBase) -> WireBatch:
    """Convert without copying contiguous CPU tensors (each block is a view of a tensor's memory)."""
    n = _check_one_dim(td)
    tensors, others = _leaves(td)
    wire_tensors = {}
    for key, tensor in tensors.items():
        t = tensor.detach().cpu().contiguous()
        sample_shape = tuple(t.shape[1:])
        flat = t.reshape(n, prod(sample_shape))
        wire_tensors[key] = (t.dtype, sample_shape, [flat.view(torch.uint8).numpy()])
    return WireBatch(n, wire_tensors, {key: non_tensor_list(td, key) for key in others})


def _runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """Maximal ranges [start, end) of consecutive ascending row numbers, in the order of ``rows``."""
    if not len(rows):
        return []
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    firsts = np.concatenate([[0], breaks])
    lasts = np.concatenate([breaks, [len(rows)]]) - 1
    return list(zip(rows[firsts].tolist(), (rows[lasts] + 1).tolist()))


def wire_take(wire: WireBatch, rows: np.ndarray) -> WireBatch:
    """The given rows of a wire batch; long runs of consecutive rows stay views (no copy)."""
    rows = np.asarray(rows, dtype=np.int64)
    runs = _runs(rows)
    as_views = len(runs) * MIN_AVG_RUN_ROWS <= len(rows)
    tensors = {}
    for key, (dtype, shape, blocks) in wire.tensors.items():
        data = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        tensors[key] = (
            dtype,
            shape,
            [data[a:b] for a, b in runs] if as_views else [np.take(data, rows, axis=0)],
        )
    picked = rows.tolist()
    others = {key: [vals[i] for i in picked] for key, vals in wire.non_tensors.items()}
    return WireBatch(len(rows), tensors, others)


def from_wires(wires: Sequence[WireBatch]) -> TensorDict:
    """Concatenate wire batches into one writable TensorDict (one copy of every byte)."""
    if not wires:
        raise ValueError("from_wires needs at least one WireBatch")
    first = wires[0]
    for i, wire in enumerate(wires[1:], start=1):
        if set(wire.tensors) != set(first.tensors) or set(wire.non_tensors) != set(first.non_tensors):
            raise ValueError(f"cannot concatenate wire batch #{i}: its fields differ from #0")
    num_rows = sum(w.num_rows for w in wires)
    tensors = {}
    for key, (dtype, shape, _) in first.tensors.items():
        row_bytes = prod(shape) * torch.empty(0, dtype=dtype).element_size()
        if row_bytes == 0 or num_rows == 0:  # no bytes to reinterpret
            tensors[key] = torch.empty((num_rows, *shape), dtype=dtype)
            continue
        out = np.empty((num_rows, row_bytes), dtype=np.uint8)
        at = 0
        for wire in wires:
            for block in wire.tensors[key][2]:
                out[at : at + len(block)] = block
                at += len(block)
        tensors[key] = torch.from_numpy(out).view(dtype).reshape(num_rows, *shape)
    others = {key: [v for w in wires for v in w.non_tensors[key]] for key in first.non_tensors}
    return _build(num_rows, tensors, others)


def _copy_rows(out: np.ndarray, data: np.ndarray, rows: np.ndarray) -> None:
    """``out[:] = data[rows]`` without a temporary: slices for long consecutive runs, else one gather."""
    runs = _runs(rows)
    if len(runs) * MIN_AVG_RUN_ROWS <= len(rows):
        at = 0
        for a, b in runs:
            out[at : at + b - a] = data[a:b]
            at += b - a
    else:
        np.take(data, rows, axis=0, out=out)


def take_from_wires(pieces: Sequence[tuple[WireBatch, np.ndarray]]) -> TensorDict:
    """The given rows of each wire batch, concatenated in order, as one writable TensorDict.

    Each byte is copied exactly once, straight from the (possibly object-store mapped) wire blocks into
    the result: no intermediate piece is materialised.
    """
    if not pieces:
        raise ValueError("take_from_wires needs at least one (wire batch, rows) pair")
    first = pieces[0][0]
    for i, (wire, _) in enumerate(pieces[1:], start=1):
        if set(wire.tensors) != set(first.tensors) or set(wire.non_tensors) != set(first.non_tensors):
            raise ValueError(f"cannot concatenate wire batch #{i}: its fields differ from #0")
    rows_list = [np.asarray(rows, dtype=np.int64) for _, rows in pieces]
    num_rows = sum(len(rows) for rows in rows_list)
    tensors = {}
    for key, (dtype, shape, _) in first.tensors.items():
        row_bytes = prod(shape) * torch.empty(0, dtype=dtype).element_size()
        if row_bytes == 0 or num_rows == 0:
            tensors[key] = torch.empty((num_rows, *shape), dtype=dtype)
            continue
        out = np.empty((num_rows, row_bytes), dtype=np.uint8)
        at = 0
        for (wire, _), rows in zip(pieces, rows_list):
            blocks = wire.tensors[key][2]
            data = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
            _copy_rows(out[at : at + len(rows)], data, rows)
            at += len(rows)
        tensors[key] = torch.from_numpy(out).view(dtype).reshape(num_rows, *shape)
    others = {
        key: [wire.non_tensors[key][i] for (wire, _), rows in zip(pieces, rows_list) for i in rows.tolist()]
        for key in first.non_tensors
    }
    return _build(num_rows, tensors, others)
