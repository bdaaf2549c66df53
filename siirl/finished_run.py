"""A finished job run again: its last checkpoint is already at the final step, so starting Ray would train
nothing and end with an empty summary (verl resumes and exits silently). The launcher says so instead, in
one line before Ray starts, naming the step and how to go on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from siirl.params import SiirlConfig


def final_step(cfg: SiirlConfig, loader_state: dict[str, Any], prompts_per_draw: int | None = None) -> int | None:
    """The run's last step as the workers will count it (``trainer.total_training_steps``, else batches per
    epoch x ``trainer.total_epochs``); None when it cannot be told from the checkpoint alone (a sampler of
    the user's, or a batch size other than the one saved). ``prompts_per_draw``: the plan's resolved draw
    (siirl.params.resolved), else the config's generation batch."""
    if cfg.trainer.total_training_steps > 0:
        return int(cfg.trainer.total_training_steps)
    from siirl.data_coordinator.custom_sampler import sampler_class

    rows, batch = loader_state.get("num_rows"), loader_state.get("global_batch_size")
    draw = cfg.data.prompts_per_generation() if prompts_per_draw is None else prompts_per_draw
    if sampler_class(cfg.data) is not None or not rows or batch != draw:
        return None
    return int(rows) // int(batch) * int(cfg.trainer.total_epochs)  # the training loader drops the last batch


def _resumed_state(cfg: SiirlConfig) -> dict[str, Any] | None:
    """Rank 0's saved trainer state of the checkpoint the run resumes from (pinned by the preflight), or None."""
    mode = str(cfg.trainer.resume_mode)
    state_file = Path(mode) / "worker_0.json"
    if mode in ("auto", "disable") or not state_file.is_file():
        return None
    return json.loads(state_file.read_text(encoding="utf-8"))


def resume_message(cfg: SiirlConfig) -> str | None:
    """The console line of a resumed run: from which checkpoint and step, and how to start afresh instead
    (resuming is the default, so a run that picks up an earlier one must say so)."""
    state = _resumed_state(cfg)
    if state is None:
        return None
    return (
        f"siirl: resuming from {cfg.trainer.resume_mode} at step {int(state.get('step', 0))}; to start afresh "
        "instead, pass trainer.resume_mode=disable (or a new trainer.output_dir)"
    )


def finished_message(cfg: SiirlConfig, prompts_per_draw: int | None = None) -> str | None:
    """One line when the checkpoint the run resumes from (pinned by the preflight) is at the final step."""
    state = _resumed_state(cfg)
    if state is None:
        return None
    mode = str(cfg.trainer.resume_mode)
    step, total = int(state.get("step", 0)), final_step(cfg, state.get("dataloader") or {}, prompts_per_draw)
    if total is None or step < total:
        return None
    return (
        f"siirl: this job already finished: its last checkpoint ({mode}) is at step {step} of {total}; to train "
        "on, raise trainer.total_training_steps (or trainer.total_epochs) and run the command again, or start "
        "afresh with trainer.resume_mode=disable"
    )
