"""Two jobs with different output directories on one Ray cluster (``trainer.ray_address``) run side by side,
each to the metrics it reaches alone. Both join the session's Ray from their own launcher process in ONE Ray
namespace, so only the job-scoped actor names (``siirl.ray_names``) keep their DAG workers and progress
boards apart. One DAG worker each: they fit beside the session's warm workers."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .e2e_helpers import FAST, read_metrics

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
COMPARED = ("reward/mean", "actor/pg_loss", "actor/grad_norm")


def test_two_jobs_on_one_cluster_run_side_by_side(tmp_path, ray_session):
    import ray

    address = ray.get_runtime_context().gcs_address
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    runs = {name: tmp_path / name for name in ("a", "b")}
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "siirl.main_dag", *FAST, f"trainer.output_dir={run_dir}",
             "trainer.n_devices_per_node=1", "trainer.total_training_steps=2", f"trainer.ray_address={address}",
             "+ray_kwargs.ray_init.namespace=siirl_shared_cluster_test"],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for name, run_dir in runs.items()
    }
    errors = {name: proc.communicate(timeout=400)[1] for name, proc in procs.items()}
    for name, proc in procs.items():
        assert proc.returncode == 0, errors[name][-2000:]
    metrics = {name: read_metrics(run_dir) for name, run_dir in runs.items()}
    assert [r["step"] for r in metrics["a"]] == [r["step"] for r in metrics["b"]] == [1, 2]
    # the same seeded job twice: what each reaches beside the other is what it reaches alone
    for a, b in zip(metrics["a"], metrics["b"]):
        assert {k: a[k] for k in COMPARED if k in a} == {k: b[k] for k in COMPARED if k in b}
        assert "reward/mean" in a
