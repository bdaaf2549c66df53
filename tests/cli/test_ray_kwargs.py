"""verl's ``ray_kwargs.ray_init`` reaches ``ray.init`` as in verl; its uv launcher key is accepted and said
once, not refused."""

import inspect
import logging

import pytest
import ray
from ray.runtime_env import RuntimeEnv

from siirl.cluster import ray_init_options
from siirl.config_checks import load_config
from siirl.errors import ConfigError

UV = "uv run --frozen --all-packages --extra vllm"


def _ray_init(*overrides: str) -> dict:
    return load_config(["device=cpu", *overrides]).ray_kwargs.ray_init


def test_ray_init_keys_reach_ray_init_and_pass_its_validation():
    user = _ray_init(
        "ray_kwargs.ray_init.num_cpus=3", "+ray_kwargs.ray_init.num_gpus=2",
        "+ray_kwargs.ray_init.runtime_env.env_vars.TRANSFER_QUEUE_ENABLE=1",
    )
    for address, ours in ((None, None), ("10.0.0.5:6379", {"env_vars": {"PYTHONPATH": "/job"}})):
        options = ray_init_options(address, ours, user)
        assert options["num_cpus"] == 3 and options["num_gpus"] == 2
        assert options["runtime_env"]["env_vars"]["TRANSFER_QUEUE_ENABLE"] == "1"
        inspect.signature(ray.init).bind(**options)  # every key is one ray.init takes
        RuntimeEnv(**options["runtime_env"])  # Ray's own runtime_env validation
    assert options["runtime_env"]["env_vars"]["PYTHONPATH"] == "/job"  # merged over siiRL's, key by key


def test_without_ray_kwargs_the_options_are_siirls():
    assert ray_init_options(None, None, _ray_init()) == ray_init_options(None)


@pytest.mark.parametrize(("value", "warned"), [(f"'{UV}'", True), ("null", False)])
def test_uv_launcher_key_is_dropped_and_said_once(caplog, value, warned):
    with caplog.at_level(logging.WARNING):
        user = _ray_init(f"ray_kwargs.ray_init.runtime_env.py_executable={value}")
    assert "py_executable" not in user.get("runtime_env", {})
    said = [r for r in caplog.records if "py_executable" in r.getMessage()]
    assert len(said) == int(warned)
    assert "runtime_env" not in ray_init_options(None, None, user)


def test_a_misspelt_ray_init_key_is_one_line():
    with pytest.raises(ConfigError, match=r"ray_kwargs.ray_init.num_gpu is not an argument .*num_gpus"):
        _ray_init("+ray_kwargs.ray_init.num_gpu=2")


def test_verls_gb200_branch_plans_and_its_num_gpus_reaches_ray_init(tmp_path, monkeypatch):
    """verl's current GRPO script on a GB200 (``MACHINE=gb200``) pins ``+ray_kwargs.ray_init.num_gpus`` beside
    its other Blackwell overrides: the script plans, and the count is what ``ray.init`` gets."""
    from launch_scripts import replays, write_task_data

    from siirl.main_dag import prepare

    gb200 = ["actor_rollout_ref.rollout.enforce_eager=True", "actor_rollout_ref.rollout.free_cache_engine=True",
             "actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16", "+ray_kwargs.ray_init.num_gpus=4"]
    data = write_task_data(tmp_path / "data", train_rows=1024)
    (replay,) = replays("verl_2026_08/examples/grpo_trainer/run_qwen3_8b_fsdp", tmp_path, data,
                        [*gb200, f"trainer.output_dir={tmp_path / 'out'}"])
    monkeypatch.chdir(replay.cwd)
    cfg, *_ = prepare(replay.overrides, replay.config_path, replay.config_name)
    assert ray_init_options(None, None, cfg.ray_kwargs.ray_init)["num_gpus"] == 4
