"""CUDA packed-attention kernels: the choice order, and the batched kernels against the per-sequence loop.

FlexAttention's forward runs on the CPU (eager; its backward does not), so forwards are compared for real
here and gradients in tests/cuda. ``varlen_attn`` needs the flash kernel
of a CUDA build: a stand-in with the installed signature computes the reference math and records the
arguments, so the call we make (causal window, GQA, int32 boundaries) is what is checked.
"""

from __future__ import annotations

import inspect
import sys

import pytest
import torch

from siirl.device import get_backend
from siirl.device.kernels import cuda_attention
from siirl.device.kernels.attention import sdpa_varlen_kernel
from siirl.device.kernels.varlen import Segments

from .accel_testutils import VOCAB, tiny_qwen2_config


@pytest.fixture(autouse=True)
def _no_leftover_fake_npu_accelerator(monkeypatch):
    """After an earlier test imported the fake torch_npu, torch names PrivateUse1 "npu" for good and
    ``torch.accelerator`` reports that (kernel-less) device as present; FlexAttention's tracing then asks
    it for a stream. This host has no accelerator: say so again."""
    if hasattr(torch, "npu") and sys.modules.get("torch_npu") is None:
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)


@pytest.fixture
def no_flash_attn(monkeypatch):
    """The choice below flash-attn, whatever this host has installed."""
    monkeypatch.setattr(cuda_attention, "_flash_attn_installed", lambda: False)


def segments(q_lens, k_lens) -> Segments:
    cu = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return Segments(None, None, cu(q_lens), cu(k_lens), max(q_lens), max(k_lens))


def qkv(tq, tk, heads=4, kv_heads=2, dim=16, dtype=torch.float32):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(t, h, dim, generator=gen).to(dtype) for t, h in ((tq, heads), (tk, kv_heads), (tk, kv_heads))]


@pytest.mark.parametrize(("q_lens", "k_lens"), [([5, 9, 3, 1], [5, 9, 3, 1]), ([1, 2, 4], [6, 2, 9])])
def test_flex_matches_the_loop(q_lens, k_lens):
    """Packed training (q = k lengths) and decoding-style (fewer queries, causal aligned bottom-right)."""
    seg = segments(q_lens, k_lens)
    q, k, v = qkv(sum(q_lens), sum(k_lens))
    flex = cuda_attention.flex_varlen_kernel(q, k, v, seg, 0.25, 0.0)
    torch.testing.assert_close(flex, sdpa_varlen_kernel(q, k, v, seg, 0.25, 0.0), rtol=1e-5, atol=1e-5)


def test_flex_block_mask_reused_across_layers():
    seg = segments([4, 7], [4, 7])
    first = cuda_attention._LAST_MASK.get(seg, 11, 11, torch.device("cpu"))
    assert cuda_attention._LAST_MASK.get(seg, 11, 11, torch.device("cpu")) is first
    other = segments([4, 7], [4, 7])  # equal values, new tensors: a new forward
    assert cuda_attention._LAST_MASK.get(other, 11, 11, torch.device("cpu")) is not first


def _stand_in(signature_of, seen: list[dict]):
    """A callable with ``signature_of``'s parameters computing the loop's math (causal, bottom-right)."""
    def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, **kwargs):
        seen.append({"kwargs": kwargs, "dtype": cu_seq_q.dtype, "kv_heads": key.shape[1], "max": (max_q, max_k)})
        return sdpa_varlen_kernel(query, key, value, Segments(None, None, cu_seq_q, cu_seq_k, max_q, max_k),
                                  kwargs.get("scale"), 0.0)

    varlen_attn.__signature__ = inspect.signature(signature_of)
    return varlen_attn


def test_torch_varlen_call_with_installed_signature(monkeypatch):
    from torch.nn.attention.varlen import varlen_attn

    seen: list[dict] = []
    monkeypatch.setattr(cuda_attention, "torch_varlen_attn", lambda: _stand_in(varlen_attn, seen))
    seg = segments([5, 9, 3], [5, 9, 3])
    q, k, v = qkv(17, 17, dtype=torch.bfloat16)
    out = cuda_attention.torch_varlen_kernel(q, k, v, seg, 0.25, 0.0)
    torch.testing.assert_close(out, sdpa_varlen_kernel(q, k, v, seg, 0.25, 0.0))
    params = inspect.signature(varlen_attn).parameters
    kwargs = seen[0]["kwargs"]
    assert kwargs["scale"] == 0.25 and seen[0]["dtype"] == torch.int32 and seen[0]["max"] == (9, 9)
    if "window_size" in params:
        assert kwargs["window_size"] == (-1, 0)
    assert kwargs.get("enable_gqa", False) == ("enable_gqa" in params)
    assert seen[0]["kv_heads"] == (2 if "enable_gqa" in params else 4)


