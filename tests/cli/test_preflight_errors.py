"""Mistakes a DAG worker would find only after Ray started are found by the launcher first: one line, exit 2.

Each case is one the launcher used to report as an opaque worker failure (exit 1) after 15-26 s.
"""

import os
import shutil
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from siirl.embedded_assets import default_model_path
from siirl.main_dag import EXIT_USER_ERROR, main


def run(capsys, *args):
    code = main(["--print-config", "device=cpu", *args])
    err = capsys.readouterr().err.strip()
    return code, err


def assert_one_line(code, err, *needles):
    assert code == EXIT_USER_ERROR, err
    assert err.startswith("siirl: error:") and "\n" not in err, err
    for needle in needles:
        assert needle in err, err


def _parquet(path, prompts, ground_truths=None):
    rows = len(prompts)
    truths = ["2"] * rows if ground_truths is None else ground_truths
    rewards = [{"style": "rule", "ground_truth": truth} for truth in truths]
    pq.write_table(pa.table({"prompt": prompts, "data_source": ["siirl/arith_add"] * rows, "reward_model": rewards}),
                   path)
    return path


def test_row_without_ground_truth_for_a_rule_reward(capsys, tmp_path):
    path = _parquet(tmp_path / "gt.parquet", ["1+1="] * 64, ["2"] * 40 + [None] + ["2"] * 23)
    assert_one_line(*run(capsys, f"data.train_files=[{path}]"), f"{path} row 40 has no reward_model.ground_truth")
    # a reward model scores without it
    assert run(capsys, f"data.train_files=[{path}]", "reward_model.enable=true")[0] == 0


def test_duplicated_parquet_column(capsys, tmp_path):
    table = pq.read_table(_parquet(tmp_path / "one.parquet", ["1+1="] * 64))
    doubled = pa.Table.from_arrays([*table.columns, table.column("data_source")], [*table.column_names, "data_source"])
    pq.write_table(doubled, tmp_path / "dup.parquet")
    assert_one_line(*run(capsys, f"data.train_files=[{tmp_path / 'dup.parquet'}]"),
                    "has the column 'data_source' more than once")


def test_custom_pipeline_function_that_raises(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken_pipeline.py").write_text("def build():\n    raise RuntimeError('no graph today')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert_one_line(*run(capsys, "dag.custom_pipeline_fn=broken_pipeline:build"),
                    "dag.custom_pipeline_fn 'broken_pipeline:build' raised RuntimeError: no graph today")


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        ("actor_rollout_ref.actor.policy_loss.loss_mode=bogus", ["loss_mode='bogus'", "vanilla"]),
        ("actor_rollout_ref.actor.loss_agg_mode=bogus", ["loss_agg_mode='bogus'", "token-mean"]),
        ("critic.loss_agg_mode=bogus", ["critic.loss_agg_mode='bogus'"]),
        ("algorithm.kl_penalty=bogus", ["algorithm.kl_penalty='bogus'", "low_var_kl"]),
        ("algorithm.weight_factor_in_cpgd=bogus", ["weight_factor_in_cpgd='bogus'", "STD_weight"]),
        ("reward_model.reward_manager=bogus", ["reward_model.reward_manager='bogus'", "naive"]),
        ("trainer.logger=[console,bogus]", ["trainer.logger='bogus'", "jsonl"]),
        ("actor_rollout_ref.model.attn_implementation=bogus", ["attn_implementation='bogus'", "sdpa"]),
    ],
)
def test_unknown_registry_name(capsys, override, needles):
    assert_one_line(*run(capsys, override), *needles)


def test_known_attention_forms_pass(capsys):
    assert run(capsys, "actor_rollout_ref.model.attn_implementation=eager")[0] == 0
    assert run(capsys, "actor_rollout_ref.model.attn_implementation=siirl_varlen_sdpa")[0] == 0


def test_batch_not_divisible_by_rollout_dp(capsys):
    code, err = run(capsys, "data.train_batch_size=3", "actor_rollout_ref.actor.ppo_mini_batch_size=3")
    assert_one_line(code, err, "data.train_batch_size=3", "data-parallel size 2")


def test_zero_row_parquet(capsys, tmp_path):
    path = _parquet(tmp_path / "empty.parquet", pa.array([], type=pa.string()))
    assert_one_line(*run(capsys, f"data.train_files=[{path}]"), str(path), "no rows")


