"""verl's trainer-level keys mean here what they mean in verl, or end as ONE line before Ray starts."""

import importlib.util
from pathlib import Path

import pytest
from cli_testutils import one_line_refusal

from siirl.config_checks import load_config
from siirl.dag_worker.checkpoint import checkpoint_root
from siirl.errors import ConfigError


def _refusal(capsys, *overrides: str) -> str:
    return one_line_refusal(capsys, "--print-config", "device=cpu", *overrides)


@pytest.mark.parametrize("name", ["swanlab", "mlflow"])
def test_unsupported_logger_is_named(capsys, name):
    err = _refusal(capsys, f"trainer.logger=[console,{name}]")
    assert f"trainer.logger={name} is not supported" in err and "wandb" in err


def test_wandb_without_the_package_names_the_extra(capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    assert "pip install siirl[wandb]" in _refusal(capsys, "trainer.logger=[console,wandb]")


@pytest.mark.parametrize("spelling", ["dapo", "Dapo", "DAPO"])
def test_workflow_type_is_case_insensitive(spelling):
    assert load_config([f"algorithm.workflow_type={spelling}"]).algorithm.workflow_type == "DAPO"


@pytest.mark.parametrize(
    ("overrides", "kept"),
    [
        ([], 2),
        (["trainer.max_actor_ckpt_to_keep=3"], 3),
        (["trainer.max_critic_ckpt_to_keep=1"], 1),
        (["trainer.max_actor_ckpt_to_keep=4", "trainer.max_critic_ckpt_to_keep=4"], 4),
    ],
)
def test_verl_retention_sets_max_ckpt_to_keep(overrides, kept):
    assert load_config(overrides).trainer.max_ckpt_to_keep == kept


def test_different_actor_and_critic_retention_is_refused(capsys):
    err = _refusal(capsys, "trainer.max_actor_ckpt_to_keep=3", "trainer.max_critic_ckpt_to_keep=1")
    assert "max_actor_ckpt_to_keep=3" in err and "max_critic_ckpt_to_keep=1" in err


def test_resume_path_reads_resume_from_path(tmp_path):
    folder = str(tmp_path / "global_step_4")
    cfg = load_config(["trainer.resume_mode=resume_path", f"trainer.resume_from_path={folder}"])
    assert cfg.trainer.resume_mode == folder
    assert load_config([f"trainer.resume_from_path={folder}"]).trainer.resume_mode == "auto"  # ignored, as in verl
    with pytest.raises(ConfigError, match="resume_from_path"):
        load_config(["trainer.resume_mode=resume_path"])


def test_default_local_dir_moves_the_checkpoints(tmp_path):
    cfg = load_config([f"trainer.output_dir={tmp_path / 'run'}"])
    assert checkpoint_root(cfg.trainer) == tmp_path / "run" / "checkpoints"
    cfg = load_config([f"trainer.output_dir={tmp_path / 'run'}", f"trainer.default_local_dir={tmp_path / 'ckpt'}"])
    assert checkpoint_root(cfg.trainer) == Path(tmp_path / "ckpt")


def test_critic_warmup_is_a_step_count(capsys):
    assert load_config(["trainer.critic_warmup=2"]).trainer.critic_warmup == 2
    assert "trainer.critic_warmup=-1" in _refusal(capsys, "trainer.critic_warmup=-1")
