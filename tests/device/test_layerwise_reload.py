"""Weight buckets for an engine that re-processes a layer per reload (vLLM's CPU build): no bucket boundary
inside a fused layer, and a layer that ends a transport's bucket waits for the rest of it."""

from __future__ import annotations

import torch

from siirl.device.weight_sync.buckets import fused_layers, iter_buckets
from siirl.device.weight_sync.layerwise_reload import LayerwiseReload

LAYER_OF = fused_layers({"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]})
NAMES = [f"model.layers.0.{m}.{p}" for m, p in [
    ("self_attn.q_proj", "weight"), ("self_attn.q_proj", "bias"), ("self_attn.k_proj", "weight"),
    ("self_attn.v_proj", "weight"), ("self_attn.o_proj", "weight"), ("mlp.gate_proj", "weight"),
    ("mlp.up_proj", "weight"), ("mlp.down_proj", "weight"), ("input_layernorm", "weight")]]


def test_fused_layer_names():
    assert LAYER_OF("model.layers.3.self_attn.k_proj.bias") == "model.layers.3.self_attn.qkv_proj"
    assert LAYER_OF("model.layers.3.mlp.up_proj.weight") == "model.layers.3.mlp.gate_up_proj"
    assert LAYER_OF("model.layers.3.mlp.down_proj.weight") == "model.layers.3.mlp.down_proj"
    assert LAYER_OF("lm_head.weight") == "lm_head"


def test_buckets_close_only_between_layers():
    tensors = [(name, torch.zeros(4)) for name in NAMES]  # 16 bytes each, buckets of 16: one tensor per bucket
    buckets = [[n for n, _ in b] for b in iter_buckets(tensors, 16, layer_of=LAYER_OF)]
    assert buckets == [NAMES[:4], NAMES[4:5], NAMES[5:7], NAMES[7:8], NAMES[8:]]
    assert [len(b) for b in iter_buckets(tensors, 16)] == [1] * len(NAMES)  # bytes only: q, k, v apart


def test_a_layer_split_by_the_transport_waits_for_its_rest():
    calls, finished = [], []
    load = LayerwiseReload(lambda t: calls.append([n for n, _ in t]), LAYER_OF, lambda: finished.append(True))
    tensors = [(name, torch.full((2,), float(i))) for i, name in enumerate(NAMES)]
    load(tensors[:2])  # q_proj only: held back
    load(tensors[2:6])  # k, v complete qkv_proj; o_proj whole; gate_proj held back
    assert calls == [NAMES[:5]] and not finished
    load(tensors[6:])
    load.finish()
    assert calls == [NAMES[:5], NAMES[5:8], NAMES[8:]] and finished == [True]
