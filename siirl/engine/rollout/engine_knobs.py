"""The ``actor_rollout_ref.rollout.*`` engine knobs of verl's scripts under each library's own argument names.

Only knobs the user set (not None) are passed, so an unset one keeps the engine's default; the
``engine_kwargs.<engine>`` dict is applied last and wins. The HF engine reads none of them.

vLLM (``LLM`` / ``EngineArgs``): ``max_model_len``, ``max_num_batched_tokens``, ``max_num_seqs``,
``enable_chunked_prefill``, ``enable_prefix_caching``, ``disable_log_stats``, ``quantization``,
``compilation_config={"cudagraph_capture_sizes": [...]}``.
SGLang (``Engine`` / ``ServerArgs``): ``context_length``, ``max_prefill_tokens``, ``max_running_requests``,
``chunked_prefill_size=-1`` (chunked prefill off), ``disable_radix_cache``, ``cuda_graph_bs``,
``log_level`` (``quantization`` is refused there: see ``SGLangRolloutEngine.check_rollout_config``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from siirl.params.model import RolloutConfig


def context_length(cfg: RolloutConfig, max_response_length: int) -> int | None:
    """``max_model_len`` as set, else prompt + response limits (verl's rule), else None (the model's)."""
    if cfg.max_model_len is not None:
        return int(cfg.max_model_len)
    if cfg.prompt_length is not None:
        return int(cfg.prompt_length) + int(max_response_length)
    return None


def _set_only(args: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in args.items() if value is not None}


#: vLLM engine arguments that published verl / siiRL scripts set (``rollout.engine_kwargs.vllm.*``) and later vLLM
#: releases renamed: old name -> (new name, the old value as the new one's; None: the new one's default).
VLLM_RENAMED_ARGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # vLLM 0.11 sizes the multimodal processor cache in GiB instead, 0 turning it off
    "disable_mm_preprocessor_cache": ("mm_processor_cache_gb", lambda disabled: 0 if disabled else None),
}


def vllm_renamed(args: dict[str, Any], accepted: set[str]) -> dict[str, Any]:
    """``args`` for a vLLM whose ``EngineArgs`` has the fields ``accepted``: an argument it renamed goes under its
    new name (left out where its value is the new argument's default; an explicit new argument wins)."""
    out = dict(args)
    for old, (new, convert) in VLLM_RENAMED_ARGS.items():
        if old in out and old not in accepted:
            value = convert(out.pop(old))
            if value is not None:
                out.setdefault(new, value)
    return out


def vllm_knobs(cfg: RolloutConfig, max_response_length: int) -> dict[str, Any]:
    args = _set_only({
        "max_model_len": context_length(cfg, max_response_length),
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "max_num_seqs": cfg.max_num_seqs,
        "enable_chunked_prefill": bool(cfg.enable_chunked_prefill),
        "enable_prefix_caching": bool(cfg.enable_prefix_caching),
        "disable_log_stats": bool(cfg.disable_log_stats),
        "quantization": cfg.quantization,
    })
    if cfg.cudagraph_capture_sizes is not None:
        args["compilation_config"] = {"cudagraph_capture_sizes": [int(s) for s in cfg.cudagraph_capture_sizes]}
    return {**args, **dict(cfg.engine_kwargs.vllm)}


def sglang_knobs(cfg: RolloutConfig, max_response_length: int) -> dict[str, Any]:
    args = _set_only({
        "context_length": context_length(cfg, max_response_length),
        "max_prefill_tokens": cfg.max_num_batched_tokens,
        "max_running_requests": cfg.max_num_seqs,
        "chunked_prefill_size": None if cfg.enable_chunked_prefill else -1,
        "disable_radix_cache": not cfg.enable_prefix_caching,
        "cuda_graph_bs": None if cfg.cudagraph_capture_sizes is None else [int(s) for s in cfg.cudagraph_capture_sizes],
        "log_level": "error" if cfg.disable_log_stats else "info",
    })
    return {**args, **dict(cfg.engine_kwargs.sglang)}


def rollout_dtype(model_dtype: str, cfg: RolloutConfig) -> str:
    """The engine's dtype name: ``rollout.dtype``, or the model's where it is ``auto``."""
    return str(model_dtype) if str(cfg.dtype) == "auto" else str(cfg.dtype)
