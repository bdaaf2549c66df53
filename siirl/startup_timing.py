"""Where a job's start-up goes: wall-clock marks at the boundaries of the phases before the first step.

Marks are seconds since the epoch, so the launcher's and a DAG worker's line up on one host. The launcher
marks its phases, ``run_job`` sends its marks to the workers, and rank 0 adds its own and logs the
differences with its first step as ``timing_s/startup/<phase>`` (metrics.jsonl, TensorBoard): each phase is
named by the mark that ends it, and ``timing_s/startup/total`` runs from the first mark to the first step.
"""

from __future__ import annotations

import os
import time
from itertools import pairwise

#: Phase boundaries in the order a job passes them; a phase missing from a job (no launcher, warm workers)
#: counts towards the next one present.
MARKS = (
    "launch",  # the launcher process was created
    "interpreter",  # Python started and imported the launcher: main() runs
    "imports",  # the config checks' imports (torch, transformers, the registries)
    "config",  # config composed and its registry values checked
    "preflight",  # inputs checked, pipeline planned, data previewed
    "ray",  # Ray started or joined
    "placement",  # placement group reserved (warm workers: borrowed and reset)
    "workers",  # rank 0's actor is up: its process took the actor, imported siiRL and torch, ran __init__
    "rendezvous",  # every rank up, torch.distributed initialised
    "tokenizer",  # tokenizer and image processor loaded
    "process_groups",  # the plan's data- and sequence-parallel groups (each waits for every rank)
    "data",  # train and validation loaders built (their parquet scans included)
    "reward",  # reward manager built
    "models",  # the models this rank's graph needs, built
    "loggers",  # checkpoint resumed (if any), metric sinks (JSONL, TensorBoard, ...) opened
    "validation",  # validation before training; the first step starts here
)
PREFIX = "timing_s/startup/"
#: Launch to the first step, which the driver's closing line also shows.
TOTAL = f"{PREFIX}total"

#: The launcher's marks, until ``run_job`` takes them.
_LAUNCHER: dict[str, float] = {}
#: Whether no job of this process has come through main() yet.
_FIRST_LAUNCH = True


def process_start() -> float | None:
    """When this process was created (Linux: from /proc; 10 ms resolution), or None where unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of proc(5), counted from the 3rd
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        return time.time() - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def mark(name: str, marks: dict[str, float] | None = None) -> None:
    """Record that phase ``name`` ended now, in ``marks`` or (None) among the launcher's marks."""
    (_LAUNCHER if marks is None else marks)[name] = time.time()


def launcher_started() -> None:
    """main() runs: the first job of a process starts its marks at the process's creation; a later one (a
    notebook, a test session) at this call, since the interpreter's start was not its cost."""
    global _FIRST_LAUNCH
    _LAUNCHER.clear()
    started = process_start() if _FIRST_LAUNCH else None
    _FIRST_LAUNCH = False
    if started is not None:
        _LAUNCHER["launch"] = started
    mark("interpreter")


def take_launcher_marks() -> dict[str, float]:
    """The launcher's marks so far (empty when the job did not come through main()); the next job starts anew."""
    marks = dict(_LAUNCHER)
    _LAUNCHER.clear()
    return marks


def phase_seconds(marks: dict[str, float]) -> dict[str, float]:
    """``timing_s/startup/<phase>``: seconds from the previous mark present to each mark, and ``total``."""
    present = [name for name in MARKS if name in marks]
    if len(present) < 2:
        return {}
    out = {f"{PREFIX}{later}": marks[later] - marks[earlier] for earlier, later in pairwise(present)}
    out[TOTAL] = marks[present[-1]] - marks[present[0]]
    return out
