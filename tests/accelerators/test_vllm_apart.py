"""The vLLM engine on rollout ranks of their own (``separate_async``), against the real CPU build only: there
the engine core runs in a process of its own, which the fake (an in-process model of the library) has no
counterpart for. Its weights arrive through the worker extension, packed across vLLM's own RPC, or broadcast
into the engine's process over gloo by the engine-broadcast transport; either way the engine then samples
with the trainer's log-probs (whole fused layers reloaded, the tied head re-packed)."""

from __future__ import annotations

import threading

import pytest
import torch
from transformers import Qwen2ForCausalLM

from siirl.device.weight_sync.buckets import bucket_bytes, iter_buckets, pack
from siirl.device.weight_sync.engine_group import join_group
from siirl.device.weight_sync.engine_receivers import VLLMReceiver

from .accel_testutils import free_port, prompt_batch, save_tiny_model, tiny_qwen2_config
from .test_vllm_cpu_build import LARGER
from .test_vllm_engine import make_engine

pytestmark = pytest.mark.parametrize("vllm_build", ["real"], ids=["real-vllm"], indirect=True)


def _engine_apart(tmp_path):
    model_dir = save_tiny_model(tmp_path / "larger", **LARGER)
    engine = make_engine(model_dir, backend="cpu", model_overrides={"dtype": "float32"}, apart=True,
                         weight_sync_bucket_mb=1, temperature=1.0, top_p=1.0)
    engine.records_log_probs = True
    return engine


def _trainer(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(tiny_qwen2_config(**LARGER, initializer_range=0.3)).eval()


def _gap_to(trainer: torch.nn.Module, engine) -> float:
    """Largest gap between the engine's sampled tokens' log-probs and the trainer's."""
    out = engine.generate(prompt_batch(rows=3))
    with torch.no_grad():
        logits = trainer(input_ids=out["input_ids"], attention_mask=out["attention_mask"],
                         position_ids=out["position_ids"]).logits[:, -7:-1]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, out["responses"][..., None])[..., 0]
    mask = out["response_mask"].bool()
    return float((out["rollout_log_probs"][mask] - expected[mask]).abs().max())


def _broadcast(trainer: torch.nn.Module, receiver: VLLMReceiver) -> None:
    """This process is the source (group rank 0); the engine's worker, in vLLM's process, joins as rank 1 and
    takes each 1 MB bucket by the collective itself."""
    address, port = "127.0.0.1", free_port()
    joined: dict = {}
    source = threading.Thread(target=lambda: joined.update(group=join_group(address, port, 0, 2, "gloo")))
    source.start()
    receiver.join(address, port, 1, 2, "gloo")
    source.join()
    buckets = list(iter_buckets(trainer.named_parameters(), bucket_bytes(1), torch.float32))
    assert len(buckets) > 3
    for bucket in buckets:
        flat, metas = pack([(name, tensor.detach()) for name, tensor in bucket])
        sender = threading.Thread(target=VLLMReceiver.transmit, args=(joined["group"], flat, metas))
        sender.start()
        receiver.receive_bucket(flat.numel(), metas)
        sender.join()
    receiver.finish()


def test_an_engine_apart_runs_in_its_own_process_and_takes_weights_by_rpc_and_by_broadcast(vllm_build, tmp_path):
    engine = _engine_apart(tmp_path)
    try:
        assert type(engine.llm.llm_engine.engine_core).__name__ == "SyncMPClient"  # a process of its own
        assert engine.layer_of("model.layers.0.self_attn.k_proj.weight") == "model.layers.0.self_attn.qkv_proj"
        trainer = _trainer(seed=3)
        assert _gap_to(trainer, engine) > 1e-2
        engine.sync_weights(trainer.named_parameters())  # packed buckets through collective_rpc
        assert _gap_to(trainer, engine) <= 1e-4
        trainer = _trainer(seed=4)
        _broadcast(trainer, VLLMReceiver(engine.llm))  # the engine-broadcast transport's data path
        assert _gap_to(trainer, engine) <= 1e-4
    finally:
        engine.close()
