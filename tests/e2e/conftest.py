"""End-to-end runs of ``siirl.main_dag`` on the embedded model, on the session's Ray and warm workers
(``ray_session`` in tests/conftest.py)."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def workflow_run(tmp_path_factory, ray_session):
    """``workflow_run(name)``: (exit code, run folder) of the workflow's two-step training
    (``workflow_runs.WORKFLOWS``), trained once per process."""
    from .e2e_helpers import run_main
    from .workflow_runs import WORKFLOWS

    done: dict[str, tuple[int, Path]] = {}

    def run(name: str) -> tuple[int, Path]:
        if name not in done:
            run_dir = tmp_path_factory.mktemp(f"workflow_{name}") / name
            done[name] = (run_main(run_dir, "trainer.total_training_steps=2", *WORKFLOWS[name]), run_dir)
        return done[name]

    return run
