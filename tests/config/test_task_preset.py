"""``task=digits``: the embedded image task and tiny Qwen2-VL as one preset, its shipped paths named in YAML
by ``${siirl_asset:...}``; the default ``task=arith`` leaves the embedded text defaults as they were."""

from pathlib import Path

import pytest

import siirl.embedded_assets
from siirl.config_checks import load_config
from siirl.embedded_assets import (
    asset_path,
    default_data_files,
    default_model_path,
    default_vlm_data_files,
    default_vlm_model_path,
)
from siirl.errors import ConfigError, SiirlUserError


def test_digits_preset_names_the_embedded_vlm_and_its_data():
    cfg = load_config(["device=cpu", "task=digits"])
    assert cfg.actor_rollout_ref.model.path == default_vlm_model_path()
    assert (cfg.data.train_files, cfg.data.val_files) == tuple([f] for f in default_vlm_data_files())
    assert cfg.data.image_key == "images"
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(2e-4)
    assert cfg.trainer.output_dir == "outputs/siirl/grpo_tiny_vlm"


def test_running_sums_preset_names_the_long_tail_data_and_fits_its_longest_trace():
    cfg = load_config(["device=cpu", "task=running_sums"])
    assert cfg.data.train_files == [asset_path("data/running_sums/train.parquet")]
    assert cfg.data.val_files == [asset_path("data/running_sums/val.parquet")]
    assert cfg.actor_rollout_ref.model.path == asset_path("tiny_qwen2_running_sums")
    assert cfg.data.max_response_length >= 23 + 1  # 8 partial sums and EOS


def test_command_line_wins_over_the_preset():
    cfg = load_config(["task=digits", "trainer.total_training_steps=3", "actor_rollout_ref.actor.optim.lr=1e-4"])
    assert cfg.trainer.total_training_steps == 3
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-4)


def test_default_task_is_the_text_one():
    cfg = load_config([])
    assert cfg.actor_rollout_ref.model.path == default_model_path()
    assert cfg.data.train_files == [default_data_files()[0]]


def test_unknown_task_is_one_line():
    with pytest.raises(ConfigError, match=r"^bad config: unknown task 'digit'; valid tasks: arith, digits, running_sums$"):
        load_config(["task=digit"])


def test_missing_preset_asset_names_the_rebuild(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(siirl.embedded_assets, "ASSETS_DIR", tmp_path)
    with pytest.raises(SiirlUserError, match=r"^embedded asset missing: .*digits/train.parquet; rebuild it as siirl/assets/README.md says$"):
        load_config(["task=digits"])
