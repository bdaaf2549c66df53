"""Generation that records which policy version sampled every token, and can cross a weight sync.

``generate_tagged`` runs the engine's whole generation under one version. ``generate_partial`` (verl's and
AReaL's partial / interruptible rollout) samples at most ``chunk_tokens`` tokens per row at a time; before
each piece ``chunk()`` is entered, which may load newer weights and says which version the piece samples
with. Unfinished rows keep their tokens and sampled log-probs and continue, prompt plus prefix re-read by
the new weights, so one response may span versions. Rows still running after a piece all generated the
whole piece, so the continuing rows stay aligned and need no re-padding.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from tensordict import TensorDict

from siirl.engine.rollout.batch_ops import assemble_sequences, expand_prompts

#: Batch key: the policy version that sampled each response token (-1 past the response).
VERSION_KEY = "rollout_policy_version"
#: ``chunk()``: a context entered around each piece of generation, yielding the version it samples with.
ChunkGuard = Callable[[], AbstractContextManager[int]]


def tag_versions(out: TensorDict, version: int) -> TensorDict:
    mask = out["response_mask"].bool()
    out[VERSION_KEY] = torch.where(mask, torch.full_like(mask, version, dtype=torch.long), -1)
    return out


def generate_tagged(engine, batch: TensorDict, chunk: ChunkGuard) -> TensorDict:
    """The engine's own generation under one ``chunk()`` (no sync can land mid-response)."""
    with chunk() as version:
        return tag_versions(engine.generate(batch), version)


def _prompt_fields(expanded: TensorDict) -> TensorDict:
    keep = [k for k in ("input_ids", "attention_mask", "position_ids") if k in set(expanded.keys())]
    return expanded.select(*keep)


def generate_partial(engine, batch: TensorDict, chunk_tokens: int, chunk: ChunkGuard) -> TensorDict:
    """``engine.generate``'s output (plus :data:`VERSION_KEY`), sampled ``chunk_tokens`` at a time."""
    n = engine.train_params.n
    expanded = expand_prompts(batch, n)
    prompts = _prompt_fields(expanded)
    rows, width = expanded.batch_size[0], engine.max_response_length
    tokens = torch.full((rows, width), engine.pad_id, dtype=torch.long)
    versions = torch.full((rows, width), -1, dtype=torch.long)
    log_probs, entropies = torch.zeros(rows, width), torch.zeros(rows, width)
    lengths, done = torch.zeros(rows, dtype=torch.long), torch.zeros(rows, dtype=torch.bool)
    recorded, made = False, 0
    while made < width and not bool(done.all()):
        active = (~done).nonzero().squeeze(1)
        steps = min(chunk_tokens, width - made)
        first = made == 0  # every row is active and rows still come in groups of n identical prompts
        per_call = max(n, engine.micro_batch_size // n * n) if first else engine.micro_batch_size
        with chunk() as version:
            for start in range(0, len(active), per_call):
                rows_now = active[start : start + per_call]
                ids = torch.cat([prompts["input_ids"][rows_now], tokens[rows_now, :made]], dim=1)
                mask = torch.cat(
                    [prompts["attention_mask"][rows_now], torch.ones(len(rows_now), made, dtype=torch.long)], dim=1
                )
                piece = TensorDict({"input_ids": ids, "attention_mask": mask}, batch_size=[len(rows_now)])
                new, got, finished, lp, ent = engine.continue_sequences(piece, steps, n if first else 1)
                for i, row in enumerate(rows_now.tolist()):
                    k = int(got[i])
                    tokens[row, made : made + k] = new[i, :k]
                    versions[row, made : made + k] = version
                    if lp is not None:
                        log_probs[row, made : made + k], entropies[row, made : made + k] = lp[i, :k], ent[i, :k]
                    lengths[row] = made + k
                    done[row] = bool(finished[i]) or k < steps
                recorded = recorded or lp is not None
        made += steps
    for key, value in assemble_sequences(prompts, tokens, lengths, engine.pad_id).items():
        expanded[key] = value
    in_response = expanded["response_mask"].to(torch.float32)
    if recorded:
        expanded["rollout_log_probs"] = log_probs * in_response
        expanded["rollout_entropys"] = entropies * in_response
    expanded[VERSION_KEY] = torch.where(expanded["response_mask"].bool(), versions, -1)
    return expanded
