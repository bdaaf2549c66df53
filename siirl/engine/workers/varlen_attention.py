"""Attention over packed sequences for devices without a varlen flash kernel (CPU; GPU/NPU without flash-attn).

In the ``packed`` layout a micro-batch is one row of concatenated sequences, so every linear layer (the bulk
of the compute) sees only valid tokens. Attention must keep each sequence to its own causal past. With
plain sdpa transformers builds a dense (tokens x tokens) block-diagonal mask, which costs far more than the
padding it removes. This kernel instead gathers the sequences into a few length buckets (lengths within a
factor ``BUCKET_RATIO`` of each other), right-pads each bucket to its longest member and runs ONE
``scaled_dot_product_attention`` with ``is_causal=True`` per bucket: a causal query never looks right, so
right padding cannot leak into valid positions and no mask is needed. Attention work stays within
``BUCKET_RATIO**2`` of the sum of squared lengths, and the number of kernel calls (and of autograd nodes)
is the number of buckets, not of sequences.

Sequence boundaries come from the ``cu_seq_lens_q`` keyword that transformers forwards to attention
functions (the same argument flash attention's varlen path reads). Registered in transformers'
``AttentionInterface`` as ``siirl_varlen_sdpa``; full causal attention only (no sliding window).

Shared prompts (the ``shared`` layout of ``padding_free``): the packed row holds each prompt once, however
many responses follow it. Two more keywords describe that: ``siirl_sequence_tokens`` lists, sequence after
sequence, the packed token at each position of every full ``prompt + response`` sequence (so a prompt's
tokens appear once per response) and ``cu_seq_lens_q`` bounds those sequences; ``siirl_token_source``
says which of those positions gives each packed token its output. Attention then runs on the gathered
sequences exactly as above, and the gradients of a shared prompt's keys and values add up over its
responses through the gather.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any

import torch
from torch import nn
from torch.nn.functional import scaled_dot_product_attention
from transformers import AttentionInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from siirl.device.kernels import VARLEN_ATTENTION_NAMES
from siirl.errors import ConfigError
from siirl.params.root import SiirlConfig

VARLEN_SDPA = "siirl_varlen_sdpa"
#: Attention kernels that take packed sequences natively (sequence boundaries from ``cu_seq_lens_q``).
VARLEN_ATTENTION = frozenset({"flash_attention_2", "flash_attention_3", VARLEN_SDPA, *VARLEN_ATTENTION_NAMES})
#: Longest / shortest sequence length allowed in one padded bucket.
BUCKET_RATIO = 1.25


def length_buckets(cu_seq_lens: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per bucket: ``(gather, valid)``; ``gather`` is ``(k, L)`` token indices of k right-padded sequences
    (padding repeats each sequence's last token), ``valid`` the flat positions of real tokens in it."""
    bounds = cu_seq_lens.to("cpu", torch.long)
    starts, lengths = bounds[:-1], bounds[1:] - bounds[:-1]
    keys = torch.ceil(torch.log(lengths.clamp(min=1).double()) / math.log(BUCKET_RATIO)).long()
    buckets = []
    for key in torch.unique(keys).tolist():
        members = (keys == key).nonzero().squeeze(1)
        lens, first = lengths[members], starts[members]
        width = int(lens.max())
        offsets = torch.arange(width)[None, :]
        gather = first[:, None] + torch.minimum(offsets, (lens - 1)[:, None])
        valid = (offsets < lens[:, None]).flatten().nonzero().squeeze(1)
        buckets.append((gather, valid))
    return buckets


class _LastBuckets:
    """The buckets of the last ``cu_seq_lens_q`` tensor seen, on the device they were asked for: every layer of
    one forward passes the same tensor, so the grouping (host work and a device-to-host copy) runs once per
    forward instead of once per layer."""

    def __init__(self) -> None:
        self.bounds: torch.Tensor | None = None
        self.device: torch.device | None = None
        self.buckets: list[tuple[int, int, torch.Tensor, torch.Tensor]] = []

    def get(
        self, bounds: torch.Tensor, device: torch.device
    ) -> list[tuple[int, int, torch.Tensor, torch.Tensor]]:
        """Per bucket: ``(rows, width, gather index, valid positions)``, the last two on ``device``."""
        if bounds is not self.bounds or device != self.device:
            self.buckets = [
                (*gather.shape, gather.flatten().to(device), valid.to(device))
                for gather, valid in length_buckets(bounds)
            ]
            self.bounds, self.device = bounds, device
        return self.buckets


_LAST_BUCKETS = _LastBuckets()


def varlen_sdpa_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``query`` (1, heads, tokens, dim) of packed sequences -> output (1, tokens, heads, dim)."""
    if kwargs.get("sliding_window") is not None or kwargs.get("softcap") is not None:
        raise ValueError(f"{VARLEN_SDPA} supports full causal attention only (no sliding window / softcap)")
    if cu_seq_lens_q is None or attention_mask is not None or query.shape[0] != 1:
        raise ValueError(f"{VARLEN_SDPA} needs one packed row with cu_seq_lens_q and no attention mask")
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    sequence_tokens = kwargs.get("siirl_sequence_tokens")
    if sequence_tokens is not None:
        query, key, value = (x.index_select(2, sequence_tokens) for x in (query, key, value))
    p = dropout if module.training else 0.0
    heads, dim = query.shape[1], query.shape[3]
    outputs, order = [], []
    for rows, width, index, keep in _LAST_BUCKETS.get(cu_seq_lens_q, query.device):

        def padded(
            x: torch.Tensor, index: torch.Tensor = index, rows: int = rows, width: int = width
        ) -> torch.Tensor:
            return x[0].index_select(1, index).view(heads, rows, width, dim).transpose(0, 1)

        out = scaled_dot_product_attention(
            padded(query), padded(key), padded(value), dropout_p=p, is_causal=True, scale=scaling
        )
        outputs.append(out.transpose(0, 1).reshape(heads, rows * width, dim).index_select(1, keep))
        order.append(index.index_select(0, keep))
    flat = torch.cat(outputs, dim=1)
    result = flat.new_empty(flat.shape).index_copy(1, torch.cat(order), flat)
    if sequence_tokens is not None:
        result = result.index_select(1, kwargs["siirl_token_source"])
    return result.transpose(0, 1).unsqueeze(0), None


AttentionInterface.register(VARLEN_SDPA, varlen_sdpa_attention)


def check_attention_names(cfg: SiirlConfig) -> None:
    """Each ``attn_implementation`` is one transformers (or this module) registers, ``paged|<name>`` of one,
    or a Hub kernel repo (``org/repo[:fn]``) that transformers fetches."""
    known = sorted({"auto", "eager", *ALL_ATTENTION_FUNCTIONS.valid_keys()})
    for key in ("actor_rollout_ref.model.attn_implementation", "critic.model.attn_implementation"):
        value = str(attrgetter(key)(cfg))
        paged = value.startswith("paged|") and value[len("paged|"):] in known
        if not (value in known or "/" in value or paged):
            raise ConfigError(f"bad config: {key}={value!r} is unknown; known: {', '.join(known)}")
