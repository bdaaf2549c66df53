"""A fresh run in a folder that holds an earlier run's records: those records are set aside, not appended to.

metrics.jsonl is appended to and the reward plot is drawn from all of it, so a second fresh run into the same
``trainer.output_dir`` would draw one curve jumping from the old run's last step back to 0. A resumed run keeps
them (its sinks cut them back to the resumed step); a fresh one moves them to ``previous_runs/<time>/`` and
says so in one line. Checkpoints stay where they are: the run did not resume from them, and may be resumed later.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from siirl.params import SiirlConfig

logger = logging.getLogger("siirl")

#: What a run writes as its own record under ``trainer.output_dir`` (files or folders).
RUN_RECORDS = ("metrics.jsonl", "reward_curve.png", "val_generations.jsonl", "tensorboard", "profile")
ASIDE = "previous_runs"


def resumes(cfg: SiirlConfig) -> bool:
    """Whether the workers will load a checkpoint (the preflight pins ``auto`` to the one it found)."""
    mode = str(cfg.trainer.resume_mode)
    if mode == "disable":
        return False
    if mode != "auto":
        return True
    from siirl.dag_worker.checkpoint import CheckpointManager, checkpoint_root

    return CheckpointManager(checkpoint_root(cfg.trainer), rank=0).resolve("auto", verify="manifest") is not None


def set_aside_earlier_run(cfg: SiirlConfig) -> Path | None:
    """Move an earlier run's records out of the way of a fresh run; the folder they went to, or None."""
    run_dir = Path(cfg.trainer.output_dir)
    found = [run_dir / name for name in RUN_RECORDS if (run_dir / name).exists()]
    if not found or resumes(cfg):
        return None
    aside = run_dir / ASIDE / time.strftime("%Y%m%d-%H%M%S")
    suffix = 1
    while aside.exists():
        aside, suffix = aside.with_name(f"{aside.name.split('.')[0]}.{suffix}"), suffix + 1
    aside.mkdir(parents=True)
    for path in found:
        path.rename(aside / path.name)
    logger.warning("%s held an earlier run that this fresh run does not resume; its records (%s) moved to %s",
                   run_dir, ", ".join(p.name for p in found), aside)
    return aside