def test_torch_varlen_without_enable_gqa_repeats_kv_heads(monkeypatch):
    """torch 2.11's signature: causal through window_size, no enable_gqa."""
    def old(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
            window_size=(-1, -1)):
        raise AssertionError("signature only")

    seen: list[dict] = []
    monkeypatch.setattr(cuda_attention, "torch_varlen_attn", lambda: _stand_in(old, seen))
    seg = segments([3, 6], [3, 6])
    q, k, v = qkv(9, 9, dtype=torch.bfloat16)
    out = cuda_attention.torch_varlen_kernel(q, k, v, seg, 0.25, 0.0)
    torch.testing.assert_close(out, sdpa_varlen_kernel(q, k, v, seg, 0.25, 0.0))
    assert seen[0]["kv_heads"] == 4 and seen[0]["kwargs"] == {"scale": 0.25, "window_size": (-1, 0)}


def test_torch_varlen_hands_fp32_to_flex(monkeypatch):
    """varlen_attn's flash kernel takes fp16/bf16 only: an fp32 model runs FlexAttention instead."""
    monkeypatch.setattr(cuda_attention, "torch_varlen_attn", lambda: pytest.fail("varlen_attn called in fp32"))
    seg = segments([4, 2], [4, 2])
    q, k, v = qkv(6, 6)
    out = cuda_attention.torch_varlen_kernel(q, k, v, seg, 0.25, 0.0)
    torch.testing.assert_close(out, sdpa_varlen_kernel(q, k, v, seg, 0.25, 0.0), rtol=1e-5, atol=1e-5)


def test_cuda_kernel_choice_order(fake_cuda, no_flash_attn, monkeypatch):
    from transformers import Qwen2ForCausalLM

    def patches() -> list[str]:
        return get_backend("cuda").apply_model_patches(Qwen2ForCausalLM(tiny_qwen2_config()))

    expected_first = "torch_varlen_attn" if cuda_attention.torch_varlen_attn() else "flex_attention_varlen"
    assert patches() == [expected_first]
    monkeypatch.setattr(cuda_attention, "torch_varlen_attn", lambda: None)
    assert patches() == ["flex_attention_varlen"]
    monkeypatch.setattr(cuda_attention, "flex_attention_available", lambda: False)
    assert patches() == ["sdpa_varlen"]


@torch.no_grad()
def test_flex_patched_model_keeps_packed_logits(no_flash_attn, monkeypatch):
    """The whole model through the packed layout's keywords (cu_seq_lens / max_length), as the actor runs it.

    The CUDA patches are applied through the kernel registry: a faked ``torch.cuda`` would send
    FlexAttention down its GPU path.
    """
    from transformers import Qwen2ForCausalLM

    from siirl.device.kernels import apply_patches

    monkeypatch.setattr(cuda_attention, "torch_varlen_attn", lambda: None)  # not runnable on the CPU
    torch.manual_seed(0)
    reference = Qwen2ForCausalLM(tiny_qwen2_config(initializer_range=0.3))
    patched = Qwen2ForCausalLM(tiny_qwen2_config(initializer_range=0.3))
    patched.load_state_dict(reference.state_dict())
    assert apply_patches(patched, "cuda") == ["flex_attention_varlen"]
    lengths = [6, 3, 8]
    gen = torch.Generator().manual_seed(2)
    rows = [torch.randint(2, VOCAB, (n,), generator=gen) for n in lengths]
    cu = torch.tensor([0, 6, 9, 17], dtype=torch.int32)
    packed = {"input_ids": torch.cat(rows)[None], "position_ids": torch.cat([torch.arange(n) for n in lengths])[None],
              "cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": 8, "max_length_k": 8}
    out = patched(**packed).logits[0]
    expected = torch.cat([reference(input_ids=r[None]).logits[0] for r in rows])
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
