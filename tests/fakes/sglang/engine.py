"""``sglang.Engine``: the offline engine, recording every call in ``sglang.CALLS`` in order.

Modelled behaviour: ``ServerArgs`` fields checked (an unknown one is a ``TypeError``); sampling
parameters checked like SGLang's ``SamplingParams`` (an unknown key is a ``TypeError``, stop strings
need the tokenizer); memory release/resume need ``enable_memory_saver``; generating while weights or KV
cache are released, or updating weights while they are released, fails; weight updates over a
``torch.distributed`` group are ``_weights_group``'s; ``return_logprob=True`` adds
``meta_info["output_token_logprobs"]``, one ``(logprob, token_id, None)`` per generated token (no text unless
``return_text_in_logprobs``): by SGLang's default log-softmax(logits / T) with any logit bias, before the
top-k / top-p cut.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from sglang._weights_group import DistributedWeights
from transformers import AutoTokenizer
from vllm._tiny_lm import TinyLM  # the same tiny-model core as the fake vllm (tests/fakes)

CALLS: list[tuple[str, Any]] = []
SERVER_ARGS = {
    "model_path": None, "tokenizer_path": None, "skip_tokenizer_init": False, "trust_remote_code": False,
    "tp_size": 1, "base_gpu_id": 0, "dtype": "auto", "mem_fraction_static": None, "disable_cuda_graph": False,
    "enable_memory_saver": False, "random_seed": None, "log_level": "error", "context_length": None, "load_format": "auto",
    "max_prefill_tokens": 16384, "max_running_requests": None, "chunked_prefill_size": None,
    "disable_radix_cache": False, "cuda_graph_bs": None, "attention_backend": None,
}
SAMPLING_KEYS = {"n", "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
                 "ignore_eos", "skip_special_tokens", "sampling_seed", "logit_bias"}
MEMORY_TAGS = ("weights", "kv_cache")


class Engine(DistributedWeights):
    _calls = CALLS

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(SERVER_ARGS))
        if unknown:
            raise TypeError(f"ServerArgs.__init__() got unexpected keyword arguments {unknown}")
        self.server_args = {**SERVER_ARGS, **kwargs}
        CALLS.append(("Engine", dict(self.server_args)))
        args = self.server_args
        self.lm = TinyLM(args["model_path"], args["dtype"])
        self.tokenizer = None if args["skip_tokenizer_init"] else AutoTokenizer.from_pretrained(
            args["tokenizer_path"] or args["model_path"]
        )
        self.released: set[str] = set()
        self._weight_groups = {}
        self._rids = itertools.count()

    def _check_sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(params) - SAMPLING_KEYS)
        if unknown:
            raise TypeError(f"SamplingParams.__init__() got unexpected keyword arguments {unknown}")
        if params.get("stop") and self.tokenizer is None:
            raise ValueError("stop strings need the tokenizer (skip_tokenizer_init=True)")
        return {"n": 1, "max_new_tokens": 128, "temperature": 1.0, "top_p": 1.0, "top_k": -1,
                "stop_token_ids": [], **params}

    def generate(
        self, prompt=None, sampling_params: dict | None = None, input_ids=None, image_data=None,
        return_logprob: bool = False, **_: Any
    ):
        if self.released:
            raise RuntimeError(f"generate while {sorted(self.released)} are released; resume_memory_occupation first")
        if prompt is not None or input_ids is None:
            raise ValueError("the fake takes token ids (input_ids=...) only")
        single = bool(input_ids) and isinstance(input_ids[0], int)
        batch = [input_ids] if single else [list(p) for p in input_ids]
        params = self._check_sampling(dict(sampling_params or {}))
        images = list(image_data) if image_data is not None else [None] * len(batch)
        if any(images) and self.tokenizer is None:
            raise ValueError("image_data needs the tokenizer and processor (skip_tokenizer_init=True)")
        CALLS.append(("generate", {"input_ids": batch, "sampling_params": dict(params), "image_data": image_data,
                                   "return_logprob": return_logprob}))
        seed = self.server_args["random_seed"] or 0
        bias = {int(token): value for token, value in (params.get("logit_bias") or {}).items()}
        # Identical requests (a prompt sent n times, with the same images) are decoded side by side.
        groups: dict[tuple, list[int]] = {}
        for index, ids in enumerate(batch):
            key = (tuple(ids), tuple(id(i) for i in images[index] or ()))
            groups.setdefault(key, []).extend([index] * params["n"])
        results: list[dict | None] = [None] * (len(batch) * params["n"])
        for (ids, _), indices in groups.items():
            rid = next(self._rids)
            prompt_ids, processed = list(ids), None
            if images[indices[0]]:
                prompt_ids, processed = self.lm.expand_images(prompt_ids, images[indices[0]])
            samples = self.lm.sample(
                prompt_ids, len(indices), temperature=params["temperature"], top_p=params["top_p"],
                top_k=params["top_k"], max_tokens=params["max_new_tokens"], stop_token_ids=params["stop_token_ids"],
                generator=torch.Generator().manual_seed(seed * 100003 + rid), images=processed, logit_bias=bias,
                logprobs_mode="temperature_logprobs" if return_logprob else None,
            )
            slots = [i * params["n"] + k for i in dict.fromkeys(indices) for k in range(params["n"])]
            for slot, (tokens, reason, steps) in zip(slots, samples):
                finish = {"type": "stop", "matched": tokens[-1]} if reason == "stop" else {
                    "type": "length", "length": len(tokens)}
                out = {"output_ids": tokens, "meta_info": {
                    "id": f"{rid}-{slot}", "finish_reason": finish, "prompt_tokens": len(ids),
                    "completion_tokens": len(tokens)}}
                if return_logprob:
                    out["meta_info"]["output_token_logprobs"] = [
                        (float(step[token]), token, None) for token, step in zip(tokens, steps)]
                if self.tokenizer is not None:
                    out["text"] = self.tokenizer.decode(tokens)
                results[slot] = out
        return results[0] if single else results

    def update_weights_from_tensor(self, named_tensors, load_format: str | None = None, flush_cache: bool = True):
        if "weights" in self.released:
            raise RuntimeError("update_weights_from_tensor while the weights are released")
        named_tensors = list(named_tensors)
        CALLS.append(("update_weights_from_tensor", {
            "tensors": [(n, tuple(t.shape), t.dtype) for n, t in named_tensors], "flush_cache": flush_cache}))
        self.lm.load_weights(named_tensors)
        return True, "Succeeded to update model weights."

    def flush_cache(self):
        CALLS.append(("flush_cache", ()))

    def _check_memory_call(self, tags: list[str] | None) -> set[str]:
        if not self.server_args["enable_memory_saver"]:
            raise RuntimeError("memory release/resume needs enable_memory_saver=True")
        if tags is not None and not set(tags) <= set(MEMORY_TAGS):
            raise ValueError(f"unknown memory tags {tags}")
        return set(MEMORY_TAGS if tags is None else tags)

    def release_memory_occupation(self, tags: list[str] | None = None):
        parts = self._check_memory_call(tags)
        CALLS.append(("release_memory_occupation", None if tags is None else list(tags)))
        self.released |= parts

    def resume_memory_occupation(self, tags: list[str] | None = None):
        parts = self._check_memory_call(tags)
        CALLS.append(("resume_memory_occupation", None if tags is None else list(tags)))
        self.released -= parts

    def shutdown(self) -> None:
        CALLS.append(("shutdown", ()))
