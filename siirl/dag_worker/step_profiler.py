"""verl's ``global_profiler.tool=torch``: torch's profiler around each profiled training step, on every device
(the CPU included). Each rank writes one Chrome trace per profiled step to
``<trainer.output_dir>/profile/step_<n>/rank_<r>.json`` (open it in chrome://tracing or Perfetto);
``global_profiler.steps`` lists the steps (null: every step), ``global_profiler.save_path`` other than verl's
default moves the folder."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from siirl.params import SiirlConfig
from siirl.params.trainer import DEFAULT_PROFILE_PATH

logger = logging.getLogger(__name__)

TOOL = "torch"


def profile_dir(cfg: SiirlConfig) -> Path:
    save_path = str(cfg.global_profiler.save_path)
    return Path(cfg.trainer.output_dir) / "profile" if save_path == DEFAULT_PROFILE_PATH else Path(save_path)


def profiles(cfg: SiirlConfig, step: int) -> bool:
    section = cfg.global_profiler
    return section.tool == TOOL and (section.steps is None or step in set(section.steps))


@contextmanager
def profiled_step(cfg: SiirlConfig, step: int, rank: int) -> Iterator[None]:
    """Profile the block when ``step`` is profiled, then write this rank's trace."""
    if not profiles(cfg, step):
        yield
        return
    from torch.profiler import profile, supported_activities

    with profile(activities=list(supported_activities())) as prof:
        yield
    path = profile_dir(cfg) / f"step_{step}" / f"rank_{rank}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    if rank == 0:
        logger.info("torch profiler: step %d traced to %s", step, path.parent)
