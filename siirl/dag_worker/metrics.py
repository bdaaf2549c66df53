"""Metrics: averaged across DAG workers with one all-reduce, then written by rank 0 to each sink.

Sinks are a registry (console, jsonl, file, tensorboard, wandb), so adding one is one class.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import logging
import os
import socket
from dataclasses import dataclass, field
from hashlib import blake2b
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
import torch.distributed as dist

from siirl.dag_worker.run_files import WANDB_FOLDERS, files_under
from siirl.errors import ConfigError
from siirl.registry import Registry

logger = logging.getLogger("siirl.metrics")

#: Metric writers by ``trainer.logger`` name: a class ``cls(run_dir, run)`` (``run``: a :class:`RunInfo`)
#: with ``write(step, metrics)`` and ``close()``.
SINKS: Registry[type] = Registry("metric sink", config_keys=("trainer.logger",))

#: verl loggers without a sink here, refused by name before Ray starts.
UNSUPPORTED_LOGGERS = ("swanlab", "mlflow", "vemlp_wandb", "clearml")


@dataclass(frozen=True)
class RunInfo:
    """What sinks that name runs (wandb) call this one: verl's ``trainer.project_name`` /
    ``trainer.experiment_name``, and the config recorded with it."""

    project: str = "siirl"
    name: str = "run"
    config: dict[str, Any] = field(default_factory=dict)
    #: The checkpoint step a resumed run starts after: sinks drop what an earlier attempt logged beyond it,
    #: so each step is recorded once.
    resumed_at: int = 0


def check_loggers(names: list[str]) -> None:
    """One ``ConfigError`` line for a verl logger siiRL has no sink for, or for wandb when it is not installed."""
    for name in names:
        if name in UNSUPPORTED_LOGGERS:
            raise ConfigError(
                f"bad config: trainer.logger={name} is not supported; supported loggers: {', '.join(SINKS.names())}"
            )
        if name == "wandb" and importlib.util.find_spec("wandb") is None:
            raise ConfigError("bad config: trainer.logger=wandb needs the wandb package: pip install siirl[wandb]")


#: Failure counters (``reward/timeouts``, ``env/errors``, ...): each worker counts its own samples, so the
#: job's count is their sum, not their mean.
COUNTER_LEAVES = frozenset({"timeouts", "errors", "crashes", "nonfinite", "clipped", "env_errors"})


#: Maxima named ``*_max`` by the spec they follow (the issue's ``async/staleness_max``): the job's is the max.
MAX_KEYS = frozenset({"async/staleness_max"})


def _reduce_column(key: str, column: torch.Tensor) -> float:
    if key.rsplit("/", 1)[-1] in COUNTER_LEAVES:
        return column.sum().item()
    if key.endswith("/max") or key in MAX_KEYS:
        return column.max().item()
    if key.endswith("/min"):
        return column.min().item()
    return column.mean().item()


def _keys_agree(metrics: dict[str, float], group: dist.ProcessGroup | None) -> bool:
    digest = blake2b("\n".join(sorted(metrics)).encode(), digest_size=7).digest()
    mine = torch.tensor([int.from_bytes(digest, "little")], dtype=torch.int64)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(gathered, mine, group=group)
    return all(bool(g == mine) for g in gathered)


def reduce_metrics(
    metrics: dict[str, float], group: dist.ProcessGroup | None = None, same_keys: bool = True
) -> dict[str, float]:
    """Mean of every scalar over the workers; ``*/max`` keys take the max, ``*/min`` the min, failure counters
    (:data:`COUNTER_LEAVES`) the sum.

    With ``same_keys`` the workers usually pass the same keys (they all run the same task graph); keys are
    sorted so the collective lines up, and one all-gather of the values (a few hundred bytes per worker)
    serves all three reductions, after one of a digest of the keys: a score function's extra values
    (``reward_extra/*``) may differ with the data sources a worker drew. Workers running different nodes
    (placement groups) report different keys: then the dicts are all-gathered and each key is reduced over
    the workers that reported it.
    """
    if not dist.is_available() or not dist.is_initialized():
        return dict(metrics)
    if same_keys and not _keys_agree(metrics, group):
        same_keys = False
    if not same_keys:
        gathered_dicts: list[dict[str, float]] = [{} for _ in range(dist.get_world_size(group))]
        dist.all_gather_object(gathered_dicts, {k: float(v) for k, v in metrics.items()}, group=group)
        keys = sorted({k for d in gathered_dicts for k in d})
        return {
            k: _reduce_column(k, torch.tensor([d[k] for d in gathered_dicts if k in d], dtype=torch.float64))
            for k in keys
        }
    keys = sorted(metrics)
    values = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64)
    gathered = [torch.empty_like(values) for _ in range(dist.get_world_size(group))]
    dist.all_gather(gathered, values, group=group)
    table = torch.stack(gathered)
    return {key: _reduce_column(key, table[:, i]) for i, key in enumerate(keys)}


@SINKS.register("console")
class ConsoleSink:
    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        self.keys = ("reward/mean", "val/score", "actor/pg_loss", "actor/entropy", "timing_s/step")

    def write(self, step: int, metrics: dict[str, float]) -> None:
        shown = " ".join(f"{k}={metrics[k]:.4g}" for k in self.keys if k in metrics)
        logger.info("step %d %s", step, shown)

    def close(self) -> None:
        return None


def _keep_steps_up_to(path: Path, step: int) -> None:
    """Rewrite ``path`` (atomically) without the records of steps after ``step``; unreadable lines stay."""
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            later = int(json.loads(line).get("step", 0)) > step
        except (ValueError, AttributeError, TypeError):
            later = False
        if not later:
            kept.append(line + "\n")
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    os.replace(tmp, path)


def append_record(file: Any, text: str) -> None:
    """Append one line to an unbuffered binary ``file`` whole or not at all: a write the disk refuses is cut
    back off (resume and the reward plot read every line), so the records of the earlier steps stay readable."""
    line = (text + "\n").encode("utf-8")
    size = os.fstat(file.fileno()).st_size
    try:
        if file.write(line) != len(line):  # a short write: the disk filled up mid-record
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError:
        file.truncate(size)
        raise


@SINKS.register("jsonl")
class JsonlSink:
    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        path = run_dir / "metrics.jsonl"
        if run.resumed_at and path.is_file():
            _keep_steps_up_to(path, run.resumed_at)
        self.path = path
        self.file = open(path, "ab", buffering=0)  # noqa: SIM115 - one write call per record, nothing buffered

    def write(self, step: int, metrics: dict[str, float]) -> None:
        append_record(self.file, json.dumps({"step": step, **metrics}, sort_keys=True))

    def close(self) -> None:
        self.file.close()


def verl_file_logger_path(run_dir: Path, run: RunInfo) -> Path:
    """Where verl's ``file`` logger writes: ``$VERL_FILE_LOGGER_PATH``, else
    ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl``; verl's root without the variable is the working
    directory, siiRL's is the run's output folder, where all its output goes."""
    if os.environ.get("VERL_FILE_LOGGER_PATH"):
        return Path(os.environ["VERL_FILE_LOGGER_PATH"])
    if os.environ.get("VERL_FILE_LOGGER_ROOT"):
        return Path(os.environ["VERL_FILE_LOGGER_ROOT"]).expanduser() / run.project / f"{run.name}.jsonl"
    return run_dir / f"{run.name}.jsonl"


@SINKS.register("file")
class FileSink:
    """verl's ``file`` logger: one ``{"step": N, "data": {metrics}}`` line per step, for tools that read
    verl's file; a fresh run starts the file anew, as verl does, a resumed one keeps the steps up to its
    checkpoint."""

    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        path = verl_file_logger_path(run_dir, run)
        path.parent.mkdir(parents=True, exist_ok=True)
        if run.resumed_at and path.is_file():
            _keep_steps_up_to(path, run.resumed_at)
        self.path = path
        self.file = open(path, "ab" if run.resumed_at else "wb", buffering=0)  # noqa: SIM115

    def write(self, step: int, metrics: dict[str, float]) -> None:
        append_record(self.file, json.dumps({"step": step, "data": metrics}))

    def close(self) -> None:
        self.file.close()


@SINKS.register("tensorboard")
class TensorboardSink:
    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step hides what an earlier attempt logged after the resumed checkpoint
        purge = run.resumed_at + 1 if run.resumed_at else None
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=purge)

    def write(self, step: int, metrics: dict[str, float]) -> None:
        """One event holding every scalar of the step: ``add_scalar`` writes an event per key, and on the rank
        that logs that cost a few milliseconds a step the other ranks waited for at their next collective."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [Summary.Value(tag=key, simple_value=float(value)) for key, value in metrics.items()]
        self.writer.file_writer.add_summary(Summary(value=values), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def wandb_mode() -> tuple[str, str]:
    """wandb's mode and, when it falls back to offline, why: an explicit ``WANDB_MODE`` wins; otherwise
    online needs ``WANDB_API_KEY`` and a reachable server (``WANDB_BASE_URL``), so a run never stalls on login."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"], ""
    if not os.environ.get("WANDB_API_KEY"):
        return "offline", "no WANDB_API_KEY"
    url = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai"))
    host, port = url.hostname or "api.wandb.ai", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError:
        return "offline", f"{host} is unreachable"
    return "online", ""


@SINKS.register("wandb")
class WandbSink:
    """Weights & Biases, as verl logs to it; offline runs land in ``<run_dir>/wandb`` (``wandb sync`` uploads)."""

    def __init__(self, run_dir: Path, run: RunInfo) -> None:
        mode, why = wandb_mode()
        if why:
            logger.warning("wandb: %s; logging offline into %s (upload with `wandb sync`)", why, run_dir / "wandb")
        # wandb makes temporary folders when imported and starts its service in init: both under the run
        with files_under(run_dir / "wandb", WANDB_FOLDERS, temp=True):
            import wandb

            settings = wandb.Settings(silent=True, console="off", disable_git=True)
            self.run = wandb.init(project=run.project, name=run.name, config=run.config, dir=str(run_dir),
                                  mode=mode, settings=settings)

    def write(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


#: The sink every run writes, listed in ``trainer.logger`` or not.
RECORD_SINK = "jsonl"


class MetricsLogger:
    """Fan one step's metrics out to the configured sinks (only on the writing rank)."""

    def __init__(self, run_dir: Path, sinks: list[str], enabled: bool, run: RunInfo | None = None) -> None:
        # metrics.jsonl is the run's own record (the reward plot and resume read it), whatever the loggers
        # a verl script lists (``trainer.logger=[console,wandb]``)
        classes = [SINKS.get(s) for s in dict.fromkeys([*sinks, RECORD_SINK])]
        run_dir.mkdir(parents=True, exist_ok=True)
        self.sinks = [cls(run_dir, run or RunInfo()) for cls in classes] if enabled else []

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for sink in self.sinks:
            try:
                sink.write(step, metrics)
            except OSError as exc:  # name the file: a write error on an open file carries no path
                if exc.filename or not hasattr(sink, "path"):
                    raise
                raise OSError(exc.errno, exc.strerror, str(sink.path)) from exc

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
