"""``vllm.LLM``: the offline engine, in-process, recording every call in ``vllm.CALLS`` in order.

Modelled behaviour: engine arguments checked like ``EngineArgs`` (an unknown one is a ``TypeError``;
``max_lora_rank`` must be one of vLLM's allowed values; ``load_format="dummy"`` starts from random weights);
a ``lora_request`` needs ``enable_lora`` and runs its adapter folder over the base weights (``_adapter``);
``distributed_executor_backend="external_launcher"`` needs an initialised ``torch.distributed`` world
divisible by the TP size; a ``quantization`` engine loads new weights only inside the weight-update window
(``collective_rpc("start_weight_update")`` ... ``"finish_weight_update"``; fp8 rounds them on closing);
``SamplingParams(logprobs=k)`` returns per generated token the sampled token's and the top ``k`` log-probs
(``vllm.logprobs``) as ``logprobs_mode`` defines them (``raw_logprobs`` by default, as in vLLM), ``k`` at most
``max_logprobs``; sleep mode must be enabled to sleep; generating while weights or KV cache are released, or
loading weights while they are released, fails; ``wake_up(tags=...)`` brings back parts; stop strings with
``skip_tokenizer_init=True`` are silently not matched; the external launcher reads torchrun's ``RANK``.
Where the host has no accelerator the fake is vLLM's CPU build (``vllm.platforms``, ``_cpu_build``).
"""

from __future__ import annotations

import importlib
import itertools
import os
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed as dist
from vllm import _cpu_build as cpu_build
from vllm._adapter import applied, deltas, read_adapter
from vllm._tiny_lm import TinyLM
from vllm.logprobs import Logprob
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.platforms import current_platform
from vllm.sampling_params import SamplingParams

CALLS: list[tuple[str, Any]] = []
#: Environment variables whose values at construction time are recorded with the "LLM" call.
OBSERVED_ENV = ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_USE_V1", "RANK", "LOCAL_RANK", "ASCEND_RT_VISIBLE_DEVICES",
                "CUDA_VISIBLE_DEVICES")
SLEEP_TAGS = ("weights", "kv_cache")
#: Further ``EngineArgs`` fields the fake accepts (and records), with vLLM's defaults.
ENGINE_ARGS: dict[str, Any] = {
    "max_model_len": None, "max_num_batched_tokens": None, "max_num_seqs": None, "enable_chunked_prefill": None,
    "enable_prefix_caching": None, "disable_log_stats": False, "compilation_config": None,
    "mm_processor_cache_gb": 4, "quantization": None, "worker_extension_cls": "",
    "logprobs_mode": "raw_logprobs", "max_logprobs": 20, "kv_cache_memory_bytes": None,
}
#: What ``CompletionOutput.logprobs`` holds (vLLM >= 0.10.1); the fake reports the two log-prob modes.
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")
#: Some of vLLM's ``QUANTIZATION_METHODS`` (an unknown method is refused when the engine is configured).
QUANTIZATION_METHODS = ("fp8", "torchao", "awq", "gptq", "bitsandbytes", "compressed-tensors", "modelopt")
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
LOAD_FORMATS = ("auto", "pt", "safetensors", "npcache", "dummy")


class _Model:
    """What ``apply_model`` hands to the function: the model with vLLM's ``load_weights``."""

    packed_modules_mapping = cpu_build.PACKED_MODULES

    def __init__(self, llm: LLM, lm: TinyLM) -> None:
        self._llm, self.lm = llm, lm

    def named_modules(self, *args, **kwargs):
        return self.lm.model.named_modules(*args, **kwargs)

    def load_weights(self, weights):
        if "weights" in self._llm.released:
            raise RuntimeError("load_weights while the weights are released by sleep(); wake_up first")
        weights = list(weights)
        packed = [t for name, t in weights if self._llm.cpu and cpu_build.is_packed_linear(name)]
        if packed:
            raise AssertionError(f"Attempted to load weight ({packed[0].shape}) into parameter (torch.Size([0]))")
        if self._llm.args["quantization"] and not self._llm.updating:
            raise AttributeError("'Parameter' object has no attribute 'weight_loader'")
        CALLS.append(("load_weights", [(n, tuple(t.shape), t.dtype) for n, t in weights]))
        return self.lm.load_weights(weights)


