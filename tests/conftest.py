"""Shared fixtures: fake accelerator stacks and skipping of device-marked tests."""

import importlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
FAKES = Path(__file__).resolve().parent / "fakes"

#: Markers of tests that need real hardware of that device family.
DEVICE_MARKERS = ("cuda", "npu")


def pytest_configure(config):
    """Every job of this run, in any process, appends one line to a ledger the session checks at its end."""
    from siirl.job_ledger import LEDGER_ENV

    if LEDGER_ENV not in os.environ:
        handle, path = tempfile.mkstemp(prefix="siirl_job_ledger_", suffix=".jsonl")
        os.close(handle)
        os.environ[LEDGER_ENV] = config.siirl_job_ledger = path


def pytest_sessionfinish(session, exitstatus):
    """The start-up budget (tests/job_budget.py): a run that started more than it may fails, whatever passed."""
    from siirl.job_ledger import read_ledger
    from tests.job_budget import over_budget, spent, top_starters

    path = getattr(session.config, "siirl_job_ledger", None)
    if path is None:
        return
    jobs = read_ledger(path)
    os.unlink(path)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    over = over_budget(jobs)
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(f"siirl jobs of this run: {spent(jobs)}")
        reporter.write_line(f"most DAG workers started by: {top_starters(jobs)}")
        for line in over:
            reporter.write_line(f"start-up budget exceeded: {line}", red=True)
    if over and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _label_jobs(request, monkeypatch):
    """Jobs of this test (in any process it starts) carry its id in the ledger."""
    from siirl.job_ledger import LABEL_ENV

    monkeypatch.setenv(LABEL_ENV, request.node.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Device-marked tests run only where that device family is really usable; tests on the session's Ray
    are ``slow`` (``-m "not slow"`` is the quick tier).

    Markers are looked up with ``get_closest_marker``: a parametrize id such as ``cuda`` is a keyword of
    the item too, and must not make a CPU test look hardware-bound.
    """
    from siirl.device import get_backend
    from siirl.errors import DeviceUnavailableError

    for item in items:  # a test that trains on the session's Ray is in the slow tier, marked or not
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    for marker in DEVICE_MARKERS:
        try:
            get_backend(marker)
            continue
        except DeviceUnavailableError as exc:
            reason = str(exc)
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
    _keep_xdist_groups_together(config, items)


def _keep_xdist_groups_together(config, items) -> None:
    """Tag each ``xdist_group`` test's id with its group, as pytest-xdist does under ``--dist loadgroup``:
    pytest 9 keeps a node's id in ``_id``, and xdist (3.8) still writes ``_nodeid``, which pytest 9 no longer
    reads, so without this every test of a group could land in another process and each process would build
    the group's expensive fixture (a Ray cluster of its own) again."""
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")) or not hasattr(pytest.Item, "id"):
        return  # not an xdist worker of loadgroup, or pytest 8, whose ids xdist tags itself
    from _pytest.nodes import coerce_node_id

    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)


@pytest.fixture(autouse=True)
def _no_real_accelerators(request, monkeypatch):
    """Every test not marked for a device family sees a host without accelerators, GPU hosts included.

    In this process torch reports no CUDA device and ``import torch_npu`` fails; subprocesses and Ray
    clusters started by the test inherit an empty ``CUDA_VISIBLE_DEVICES``. Fixtures that fake a device
    (``fake_cuda``, ``fake_torch_npu``) run after this one and win.
    """
    if any(request.node.get_closest_marker(m) is not None for m in DEVICE_MARKERS):
        return
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture
def fake_torch_npu(monkeypatch):
    """Install the fake torch_npu for one test; afterwards ``import torch_npu`` fails again.

    ``torch.npu`` stays: the fake renamed torch's PrivateUse1 device to "npu" (irreversible in a process),
    and torch then expects that module to exist (e.g. in ``fork_rng``). Without an importable torch_npu the
    NPU backend still reports itself unavailable.
    """
    monkeypatch.syspath_prepend(str(FAKES))
    sys.modules.pop("torch_npu", None)
    module = importlib.import_module("torch_npu")
    module.CALLS.clear()
    yield module
    sys.modules.pop("torch_npu", None)


@pytest.fixture
def fake_cuda(monkeypatch):
    """Make torch report two CUDA devices without touching any GPU API."""
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append(("set_device", i)))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append(("synchronize", a)))
    return calls


@pytest.fixture(scope="session")
def ray_session():
    """The session's Ray, with warm DAG workers that every job of the session borrows (siirl.worker_pool):
    a job pays for its model and data, not for starting worker processes (tests/job_budget.py)."""
    import ray

    from siirl.worker_pool import warm_workers
    from tests.ray_testutils import start_local_ray

    if not ray.is_initialized():
        start_local_ray()
    with warm_workers() as pool:
        yield pool
    ray.shutdown()


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def load_benchmark():
    """Import a script of ``benchmarks/`` by file name: they are scripts, not a package."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
