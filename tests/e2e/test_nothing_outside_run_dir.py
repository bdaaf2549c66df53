"""Nothing a run writes lands outside ``trainer.output_dir``: a job logging to every writer of the default
(console, jsonl) and to wandb offline, launched with an empty ``HOME``, ``TMPDIR`` and working directory,
leaves there only what is listed in ``OUTSIDE`` (each with the reason it cannot move, as docs/reliability.md
says). A subprocess launch with its own Ray: ``HOME`` and ``TMPDIR`` must differ from the session's
(tests/job_budget.py counts it). One run covers both: wandb only adds files to what the default writes."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .e2e_helpers import FAST

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
#: What may appear outside the run directory, by where it lands, and why it stays there.
OUTSIDE = {
    "TMPDIR/ray": "Ray's session folder: it holds Ray's Unix sockets, whose paths must fit in 108 bytes "
                  "(RAY_TMPDIR or ray_kwargs.ray_init._temp_dir move it)",
    f"TMPDIR/torchinductor_{os.environ.get('USER') or 'root'}": "torch's compile cache folder, made when torch "
                  "is imported and shared by runs on purpose (TORCHINDUCTOR_CACHE_DIR moves it)",
}


def _written(roots: dict[str, Path]) -> list[str]:
    return sorted(f"{name}/{path.relative_to(root)}" for name, root in roots.items() for path in root.rglob("*"))


def test_a_run_writes_nothing_outside_its_output_dir():
    pytest.importorskip("wandb")
    # short paths: Ray's and wandb's Unix sockets live under TMPDIR and the run directory
    base = Path(tempfile.mkdtemp(prefix="sr-", dir="/tmp"))
    roots = {"HOME": base / "home", "TMPDIR": base / "tmp", "CWD": base / "cwd"}
    for root in roots.values():
        root.mkdir()
    run_dir = base / "run"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "WANDB_", "RAY_", "MPLCONFIGDIR", "TORCHINDUCTOR"))}
    env.update(HOME=str(roots["HOME"]), TMPDIR=str(roots["TMPDIR"]), WANDB_MODE="offline",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "siirl.main_dag", *FAST, f"trainer.output_dir={run_dir}",
             "trainer.total_training_steps=1", "trainer.logger=[console,jsonl,wandb]"],
            cwd=roots["CWD"], env=env, capture_output=True, text=True, timeout=300, check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (run_dir / "metrics.jsonl").is_file()
        assert list((run_dir / "wandb").glob("offline-run-*"))
        unexplained = [p for p in _written(roots) if not any(p == k or p.startswith(f"{k}/") for k in OUTSIDE)]
        assert unexplained == []
    finally:
        shutil.rmtree(base, ignore_errors=True)
