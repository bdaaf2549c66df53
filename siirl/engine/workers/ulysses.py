"""Ulysses sequence parallelism (verl's ``ulysses_sequence_parallel_size``) for the packed layout.

The ranks of one sequence-parallel (sp) group hold the same micro-batch. Each runs the model on one
contiguous slice of the packed token row, so activations per rank shrink by the group size. Everything but
attention works token by token; attention needs every token of a sequence, so an all-to-all before it trades
the token split for a head split (each rank attends over all tokens with 1/sp of the heads) and one after it
trades back. At the end the per-token outputs of all slices are gathered, so every rank of the group computes
the same loss; each rank's backward covers its own slice, and ``reduce_gradients`` sums the parameter
gradients over the group before the optimiser step (the data-parallel average runs over the dp group as
without sp).

Registered in transformers' ``AttentionInterface`` as ``siirl_ulysses``; the kernel it wraps (a varlen one:
``siirl_varlen_sdpa``, flash attention, the NPU's) is named by the ``SequenceParallel`` the forward passes as
the ``siirl_sp`` keyword.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch import nn
from torch.nn.functional import pad as pad_last
from transformers import AttentionInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from siirl.engine.workers.distributed import all_reduce_gradients
from siirl.engine.workers.model_loading import hf_config, model_dir
from siirl.engine.workers.varlen_attention import VARLEN_ATTENTION
from siirl.errors import ConfigError
from siirl.params.root import SiirlConfig
from siirl.params.sequence_parallel import SP_KEYS, role_models, sequence_parallel_sizes

ULYSSES_ATTENTION = "siirl_ulysses"


class _GatherSameLoss(torch.autograd.Function):
    """All-gather whose backward keeps this rank's slice of the incoming gradient.

    Every rank of the group computes the same loss from the gathered tensor, so the gradient arriving
    here is the same on every rank, and this rank's slice of it is exactly the gradient of its input.
    """

    @staticmethod
    def forward(
        ctx: Any, local: torch.Tensor, group: dist.ProcessGroup, rank: int, size: int
    ) -> torch.Tensor:
        pieces = [torch.empty_like(local) for _ in range(size)]
        dist.all_gather(pieces, local.contiguous(), group=group)
        ctx.rank = rank
        return torch.stack(pieces)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        return grad[ctx.rank], None, None, None


class SequenceParallel:
    """One rank's place in its sp group, and the collectives the sharded forward needs."""

    def __init__(self, group: dist.ProcessGroup, inner_attention: str) -> None:
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        #: The varlen kernel that runs attention on the gathered tokens.
        self.inner_attention = inner_attention

    # ----- inputs and outputs of one packed micro-batch -----

    def shard_inputs(
        self, inputs: dict[str, Any], keep: torch.Tensor
    ) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor]:
        """(this rank's model inputs, its kept positions in local coordinates, the owner rank of each kept
        position). The packed row is right-padded to a multiple of the group size; the padding is one more
        sequence of its own, so no real token attends to it."""
        ids, positions, bounds = inputs["input_ids"], inputs["position_ids"], inputs["cu_seq_lens_q"]
        total = ids.shape[-1]
        chunk = math.ceil(total / self.size)
        padding = chunk * self.size - total
        longest = int(inputs["max_length_q"])
        if padding:
            ids, positions = pad_last(ids, (0, padding)), pad_last(positions, (0, padding))
            bounds = torch.cat([bounds, bounds.new_tensor([total + padding])])
            longest = max(longest, padding)
        lo, hi = self.rank * chunk, (self.rank + 1) * chunk
        local = {
            **inputs,
            "input_ids": ids[..., lo:hi],
            "position_ids": positions[..., lo:hi],
            "cu_seq_lens_q": bounds,
            "cu_seq_lens_k": bounds,
            "max_length_q": longest,
            "max_length_k": longest,
            "siirl_sp": self,
        }
        owner = torch.div(keep, chunk, rounding_mode="floor")
        return local, keep[owner == self.rank] - lo, owner

    def gather_outputs(self, local: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        """Every rank's outputs at its kept positions, back in the order of ``owner`` (all kept positions)."""
        counts = torch.bincount(owner.cpu(), minlength=self.size).tolist()
        padded = torch.cat([local, local.new_zeros((max(counts) - local.shape[0], *local.shape[1:]))])
        stacked = _GatherSameLoss.apply(padded, self.group, self.rank, self.size)
        pieces = torch.cat([stacked[r, : counts[r]] for r in range(self.size)])
        order = torch.cat([(owner == r).nonzero().squeeze(1) for r in range(self.size)])
        return pieces.new_empty(pieces.shape).index_copy(0, order.to(pieces.device), pieces)

    # ----- attention -----

    def _all_to_all(self, x: torch.Tensor) -> torch.Tensor:
        """Cut dim 1 into sp chunks, send chunk j to rank j, and join what arrives, in rank order, on dim 2
        (ONE collective: the chunks stacked on a leading dim that ``all_to_all_single`` splits by rank)."""
        sent = torch.stack(x.chunk(self.size, dim=1))
        received = dist_fn.all_to_all_single(torch.empty_like(sent), sent, group=self.group)
        return torch.cat(received.unbind(0), dim=2)

    def heads_for_all_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """(1, heads, tokens / sp, dim) -> (1, heads / sp, tokens, dim)."""
        return self._all_to_all(x)

    def tokens_for_all_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(1, tokens, heads / sp, dim) -> (1, tokens / sp, heads, dim)."""
        return self._all_to_all(x)

    # ----- gradients -----

    def reduce_gradients(self, model: nn.Module, device: torch.device) -> None:
        """Sum the parameter gradients over the group: each rank's backward covered its own slice."""
        all_reduce_gradients(model, self.group, device, torch.float32)


def sequence_parallel_for(group: dist.ProcessGroup, layout: str, attention: str) -> SequenceParallel:
    """The worker's ``SequenceParallel``, once its padding-free layout and attention kernel allow it."""
    if layout != "packed" or attention not in VARLEN_ATTENTION:
        raise ConfigError(
            f"ulysses_sequence_parallel_size > 1 needs model.use_remove_padding=true and a varlen attention "
            f"kernel (sdpa, eager or flash attention), got layout {layout!r} with {attention!r}"
        )
    return SequenceParallel(group, attention)


def check_attention_heads(cfg: SiirlConfig, critic_loaded: bool) -> None:
    """Each role with ``ulysses_sequence_parallel_size`` > 1 splits its model's attention heads evenly over
    the group (read from each model's config once, before Ray)."""
    models = role_models(cfg)
    heads_of: dict[str, int] = {}
    for role, size in sequence_parallel_sizes(cfg).items():
        if size == 1 or (role == "critic" and not critic_loaded):
            continue
        section, model_cfg = models[role]
        path = model_dir(model_cfg)
        if section not in heads_of:
            heads_of[section] = hf_config(model_cfg).get_text_config().num_attention_heads
        heads = heads_of[section]
        if heads % size:
            raise ConfigError(
                f"bad config: {SP_KEYS[role]}={size} must divide the {heads} attention heads of {section}.path "
                f"({path}): each rank of a sequence-parallel group attends with heads / {size} of them"
            )


def kv_repeats(kv_heads: int, sp: int) -> int:
    """How many copies of each key/value head make their count divisible by the group size (1 if it is)."""
    return sp // math.gcd(kv_heads, sp)


def ulysses_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    siirl_sp: SequenceParallel | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``query`` (1, heads, tokens / sp, dim) of this rank's slice -> output (1, tokens / sp, heads, dim)."""
    if siirl_sp is None:
        raise ValueError(f"{ULYSSES_ATTENTION} runs inside a sequence-parallel forward (siirl_sp is missing)")
    repeats = kv_repeats(key.shape[1], siirl_sp.size)
    if repeats > 1:  # each rank's query heads keep their key/value heads: contiguous blocks line up
        key, value = key.repeat_interleave(repeats, dim=1), value.repeat_interleave(repeats, dim=1)
    q, k, v = (siirl_sp.heads_for_all_tokens(x) for x in (query, key, value))
    inner = ALL_ATTENTION_FUNCTIONS[siirl_sp.inner_attention]
    out, _ = inner(module, q, k, v, attention_mask, **kwargs)
    return siirl_sp.tokens_for_all_heads(out), None


AttentionInterface.register(ULYSSES_ATTENTION, ulysses_attention)
