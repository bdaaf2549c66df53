"""A Ray the launcher starts itself hands the job's environment to every worker without a runtime_env."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .e2e_helpers import FAST

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

USER_NODES = textwrap.dedent('''
    """A user's module next to where the job starts: importable by the workers only through the job's PYTHONPATH."""
    import os
    from pathlib import Path

    from siirl.dag_worker.builtin_nodes import compute_reward
    from siirl.execution.dag.builtin_pipelines import grpo_pipeline


    def reward_here(batch, config=None, **kwargs):
        Path(os.environ["MARKER_DIR"], f"{os.getpid()}.{os.environ['TOKENIZERS_PARALLELISM']}").touch()
        return compute_reward(batch, config, **kwargs)


    def build():
        graph = grpo_pipeline()
        graph.nodes["function_reward"].executable_ref = "user_nodes:reward_here"
        return graph
''')


def test_workers_import_modules_from_the_job_directory(tmp_path):
    job_dir, markers = tmp_path / "job", tmp_path / "markers"
    job_dir.mkdir()
    markers.mkdir()
    (job_dir / "user_nodes.py").write_text(USER_NODES, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "MARKER_DIR": str(markers)}
    env.pop("RAY_ADDRESS", None)
    env.pop("TOKENIZERS_PARALLELISM", None)
    done = subprocess.run(
        [sys.executable, "-m", "siirl.main_dag", *FAST, "dag.custom_pipeline_fn=user_nodes:build",
         f"trainer.output_dir={tmp_path / 'run'}", "trainer.total_training_steps=1", "trainer.val_before_train=false"],
        cwd=job_dir, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = sorted(p.name.split(".", 1)[1] for p in markers.iterdir())
    assert seen and set(seen) == {"false"}, "every worker ran the user's node with the job's environment"
    assert len({p.name.split(".")[0] for p in markers.iterdir()}) == 2, "both DAG workers ran it"
