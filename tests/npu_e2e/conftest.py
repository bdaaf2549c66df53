"""A local Ray instance that offers two "NPU" resources and starts its workers with the fake torch_npu."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from tests.ray_testutils import own_ray

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "fakes"


@pytest.fixture
def fake_npu_ray(tmp_path) -> Iterator[Path]:
    """Ray with ``{"NPU": 2}`` whose workers import the fake torch_npu in host-tensor, file-trace mode.

    Yields the folder the workers write their device-call traces to. A Ray instance left running by an
    earlier test has neither the NPU resources nor the fake on its workers' path: it stops meanwhile.
    """
    trace_dir = tmp_path / "npu_traces"
    trace_dir.mkdir()
    path = os.pathsep.join(p for p in [str(FAKES), str(REPO), os.environ.get("PYTHONPATH", "")] if p)
    env = {
        "PYTHONPATH": path,
        "SIIRL_FAKE_NPU": "1",
        "SIIRL_FAKE_NPU_TRACE_DIR": str(trace_dir),
        "TOKENIZERS_PARALLELISM": "false",
        # Ray exports ASCEND_RT_VISIBLE_DEVICES for the NPUs it assigns; leaving that to siiRL's own pinning
        # makes the variable each worker saw at set_device the proof that siiRL pinned it.
        "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
    }
    with own_ray():
        yield from _fake_npu_ray(env, trace_dir)


def _fake_npu_ray(env: dict, trace_dir: Path) -> Iterator[Path]:
    # Ray probes the NPU model through AscendCL, absent here, and logs a full traceback at ERROR for it.
    probe_logger = logging.getLogger("ray._private.accelerators.npu")
    level = probe_logger.level
    probe_logger.setLevel(logging.CRITICAL)
    try:
        ray.init(address="local", num_cpus=4, resources={"NPU": 2}, runtime_env={"env_vars": env}, include_dashboard=False,
                 logging_level="ERROR")
    finally:
        probe_logger.setLevel(level)
    yield trace_dir
    ray.shutdown()
