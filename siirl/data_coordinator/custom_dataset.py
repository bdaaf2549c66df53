"""verl's ``data.custom_cls``: prompts come from the user's own dataset class instead of siiRL's parquet reader.

The class is built as verl builds its ``RLHFDataset``: ``cls(data_files=..., tokenizer=..., processor=None,
config=data)``, and must be a ``torch.utils.data.Dataset`` whose items are verl's: 1-D ``input_ids``,
``attention_mask`` and ``position_ids`` left-padded to ``data.max_prompt_length``, plus ``data_source``
(``data.reward_fn_key``), ``reward_model.ground_truth``, ``index`` (or ``extra_info.index``) and, for
``data.return_raw_chat``, ``raw_prompt``. Filtering over-long prompts is the class's job, as in verl. Each
worker builds the class and reads only the item indices of its own shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from siirl.data_coordinator.errors import DataError
from siirl.errors import ConfigError
from siirl.params.data import DataConfig
from siirl.user_files import load_from_user_file

SECTION = "data.custom_cls"
PROMPT_TENSORS = ("input_ids", "attention_mask", "position_ids")


def dataset_class(config: DataConfig) -> type[Dataset] | None:
    """The class ``data.custom_cls`` names (None when unset); one ``ConfigError`` line when it is not there."""
    path = config.custom_cls.path
    if not path:
        return None
    if not config.custom_cls.name:
        raise ConfigError(f"{SECTION}.name is empty; give the name of the dataset class in {path}")
    cls = load_from_user_file(path, config.custom_cls.name, SECTION)
    if not (isinstance(cls, type) and issubclass(cls, Dataset)):
        raise ConfigError(f"{SECTION}.name: {config.custom_cls.name!r} in {path} is not a torch.utils.data.Dataset class")
    return cls


def build_dataset(cls: type[Dataset], files: Sequence[str], tokenizer: Any, config: DataConfig) -> Dataset:
    return cls(data_files=list(files), tokenizer=tokenizer, processor=None, config=config)


def item_tensors(items: list[dict[str, Any]], row_ids: np.ndarray, config: DataConfig, cls_name: str) -> dict:
    """The prompt tensors of dataset items ``row_ids``, stacked; one line naming the item when one is off."""
    tensors = {}
    for key in PROMPT_TENSORS:
        values = [item.get(key) for item in items]
        bad = next(
            (i for i, v in enumerate(values)
             if not isinstance(v, torch.Tensor) or tuple(v.shape) != (config.max_prompt_length,)),
            None,
        )
        if bad is not None:
            raise DataError(
                f"{cls_name} item {int(row_ids[bad])}: {key} must be a 1-D tensor of data.max_prompt_length="
                f"{config.max_prompt_length} tokens (left-padded), got {_describe(values[bad])}"
            )
        tensors[key] = torch.stack(values).long()
    return tensors


def _describe(value: Any) -> str:
    return f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
