"""``vllm.LLM``: the offline engine, in-process, recording every call in ``vllm.CALLS`` in order.

Modelled behaviour: engine arguments checked like ``EngineArgs`` (an unknown one is a ``TypeError``);
``distributed_executor_backend="external_launcher"`` needs an initialised ``torch.distributed`` world
divisible by the TP size; sleep mode must be enabled to sleep; generating while weights or KV cache are
released, or loading weights while they are released, fails; ``wake_up(tags=...)`` brings back parts.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed as dist
from vllm._tiny_lm import TinyLM
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.sampling_params import SamplingParams

CALLS: list[tuple[str, Any]] = []
#: Environment variables whose values at construction time are recorded with the "LLM" call.
OBSERVED_ENV = ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_USE_V1", "LOCAL_RANK", "ASCEND_RT_VISIBLE_DEVICES",
                "CUDA_VISIBLE_DEVICES")
SLEEP_TAGS = ("weights", "kv_cache")
#: Further ``EngineArgs`` fields the fake accepts (and records), with vLLM's defaults.
ENGINE_ARGS: dict[str, Any] = {
    "max_model_len": None, "max_num_batched_tokens": None, "max_num_seqs": None, "enable_chunked_prefill": None,
    "enable_prefix_caching": None, "disable_log_stats": False, "compilation_config": None,
    "disable_mm_preprocessor_cache": False,
}


class _Model:
    """What ``apply_model`` hands to the function: the model with vLLM's ``load_weights``."""

    def __init__(self, llm: LLM, lm: TinyLM) -> None:
        self._llm, self.lm = llm, lm

    def load_weights(self, weights):
        if "weights" in self._llm.released:
            raise RuntimeError("load_weights while the weights are released by sleep(); wake_up first")
        weights = list(weights)
        CALLS.append(("load_weights", [(n, tuple(t.shape), t.dtype) for n, t in weights]))
        return self.lm.load_weights(weights)


class LLM:
    def __init__(
        self,
        model: str,
        *,
        tokenizer: str | None = None,
        skip_tokenizer_init: bool = False,
        trust_remote_code: bool = False,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        seed: int | None = 0,
        gpu_memory_utilization: float = 0.9,
        enforce_eager: bool = False,
        enable_sleep_mode: bool = False,
        distributed_executor_backend: str | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = sorted(set(kwargs) - set(ENGINE_ARGS))
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword arguments {unknown}")
        args = {
            **ENGINE_ARGS, **kwargs,
            "model": model, "tokenizer": tokenizer, "skip_tokenizer_init": skip_tokenizer_init,
            "trust_remote_code": trust_remote_code, "tensor_parallel_size": tensor_parallel_size, "dtype": dtype,
            "seed": seed, "gpu_memory_utilization": gpu_memory_utilization, "enforce_eager": enforce_eager,
            "enable_sleep_mode": enable_sleep_mode, "distributed_executor_backend": distributed_executor_backend,
        }
        env = {key: os.environ.get(key) for key in OBSERVED_ENV}
        CALLS.append(("LLM", {**args, "env": env}))
        if distributed_executor_backend == "external_launcher":
            if not dist.is_initialized():
                raise RuntimeError("external_launcher needs torch.distributed to be initialised by the launcher")
            if dist.get_world_size() % tensor_parallel_size:
                raise ValueError("world size must be a multiple of tensor_parallel_size")
        elif tensor_parallel_size != 1:
            raise ValueError("the fake runs tensor_parallel_size > 1 only with external_launcher")
        self.args = args
        self.enable_sleep_mode = enable_sleep_mode
        self.skip_tokenizer_init = skip_tokenizer_init
        self.released: set[str] = set()
        self.lm = TinyLM(model, dtype)
        self.model = _Model(self, self.lm)
        self._seed = 0 if seed is None else seed
        self._request_ids = itertools.count()
        runner = SimpleNamespace(model=self.model)
        worker = SimpleNamespace(worker=SimpleNamespace(model_runner=runner))
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=worker))

    def apply_model(self, func: Callable[[Any], Any]) -> list[Any]:
        CALLS.append(("apply_model", ()))
        return [func(self.model)]

    def generate(
        self, prompts: Sequence[dict], sampling_params: SamplingParams | None = None, use_tqdm: bool = True, **_: Any
    ) -> list[RequestOutput]:
        if self.released:
            raise RuntimeError(f"generate while {sorted(self.released)} are released by sleep(); wake_up first")
        params = sampling_params or SamplingParams()
        if self.skip_tokenizer_init and (params.stop or params.detokenize):
            raise ValueError("stop strings / detokenize need the tokenizer (skip_tokenizer_init=True)")
        CALLS.append(("generate", {"prompts": [list(p["prompt_token_ids"]) for p in prompts], "params": params}))
        outputs = []
        for prompt in prompts:
            request_id = next(self._request_ids)
            generator = torch.Generator().manual_seed(
                (params.seed if params.seed is not None else self._seed) * 100003 + request_id
            )
            samples = self.lm.sample(
                list(prompt["prompt_token_ids"]), params.n, temperature=params.temperature, top_p=params.top_p,
                top_k=params.top_k, max_tokens=params.max_tokens, stop_token_ids=params.stop_token_ids,
                generator=generator,
            )
            completions = [
                CompletionOutput(index, "", tokens, None, None, reason, tokens[-1] if reason == "stop" else None)
                for index, (tokens, reason) in enumerate(samples)
            ]
            outputs.append(RequestOutput(str(request_id), None, list(prompt["prompt_token_ids"]), None, completions))
        return outputs

    def sleep(self, level: int = 1) -> None:
        if not self.enable_sleep_mode:
            raise RuntimeError("Sleep mode is not enabled in the model config")
        if level not in (1, 2):
            raise ValueError(f"sleep level must be 1 or 2, got {level}")
        CALLS.append(("sleep", level))
        self.released = set(SLEEP_TAGS)

    def wake_up(self, tags: list[str] | None = None) -> None:
        if tags is not None and not set(tags) <= set(SLEEP_TAGS):
            raise ValueError(f"unknown wake_up tags {tags}")
        CALLS.append(("wake_up", None if tags is None else list(tags)))
        self.released -= set(SLEEP_TAGS if tags is None else tags)

    def reset_prefix_cache(self) -> bool:
        CALLS.append(("reset_prefix_cache", ()))
        return True
