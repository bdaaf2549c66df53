"""What the token-list engines (vLLM, SGLang) share: requests out of a padded batch, responses back into
one, the end-of-sequence ids, the optional package and the environment they are built in.

These engines take each prompt as a plain list of token ids (left padding stripped) and answer with the
generated ids per sample; the batch on both sides follows the ``RolloutEngine`` contract, assembled
with the same helpers as the Hugging Face engine. A piece of a partial rollout comes back as the Hugging Face
engine's ``continue_sequences`` answers (``continuation``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

import torch
from tensordict import TensorDict
from transformers import GenerationConfig, PreTrainedTokenizerBase

from siirl.device import DeviceBackend
from siirl.engine.rollout.batch_ops import assemble_sequences, expand_prompts
from siirl.engine.workers.model_loading import model_dir
from siirl.errors import ConfigError, SiirlUserError
from siirl.params.model import ModelConfig

PROMPT_KEYS = ("input_ids", "attention_mask")


def import_engine_package(engine: str, package: str, backend: DeviceBackend) -> ModuleType:
    """The engine's Python package (the launcher refused an engine the device family does not run)."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        hint = backend.rollout_install_hints.get(engine, f"pip install siirl[{engine}]")
        raise SiirlUserError(
            f"rollout.name={engine} needs the '{package}' package ({exc.msg}); fix: {hint}"
        ) from None


@contextlib.contextmanager
def scoped_env(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` while an engine is built (its workers read it then), restore the previous values after."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def eos_token_ids(model_path: Path, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """End-of-sequence ids from the model's generation config, plus the tokenizer's own."""
    try:
        configured = GenerationConfig.from_pretrained(model_path).eos_token_id
    except OSError:
        configured = None
    ids = [] if configured is None else ([configured] if isinstance(configured, int) else list(configured))
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(int(tokenizer.eos_token_id))
    if not ids:
        raise ConfigError(
            f"the model at '{model_path}' defines no end-of-sequence token (generation_config or tokenizer)"
        )
    return ids


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``, the spelling engine configs take."""
    return str(dtype).removeprefix("torch.")


def prompt_token_lists(batch: TensorDict) -> list[list[int]]:
    """Each row's prompt without its left padding."""
    missing = [key for key in PROMPT_KEYS if key not in set(batch.keys())]
    if missing:
        raise ValueError(f"rollout needs prompt fields {missing} (left-padded input_ids / attention_mask)")
    ids, mask = batch["input_ids"].cpu(), batch["attention_mask"].cpu().bool()
    prompts = [row[keep].tolist() for row, keep in zip(ids, mask)]
    empty = [i for i, prompt in enumerate(prompts) if not prompt]
    if empty:
        raise ValueError(f"rollout batch rows {empty[:8]} have an empty prompt (attention_mask all 0)")
    return prompts


def padded_rows(rows: Sequence[Sequence[float]], width: int, fill: float, dtype: torch.dtype) -> torch.Tensor:
    """``(len(rows), width)``: each row's first ``width`` values, then ``fill``."""
    out = torch.full((len(rows), width), fill, dtype=dtype)
    for index, row in enumerate(rows):
        kept = list(row)[:width]
        if kept:
            out[index, : len(kept)] = torch.tensor(kept, dtype=dtype)
    return out


def continuation(
    samples: Sequence[Sequence[int]], finished: Sequence[bool], pad_id: int,
    log_probs: Sequence[Sequence[float]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, None]:
    """``continue_sequences``' answer (see the Hugging Face engine) from the engine's per-row token lists:
    tokens padded to the longest, lengths, which rows ended (end-of-sequence token or stop string, not the
    piece's cap), and the sampled tokens' log-probs; no entropies (these engines return no distribution)."""
    width = max((len(s) for s in samples), default=0)
    tokens = padded_rows(samples, width, pad_id, torch.long)
    lengths = torch.tensor([len(s) for s in samples], dtype=torch.long)
    recorded = None if log_probs is None else padded_rows(log_probs, width, 0.0, torch.float32)
    return tokens, lengths, torch.tensor(list(finished), dtype=torch.bool), recorded, None


def responses_to_batch(
    batch: TensorDict,
    samples: Sequence[Sequence[int]],
    n: int,
    pad_id: int,
    max_response_length: int,
    log_probs: Sequence[Sequence[float]] | None = None,
) -> TensorDict:
    """The ``RolloutEngine.generate`` output for ``samples`` (prompt i's n samples at rows i*n .. i*n+n-1);
    with the sampled tokens' ``log_probs`` also ``rollout_log_probs`` (0 past each response)."""
    rows = batch.batch_size[0] * n
    if len(samples) != rows:
        raise RuntimeError(
            f"the engine returned {len(samples)} samples for {batch.batch_size[0]} prompts x n={n}"
        )
    lengths = torch.tensor([min(len(s), max_response_length) for s in samples], dtype=torch.long)
    responses = padded_rows(samples, max_response_length, pad_id, torch.long)
    expanded = expand_prompts(batch, n)
    prompts = expanded.select(*PROMPT_KEYS).cpu()
    if "position_ids" in set(expanded.keys()):
        prompts["position_ids"] = expanded["position_ids"].cpu()
    out = assemble_sequences(prompts, responses, lengths, pad_id)
    if log_probs is not None:
        recorded = padded_rows(log_probs, max_response_length, 0.0, torch.float32)
        out["rollout_log_probs"] = recorded * out["response_mask"].to(torch.float32)
    for key, value in out.items():
        expanded[key] = value
    return expanded


def engine_model_paths(model_cfg: ModelConfig) -> tuple[str, str]:
    """(model dir, tokenizer dir) as the engines load them."""
    path = str(model_dir(model_cfg))
    return path, str(model_cfg.tokenizer_path or "") or path
