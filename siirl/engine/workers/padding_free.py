"""Run a model on a micro-batch without computing on padding, and return per-response-token outputs.

A batch row is ``[left-padded prompt | right-padded response]`` of width ``S = P + R``. The output at
response token ``j`` comes from the model's head at column ``P + j - 1`` (the position that predicts
it). Three layouts, registered by name, compute exactly the same values on the valid tokens:

- ``packed``: every valid token of the micro-batch in one row, ``position_ids`` restarting at 0 per
  sequence, no attention mask, sequence boundaries passed as ``cu_seq_lens_q/k``. A varlen kernel keeps
  the sequences apart: flash attention, or ``siirl_varlen_sdpa`` (see ``varlen_attention``) in place of
  sdpa / eager. (Under plain sdpa transformers would build a dense block-diagonal mask instead: correct,
  but quadratic in the packed length.)
- ``shared``: ``packed`` with every prompt that several rows of the micro-batch repeat (GRPO's n responses
  per prompt) packed once: the linear layers, most of the compute, run on each prompt token once instead
  of n times. Attention still sees every full ``prompt + response`` sequence (``siirl_varlen_sdpa``
  gathers them), so the results are those of ``packed``. Needs ``siirl_varlen_sdpa``.
- ``trimmed``: keep the padded layout but drop the columns no row of the micro-batch uses; combined
  with length-sorted micro-batches this removes most padding for any attention backend.
- ``padded``: the full padded width (the plain reference computation).

Only the positions that predict a valid (attended) response token reach the head (``logits_to_keep``
when the model supports it), so a large vocabulary is never projected for prompt tokens or padding. The
result is scattered into a ``(rows, R, ...)`` tensor that is 0 wherever the response token is padding.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import torch
from torch import nn

from siirl.engine.workers.model_loading import apply_config_overrides, hf_config
from siirl.engine.workers.varlen_attention import VARLEN_ATTENTION, VARLEN_SDPA
from siirl.engine.workers.vision_inputs import VisionRows
from siirl.errors import ConfigError
from siirl.params.distillation import teacher_model_config
from siirl.params.root import SiirlConfig
from siirl.registry import Registry

if TYPE_CHECKING:
    from siirl.engine.workers.ulysses import SequenceParallel

#: Kernels whose math ``siirl_varlen_sdpa`` reproduces for packed sequences.
SDPA_LIKE = frozenset({"sdpa", "eager"})


@dataclass(frozen=True)
class TokenSelection:
    """Model inputs of one micro-batch and where each needed head output goes."""

    model_inputs: dict[str, torch.Tensor | int | None]
    #: Sequence positions whose head output is needed (shared by all rows of the model input).
    keep: torch.Tensor
    #: Which entries of the flattened ``(rows_in, len(keep))`` head output are used.
    used: torch.Tensor | None
    #: Token predicted at each used position, shape ``(N,)``.
    labels: torch.Tensor
    #: Flat index of each used position in the ``(rows, R)`` output, shape ``(N,)``.
    target: torch.Tensor
    #: Rows whose prompt tokens are in the model input, in input order (whose images the model needs).
    prompt_rows: torch.Tensor


SelectFn = Callable[..., TokenSelection]

LAYOUTS: Registry[SelectFn] = Registry("padding-free layout", open=True)


def choose_layout(
    use_remove_padding: bool, requested: str, attn_implementation: str, full_causal: bool = True
) -> tuple[str, str]:
    """(layout, attention implementation to run it with) for ``model.use_remove_padding`` /
    ``model.remove_padding_layout`` and the model's attention kernel.

    Packing needs a kernel that keeps packed sequences apart without a dense mask: flash attention's varlen
    path, or siiRL's ``siirl_varlen_sdpa`` in place of sdpa / eager (full causal attention only), with
    which ``auto`` also packs shared prompts once (``shared``; ``packed`` asks for one copy per row;
    ``shared`` asks for siiRL's varlen SDPA in place of any kernel).
    Other kernels trim instead, unless packing is requested explicitly (transformers then builds dense
    masks).
    """
    if not use_remove_padding:
        return "padded", attn_implementation
    if requested == "trimmed":
        return "trimmed", attn_implementation
    if requested == "shared":  # of a model with full causal attention only (``check_shared_layout``)
        return "shared", VARLEN_SDPA
    if attn_implementation == VARLEN_SDPA or (attn_implementation in SDPA_LIKE and full_causal):
        return ("packed" if requested == "packed" else "shared"), VARLEN_SDPA
    if attn_implementation in VARLEN_ATTENTION:
        return "packed", attn_implementation
    return ("packed" if requested == "packed" else "trimmed"), attn_implementation


def check_shared_layout(cfg: SiirlConfig, critic_loaded: bool) -> None:
    """The shared layout (``remove_padding_layout=shared``, or the actor's ``use_prefix_grouper``) attends to a
    prompt once per micro-batch, which needs full causal attention in every layer: each model that asks for
    it is read from its config.json (with ``override_config``) before Ray."""
    policy = cfg.actor_rollout_ref.model
    models = [("actor_rollout_ref.model", policy, cfg.actor_rollout_ref.actor.use_prefix_grouper)]
    models += [("critic.model", cfg.critic.model, False)] if critic_loaded else []
    models += [("reward_model.model", cfg.reward_model.model, False)] if cfg.reward_model.enable else []
    if cfg.distillation.enabled:
        models.append(("distillation.teacher_models", teacher_model_config(policy, cfg.distillation), False))
    for key, model, grouped in models:
        if not (grouped or (model.use_remove_padding and model.remove_padding_layout == "shared")):
            continue
        config = hf_config(model)
        apply_config_overrides(config, dict(getattr(model, "override_config", None) or {}))
        kinds = set(getattr(config.get_text_config(), "layer_types", None) or ["full_attention"]) - {"full_attention"}
        if kinds:
            raise ConfigError(
                f"bad config: {key}: the shared layout (remove_padding_layout=shared, or actor.use_prefix_grouper) "
                f"attends to a prompt once per micro-batch, which needs full causal attention; {model.path} has "
                f"{', '.join(sorted(kinds))} layers (use remove_padding_layout=auto)"
            )


def _select_columns(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    response_len: int,
    row_key: torch.Tensor | None = None,
    *,
    trim: bool,
) -> TokenSelection:
    """Every row whole (``trim=False``) or cut to the columns some row uses; ``row_key`` plays no part."""
    rows, width = input_ids.shape
    prompt_len = width - response_len
    lo, hi = 0, width
    if trim:
        used_cols = attention_mask.bool().any(dim=0).nonzero().squeeze(1).tolist()
        lo = min(used_cols[0], prompt_len - 1)
        hi = max(used_cols[-1] + 1, prompt_len + 1)
    kept_len = hi - prompt_len
    keep = torch.arange(prompt_len - 1 - lo, hi - 1 - lo, device=input_ids.device)
    valid = attention_mask[:, prompt_len:hi].bool().flatten()
    used = valid.nonzero().squeeze(1)
    target = (
        torch.arange(rows, device=input_ids.device)[:, None] * response_len
        + torch.arange(kept_len, device=input_ids.device)[None, :]
    ).flatten()
    return TokenSelection(
        model_inputs={
            "input_ids": input_ids[:, lo:hi],
            "attention_mask": attention_mask[:, lo:hi],
            "position_ids": position_ids[..., lo:hi],  # (rows, S) or mrope's (3, rows, S)
        },
        keep=keep,
        used=used,
        labels=input_ids[:, prompt_len:hi].flatten()[used],
        target=target[used],
        prompt_rows=torch.arange(rows, device=input_ids.device),
    )




def prompt_groups(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, response_len: int, row_key: torch.Tensor | None = None
) -> torch.Tensor:
    """(rows,) group id of each row: rows whose prompts are the same tokens (and ``row_key``) share one."""
    prompt_len = input_ids.shape[1] - response_len
    prompt_key = torch.where(attention_mask[:, :prompt_len].bool(), input_ids[:, :prompt_len], -1)
    if row_key is not None:
        prompt_key = torch.cat([row_key[:, None].to(prompt_key), prompt_key], dim=1)
    return torch.unique(prompt_key, dim=0, return_inverse=True)[1]


def _pack(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    response_len: int,
    row_key: torch.Tensor | None = None,
    *,
    share_prompts: bool,
) -> TokenSelection:
    """Every valid token in one row; with ``share_prompts``, a row whose prompt an earlier row repeats
    leaves its prompt tokens out and reads that row's (same tokens, same positions) through the attention
    gather (``siirl_sequence_tokens`` / ``siirl_token_source``, sent only when some prompt is shared).
    ``row_key`` (rows,) is part of the prompt's identity besides its tokens (its image)."""
    rows, width = input_ids.shape
    prompt_len = width - response_len
    device = input_ids.device
    valid = attention_mask.bool()
    row_ids = torch.arange(rows, device=device)
    leader = row_ids
    if share_prompts:
        group = prompt_groups(input_ids, attention_mask, response_len, row_key)
        first_of_group = torch.full((int(group.max()) + 1,), rows, device=device)
        leader = first_of_group.scatter_reduce(0, group, row_ids, "amin")[group]
    packed = valid.clone()
    packed[:, :prompt_len] &= (leader == row_ids)[:, None]
    packed_flat = packed.flatten().nonzero().squeeze(1)
    # the full sequences, row after row: (row, column) of each position and the packed token it reads
    seq_flat = valid.flatten().nonzero().squeeze(1)
    row, col = seq_flat // width, seq_flat % width
    same_row_as_previous = torch.zeros_like(row, dtype=torch.bool)
    same_row_as_previous[1:] = row[1:] == row[:-1]
    targets = ((col >= prompt_len) & same_row_as_previous).nonzero().squeeze(1)
    lengths = valid.sum(dim=1)
    cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
    max_len = int(lengths.max())
    model_inputs = {
        "input_ids": input_ids.flatten()[packed_flat][None, :],
        "attention_mask": None,
        "position_ids": position_ids.flatten(-2)[..., packed_flat].unsqueeze(-2),  # (1, T) or (3, 1, T)
        # Sequence boundaries for varlen kernels (flash attention, siirl_varlen_sdpa); others ignore them.
        "cu_seq_lens_q": cu_seqlens,
        "cu_seq_lens_k": cu_seqlens,
        "max_length_q": max_len,
        "max_length_k": max_len,
    }
    sequence_tokens = torch.arange(len(seq_flat), device=device)
    if len(packed_flat) < len(seq_flat):
        packed_at = torch.full((rows * width,), -1, dtype=torch.long, device=device)
        packed_at[packed_flat] = torch.arange(len(packed_flat), device=device)
        packed_at = packed_at.view(rows, width)
        packed_at[:, :prompt_len] = packed_at[leader, :prompt_len]  # a repeated prompt is its leader's tokens
        position_of = torch.full((rows * width,), -1, dtype=torch.long, device=device)
        position_of[seq_flat] = sequence_tokens
        sequence_tokens = packed_at.flatten()[seq_flat]
        model_inputs["siirl_sequence_tokens"] = sequence_tokens
        model_inputs["siirl_token_source"] = position_of[packed_flat]
    return TokenSelection(
        model_inputs=model_inputs,
        keep=sequence_tokens[targets - 1],
        used=None,
        labels=input_ids.flatten()[seq_flat[targets]],
        target=row[targets] * response_len + (col[targets] - prompt_len),
        prompt_rows=(leader == row_ids).nonzero().squeeze(1),
    )




def supports_logits_to_keep(model: nn.Module) -> bool:
    """Whether the HF model's forward takes ``logits_to_keep`` (a peft wrapper passes it through)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(inner.forward).parameters


HeadReduce = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def response_outputs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    response_len: int,
    layout: str,
    reduce: HeadReduce,
    logits_to_keep: bool,
    vision: VisionRows | None = None,
    sp: SequenceParallel | None = None,
) -> torch.Tensor:
    """``reduce(head_outputs (N, C), labels (N,))`` placed at the valid response tokens of ``(rows, R, ...)``.

    ``reduce`` maps the head outputs of the N needed positions (logits for an LM, values for a critic)
    to one value (or a vector) per position; everything else in the result is 0. ``vision``: the rows'
    images, for a vision-language model (its mrope positions replace ``position_ids``). ``sp``: this rank's
    sequence-parallel group (``packed`` layout): it runs the model on its slice of the packed row.
    """
    if response_len < 1 or input_ids.shape[1] <= response_len:
        raise ValueError(
            f"need at least one prompt and one response column, got width {input_ids.shape[1]} "
            f"and response length {response_len}"
        )
    row_key, anchor = None, None
    if vision is not None:
        position_ids, row_key = vision.positions, vision.row_key
    selection = LAYOUTS.get(layout)(input_ids, attention_mask, position_ids, response_len, row_key)
    inputs, keep, labels = selection.model_inputs, selection.keep, selection.labels
    if vision is not None:
        images, anchor = vision.model_inputs(model, selection.prompt_rows)
        inputs = {**inputs, **images}
    if sp is not None:
        inputs, keep, owner = sp.shard_inputs(inputs, keep)
        labels = labels[owner == sp.rank]
    if logits_to_keep:
        head = model(**inputs, use_cache=False, logits_to_keep=keep).logits
    else:
        head = model(**inputs, use_cache=False).logits.index_select(1, keep)
    if anchor is not None:
        head = head + anchor
    head = head.reshape(-1, head.shape[-1])
    if selection.used is not None:
        head = head.index_select(0, selection.used)
    values = reduce(head, labels)
    if sp is not None:
        values = sp.gather_outputs(values, owner)
    rows = input_ids.shape[0]
    out = values.new_zeros((rows * response_len, *values.shape[1:]))
    out = out.index_copy(0, selection.target, values)
    return out.view(rows, response_len, *values.shape[1:])


LAYOUTS.register("padded")(partial(_select_columns, trim=False))
LAYOUTS.register("trimmed")(partial(_select_columns, trim=True))
LAYOUTS.register("packed")(partial(_pack, share_prompts=False))
LAYOUTS.register("shared")(partial(_pack, share_prompts=True))
