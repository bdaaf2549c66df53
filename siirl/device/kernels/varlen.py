"""Attention over variable-length sequences for Hugging Face models, with a pluggable device kernel.

The transformers attention interface hands over ``query (B, H, Sq, D)``, ``key/value (B, Hkv, Skv, D)``
and either a 2-D padding mask or none (the mask function registered alongside is transformers' own
``flash_attention_mask``: None when nothing is padded). This module finds the sequences in that input --
rows of a padded batch, or several sequences packed in one row (``position_ids`` restarting) -- lays the
valid tokens out as ``(T, H, D)`` with cumulative lengths, runs a varlen kernel with causal masking
aligned bottom-right (so decoding with a KV cache works too), and scatters the result back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from siirl.device.kernels.hf_models import set_text_attn_implementation


@dataclass(frozen=True)
class Segments:
    """Where the sequences are in the flattened ``(B*Sq)`` queries and ``(B*Skv)`` keys."""

    #: Flat rows of the queries / keys that take part; None = all of them, in order.
    q_index: torch.Tensor | None
    k_index: torch.Tensor | None
    #: Cumulative lengths, int32, shape (num_sequences + 1,), starting at 0.
    cu_q: torch.Tensor
    cu_k: torch.Tensor
    max_q: int
    max_k: int


#: ``kernel(q (Tq, H, D), k (Tk, Hkv, D), v, segments, scale, dropout) -> (Tq, H, D)``
VarlenKernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Segments, float, float], torch.Tensor]


def _cumulative(lengths: torch.Tensor) -> torch.Tensor:
    return F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))


def segments_from_mask(mask: torch.Tensor, q_len: int) -> Segments:
    """One sequence per row: the row's valid keys, and its valid queries among the last ``q_len`` columns."""
    k_valid = mask.bool()
    q_valid = k_valid[:, -q_len:]
    q_lens, k_lens = q_valid.sum(1), k_valid.sum(1)
    return Segments(
        q_index=q_valid.flatten().nonzero().squeeze(1),
        k_index=k_valid.flatten().nonzero().squeeze(1),
        cu_q=_cumulative(q_lens),
        cu_k=_cumulative(k_lens),
        max_q=int(q_lens.max()),
        max_k=int(k_lens.max()),
    )


def segments_from_positions(position_ids: torch.Tensor, batch: int) -> Segments:
    """Every token valid; a sequence starts at each row start and wherever positions do not go up by one."""
    positions = position_ids.expand(batch, -1)
    starts = torch.ones_like(positions, dtype=torch.bool)
    starts[:, 1:] = positions[:, 1:] != positions[:, :-1] + 1
    start_at = starts.flatten().nonzero().squeeze(1)
    lengths = torch.diff(start_at, append=start_at.new_tensor([positions.numel()]))
    cu = _cumulative(lengths)
    longest = int(lengths.max())
    return Segments(q_index=None, k_index=None, cu_q=cu, cu_k=cu, max_q=longest, max_k=longest)


def uniform_segments(batch: int, q_len: int, kv_len: int, device: torch.device) -> Segments:
    rows = torch.arange(batch + 1, device=device, dtype=torch.int32)
    return Segments(None, None, rows * q_len, rows * kv_len, q_len, kv_len)


def segments_from_boundaries(kwargs: dict) -> Segments | None:
    """Boundaries the packed layout hands over (``cu_seq_lens_q/k``, ``max_length_q/k``), if present: the
    same tensors reach every layer, without a host sync per layer."""
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    max_q, max_k = kwargs.get("max_length_q"), kwargs.get("max_length_k")
    if cu_q is None or cu_k is None or max_q is None or max_k is None:
        return None
    return Segments(None, None, cu_q.to(torch.int32), cu_k.to(torch.int32), int(max_q), int(max_k))


def find_segments(
    attention_mask: torch.Tensor | None, position_ids: torch.Tensor | None, batch: int, q_len: int, kv_len: int,
    device: torch.device, boundaries: Segments | None = None,
) -> Segments:
    if attention_mask is None and batch == 1 and boundaries is not None:
        return boundaries
    if attention_mask is not None:
        return segments_from_mask(attention_mask, q_len)
    if position_ids is not None and q_len == kv_len:
        return segments_from_positions(position_ids, batch)
    return uniform_segments(batch, q_len, kv_len, device)


def make_attention_forward(kernel: VarlenKernel) -> Callable:
    """A transformers attention function (``AttentionInterface`` signature) running ``kernel``."""

    def attention_forward(
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        scaling: float | None = None,
        dropout: float = 0.0,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        batch, heads, q_len, head_dim = query.shape
        kv_heads, kv_len = key.shape[1], key.shape[2]
        if attention_mask is not None and attention_mask.dim() != 2:
            raise ValueError(f"varlen attention takes a 2-D padding mask, got shape {tuple(attention_mask.shape)}")
        seg = find_segments(attention_mask, kwargs.get("position_ids"), batch, q_len, kv_len, query.device,
                            segments_from_boundaries(kwargs))
        q = query.transpose(1, 2).reshape(batch * q_len, heads, head_dim)
        k = key.transpose(1, 2).reshape(batch * kv_len, kv_heads, head_dim)
        v = value.transpose(1, 2).reshape(batch * kv_len, kv_heads, value.shape[-1])
        if seg.q_index is not None:
            q = q.index_select(0, seg.q_index)
        if seg.k_index is not None:
            k, v = k.index_select(0, seg.k_index), v.index_select(0, seg.k_index)
        scale = float(scaling) if scaling is not None else head_dim**-0.5
        out = kernel(q, k, v, seg, scale, float(dropout))
        if seg.q_index is not None:
            out = out.new_zeros(batch * q_len, *out.shape[1:]).index_copy(0, seg.q_index, out)
        return out.view(batch, q_len, heads, -1), None

    return attention_forward


def install(model: nn.Module, name: str, kernel: VarlenKernel) -> None:
    """Register ``kernel`` with transformers under ``name`` and switch ``model`` to it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(name, make_attention_forward(kernel))
    AttentionMaskInterface.register(name, flash_attention_mask)
    set_text_attn_implementation(model, name)
