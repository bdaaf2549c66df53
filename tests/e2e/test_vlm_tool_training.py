"""Two training steps of verl's geo3k multi-turn tool script (``examples/sglang_multiturn/geo3k``) as
published: its config file (``custom_chat_template``, ``return_multi_modal_inputs: False``), the geo3k tool
YAML and image rows, on a tiny Qwen2.5-VL. Only the batch and lengths are cut so the run takes a minute on
the CPU (at the script's 256 prompts x 16 samples x 2048 tokens it would take hours here); the script's
other overrides are replayed unchanged."""

import importlib.util
import sys
from pathlib import Path

import pytest

from .e2e_helpers import read_metrics

_SPEC = importlib.util.spec_from_file_location(
    "launch_scripts", Path(__file__).resolve().parent.parent / "cli" / "launch_scripts.py"
)
replay_helpers = sys.modules.setdefault("launch_scripts", importlib.util.module_from_spec(_SPEC))
if not hasattr(replay_helpers, "replays"):
    _SPEC.loader.exec_module(replay_helpers)

SCRIPT = "verl/examples/sglang_multiturn/geo3k/run_qwen2.5-3b_geo3k_multiturn"
SMALL = [
    "data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.rollout.n=2",
    "data.max_response_length=16", "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "data.val_batch_size=4",
]


@pytest.mark.slow
def test_two_steps_of_verls_geo3k_multi_turn_tool_script(tmp_path, ray_session, monkeypatch):
    from siirl.main_dag import main

    data = replay_helpers.write_task_data(tmp_path / "data", train_rows=8, val_rows=4)
    run_dir = tmp_path / "run"
    (replay,) = replay_helpers.replays(
        SCRIPT, tmp_path, data, [*SMALL, "trainer.total_training_steps=2", f"trainer.output_dir={run_dir}"]
    )
    monkeypatch.chdir(replay.cwd)
    assert main(["--config-path", replay.config_path, "--config-name", replay.config_name, *replay.overrides]) == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all("tools/calls" in r and "env/turns" in r for r in steps)  # the tool loop ran
