"""The original siiRL's OpenVLA-OFT on LIBERO script trains on the real simulator (ci/tier_libero.sh): its
overrides as published, the embedded VLA standing in for its model path, the arithmetic rows for its task
files, and what makes it fit a CPU in minutes appended (one worker, one task of two trajectories, episodes of
8 steps in chunks of 4, one step, no validation or checkpoint). Its success-rate bounds (keep tasks solved 10-90%
of the time) are switched off: an untrained policy solves none, so every group would be dropped and the step
would stop at its generation budget (``max_num_gen_batches``), as it would in the original."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from launch_scripts import replays, write_task_data

from siirl.environment import libero_setup

pytestmark = pytest.mark.skipif(libero_setup.libero_package() is None, reason="LIBERO is not installed")

SCRIPT = "siirl/examples/embodied_srpo_trainer/run_openvla_oft_libero_spatial"
SMALL = [
    "trainer.n_gpus_per_node=1", "trainer.total_training_steps=1", "trainer.val_before_train=False",
    "trainer.save_freq=-1", "data.train_batch_size=1", "data.val_files=[]", "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=1", "actor_rollout_ref.embodied.action_chunks_len=4",
    "actor_rollout_ref.embodied.env.max_steps=8", "actor_rollout_ref.embodied.env.num_steps_wait=2",
    "actor_rollout_ref.embodied.env.num_envs=2", "env.timeout_s=300",
    "algorithm.embodied_sampling.filter_accuracy=False",
]


def test_the_original_libero_spatial_script_trains_on_the_real_simulator(tmp_path, repo_root):
    data = write_task_data(tmp_path / "data", train_rows=16, val_rows=4)
    [replay] = replays(SCRIPT, tmp_path, data, [*SMALL, f"trainer.output_dir={tmp_path / 'run'}"])
    flags = [f"--config-path={replay.config_path}"] if replay.config_path else []
    flags += [f"--config-name={replay.config_name}"] if replay.config_name else []
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    done = subprocess.run([sys.executable, "-m", "siirl.main_dag", *flags, *replay.overrides], cwd=replay.cwd,
                          env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    [metrics] = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any(key.startswith("env/success_rate/task_") for key in metrics)
    assert metrics["env/errors"] == 0.0 and metrics["env/steps"] == 2.0  # two chunks of 4 in an 8-step episode
