"""Varlen attention kernels per device family, installed into transformers models as patches.

NPU: ``torch_npu.npu_fusion_attention`` in the TND (packed tokens) layout with cumulative
``actual_seq_qlen`` / ``actual_seq_kvlen`` and ``sparse_mode=3`` (causal, aligned bottom-right), which
takes the compressed 2048x2048 upper-triangular mask. CUDA: ``flash_attn.flash_attn_varlen_func``; the
other CUDA kernels and the choice between them live in ``cuda_attention``. ``sdpa_varlen_kernel`` (SDPA
sequence by sequence) is the reference they are tested against and the last resort of an old torch.
"""

from __future__ import annotations

import functools
import importlib

import torch
import torch.nn.functional as F
from torch import nn

from siirl.device.kernels import npu_norm_rope  # noqa: F401  (NPU norm/rotary patches run before attention)
from siirl.device.kernels.hf_models import modeling_module, uses_sliding_window
from siirl.device.kernels.registry import PATCHES
from siirl.device.kernels.varlen import Segments, install

# No "flash" in these names: transformers treats any such name as a request for its own flash-attn path.
NPU_VARLEN, FLASH_VARLEN, SDPA_VARLEN = "siirl_npu_varlen", "siirl_fa_varlen", "siirl_sdpa_varlen"


@functools.lru_cache(maxsize=8)
def _compressed_causal_mask(device: torch.device) -> torch.Tensor:
    return torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=device), diagonal=1)


def npu_varlen_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segments, scale: float, dropout: float
) -> torch.Tensor:
    torch_npu = importlib.import_module("torch_npu")
    return torch_npu.npu_fusion_attention(
        q, k, v, q.shape[1], "TND",
        atten_mask=_compressed_causal_mask(q.device),
        scale=scale,
        keep_prob=1.0 - dropout,
        actual_seq_qlen=seg.cu_q[1:].tolist(),
        actual_seq_kvlen=seg.cu_k[1:].tolist(),
        sparse_mode=3,
    )[0]


def flash_varlen_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segments, scale: float, dropout: float
) -> torch.Tensor:
    from flash_attn import flash_attn_varlen_func

    return flash_attn_varlen_func(
        q, k, v, seg.cu_q, seg.cu_k, seg.max_q, seg.max_k, dropout_p=dropout, softmax_scale=scale, causal=True
    )


def sdpa_varlen_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segments, scale: float, dropout: float
) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    pieces = []
    bounds = zip(seg.cu_q.tolist(), seg.cu_q[1:].tolist(), seg.cu_k.tolist(), seg.cu_k[1:].tolist())
    for q0, q1, k0, k1 in bounds:
        if q1 == q0:
            continue
        qi = q[q0:q1].transpose(0, 1)[None]
        ki = k[k0:k1].repeat_interleave(group, dim=1).transpose(0, 1)[None]
        vi = v[k0:k1].repeat_interleave(group, dim=1).transpose(0, 1)[None]
        lq, lk = q1 - q0, k1 - k0
        mask = None
        if lq != lk:  # causal aligned bottom-right: query i sees keys up to i + (lk - lq)
            mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(diagonal=lk - lq)
        out = F.scaled_dot_product_attention(
            qi, ki, vi, attn_mask=mask, dropout_p=dropout, is_causal=mask is None, scale=scale
        )
        pieces.append(out[0].transpose(0, 1))
    return torch.cat(pieces) if pieces else q.new_zeros(q.shape)


def _installable(model: nn.Module) -> bool:
    return modeling_module(model) is not None and not uses_sliding_window(model)


@PATCHES.register("npu/npu_fusion_attention_varlen")
def patch_npu_attention(model: nn.Module) -> bool:
    if not _installable(model):
        return False
    install(model, NPU_VARLEN, npu_varlen_kernel)
    return True
