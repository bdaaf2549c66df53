"""What the in-process accelerator engines (vLLM, SGLang) share: staged wake-up, bucketed weight streaming
from the trainer, and dropping prefix caches computed with the previous weights."""

from __future__ import annotations

import logging
import sys
from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

import torch
from transformers import AutoConfig

from siirl.device.weight_sync.buckets import LayerOf, NamedTensors, stream_weights
from siirl.engine.rollout.base import ModelRolloutEngine
from siirl.engine.rollout.engine_knobs import rollout_dtype
from siirl.engine.rollout.vision_requests import vision_token_ids
from siirl.engine.rollout.vllm_batch import engine_model_paths, eos_token_ids
from siirl.engine.rollout.weight_sync import StagedMemory
from siirl.engine.workers.model_loading import load_tokenizer, resolve_dtype

logger = logging.getLogger(__name__)


class ColocatedRolloutEngine(ModelRolloutEngine):
    """Subclasses set ``memory`` (a StagedMemory over the engine's own release / resume calls), ``bucket_mb``,
    ``dtype`` and ``_loader`` (one bucket into the engine) and implement ``_reset_cache``; they call
    ``_prepare_generation`` first thing in ``generate``."""

    memory: StagedMemory
    bucket_mb: int
    dtype: torch.dtype
    _cache_stale: bool = False
    #: The engine's layer of each weight name (fused layers), where a bucket must hold whole layers.
    layer_of: LayerOf | None = None
    #: Rows per ``continue_sequences`` call of a partial rollout: all of a piece's, as the engine batches and
    #: schedules its requests itself (the Hugging Face engine takes ``rollout.micro_batch_size``).
    micro_batch_size: int = sys.maxsize

    def _read_model(self, model_cfg: Any, tokenizer: Any) -> tuple[str, str]:
        """The model's dtype, tokenizer, pad and end ids, config and never-sampled (vision) tokens, as both
        engines need them before they start; returns the model's and the tokenizer's paths for the engine."""
        self.dtype = resolve_dtype(rollout_dtype(model_cfg.dtype, self.cfg), self.backend)
        model_path, tokenizer_path = engine_model_paths(model_cfg)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model_cfg)
        self.pad_id = int(self.tokenizer.pad_token_id)
        self.eos_ids = eos_token_ids(model_path, self.tokenizer)
        self.hf_config = AutoConfig.from_pretrained(model_path, trust_remote_code=bool(model_cfg.trust_remote_code))
        self.never_sampled = vision_token_ids(self.hf_config)
        return model_path, tokenizer_path

    _loader: Callable[[NamedTensors], Any]

    def _load(self, bucket: NamedTensors) -> None:
        """Hand one bucket of (name, tensor) pairs to the engine's weight-loading path."""
        self._loader(bucket)

    @abstractmethod
    def _reset_cache(self) -> None:
        """Forget cached prompt prefixes (their KV was computed with the old weights)."""

    def sleep(self) -> None:
        self.memory.release()

    def wake_up(self) -> None:
        """Weights only: the KV cache comes back in ``generate``, after any weight sync."""
        self.memory.ensure(StagedMemory.WEIGHTS)

    @torch.no_grad()
    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.memory.ensure(StagedMemory.WEIGHTS)
        sent = stream_weights(named_tensors, self._load, self.bucket_mb, self.dtype, self.layer_of)
        self._cache_stale = True
        logger.debug("streamed %d tensors into %s", sent, type(self).__name__)

    def _prepare_generation(self) -> None:
        self.memory.ensure(StagedMemory.WEIGHTS)
        self.memory.ensure(StagedMemory.KV_CACHE)
        if self._cache_stale:
            self._reset_cache()
            self._cache_stale = False
