"""Rollout with SGLang's offline ``sglang.Engine`` (CUDA), one engine per DAG worker.

The engine runs its scheduler in a child process on the worker's device (``base_gpu_id``); prompts go
in as token ids, weights come from the trainer as in-memory tensors (``update_weights_from_tensor``,
bucketed, cache flushed before the next generation) and, with ``rollout.free_cache_engine``, device
memory is released while the trainer runs (``enable_memory_saver``) and taken back weights first, KV
cache before generation.

SGLang API used: ``Engine(model_path=..., tp_size=..., ...)``, ``Engine.generate(input_ids=...,
sampling_params={...})`` -> ``[{"output_ids": [...], "meta_info": {...}}, ...]``,
``update_weights_from_tensor(named_tensors=..., flush_cache=...)``, ``flush_cache()``,
``release_memory_occupation(tags=...)`` / ``resume_memory_occupation(tags=...)``; for a vision-language
policy ``Engine.generate(..., image_data=[[images] per request])`` with collapsed image placeholders and
``sampling_params["logit_bias"]`` (see ``vision_requests``).

Partial rollouts (``continue_sequences``) send each row's prompt plus its tokens so far, capped at the piece's
length (``max_new_tokens``); a request ends only there or at its end, so a piece cannot stop early for newer
weights and runs ``async_training.chunk_tokens`` tokens. Recording, it asks ``return_logprob=True`` and reads
``meta_info["output_token_logprobs"]``: by SGLang's default log-softmax(logits / T), before any top-k / top-p
cut (``SGLANG_RETURN_ORIGINAL_LOGPROB`` would give them before temperature).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict
from transformers import PreTrainedTokenizerBase

from siirl.device.weight_sync.engine_loaders import sglang_loader
from siirl.engine.rollout.base import ROLLOUT_ENGINES
from siirl.engine.rollout.colocated import ColocatedRolloutEngine
from siirl.engine.rollout.engine_knobs import sglang_knobs
from siirl.engine.rollout.sampled_log_probs import listed_log_probs
from siirl.engine.rollout.sampling import SamplingParams
from siirl.engine.rollout.vision_requests import MULTIMODAL_DATA, NEVER, image_requests
from siirl.engine.rollout.vllm_batch import (
    continuation,
    dtype_name,
    import_engine_package,
    prompt_token_lists,
    responses_to_batch,
    scoped_env,
)
from siirl.engine.rollout.weight_sync import StagedMemory
from siirl.errors import ConfigError
from siirl.params.model import ModelConfig, RolloutConfig

logger = logging.getLogger(__name__)


@ROLLOUT_ENGINES.register("sglang")
class SGLangRolloutEngine(ColocatedRolloutEngine):
    """Arguments as for :class:`~siirl.engine.rollout.hf.HFRolloutEngine`.

    Tensor parallelism is not offered: an SGLang engine spanning several devices must see them all,
    while a DAG worker is pinned to its own device. Use ``rollout.name=vllm`` for rollout TP.
    """

    takes_images = True

    def start(self, model_cfg: ModelConfig, *, local_rank: int, tokenizer: PreTrainedTokenizerBase | None) -> None:
        sglang = import_engine_package("sglang", "sglang", self.backend)
        self.memory_saver = bool(self.cfg.free_cache_engine)
        self.bucket_mb = self.cfg.weight_sync_bucket_mb
        model_path, tokenizer_path = self._read_model(model_cfg, tokenizer)
        args: dict[str, Any] = {
            "model_path": model_path,
            "tokenizer_path": tokenizer_path,
            # Prompts arrive as token ids; a tokenizer is only needed to match stop strings, and by the
            # processor of a multimodal model.
            "skip_tokenizer_init": not self.stop_strings and not self.never_sampled,
            "trust_remote_code": bool(model_cfg.trust_remote_code),
            "tp_size": 1,
            "base_gpu_id": local_rank,
            "dtype": dtype_name(self.dtype),
            "mem_fraction_static": float(self.cfg.gpu_memory_utilization),
            "disable_cuda_graph": bool(self.cfg.enforce_eager),
            "enable_memory_saver": self.memory_saver,
            "random_seed": dist.get_rank() if dist.is_available() and dist.is_initialized() else 0,
            "load_format": str(self.cfg.load_format),
            **sglang_knobs(self.cfg, self.max_response_length),
        }
        with scoped_env(self.backend.rollout_env("sglang", local_rank)):
            self.engine = sglang.Engine(**args)
        staged = bool(self.cfg.multi_stage_wake_up) and (
            "tags" in inspect.signature(self.engine.resume_memory_occupation).parameters
        )
        release = self.engine.release_memory_occupation if self.memory_saver else None
        self.memory = StagedMemory(self.engine.resume_memory_occupation, staged=staged, release=release)
        self._loader = sglang_loader(self.engine)
        self.train_params = SamplingParams.from_config(self.cfg)
        self.val_params = SamplingParams.from_config(self.cfg.val_kwargs)
        logger.info("SGLang rollout engine ready (dtype=%s, memory saver=%s)", self.dtype, self.memory_saver)

    @classmethod
    def check_rollout_config(cls, rollout_cfg: RolloutConfig) -> None:
        """One engine per device: tensor parallelism is refused (before Ray starts, from the config checks).
        So is a quantized engine: its layers would take the trainer's unquantized weights at every sync."""
        if rollout_cfg.quantization is not None:
            raise ConfigError(
                f"bad config: actor_rollout_ref.rollout.quantization={rollout_cfg.quantization} is not implemented "
                "for rollout.name=sglang (its weight sync does not quantize); use rollout.name=vllm"
            )
        tp_size = int(rollout_cfg.tensor_model_parallel_size)
        if tp_size != 1:
            raise ConfigError(
                f"bad config: rollout.name=sglang runs one engine per device (tensor_model_parallel_size=1), got "
                f"{tp_size}; use rollout.name=vllm for tensor-parallel rollout"
            )

    def _sampling_params(self, params: SamplingParams) -> dict[str, Any]:
        greedy = params.greedy
        sampling: dict[str, Any] = {
            "n": 1,  # the engine receives each prompt n times instead
            "max_new_tokens": self.max_response_length,
            "temperature": 0.0 if greedy else params.temperature,
            "top_p": 1.0 if greedy else params.top_p,
            "top_k": -1 if greedy or params.top_k <= 0 else params.top_k,
            "stop_token_ids": list(self.eos_ids),
        }
        if self.stop_strings:
            sampling["stop"] = list(self.stop_strings)
        if self.never_sampled:
            sampling["logit_bias"] = {str(token): NEVER for token in self.never_sampled}
        return sampling

    # ----- weights -----

    def _reset_cache(self) -> None:
        self.engine.flush_cache()

    # ----- generation -----

    def generate(self, batch: TensorDict, validate: bool = False) -> TensorDict:
        prompts = prompt_token_lists(batch)
        params = self.val_params if validate else self.train_params
        self._prepare_generation()
        requests = [r for r in image_requests(batch, prompts, self.hf_config) for _ in range(params.n)]
        images = [(r.get(MULTIMODAL_DATA) or {}).get("image") for r in requests]
        outputs = self.engine.generate(
            input_ids=[r["prompt_token_ids"] for r in requests], sampling_params=self._sampling_params(params),
            **({"image_data": images} if any(images) else {}),
        )
        samples = [list(out["output_ids"]) for out in outputs]
        return responses_to_batch(batch, samples, params.n, self.pad_id, self.max_response_length)

    def continue_sequences(
        self, prompts: TensorDict, max_new_tokens: int, repeats: int = 1, pause: Callable[..., bool] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, None]:
        """A piece of a partial rollout, as the Hugging Face engine's: at most ``max_new_tokens`` more tokens
        after each left-padded row (prompt plus what it has so far), one request per row as in ``generate``
        (SGLang's prefix cache shares a prompt read by its ``repeats`` identical rows). A row has finished when
        ``meta_info["finish_reason"]["type"]`` is ``"stop"`` (end-of-sequence token or stop string), not
        ``"length"`` (the cap).

        ``pause`` is accepted and never asked: ``Engine.generate`` returns whole requests, so a piece ends at
        ``max_new_tokens`` (``async_training.chunk_tokens``, which the config checks require for SGLang)."""
        record = self.records_log_probs and not self.train_params.greedy
        sampling = {**self._sampling_params(self.train_params), "max_new_tokens": max_new_tokens}
        self._prepare_generation()
        asked = {"return_logprob": True} if record else {}
        outputs = self.engine.generate(input_ids=prompt_token_lists(prompts), sampling_params=sampling, **asked)
        samples = [list(out["output_ids"]) for out in outputs]
        finished = [out["meta_info"]["finish_reason"]["type"] == "stop" for out in outputs]
        log_probs = None
        if record:
            log_probs = [listed_log_probs(ids, out["meta_info"].get("output_token_logprobs"))
                         for ids, out in zip(samples, outputs)]
        return continuation(samples, finished, self.pad_id, log_probs)
