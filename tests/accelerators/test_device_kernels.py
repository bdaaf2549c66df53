"""Device kernel patches on tiny HF models: same numbers as the unpatched model, patch names reported.

NPU runs against the fake torch_npu (its operators are plain-torch CPU math); CUDA flash-attn runs against
a stub computing the same math in torch. The other CUDA varlen kernels: test_cuda_varlen_kernels.py.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2ForCausalLM
from transformers.models.llama import modeling_llama
from transformers.models.qwen2 import modeling_qwen2

from siirl.device import get_backend
from siirl.device.kernels import VARLEN_ATTENTION_NAMES
from siirl.device.kernels.attention import sdpa_varlen_kernel
from siirl.device.kernels.varlen import Segments

from .accel_testutils import VOCAB, tiny_qwen2_config

NPU_PATCHES = ["npu_rms_norm", "npu_rotary_mul", "npu_fusion_attention_varlen"]


@pytest.fixture(autouse=True)
def _restore_patch_targets(monkeypatch):
    """Patches replace class and module attributes process-wide; put them back after each test."""
    for module, norm in ((modeling_qwen2, modeling_qwen2.Qwen2RMSNorm), (modeling_llama, modeling_llama.LlamaRMSNorm)):
        monkeypatch.setattr(norm, "forward", norm.forward)
        monkeypatch.setattr(module, "apply_rotary_pos_emb", module.apply_rotary_pos_emb)


def qwen2(**overrides) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    fields = {"hidden_size": 32, "intermediate_size": 64, **overrides}  # the kernels' tolerances are set for it
    return Qwen2ForCausalLM(tiny_qwen2_config(initializer_range=0.3, **fields)).eval()


def padded_inputs() -> dict[str, torch.Tensor]:
    """Rows padded left (prompt-style), right (response-style), both, and not at all."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(2, VOCAB, (4, 9), generator=gen)
    mask = torch.ones(4, 9, dtype=torch.long)
    mask[0, :3] = 0
    mask[1, 6:] = 0
    mask[2, :2] = 0
    mask[2, 7:] = 0
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    return {"input_ids": ids * mask, "attention_mask": mask, "position_ids": position_ids}


