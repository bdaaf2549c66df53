"""Bucketed weight streaming, the weights-first / KV-cache-later wake order, and every transport's last hop
into the fake vLLM / SGLang engines through their weight-update APIs."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2ForCausalLM

from siirl.device.weight_sync import make_weight_sync
from siirl.device.weight_sync.buckets import iter_buckets, stream_weights
from siirl.device.weight_sync.engine_loaders import sglang_loader, vllm_loader
from siirl.engine.rollout.weight_sync import StagedMemory

from .accel_testutils import tiny_qwen2_config


def named(*numels: int, dtype=torch.float32):
    return [(f"t{i}", torch.zeros(n, dtype=dtype)) for i, n in enumerate(numels)]


def test_buckets_respect_the_byte_limit_and_order():
    buckets = list(iter_buckets(named(1000, 1000, 2500, 200), max_bytes=8000))
    assert [[name for name, _ in b] for b in buckets] == [["t0", "t1"], ["t2"], ["t3"]]  # 10 kB t2 alone


def test_buckets_cast_floating_tensors_only():
    tensors = [("w", torch.ones(4)), ("step", torch.ones(4, dtype=torch.int64))]
    (bucket,) = iter_buckets(tensors, max_bytes=1 << 20, dtype=torch.bfloat16)
    assert [t.dtype for _, t in bucket] == [torch.bfloat16, torch.int64]


def test_stream_counts_and_rejects_bad_input():
    loaded = []
    assert stream_weights(named(10, 10, 10), loaded.append, bucket_mb=1) == 3 and len(loaded) == 1
    with pytest.raises(ValueError, match="no tensors"):
        stream_weights([], loaded.append, bucket_mb=1)


def test_staged_memory_brings_parts_back_in_order():
    calls = []
    memory = StagedMemory(lambda tags=None: calls.append(tags), staged=True, release=lambda: calls.append("release"))
    memory.ensure(StagedMemory.WEIGHTS)  # nothing released yet
    memory.release()
    memory.release()  # released already
    memory.ensure(StagedMemory.WEIGHTS)
    memory.ensure(StagedMemory.WEIGHTS)
    memory.ensure(StagedMemory.KV_CACHE)
    assert calls == ["release", ["weights"], ["kv_cache"]] and not memory.released

    whole = []
    memory = StagedMemory(lambda tags=None: whole.append(tags), staged=False, release=lambda: None)
    memory.release()
    memory.ensure(StagedMemory.WEIGHTS)
    memory.ensure(StagedMemory.KV_CACHE)
    assert whole == [None]
    kept = StagedMemory(lambda tags=None: whole.append(tags), staged=True)  # an engine that cannot release
    kept.release()
    kept.ensure(StagedMemory.KV_CACHE)
    assert not kept.released and whole == [None]


def _object_store_ticket(trainer):
    store = []

    def put(array):
        store.append(array)
        return len(store) - 1

    ticket = make_weight_sync("ray", bucket_mb=0.002, put=put).send(trainer.named_parameters(), version=1)
    return ticket, make_weight_sync("ray", bucket_mb=1, get=store.__getitem__)


def _assert_engine_holds(lm, trainer):
    for name, tensor in trainer.named_parameters():
        assert torch.equal(lm.params[name].detach(), tensor.detach()), name


def test_object_store_sync_lands_in_vllm_through_load_weights(fake_cuda, fake_vllm, tiny_model_dir):
    """vLLM, and vLLM-Ascend (the same ``LLM`` class on NPU): each bucket is one ``apply_model`` call of the
    model's ``load_weights``. Fake only: that is the CUDA build's path (the CPU build refuses it, its layers
    packed); the CPU build's reload is held to the fake in ``test_vllm_cpu_build``."""
    torch.manual_seed(3)
    trainer, llm = Qwen2ForCausalLM(tiny_qwen2_config()), fake_vllm.LLM(model=str(tiny_model_dir), dtype="float32")
    ticket, receiver = _object_store_ticket(trainer)
    stats = receiver.receive(vllm_loader(llm), ticket)
    _assert_engine_holds(llm.lm, trainer)
    loads = [c for c in fake_vllm.CALLS if c[0] == "load_weights"]
    assert len(loads) == stats.buckets == ticket.stats.buckets > 1
    assert sum(len(c[1]) for c in loads) == stats.tensors


def test_object_store_sync_lands_in_sglang_through_update_weights_from_tensor(fake_sglang, tiny_model_dir):
    torch.manual_seed(4)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config())
    engine = fake_sglang.Engine(model_path=str(tiny_model_dir), dtype="float32", skip_tokenizer_init=True)
    ticket, receiver = _object_store_ticket(trainer)
    stats = receiver.receive(sglang_loader(engine), ticket)
    _assert_engine_holds(engine.lm, trainer)
    updates = [c[1] for c in fake_sglang.CALLS if c[0] == "update_weights_from_tensor"]
    assert len(updates) == stats.buckets > 1 and not any(u["flush_cache"] for u in updates)