def test_int_prompts(capsys, tmp_path):
    path = _parquet(tmp_path / "ints.parquet", list(range(64)))
    assert_one_line(*run(capsys, f"data.train_files=[{path}]"), str(path), "prompt must be a string")


def test_message_content_that_is_not_text(capsys, tmp_path):
    path = _parquet(tmp_path / "bytes.parquet", [[{"role": "user", "content": b"1+1="}]] * 64)
    assert_one_line(*run(capsys, f"data.train_files=[{path}]"), f"{path} row 0", "whose content is text")


def test_every_prompt_filtered_as_too_long(capsys, tmp_path):
    path = _parquet(tmp_path / "long.parquet", ["word " * 40] * 64)
    assert_one_line(*run(capsys, f"data.train_files=[{path}]"), str(path), "after filtering over-long prompts")


def test_prompt_too_long_without_filter(capsys, tmp_path):
    path = _parquet(tmp_path / "long.parquet", ["word " * 40] * 64)
    code, err = run(capsys, f"data.train_files=[{path}]", "data.filter_overlong_prompts=false")
    assert_one_line(code, err, f"{path} row 0", "data.max_prompt_length=16")


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_model_weights(capsys, tmp_path, damage):
    model = tmp_path / "model"
    shutil.copytree(default_model_path(), model)
    weights = model / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(b"\x00garbage" * 64 if damage == "garbage" else data[: len(data) // 2])
    assert_one_line(*run(capsys, f"actor_rollout_ref.model.path={model}"), str(weights), "corrupt or truncated")


def test_output_dir_under_a_file(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line(*run(capsys, f"trainer.output_dir={blocker}/run"), str(blocker), "not a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_output_dir_without_write_permission(capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        assert_one_line(*run(capsys, f"trainer.output_dir={locked}/run"), str(locked), "cannot write")
    finally:
        locked.chmod(0o755)


def test_missing_resume_path(capsys, tmp_path):
    missing = tmp_path / "nowhere" / "global_step_4"
    assert_one_line(*run(capsys, f"trainer.resume_mode={missing}"), str(missing), "not a siiRL checkpoint")


def test_unreachable_ray_address_fails_fast(tmp_path):
    """As a user runs it, from a shell: in this process the session's Ray may already run, and the launcher
    joins a Ray its process already runs."""
    began = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-m", "siirl.main_dag", "device=cpu", "trainer.ray_address=127.0.0.1:1",
         f"trainer.output_dir={tmp_path}"], check=False, env=env, capture_output=True, text=True, timeout=120,
    )
    err = done.stderr.strip().splitlines()
    assert done.returncode == EXIT_USER_ERROR and err[-1].startswith("siirl: error: cannot reach Ray at 127.0.0.1:1"), err
    assert time.monotonic() - began < 60


def _checkpoints(run_dir, steps):
    from siirl.dag_worker.checkpoint import CheckpointManager

    manager = CheckpointManager(run_dir / "checkpoints", rank=0, max_to_keep=0)
    for step in steps:
        manager.save(step, {}, {"step": step})
    return run_dir / "checkpoints"


def test_corrupt_checkpoint_is_refused_before_ray(capsys, tmp_path):
    state = _checkpoints(tmp_path, [1]) / "global_step_1" / "worker_0.json"
    state.write_text('{"step": 99}')
    code, err = run(capsys, f"trainer.output_dir={tmp_path}", "trainer.resume_mode=auto")
    assert_one_line(code, err, str(state), "sha256")


def test_dangling_pointer_is_refused_before_ray(capsys, tmp_path):
    root = _checkpoints(tmp_path, [1, 2])
    shutil.rmtree(root / "global_step_2")
    code, err = run(capsys, f"trainer.output_dir={tmp_path}", "trainer.resume_mode=auto")
    assert_one_line(code, err, "names step 2", "global_step_2 does not exist")


def test_auto_resume_pins_the_intact_checkpoint(capsys, tmp_path):
    root = _checkpoints(tmp_path, [1, 2])
    (root / "global_step_2" / "worker_0.json").write_text("{}")
    code = main(["--print-config", "device=cpu", f"trainer.output_dir={tmp_path}", "trainer.resume_mode=auto"])
    captured = capsys.readouterr()
    assert code == 0
    assert f"resume_mode: {root / 'global_step_1'}" in captured.out
