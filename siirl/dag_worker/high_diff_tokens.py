"""``trainer.dump_high_diff_tokens``: write, each step, the response tokens where the log-prob the rollout
sampled with and the actor's recomputed one differ most, to see WHICH tokens an engine mismatch (FP8 or
bf16 rollout, other kernels) hits, next to the ``rollout_corr/*`` averages.

Each DAG worker writes its own ``step_<n>_rank_<r>.jsonl``: one line per token, largest
``|rollout_log_prob - old_log_prob|`` first, with the row (in this worker's batch), its uid, the token's
position and text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase

from siirl.data_coordinator.tensordict_ops import non_tensor_list

DEFAULT_DIR = "high_diff_tokens"
#: Tokens written per step and worker.
TOKENS_PER_STEP = 64


def dump_dir(trainer_cfg: Any) -> Path:
    return Path(trainer_cfg.dump_high_diff_dir or Path(trainer_cfg.output_dir) / DEFAULT_DIR)


def high_diff_rows(batch: TensorDictBase, tokenizer: Any, limit: int = TOKENS_PER_STEP) -> list[dict[str, Any]]:
    """The ``limit`` valid response tokens with the largest log-prob gap, largest first."""
    mask = batch["response_mask"].bool()
    rollout, old = batch["rollout_log_probs"].float(), batch["old_log_probs"].float()
    gap = (rollout - old).abs().masked_fill(~mask, -1.0).flatten()
    count = min(limit, int(mask.sum()))
    if count == 0:
        return []
    top = torch.topk(gap, count).indices
    width = mask.shape[1]
    uids = non_tensor_list(batch, "uid") if "uid" in batch.keys() else None  # noqa: SIM118
    rows = []
    for flat in top.tolist():
        row, position = divmod(flat, width)
        token_id = int(batch["responses"][row, position])
        rows.append({
            "row": row,
            "uid": str(uids[row]) if uids is not None else None,
            "position": position,
            "token_id": token_id,
            "token": tokenizer.decode([token_id]),
            "rollout_log_prob": float(rollout[row, position]),
            "old_log_prob": float(old[row, position]),
            "abs_diff": float(gap[flat]),
        })
    return rows


def dump_high_diff_tokens(batch: TensorDictBase, tokenizer: Any, folder: Path, step: int, rank: int) -> None:
    rows = high_diff_rows(batch, tokenizer)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"step_{step}_rank_{rank}.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({"step": step, **row}) + "\n")
