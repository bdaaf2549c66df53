"""Read and write per-sample non-tensor fields (strings, dicts) of a TensorDict batch.

tensordict stores such fields in ways that look alike but behave differently:
``NonTensorStack.from_list(values)`` keeps one value per sample (indexing and splitting follow the
batch), reading it back gives a ``LinkedList``; ``td.set_non_tensor(key, values)`` stores the *whole*
list as one shared value (indexing does not split it); a plain string is broadcast to every sample.
These helpers accept all of them and always return one Python value per sample; the reading itself is
``siirl.data_coordinator.tensordict_ops.row_values``, the one per-row reader of the code base.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensordict import TensorDictBase

from siirl.data_coordinator.tensordict_ops import row_values, set_non_tensor_list


def batch_size(batch: TensorDictBase) -> int:
    """Number of samples (first batch dimension)."""
    if not batch.batch_size:
        raise ValueError("batch has no batch dimension; build it with TensorDict(..., batch_size=[B])")
    return int(batch.batch_size[0])


def get_list(batch: TensorDictBase, key: str, default: Any = ...) -> list[Any]:
    """One value per sample for the field ``key`` (``siirl.data_coordinator.tensordict_ops.row_values``).

    A missing field returns ``[default] * B`` when a default is given, else raises ValueError.
    """
    batch_size(batch)
    return row_values(batch, key) if default is ... else row_values(batch, key, default)


def get_str_list(batch: TensorDictBase, key: str) -> list[str]:
    """One string per sample for ``key`` (values are converted with ``str``)."""
    return [str(v) for v in get_list(batch, key)]


def get_ground_truths(batch: TensorDictBase) -> list[str]:
    """Ground truths from ``ground_truth`` or, as in verl batches, from ``reward_model["ground_truth"]``."""
    if "ground_truth" in batch.keys():  # noqa: SIM118 - keys() works on every tensordict release
        return get_str_list(batch, "ground_truth")
    if "reward_model" in batch.keys():  # noqa: SIM118 - keys() works on every tensordict release
        records = get_list(batch, "reward_model")
        if all(isinstance(r, dict) and "ground_truth" in r for r in records):
            return [str(r["ground_truth"]) for r in records]
    raise ValueError("batch has neither 'ground_truth' nor 'reward_model' entries with a 'ground_truth' key")


def set_list(batch: TensorDictBase, key: str, values: Sequence[Any]) -> None:
    """Store one value per sample so that indexing and splitting the batch keep them aligned."""
    batch_size(batch)
    set_non_tensor_list(batch, key, values)
