"""The fakes themselves refuse what the real libraries refuse, and their math matches plain torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from .accel_testutils import VOCAB


def test_fake_vllm_guard_rails(fake_cuda, fake_vllm, tiny_model_dir):
    with pytest.raises(TypeError, match="unexpected keyword"):
        fake_vllm.LLM(model=str(tiny_model_dir), max_num_seqz=4)
    with pytest.raises(ValueError, match="top_p"):
        fake_vllm.SamplingParams(top_p=0.0)
    llm = fake_vllm.LLM(model=str(tiny_model_dir), skip_tokenizer_init=True)
    with pytest.raises(RuntimeError, match="Sleep mode is not enabled"):
        llm.sleep()
    llm = fake_vllm.LLM(model=str(tiny_model_dir), enable_sleep_mode=True)
    llm.sleep(level=2)
    with pytest.raises(RuntimeError, match="released"):
        llm.generate([{"prompt_token_ids": [3, 4]}])
    with pytest.raises(RuntimeError, match="wake_up first"):
        llm.apply_model(lambda model: model.load_weights([]))
    llm.wake_up()
    (out,) = llm.generate([{"prompt_token_ids": [3, 4]}], fake_vllm.SamplingParams(n=2, max_tokens=3, seed=1))
    assert [c.index for c in out.outputs] == [0, 1] and all(len(c.token_ids) <= 3 for c in out.outputs)


def test_fake_sglang_guard_rails(fake_sglang, tiny_model_dir):
    with pytest.raises(TypeError, match="unexpected keyword"):
        fake_sglang.Engine(model_path=str(tiny_model_dir), tp=2)
    engine = fake_sglang.Engine(model_path=str(tiny_model_dir), skip_tokenizer_init=True)
    with pytest.raises(RuntimeError, match="enable_memory_saver"):
        engine.release_memory_occupation()
    with pytest.raises(TypeError, match="unexpected keyword"):
        engine.generate(input_ids=[[3, 4]], sampling_params={"max_tokens": 3})
    single = engine.generate(input_ids=[3, 4], sampling_params={"max_new_tokens": 2, "temperature": 0.0})
    assert isinstance(single, dict) and single["meta_info"]["prompt_tokens"] == 2
    engine = fake_sglang.Engine(model_path=str(tiny_model_dir), enable_memory_saver=True)
    engine.release_memory_occupation(tags=["weights"])
    with pytest.raises(RuntimeError, match="weights are released"):
        engine.update_weights_from_tensor([])
    engine.resume_memory_occupation()
    assert "text" in engine.generate(input_ids=[[3, 4]], sampling_params={"max_new_tokens": 2})[0]


def test_fake_npu_fusion_attention_layouts(fake_torch_npu):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4 if i == 0 else 2, 5, 8, generator=gen) for i in range(3))  # BNSD, GQA
    mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)
    bnsd = fake_torch_npu.npu_fusion_attention(q, k, v, 4, "BNSD", atten_mask=mask, scale=0.3, sparse_mode=3)[0]
    reference = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                               is_causal=True, scale=0.3)
    torch.testing.assert_close(bnsd, reference)
    tnd = fake_torch_npu.npu_fusion_attention(
        *(t.transpose(1, 2).reshape(10, -1, 8) for t in (q, k, v)), 4, "TND", atten_mask=mask, scale=0.3,
        actual_seq_qlen=[5, 10], actual_seq_kvlen=[5, 10], sparse_mode=3,
    )[0]
    torch.testing.assert_close(tnd, reference.transpose(1, 2).reshape(10, 4, 8))
    bsnd = fake_torch_npu.npu_fusion_attention(*(t.transpose(1, 2) for t in (q, k, v)), 4, "BSND", scale=0.3)[0]
    full = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), scale=0.3)
    torch.testing.assert_close(bsnd, full.transpose(1, 2))
    with pytest.raises(ValueError, match="compressed 2048x2048"):
        fake_torch_npu.npu_fusion_attention(q, k, v, 4, "BNSD", sparse_mode=3)


def test_fake_npu_elementwise_ops(fake_torch_npu):
    x = torch.randn(2, 3, 4, 6)
    r1, r2 = torch.randn(1, 1, 4, 6), torch.randn(1, 1, 4, 6)
    interleaved = fake_torch_npu.npu_rotary_mul(x, r1, r2, rotary_mode="interleave")
    rotated = torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)
    torch.testing.assert_close(interleaved, r1 * x + r2 * rotated)
    y, rstd = fake_torch_npu.npu_rms_norm(x, torch.full((6,), 2.0), epsilon=1e-6)
    torch.testing.assert_close(rstd, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    torch.testing.assert_close(y, 2.0 * x * rstd)
    logits, target = torch.randn(5, VOCAB), torch.tensor([1, 2, -100, 4, 5])
    for reduction in ("none", "sum", "mean"):
        loss = fake_torch_npu.npu_cross_entropy_loss(logits, target, reduction=reduction)[0]
        expected = F.cross_entropy(logits, target, reduction=reduction)
        torch.testing.assert_close(loss.reshape(expected.shape), expected)