class _Worker:
    """The worker methods ``collective_rpc`` reaches: vLLM's weight-update window (vLLM >= 0.22), inside which
    quantized layers take checkpoint-format weights and are quantized again when it closes; and, as vLLM
    does, the methods of ``worker_extension_cls`` (a qualified class name mixed into the worker class), which
    see the worker's ``rank`` (the global rank under the external launcher), ``device`` and ``model_runner``."""

    def __init__(self, llm: LLM) -> None:
        self._llm = llm
        external = llm.args["distributed_executor_backend"] == "external_launcher"
        self.rank = self.local_rank = dist.get_rank() if external else 0
        self.device = torch.device("cpu")
        self.model_runner = SimpleNamespace(model=llm.model, reload_weights=lambda **kw: self.reload_weights(**kw))

    @staticmethod
    def with_extension(qualname: str) -> type:
        if not qualname:
            return _Worker
        module, _, name = qualname.rpartition(".")
        return type("Worker", (_Worker, getattr(importlib.import_module(module), name)), {})

    def reload_weights(self, weights_iterator=None, weights_path: str | None = None,
                       is_checkpoint_format: bool = True) -> None:
        """vLLM's in-place reload: each layer processed again (quantized, re-packed) from this call's tensors."""
        if "weights" in self._llm.released:
            raise RuntimeError("reload_weights while the weights are released by sleep(); wake_up first")
        weights = list(weights_iterator or [])
        CALLS.append(("reload_weights", [(n, tuple(t.shape), t.dtype) for n, t in weights]))
        cpu_build.reload(self._llm.lm.params, self._llm.lm.load_weights, weights)
        self._llm.quantize()

    def start_weight_update(self) -> None:
        """vLLM 0.32: a session of the configured weight-transfer engine (``weight_transfer_config``)."""
        if self._llm.args.get("weight_transfer_config") is None:
            raise RuntimeError("Weight transfer not configured. Please set weight_transfer_config to enable "
                               "weight transfer.")
        if self._llm.updating:
            raise RuntimeError("start_weight_update: a weight update is already in progress")
        CALLS.append(("start_weight_update", ()))
        self._llm.updating = True

    def finish_weight_update(self) -> None:
        if not self._llm.updating:
            raise RuntimeError("finish_weight_update without start_weight_update")
        CALLS.append(("finish_weight_update", ()))
        self._llm.updating = False
        self._llm.quantize()


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
        load_format: str = "auto",
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        max_loras: int = 1,
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
            "load_format": load_format, "enable_lora": enable_lora, "max_lora_rank": max_lora_rank,
            "max_loras": max_loras,
        }
        env = {key: os.environ.get(key) for key in OBSERVED_ENV}
        CALLS.append(("LLM", {**args, "env": env}))
        self.cpu = current_platform.is_cpu()
        if self.cpu and enable_sleep_mode:
            cpu_build.refuse_sleep_mode()
        if self.cpu and args["kv_cache_memory_bytes"] is None:
            cpu_build.check_host_share(gpu_memory_utilization)
        if distributed_executor_backend == "external_launcher":
            int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])  # torchrun's variables, as vLLM reads them
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
        if self.args["quantization"] not in (None, *QUANTIZATION_METHODS):
            raise ValueError(f"Unknown quantization method: {self.args['quantization']}")
        if load_format not in LOAD_FORMATS:
            raise ValueError(f"unknown load_format {load_format!r}")
        if self.args["logprobs_mode"] not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode={self.args['logprobs_mode']!r}: the fake reports {LOGPROBS_MODES}")
        if max_lora_rank not in MAX_LORA_RANKS:
            raise ValueError(f"max_lora_rank={max_lora_rank} is not one of {MAX_LORA_RANKS}")
        self.lm = TinyLM(model, dtype)
        if self.cpu:
            torch.set_num_threads = cpu_build.skip_set_num_threads
            cpu_build.PackedHead(self.lm.model.get_output_embeddings())
        if load_format == "dummy":
            with torch.no_grad():
                for param in self.lm.params.values():
                    param.uniform_(-1e-3, 1e-3)
        self.updating = False
        self.quantize()
        self._adapters: dict[int, dict[str, torch.Tensor]] = {}
        self.model = _Model(self, self.lm)
        self._worker = _Worker.with_extension(self.args["worker_extension_cls"])(self)
        self._seed = 0 if seed is None else seed
        self._request_ids = itertools.count()
        runner = SimpleNamespace(model=self.model)
        worker = SimpleNamespace(worker=SimpleNamespace(model_runner=runner))
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=worker))

    def quantize(self) -> None:
        """``quantization="fp8"``: the weight matrices take fp8 (e4m3) values, as vLLM's online fp8 layers
        hold them after loading."""
        if self.args["quantization"] != "fp8":
            return
        with torch.no_grad():
            for param in self.lm.params.values():
                if param.dim() == 2:
                    param.copy_(param.to(torch.float8_e4m3fn).to(param.dtype))

    def collective_rpc(self, method: str | Callable[..., Any], timeout: float | None = None, args: tuple = (),
                       kwargs: dict[str, Any] | None = None) -> list[Any]:
        if isinstance(method, str) and not hasattr(_Worker, method):  # an extension method: recorded
            CALLS.append(("collective_rpc", {"method": method, "args": args, "kwargs": kwargs}))
        call = method if callable(method) else getattr(self._worker, method)
        return [call(*args, **(kwargs or {}))]

    def apply_model(self, func: Callable[[Any], Any]) -> list[Any]:
        CALLS.append(("apply_model", ()))
        return [func(self.model)]

    def generate(
        self, prompts: Sequence[dict], sampling_params: SamplingParams | None = None, use_tqdm: bool = True,
        lora_request: Any = None,
    ) -> list[RequestOutput]:
        if self.released:
            raise RuntimeError(f"generate while {sorted(self.released)} are released by sleep(); wake_up first")
        params = sampling_params or SamplingParams()
        update = self._adapter_update(lora_request)
        if params.logprobs is not None and params.logprobs > self.args["max_logprobs"]:
            raise ValueError(f"Requested sample logprobs of {params.logprobs}, which is greater than max allowed: "
                             f"{self.args['max_logprobs']}")
        CALLS.append(("generate", {"prompts": [list(p["prompt_token_ids"]) for p in prompts], "params": params,
                                   "lora_request": lora_request}))
        with applied(self.lm.params, update):
            return self._generate(prompts, params)

    def _adapter_update(self, request: Any) -> dict[str, torch.Tensor]:
        """The weight updates of ``request``'s adapter, read once per id as vLLM's adapter cache does."""
        if request is None:
            return {}
        if not self.args["enable_lora"]:
            raise ValueError("LoRA is not enabled: build the LLM with enable_lora=True")
        if request.lora_int_id not in self._adapters:
            if len(self._adapters) >= self.args["max_loras"]:
                self._adapters.pop(next(iter(self._adapters)))  # least recently added goes, as the LRU
            config, tensors = read_adapter(request.lora_path, self.args["max_lora_rank"])
            CALLS.append(("load_lora", {"id": request.lora_int_id, "path": request.lora_path, "r": config["r"],
                                        "tensors": sorted(tensors)}))
            self._adapters[request.lora_int_id] = deltas(config, tensors)
        return self._adapters[request.lora_int_id]

    def _generate(self, prompts: Sequence[dict], params: SamplingParams) -> list[RequestOutput]:
        outputs = []
        for prompt in prompts:
            request_id = next(self._request_ids)
            generator = torch.Generator().manual_seed(
                (params.seed if params.seed is not None else self._seed) * 100003 + request_id
            )
            ids, images = self._multimodal(prompt)
            samples = self.lm.sample(
                ids, params.n, temperature=params.temperature, top_p=params.top_p,
                top_k=params.top_k, max_tokens=params.max_tokens, stop_token_ids=params.stop_token_ids,
                generator=generator, images=images, logit_bias=params.logit_bias,
                logprobs_mode=None if params.logprobs is None else self.args["logprobs_mode"],
            )
            completions = [
                self._completion(index, tokens, reason, steps, params.logprobs)
                for index, (tokens, reason, steps) in enumerate(samples)
            ]
            outputs.append(RequestOutput(str(request_id), None, list(prompt["prompt_token_ids"]), None, completions))
        return outputs

    @staticmethod
    def _completion(
        index: int, tokens: list[int], reason: str, steps: list[torch.Tensor], top: int | None
    ) -> CompletionOutput:
        """With ``logprobs=top`` requested, each token's ``{token_id: Logprob}``: the sampled one first, then the
        step's ``top`` most likely (vLLM's ``SampleLogprobs``), and the sum of the sampled ones."""
        logprobs = None
        if top is not None:
            logprobs = []
            for token, step in zip(tokens, steps):
                order = step.argsort(descending=True)
                ranks = torch.empty_like(order).scatter_(0, order, torch.arange(1, len(order) + 1))
                chosen = [token, *(t for t in order[:top].tolist() if t != token)]
                logprobs.append({t: Logprob(float(step[t]), int(ranks[t])) for t in chosen})
        cumulative = None if logprobs is None else sum(step[t].logprob for t, step in zip(tokens, logprobs))
        stop = tokens[-1] if reason == "stop" else None
        return CompletionOutput(index, "", tokens, cumulative, logprobs, reason, stop)

    def _multimodal(self, prompt: dict) -> tuple[list[int], dict | None]:
        """As vLLM's input processing: images in ``multi_modal_data`` need the tokenizer and processor."""
        ids = list(prompt["prompt_token_ids"])
        data = prompt.get("multi_modal_data")
        if not data:
            return ids, None
        if self.skip_tokenizer_init:
            raise ValueError("multimodal inputs need the tokenizer and processor (skip_tokenizer_init=True)")
        return self.lm.expand_images(ids, data["image"])

    def sleep(self, level: int = 1) -> None:
        if self.cpu:  # the CPU worker logs that sleep mode is not supported and does nothing
            return
        if not self.enable_sleep_mode:
            raise RuntimeError("Sleep mode is not enabled in the model config")
        if level not in (1, 2):
            raise ValueError(f"sleep level must be 1 or 2, got {level}")
        CALLS.append(("sleep", level))
        self.released = set(SLEEP_TAGS)

    def wake_up(self, tags: list[str] | None = None) -> None:
        if self.cpu:
            return
        if tags is not None and not set(tags) <= set(SLEEP_TAGS):
            raise ValueError(f"unknown wake_up tags {tags}")
        CALLS.append(("wake_up", None if tags is None else list(tags)))
        self.released -= set(SLEEP_TAGS if tags is None else tags)

    def reset_prefix_cache(self) -> bool:
        CALLS.append(("reset_prefix_cache", ()))
        return True
