"""The CPU-checkable parts of benchmarks/bench_gpu_step.py: model shape, saved dir, launcher overrides."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_gpu_step.py"


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_gpu_step")


def test_full_size_model_is_qwen25_05b_shaped(bench):
    config = bench.model_config()
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
            config.intermediate_size, config.tie_word_embeddings) == (896, 24, 14, 2, 4864, True)
    assert 357e6 < bench.parameter_count(config) < 359e6


def test_smoke_model_loads_through_siirl_and_overrides_plan(bench, tmp_path, fake_cuda):
    from siirl.device import get_backend
    from siirl.engine.workers.model_loading import load_causal_lm, load_tokenizer
    from siirl.main_dag import prepare
    from siirl.params.model import ModelConfig

    model_dir = bench.build_and_save(tmp_path / "model", smoke=True)
    cfg = ModelConfig(path=str(model_dir), dtype="float32")
    model, tokenizer = load_causal_lm(cfg, get_backend("cpu"), torch.float32), load_tokenizer(cfg)
    batch = bench.prompt_batch(tokenizer, torch.device("cpu"))
    assert batch["input_ids"].shape[0] == bench.PROMPTS * bench.SAMPLES
    with torch.no_grad():
        assert model(**batch).logits.shape[-1] == len(tokenizer)
    run_cfg, backend, _, plan = prepare(bench.launcher_overrides(model_dir, tmp_path / "run", steps=6))
    assert backend.name == "cuda" and plan.world_size == 1
    assert run_cfg.data.max_response_length == bench.NEW_TOKENS and run_cfg.actor_rollout_ref.rollout.n == bench.SAMPLES
    assert run_cfg.actor_rollout_ref.actor.use_kl_loss


def test_stage_seconds_skip_the_first_step(bench):
    rows = [{"step": s, "timing_s/step": 10.0 / s, "timing_s/gen": 5.0 / s, "actor/pg_loss": 0.0,
             "response_length/mean": 100.0} for s in (1, 2, 3)]
    stages = bench.stage_seconds([*rows, {"val/score": 0.1}])
    assert stages["gen"] == pytest.approx((2.5 + 5 / 3) / 2)
    assert stages["response_tokens"] == 100.0 * bench.PROMPTS * bench.SAMPLES


def test_without_cuda_one_line_and_nonzero_exit():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "CUDA" in done.stderr