def packed(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every valid token in one row, positions restarting per sequence, no mask."""
    keep = inputs["attention_mask"].bool().flatten()
    return {name: inputs[name].flatten()[keep][None] for name in ("input_ids", "position_ids")}


def valid_logits(model, inputs) -> torch.Tensor:
    with torch.no_grad():
        logits = model(**inputs).logits
    return logits[inputs["attention_mask"].bool()]


def test_npu_patches_keep_qwen2_logits(fake_torch_npu):
    model, inputs = qwen2(), padded_inputs()
    reference = valid_logits(model, inputs)
    assert get_backend("npu").apply_model_patches(model) == NPU_PATCHES
    assert model.config._attn_implementation == "siirl_npu_varlen" and "siirl_npu_varlen" in VARLEN_ATTENTION_NAMES
    fake_torch_npu.CALLS.clear()
    torch.testing.assert_close(valid_logits(model, inputs), reference, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        packed_logits = model(**packed(inputs)).logits[0]
    torch.testing.assert_close(packed_logits, reference, rtol=1e-5, atol=1e-5)

    names = [name for name, _ in fake_torch_npu.CALLS]
    layers = model.config.num_hidden_layers
    assert names.count("npu_fusion_attention") == 2 * layers
    assert names.count("npu_rotary_mul") == 2 * 2 * layers  # q and k
    assert names.count("npu_rms_norm") == 2 * (2 * layers + 1)
    attention = dict(arg for arg in next(a for n, a in fake_torch_npu.CALLS if n == "npu_fusion_attention")
                     if isinstance(arg, tuple))
    assert attention["sparse_mode"] == 3 and tuple(attention["atten_mask"].shape) == (2048, 2048)
    assert attention["actual_seq_qlen"] == [6, 12, 17, 26]  # cumulative valid lengths of the padded rows


def test_npu_patches_keep_gradients(fake_torch_npu):
    model, inputs = qwen2(), padded_inputs()

    def grads():
        model.zero_grad()
        logits = model(**inputs).logits
        (logits[inputs["attention_mask"].bool()].logsumexp(-1).sum()).backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    reference = grads()
    get_backend("npu").apply_model_patches(model)
    patched = grads()
    for name in reference:
        torch.testing.assert_close(patched[name], reference[name], rtol=1e-4, atol=1e-5, msg=name)


def test_npu_patched_generation_with_kv_cache(fake_torch_npu):
    model, inputs = qwen2(), padded_inputs()
    prompts = {"input_ids": inputs["input_ids"][[0, 2]][:, :7], "attention_mask": inputs["attention_mask"][[0, 2]][:, :7]}
    reference = model.generate(**prompts, max_new_tokens=5, do_sample=False, pad_token_id=0)
    get_backend("npu").apply_model_patches(model)
    assert torch.equal(model.generate(**prompts, max_new_tokens=5, do_sample=False, pad_token_id=0), reference)


def test_npu_patches_llama_and_skip_sliding_window_attention(fake_torch_npu):
    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.3,
    )).eval()
    inputs = padded_inputs()
    reference = valid_logits(llama, inputs)
    assert get_backend("npu").apply_model_patches(llama) == NPU_PATCHES
    torch.testing.assert_close(valid_logits(llama, inputs), reference, rtol=1e-5, atol=1e-5)

    sliding = qwen2(use_sliding_window=True, sliding_window=4, max_window_layers=0)
    assert get_backend("npu").apply_model_patches(sliding) == ["npu_rms_norm", "npu_rotary_mul"]
    assert sliding.config._attn_implementation != "siirl_npu_varlen"


def test_unknown_families_and_cpu_get_no_patches(fake_torch_npu):
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=16, n_layer=1, n_head=2))
    assert get_backend("npu").apply_model_patches(gpt2) == []
    model = qwen2()
    assert get_backend("cpu").apply_model_patches(model) == []
    assert model.config._attn_implementation == "sdpa"


def test_cuda_patches_are_for_training_only(fake_cuda):
    """A model built for generation keeps stock SDPA (padding mask + KV cache): no varlen patch at all."""
    model = qwen2()
    assert get_backend("cuda").apply_model_patches(model, generation=True) == []
    assert model.config._attn_implementation == "sdpa"


def test_fused_log_probs(fake_torch_npu, fake_cuda, monkeypatch):
    from siirl.device.kernels import logprob

    monkeypatch.setattr(logprob, "NPU_MAX_ROWS", 4)  # several operator calls for 2 x 5 rows
    logits = torch.randn(2, 5, VOCAB, requires_grad=True)
    labels = torch.randint(0, VOCAB, (2, 5))
    fused = get_backend("npu").fused_log_probs()
    out = fused(logits, labels)
    expected = torch.log_softmax(logits, -1).gather(-1, labels[..., None]).squeeze(-1)
    torch.testing.assert_close(out, expected)
    assert [n for n, _ in fake_torch_npu.CALLS].count("npu_cross_entropy_loss") == 3
    out.sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    with pytest.raises(ValueError, match="labels shape"):
        fused(logits, labels[:, :4])
    assert get_backend("cuda").fused_log_probs() is None  # no flash-attn here
    assert get_backend("cpu").fused_log_probs() is None


def _stub_flash_attn(monkeypatch) -> list[dict]:
    """``flash_attn`` with its varlen attention and Triton cross-entropy signatures, computed in torch."""
    seen: list[dict] = []

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                               softmax_scale=None, causal=False):
        seen.append({"dtype": cu_seqlens_q.dtype, "max": (max_seqlen_q, max_seqlen_k), "causal": causal})
        seg = Segments(None, None, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        return sdpa_varlen_kernel(q, k, v, seg, softmax_scale, dropout_p)

    def cross_entropy_loss(logits, labels):
        losses = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="none")
        return losses, torch.zeros_like(losses)

    tree = {"flash_attn": {"flash_attn_varlen_func": flash_attn_varlen_func}, "flash_attn.ops": {},
            "flash_attn.ops.triton": {}, "flash_attn.ops.triton.cross_entropy": {"cross_entropy_loss": cross_entropy_loss}}
    for name, attrs in tree.items():
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=not name.endswith("cross_entropy"))
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    return seen


def test_cuda_flash_attn_varlen_and_cross_entropy(fake_cuda, monkeypatch):
    seen = _stub_flash_attn(monkeypatch)
    model, inputs = qwen2(), padded_inputs()
    reference = valid_logits(model, inputs)
    assert get_backend("cuda").apply_model_patches(model) == ["flash_attn_varlen"]
    assert get_backend("cuda").apply_model_patches(qwen2(), generation=True) == []
    with torch.no_grad():
        torch.testing.assert_close(model(**packed(inputs)).logits[0], reference, rtol=1e-5, atol=1e-5)
    assert seen[0] == {"dtype": torch.int32, "max": (9, 9), "causal": True}  # the longest packed sequence
    logits, labels = torch.randn(2, 3, VOCAB), torch.randint(0, VOCAB, (2, 3))
    torch.testing.assert_close(
        get_backend("cuda").fused_log_probs()(logits, labels),
        torch.log_softmax(logits, -1).gather(-1, labels[..., None]).squeeze(-1),
    )
