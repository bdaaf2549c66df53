"""``data.image_patch_size`` as verl's Qwen3.5 scripts pass it: a positive integer or one line before Ray, and
one warning before Ray when it is not the policy's own patch size (verl resizes twice then; so does siiRL)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from launch_scripts import replays, write_task_data

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.main_dag import prepare

SCRIPT = "verl_2026_08/examples/grpo_trainer/run_qwen3_5_2b_openr1_fsdp"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", "data.image_patch_size=0 is invalid; expected > 0"), ("-16", "data.image_patch_size=-16 is invalid"),
     ("abc", "key: data.image_patch_size"), ("1.5", "key: data.image_patch_size")],
)
def test_a_bad_patch_size_is_one_line(value, expected):
    with pytest.raises(ConfigError) as err:
        load_config([f"data.image_patch_size={value}"])
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_default_leaves_the_resize_to_the_image_processor():
    assert load_config([]).data.image_patch_size is None


def test_the_qwen3_5_script_plans_at_16_and_warns_once_at_another_size(tmp_path, monkeypatch, caplog):
    data = write_task_data(tmp_path / "data", image_train_rows=128)
    (replay,) = replays(SCRIPT, tmp_path, data, [f"trainer.output_dir={tmp_path / 'out'}"])
    model = Path(load_config(replay.overrides).actor_rollout_ref.model.path)
    assert json.loads((model / "config.json").read_text())["vision_config"]["patch_size"] == 16
    monkeypatch.chdir(replay.cwd)
    warnings = {}
    for size in (16, 14):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            # its vLLM rollout at tp 4 plans only at its own size (8 devices); the resize does not depend on the engine
            prepare([*replay.overrides, "actor_rollout_ref.rollout.name=hf",
                     "actor_rollout_ref.rollout.tensor_model_parallel_size=1", f"data.image_patch_size={size}"],
                    replay.config_path, replay.config_name)
        warnings[size] = [r.getMessage() for r in caplog.records if "data.image_patch_size" in r.getMessage()]
    assert warnings[16] == []
    (line,) = warnings[14]
    assert "policy's image patch size (16)" in line and "set data.image_patch_size=16" in line
