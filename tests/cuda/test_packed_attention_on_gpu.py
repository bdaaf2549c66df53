"""Every CUDA varlen kernel this GPU can run against the unpatched model, in bf16: logits and gradients."""

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from siirl.device.kernels import apply_patches, cuda_attention
from siirl.device.kernels.cuda_attention import CUDA_VARLEN_KERNELS

LENGTHS = [37, 5, 120, 64, 1, 90]


def _model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256)
    return Qwen2ForCausalLM(config).to("cuda", torch.bfloat16)


def _pinned_to(monkeypatch, wanted: str) -> None:
    """Make ``wanted`` the best available kernel by hiding the ones preferred to it."""
    for name, choice in CUDA_VARLEN_KERNELS.items():
        if name == wanted:
            break
        monkeypatch.setitem(CUDA_VARLEN_KERNELS, name, type(choice)(choice.attn_name, lambda: False, choice.kernel))


def _runnable() -> list[str]:
    return [name for name, choice in CUDA_VARLEN_KERNELS.items() if choice.available()]


@pytest.mark.parametrize("kernel", ["torch_varlen_attn", "flex_attention_varlen", "sdpa_varlen", "flash_attn_varlen"])
def test_patched_matches_unpatched_in_bf16(kernel, monkeypatch):
    if kernel not in _runnable():
        pytest.skip(f"{kernel} is not available with this torch / these packages")
    _pinned_to(monkeypatch, kernel)
    reference, patched = _model(), _model()
    assert apply_patches(patched, "cuda") == [kernel]
    gen = torch.Generator().manual_seed(1)
    rows = [torch.randint(0, 512, (n,), generator=gen).cuda() for n in LENGTHS]
    cu = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    out = patched(
        input_ids=torch.cat(rows)[None], position_ids=torch.cat([torch.arange(n) for n in LENGTHS]).cuda()[None],
        cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(LENGTHS), max_length_k=max(LENGTHS),
    ).logits[0].float()
    expected = torch.cat([reference(input_ids=r[None]).logits[0] for r in rows]).float()
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    out.square().mean().backward()
    expected.square().mean().backward()
    for (name, p), (_, r) in zip(patched.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad.float(), r.grad.float(), rtol=5e-2, atol=5e-3, msg=name)


def test_best_kernel_is_batched_on_this_gpu():
    """No per-sequence loop where torch has varlen_attn or FlexAttention."""
    if cuda_attention.torch_varlen_attn() is not None or cuda_attention.flex_attention_available():
        assert cuda_attention.best_cuda_kernel() != "sdpa_varlen"
