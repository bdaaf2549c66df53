"""The launcher refuses a rollout engine the device family does not run, in one line, before Ray starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from siirl.errors import SiirlUserError
from siirl.main_dag import EXIT_USER_ERROR, main, prepare


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_cpu_rolls_out_with_hf_and_says_so_once(repo_root, engine):
    """device=cpu is an explicit request: a script naming vllm/sglang runs with hf, one warning line."""
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    command = [sys.executable, "-m", "siirl.main_dag", "device=cpu", f"actor_rollout_ref.rollout.name={engine}",
               "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "--print-config"]
    result = subprocess.run(command, check=False, cwd=repo_root, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and f"'{engine}'" in warnings[0] and "'hf'" in warnings[0], result.stderr
    assert "not applied" in warnings[0]
    assert "name: hf" in result.stdout and "tensor_model_parallel_size: 1" in result.stdout


def test_missing_engine_on_an_accelerator_stays_an_error(fake_cuda, monkeypatch):
    """On a device that could run the engine, a missing package is an error, not a silent fallback."""
    monkeypatch.setitem(sys.modules, "vllm", None)  # "not installed"
    cfg, *_ = prepare(["device=cuda", "actor_rollout_ref.rollout.name=vllm"])
    assert cfg.actor_rollout_ref.rollout.name == "vllm"
    from siirl.device import get_backend
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    from .accel_testutils import model_cfg, rollout_cfg

    with pytest.raises(SiirlUserError, match="vllm"):
        VLLMRolloutEngine(model_cfg(""), rollout_cfg("vllm"), get_backend("cuda"), max_response_length=4)


def test_auto_device_does_not_fall_back(capsys, monkeypatch):
    """Only an explicit device=cpu falls back; device=auto landing on the CPU keeps the one-line refusal."""
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["device=auto", "actor_rollout_ref.rollout.name=vllm", "--print-config"]) == EXIT_USER_ERROR
    assert "rollout engine 'vllm' is not supported on device=cpu" in capsys.readouterr().err


def test_sglang_is_not_an_npu_engine(fake_torch_npu, capsys):
    message = r"^rollout engine 'sglang' is not supported on device=npu; supported: hf, vllm$"
    with pytest.raises(SiirlUserError, match=message):
        prepare(["device=npu", "actor_rollout_ref.rollout.name=sglang"])
    assert main(["device=npu", "actor_rollout_ref.rollout.name=sglang", "--print-config"]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.strip().splitlines() == [
        "siirl: error: rollout engine 'sglang' is not supported on device=npu; supported: hf, vllm"
    ]

