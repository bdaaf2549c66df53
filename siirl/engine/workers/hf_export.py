"""A trained policy as a Hugging Face model folder (verl's ``checkpoint.save_contents=[..., 'hf_model']``).

The checkpoint's sharded files are the resume format; this folder is for everything outside siiRL that reads
``from_pretrained`` (evaluation, serving, the next SFT). Weights are the full, unsharded parameters (LoRA
adapters merged in), written with the model's own ``save_pretrained`` next to its tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from torch import nn

from siirl.engine.workers.model_loading import load_tokenizer
from siirl.params.model import ModelConfig

#: Folder of a checkpoint's actor component holding the Hugging Face model (verl's name).
HF_MODEL_DIR = "huggingface"


def save_hf_model(
    hf_model: nn.Module,
    full_parameters: Iterable[tuple[str, torch.Tensor]],
    model_cfg: ModelConfig,
    folder: Path,
    writer: bool,
) -> None:
    """Write ``folder`` from ``writer``'s process; every rank iterates ``full_parameters`` (a collective
    under FSDP), the others keep nothing."""
    state = {name: tensor.detach().to("cpu", copy=True) for name, tensor in full_parameters if writer}
    if not writer:
        return
    hf_model.save_pretrained(str(folder), state_dict=state, safe_serialization=True)
    load_tokenizer(model_cfg).save_pretrained(str(folder))
