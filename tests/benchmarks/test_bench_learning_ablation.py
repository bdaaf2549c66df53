"""benchmarks/bench_learning_ablation.py without training: each row's command line (the row's overrides, the seed
on both the workers and the data order, TRL through its own interpreter and thread count) and the standard error
the table reports."""

import math
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_learning_ablation")


def test_siirl_row_runs_the_default_command_with_its_overrides_and_seed(bench):
    argv = bench.row_command("shuffled mini-batches", 2, 40, ["data.train_batch_size=16"], None, 1, Path("o"))
    assert argv[1:5] == ["-m", "siirl.main_dag", "device=cpu", "trainer.output_dir=o"]
    assert argv[-5:] == [
        "actor_rollout_ref.actor.shuffle=true",
        "trainer.seed=2",
        "data.seed=2",
        "data.train_batch_size=16",
        "trainer.total_training_steps=40",
    ]
    assert not any(
        "total_training_steps" in a for a in bench.row_command("default", 1, -1, [], None, 1, Path("o"))
    )


def test_trl_row_runs_trl_grpo_with_its_interpreter_and_threads(bench):
    argv = bench.row_command("trl", 1, -1, [], "/venv/bin/python", 1, Path("t"))
    assert argv[0] == "/venv/bin/python" and argv[1].endswith("benchmarks/trl_grpo.py")
    assert argv[2:6] == ["--out", "t", "--threads", "1"] and argv[-2:] == ["trainer.seed=1", "data.seed=1"]


def test_every_row_changes_one_known_key(bench):
    from siirl.config_checks import load_config

    for name, overrides in bench.ROWS.items():
        assert len(overrides) <= 1, name
        load_config(["device=cpu", *overrides])  # every override is a real key with an allowed value


def test_standard_error_is_binomial_over_the_prompts(bench):
    assert bench.final_score_error(0.36, 256) == pytest.approx(math.sqrt(0.36 * 0.64 / 256))
    assert bench.final_score_error(0.0, 256) == 0.0
