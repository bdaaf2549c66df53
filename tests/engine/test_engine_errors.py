"""Bad model paths and engine settings fail with one clear line (a SiirlUserError / ConfigError)."""

from __future__ import annotations

import shutil

import pytest
import torch
from engine_testutils import actor_config, model_config

from siirl.device import get_backend
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.workers import ActorWorker, ModelLoadError, load_tokenizer
from siirl.engine.workers.model_loading import resolve_dtype
from siirl.engine.workers.optim import build_lr_scheduler
from siirl.errors import ConfigError, SiirlUserError
from siirl.params.model import OptimConfig, RolloutConfig


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    assert isinstance(exc.value, SiirlUserError)
    return message


def test_missing_model_path(tmp_path, single_process_group):
    with pytest.raises(ModelLoadError) as exc:
        ActorWorker(model_config(tmp_path / "nowhere"), actor_config(), "cpu")
    assert "model path" in _one_line(exc) and "nowhere" in str(exc.value)


def test_empty_model_path():
    with pytest.raises(ModelLoadError, match="model.path is empty") as exc:
        load_tokenizer(model_config(""))
    _one_line(exc)


def test_dir_without_config(tmp_path):
    with pytest.raises(ModelLoadError, match="no config.json") as exc:
        load_tokenizer(model_config(tmp_path))
    _one_line(exc)


def test_model_dir_without_tokenizer(tiny_model_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        shutil.copy(tiny_model_dir / name, bare / name)
    with pytest.raises(ModelLoadError, match="no usable tokenizer") as exc:
        load_tokenizer(model_config(bare))
    _one_line(exc)
    with pytest.raises(ModelLoadError, match="tokenizer_path"):
        make_rollout_engine(
            "hf",
            model_cfg=model_config(bare),
            rollout_cfg=RolloutConfig(),
            backend="cpu",
            max_response_length=4,
        )
    # an explicit tokenizer_path repairs it
    assert load_tokenizer(model_config(bare, tokenizer_path=str(tiny_model_dir))).eos_token_id == 1


def test_bad_settings():
    with pytest.raises(ConfigError, match="model.dtype='fp8'"):
        resolve_dtype("fp8", get_backend("cpu"))
    optim = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(ConfigError, match="lr_scheduler_type 'linearish'"):
        build_lr_scheduler(optim, OptimConfig(lr_scheduler_type="linearish"))


def test_update_with_missing_keys_names_them(tiny_model_dir, single_process_group):
    from engine_testutils import make_batch

    actor = ActorWorker(model_config(tiny_model_dir), actor_config(use_kl_loss=True), "cpu")
    batch = make_batch(4).exclude("ref_log_prob", "advantages")
    with pytest.raises(ValueError, match=r"needs batch keys \['advantages', 'ref_log_prob'\]"):
        actor.update_policy(batch)
