"""On CUDA the rollout model generates with stock batched attention (padding mask + KV cache): no packed
varlen kernel -- and no per-sequence loop -- runs during generation, while the training model uses one.

Every CUDA varlen kernel is replaced by a spy; only ``CudaBackend.device`` is faked further (tensors stay
on the CPU), so the HF engine, model loading and patch selection run as they do on a GPU.
"""

from __future__ import annotations

import dataclasses

import torch

from siirl.device import get_backend
from siirl.device.cuda import CudaBackend
from siirl.device.kernels.attention import sdpa_varlen_kernel
from siirl.device.kernels.cuda_attention import CUDA_VARLEN_KERNELS, CUDA_VARLEN_NAMES
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.engine.workers.model_loading import load_causal_lm

from .accel_testutils import model_cfg, prompt_batch, rollout_cfg


def _spy_on_kernels(monkeypatch) -> list[str]:
    calls: list[str] = []
    for name, choice in list(CUDA_VARLEN_KERNELS.items()):
        def spy(q, k, v, seg, scale, dropout, _name=name):
            calls.append(_name)
            return sdpa_varlen_kernel(q, k, v, seg, scale, dropout)

        monkeypatch.setitem(CUDA_VARLEN_KERNELS, name, dataclasses.replace(choice, kernel=spy))
    return calls


def test_generation_never_calls_a_varlen_kernel(fake_cuda, tiny_model_dir, monkeypatch):
    calls = _spy_on_kernels(monkeypatch)
    monkeypatch.setattr(CudaBackend, "device", lambda self, local_rank=0: torch.device("cpu"))
    cfg = model_cfg(tiny_model_dir, dtype="float32")
    engine = HFRolloutEngine(cfg, rollout_cfg("hf", val_kwargs={"n": 2, "do_sample": False}), "cuda",
                             max_response_length=6)
    assert engine.backend.name == "cuda"
    assert engine.model.config._attn_implementation == "sdpa"
    out = engine.generate(prompt_batch(rows=3), validate=True)
    assert out["responses"].shape == (6, 6) and out["response_mask"].sum() > 6
    assert calls == [], f"varlen kernels ran during generation: {sorted(set(calls))}"

    # The same spies see the training-side model: the check above can fail.
    trained = load_causal_lm(cfg, get_backend("cuda"), torch.float32)
    assert trained.config._attn_implementation in CUDA_VARLEN_NAMES
    with torch.no_grad():
        trained(input_ids=out["input_ids"][:2], attention_mask=out["attention_mask"][:2])
    assert len(calls) == trained.config.num_hidden_layers
