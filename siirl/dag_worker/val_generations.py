"""verl's ``trainer.log_val_generations=N``: the first N validation samples of every validation pass
(prompt, response, score, ground truth), so a run's outputs can be read next to its score.

Rank 0 writes them as JSON lines to ``<trainer.output_dir>/val_generations.jsonl``; each line carries the
step, so passes stay apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tensordict import TensorDictBase

from siirl.engine.reward.batch_fields import get_ground_truths

FILE_NAME = "val_generations.jsonl"


def sample_rows(batch: TensorDictBase, scores: Any, tokenizer: Any, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` rows of one scored validation batch, decoded with special tokens dropped."""
    rows = []
    truths = get_ground_truths(batch)
    prompts, prompt_mask = batch["prompts"], batch["attention_mask"][:, : batch["prompts"].shape[1]].bool()
    responses, response_mask = batch["responses"], batch["response_mask"].bool()
    for i in range(min(limit, batch.batch_size[0])):
        rows.append({
            "input": tokenizer.decode(prompts[i][prompt_mask[i]].tolist(), skip_special_tokens=True),
            "output": tokenizer.decode(responses[i][response_mask[i]].tolist(), skip_special_tokens=True),
            "score": float(scores[i]),
            "ground_truth": truths[i],
        })
    return rows


def write_rows(run_dir: Path, step: int, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / FILE_NAME).open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({"step": step, **row}) + "\n")
