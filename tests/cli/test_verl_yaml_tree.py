"""verl's YAML tree loads under the override rules: defaults lists with placed groups, ``_target_`` dropped,
``${oc.select:...}`` resolved after the command line; verl keys siiRL lacks fail in one line naming them."""

from pathlib import Path

import pytest

from siirl.config_checks import load_config
from siirl.embedded_assets import default_data_files, default_model_path
from siirl.errors import ConfigError
from siirl.main_dag import EXIT_USER_ERROR, main

VERL_CONFIG = Path(__file__).resolve().parent.parent / "fixtures" / "verl_config"


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def verl_style_tree(tmp_path) -> Path:
    """A tree shaped like verl's: a group placed under a nested key, _target_ entries, oc.select."""
    return _write(tmp_path, {
        "trainer_main.yaml": (
            "defaults:\n  - actor@actor_rollout_ref.actor: my_actor\n  - _self_\n"
            "algorithm:\n  _target_: verl.trainer.config.AlgoConfig\n  gamma: 0.99\n"
            "data:\n  max_prompt_length: 12\n"
        ),
        "actor/my_actor.yaml": (
            "_target_: verl.workers.config.FSDPActorConfig\n"
            "ppo_mini_batch_size: 8\n"
            "optim:\n  _target_: verl.workers.config.FSDPOptimizerConfig\n  lr: 3.0e-5\n"
            "ppo_max_token_len_per_gpu: ${oc.select:data.max_prompt_length,99}\n"
        ),
    })


def test_placed_groups_targets_and_interpolations(verl_style_tree):
    cfg = load_config(["device=cpu"], config_path=str(verl_style_tree), config_name="trainer_main")
    actor = cfg.actor_rollout_ref.actor
    assert (actor.ppo_mini_batch_size, actor.optim.lr, cfg.algorithm.gamma) == (8, 3.0e-5, 0.99)
    assert actor.ppo_max_token_len_per_gpu == 12


def test_interpolations_see_the_command_line(verl_style_tree):
    cfg = load_config(["data.max_prompt_length=20"], config_path=str(verl_style_tree), config_name="trainer_main")
    assert cfg.actor_rollout_ref.actor.ppo_max_token_len_per_gpu == 20


def test_unknown_verl_key_in_the_file_fails_in_one_line(tmp_path):
    _write(tmp_path, {"main.yaml": "algorithm:\n  _target_: x.Y\n  no_such_verl_key: 1\n"})
    with pytest.raises(ConfigError, match="no_such_verl_key"):
        load_config([], config_path=str(tmp_path), config_name="main")


def test_verls_own_ppo_trainer_plans_as_shipped():
    """verl's full tree, unmodified, with only the model and data paths swapped and the CPU chosen: every key
    in it has a status (tests/cli/test_verl_tree_keys.py), so it plans."""
    train, val = default_data_files()
    cfg = load_config(
        ["device=cpu", f"actor_rollout_ref.model.path={default_model_path()}",
         f"data.train_files={train}", f"data.val_files={val}", "actor_rollout_ref.rollout.n=3"],
        config_path=str(VERL_CONFIG), config_name="ppo_trainer",
    )
    assert cfg.trainer.device == "cpu"  # the command line's device beats the file's trainer.device: cuda
    assert cfg.actor_rollout_ref.model.tokenizer_path in ("", None)  # verl's null: not set
    assert cfg.actor_rollout_ref.actor.optim.lr == 1e-6  # verl's value, kept
    assert cfg.actor_rollout_ref.rollout.n == 3  # the per-role copies (actor.rollout_n, ...) follow it


def test_verls_tree_refuses_a_non_default_value_in_one_line(tmp_path):
    _write(tmp_path, {"main.yaml": (
        "defaults:\n  - ppo_trainer\n  - _self_\n"
        "actor_rollout_ref:\n  actor:\n    fsdp_config:\n      full_determinism: true\n"
    )})
    for entry in VERL_CONFIG.iterdir():  # verl's tree beside a user file that extends it
        (tmp_path / entry.name).symlink_to(entry)
    with pytest.raises(ConfigError, match="full_determinism=True: verl's full-determinism mode") as info:
        load_config(["device=cpu"], config_path=str(tmp_path), config_name="main")
    assert "\n" not in str(info.value)


def test_file_keys_follow_the_override_rules(tmp_path):
    """A key of the file is renamed, dropped at its no-op value, refused otherwise, as on the command line."""
    _write(tmp_path, {"main.yaml": (
        "actor_rollout_ref:\n  actor:\n    use_torch_compile: true\n    ulysses_sequence_parallel_size: 1\n"
        "    optim:\n      clip_grad: 0.5\n"
    )})
    cfg = load_config([], config_path=str(tmp_path), config_name="main")
    assert cfg.actor_rollout_ref.actor.grad_clip == 0.5
    _write(tmp_path, {"main.yaml": "actor_rollout_ref:\n  actor:\n    optim:\n      optimizer: SGD\n    bogus_a: 1\n"})
    with pytest.raises(ConfigError, match="2 keys of the config file cannot be applied") as info:
        load_config([], config_path=str(tmp_path), config_name="main")
    assert "torch AdamW" in str(info.value) and "unknown key actor_rollout_ref.actor.bogus_a" in str(info.value)


def test_verls_megatron_tree_is_refused_as_megatron(capsys):
    code = main(["--print-config", "--config-path", str(VERL_CONFIG), "--config-name", "ppo_megatron_trainer"])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "megatron" in err and "\n" not in err, err


@pytest.mark.parametrize("tree", ["verl_config_2026_02", "verl_config_2026_08"])
def test_verls_later_trees_load_as_shipped(tree):
    """verl's tree after its February 2026 reward move and its current one (reward.*, critic.fsdp.*,
    model_engine, lora.*, distillation.*): ``--config-path`` into either loads, as b178a3c's does."""
    train, val = default_data_files()
    cfg = load_config(
        ["device=cpu", f"actor_rollout_ref.model.path={default_model_path()}",
         f"data.train_files={train}", f"data.val_files={val}"],
        config_path=str(VERL_CONFIG.parent / tree), config_name="ppo_trainer",
    )
    assert cfg.actor_rollout_ref.actor.optim.lr == 1e-6 and cfg.trainer.device == "cpu"
    assert cfg.reward_model.reward_manager == "naive"  # reward.reward_manager.name, moved back
