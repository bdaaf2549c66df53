"""``device=cuda`` GRPO through the launcher on one GPU, exactly as a user starts it."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_three_grpo_steps_on_one_gpu(tmp_path):
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "siirl.main_dag", "device=cuda", "trainer.n_devices_per_node=1",
        "trainer.total_training_steps=3", "trainer.val_before_train=false", "trainer.test_freq=-1",
        "trainer.logger=[console,jsonl]", f"trainer.output_dir={run_dir}", "trainer.ray_address=local",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    for row in steps:
        assert all(row[f"timing_s/{stage}"] > 0 for stage in ("gen", "old_log_prob", "update_actor")), row
        assert row["actor/grad_norm"] == row["actor/grad_norm"]  # finite, not NaN
