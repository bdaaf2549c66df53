"""What a new user meets before Ray starts or around a run: more workers than CPUs, a resumed run, an output
folder holding an earlier run, a score function that cannot take its manager's call, a tool prompt too long
for ``data.max_prompt_length``, the closing line's times."""

from __future__ import annotations

import dataclasses
import time

import pytest
import ray
from launch_scripts import tool_template_model

from siirl import driver, startup_timing
from siirl.agent_loop.tool_parser import TOOL_PARSERS
from siirl.config_checks import load_config
from siirl.dag_worker.checkpoint import CheckpointManager
from siirl.earlier_run import ASIDE, set_aside_earlier_run
from siirl.finished_run import resume_message
from siirl.main_dag import EXIT_USER_ERROR, main
from tests.e2e.gsm8k_tool_yaml import GSM8K_TOOL_YAML
from tests.ray_testutils import ray_start_attempts


@pytest.fixture
def no_ray_yet(monkeypatch):
    """The launcher as a fresh shell runs it: no Ray joined (the session's Ray, if this process runs one, hidden)."""
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        (["trainer.n_gpus_per_node=4"], "trainer.n_gpus_per_node (or trainer.n_devices_per_node) / trainer.nnodes"),
        (["trainer.v1.trainer_mode=separate_async", "rollout.nnodes=1"], "rollout.nnodes / rollout.n_gpus_per_node"),
    ],
)
def test_more_workers_than_cpus_is_refused_before_ray_naming_the_keys(capsys, tmp_path, no_ray_yet, overrides, keys):
    with ray_start_attempts() as ray_starts:
        code = main(["device=cpu", f"trainer.output_dir={tmp_path}", "ray_kwargs.ray_init.num_cpus=2", *overrides])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USER_ERROR and not ray_starts
    assert len(err) == 1 and "4 DAG workers need 4 CPUs but the local Ray will have 2" in err[0] and keys in err[0]


def _saved(run_dir, step):
    manager = CheckpointManager(run_dir / "checkpoints", rank=0, max_to_keep=0)
    loader = {"epoch": 0, "position": 0, "num_rows": 64, "global_batch_size": 8}
    return manager.save(step, {}, {"step": step, "dataloader": loader})


def test_a_resumed_run_says_from_which_step_and_how_to_start_afresh(tmp_path):
    cfg = load_config(["device=cpu", f"trainer.output_dir={tmp_path}"])
    assert resume_message(cfg) is None  # nothing pinned: a fresh run says nothing
    path = _saved(tmp_path, 2)
    pinned = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, resume_mode=str(path)))
    assert resume_message(pinned) == (
        f"siirl: resuming from {path} at step 2; to start afresh instead, pass trainer.resume_mode=disable (or a "
        "new trainer.output_dir)"
    )


def test_a_fresh_run_sets_an_earlier_runs_records_aside_and_a_resumed_one_keeps_them(tmp_path, caplog):
    (tmp_path / "metrics.jsonl").write_text('{"step": 250}\n')
    (tmp_path / "reward_curve.png").write_bytes(b"png")
    (tmp_path / "tensorboard").mkdir()
    _saved(tmp_path, 250)
    resumed = load_config(["device=cpu", f"trainer.output_dir={tmp_path}"])  # resume_mode=auto finds step 250
    assert set_aside_earlier_run(resumed) is None and (tmp_path / "metrics.jsonl").is_file()
    fresh = load_config(["device=cpu", f"trainer.output_dir={tmp_path}", "trainer.resume_mode=disable"])
    aside = set_aside_earlier_run(fresh)
    assert aside.parent == tmp_path / ASIDE
    assert sorted(p.name for p in aside.iterdir()) == ["metrics.jsonl", "reward_curve.png", "tensorboard"]
    assert not (tmp_path / "metrics.jsonl").exists() and (tmp_path / "checkpoints").is_dir()
    assert f"its records (metrics.jsonl, reward_curve.png, tensorboard) moved to {aside}" in caplog.text
    assert set_aside_earlier_run(fresh) is None  # nothing left to set aside


@pytest.mark.parametrize(
    ("source", "manager", "needle"),
    [
        ("def compute_score(solution_str):\n    return 1.0\n", "naive", "too many positional arguments"),
        ("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n", "batch",
         "missing a required argument: 'data_source'"),
        ("def compute_score(:\n", "naive", "failed to import: SyntaxError"),
        ("def score(*a, **k):\n    return 1.0\n", "naive", "compute_score"),
    ],
)
def test_a_score_function_that_cannot_take_its_managers_call_is_refused_before_ray(
    capsys, tmp_path, source, manager, needle
):
    path = tmp_path / "my_reward.py"
    path.write_text(source)
    with ray_start_attempts() as ray_starts:
        code = main(["device=cpu", f"trainer.output_dir={tmp_path / 'run'}", f"custom_reward_function.path={path}",
                     f"reward_model.reward_manager={manager}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USER_ERROR and not ray_starts
    assert len(err) == 1 and "custom_reward_function" in err[0] and needle in err[0], err


@pytest.mark.parametrize("tool_format", sorted(TOOL_PARSERS.names()))
def test_a_prompt_too_long_with_the_tool_schemas_is_refused_before_ray_in_every_format(
    capsys, tmp_path, tool_format
):
    tools = tmp_path / "gsm8k_tool_config.yaml"
    tools.write_text(GSM8K_TOOL_YAML)
    with ray_start_attempts() as ray_starts:
        code = main([
            "device=cpu", f"trainer.output_dir={tmp_path / 'run'}", "actor_rollout_ref.rollout.multi_turn.enable=true",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tools}", "data.return_raw_chat=true",
            f"actor_rollout_ref.rollout.multi_turn.format={tool_format}", "data.max_prompt_length=24",
            f"actor_rollout_ref.model.path={tool_template_model(tmp_path)}",
        ])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USER_ERROR and not ray_starts
    assert len(err) == 1 and f"(format {tool_format})" in err[0]
    assert "a prompt rendered with the tool schemas takes" in err[0] and "data.max_prompt_length=24" in err[0]


def test_the_closing_lines_two_times_count_from_one_start():
    started = time.time() - 40.0
    line = driver.closing_line({startup_timing.TOTAL: 30.0, "reward/mean": 0.5}, started, "out")
    total = float(line.split("job finished in ")[1].split("s")[0])
    assert 40.0 <= total < 45.0 and "(first step after 30.0s): reward/mean=0.500; outputs in out" in line
