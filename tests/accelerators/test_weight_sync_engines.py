"""The broadcast transport into engines that join the weight-sync group themselves (SGLang's schedulers,
vLLM's workers), run for real over gloo in three processes (trainer and two rollout ranks, each with a fake
engine): the engine API calls carry each bucket's names, dtypes and shapes, the group name and rank, and the
cache is flushed once; every engine ends with the trainer's weights. The fake vLLM is its CPU build here (no
accelerator): its worker reloads whole fused layers per call and re-packs the tied head at the end."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.distributed as dist
from dist_testutils import RANKS_GROUP, spawn

from siirl.device import backend_class
from siirl.device.weight_sync import make_weight_sync, weight_sync_group
from siirl.device.weight_sync.buckets import bucket_bytes, fused_layers, iter_buckets
from siirl.device.weight_sync.engine_group import GROUP_NAME
from siirl.device.weight_sync.engine_receivers import ENGINE_RECEIVERS
from siirl.device.weight_sync.vllm_worker import WORKER_EXTENSION

pytestmark = [RANKS_GROUP]
PACKED_MODULES = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
BUCKET_MB = 0.002


def _engine(name: str, model_dir: str):
    if name == "sglang":
        import sglang

        return sglang, sglang.Engine(model_path=model_dir, dtype="float32", skip_tokenizer_init=True)
    import vllm

    return vllm, vllm.LLM(model=model_dir, dtype="float32", worker_extension_cls=WORKER_EXTENSION,
                          kv_cache_memory_bytes=1 << 24, enforce_eager=True)


def _expected_calls(name: str, rank: int, buckets: list) -> tuple[list, list]:
    """(calls that join the group, calls per bucket) the engine ``name`` should have seen, from its real API."""
    names = [[n for n, _ in b] for b in buckets]
    if name == "sglang":
        per_bucket = [("update_weights_from_distributed", {
            "names": n, "dtypes": ["float32"] * len(n), "shapes": [list(t.shape) for _, t in b],
            "group_name": GROUP_NAME, "flush_cache": False}) for n, b in zip(names, buckets, strict=True)]
        return [("init_weights_update_group", rank, 3, GROUP_NAME, "gloo")], per_bucket
    return [("join_weight_sync_group", rank, 1, 3, "gloo")], []


def _whole_layers_reloaded(calls: list, trainer: torch.nn.Module, engine) -> None:
    """vLLM's CPU build: every tensor reloaded once, each fused layer within one reload call, and the tied
    head's packed copy made from the new embedding."""
    reloads = [[n for n, _, _ in payload] for c, payload in calls if c == "reload_weights"]
    assert sorted(n for names in reloads for n in names) == sorted(n for n, _ in trainer.named_parameters())
    layer_of = fused_layers(PACKED_MODULES)
    for layer in {layer_of(n) for names in reloads for n in names}:
        assert sum(any(layer_of(n) == layer for n in names) for names in reloads) == 1, layer
    head = engine.lm.model.get_output_embeddings()
    assert torch.equal(head.packed_weight, trainer.get_input_embeddings().weight.detach())


def _joined(name: str, calls: list) -> list:
    if name == "sglang":
        return [(c, a["rank_offset"], a["world_size"], a["group_name"], a["backend"]) for c, a in calls if c == "init_weights_update_group"]
    return [(a["method"], *a["args"][2:]) for c, a in calls if c == "collective_rpc" and a["method"] == "join_weight_sync_group"]


def _engine_ranks(rank: int, world_size: int, name: str, model_dir: str) -> None:
    """Imports transformers only here: tests/fakes, on this job's path, also holds a fake torch_npu, which
    transformers imports when it finds one and which renames torch's PrivateUse1 device for good. It is
    hidden for the job, as later jobs of this rank process need torch intact."""
    patch = pytest.MonkeyPatch()
    patch.setitem(sys.modules, "torch_npu", None)
    from transformers import Qwen2ForCausalLM

    from tests.accelerators.accel_testutils import tiny_qwen2_config

    torch.manual_seed(7)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config())
    group = weight_sync_group(range(world_size), backend_class("cpu")())
    try:
        fake, engine = _engine(name, model_dir) if rank else (None, None)
        receiver = ENGINE_RECEIVERS.get(name)(engine) if rank else None
        sync = make_weight_sync("engine_broadcast", group=group, src=0, bucket_mb=BUCKET_MB, engine=name,
                                receiver=receiver)
        if rank == 0:
            stats = sync.send(trainer.named_parameters(), version=2).stats
        else:
            stats = sync.receive(None)
            for param, tensor in trainer.named_parameters():
                assert torch.equal(engine.lm.params[param].detach(), tensor.detach()), param
            buckets = list(iter_buckets(trainer.named_parameters(), bucket_bytes(BUCKET_MB)))
            joined, per_bucket = _expected_calls(name, rank, buckets)
            assert _joined(name, fake.CALLS) == joined and stats.buckets > 1
            if name == "sglang":
                assert [c for c in fake.CALLS if c[0] == per_bucket[0][0]] == per_bucket
            else:
                _whole_layers_reloaded(fake.CALLS, trainer, engine)
            flush = "flush_cache" if name == "sglang" else "reset_prefix_cache"
            assert [c[0] for c in fake.CALLS].count(flush) == 1 and fake.CALLS[-1][0] == flush
        everyone: list = [None] * world_size
        dist.all_gather_object(everyone, (stats.version, stats.buckets, stats.bytes))
        assert everyone == [everyone[0]] * world_size and everyone[0][0] == 2
    finally:  # the rank process runs later jobs: the fake packages go with this one
        for module in [m for m in sys.modules if m.split(".")[0] in ("sglang", "vllm")]:
            sys.modules.pop(module)
        patch.undo()


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_engine_ranks_take_every_bucket_through_their_update_api(name, fake_sglang, tiny_model_dir):
    spawn(_engine_ranks, 3, name, str(tiny_model_dir))
