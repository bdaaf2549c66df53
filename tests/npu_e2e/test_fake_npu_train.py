"""``python -m siirl.main_dag device=npu`` trains two GRPO steps through the NPU backend, end to end.

No Ascend hardware here: Ray offers two "NPU" resources and its workers import the fake torch_npu
(tests/fakes) with ``SIIRL_FAKE_NPU=1``, which keeps tensors on the host while every device decision still
goes through the NPU backend. The workers write the device calls they made to per-process trace files;
this test reads them to prove what each worker asked of the NPU stack.

Where a real torch_npu is installed this test steps aside: the NPU CI job (ci/workflows/ci.yml) runs the
same job on the hardware, with vLLM-Ascend and no fakes.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from siirl import driver
from siirl.main_dag import main
from tests.ray_testutils import OWN_RAY_GROUP

pytestmark = [
    pytest.mark.slow,
    OWN_RAY_GROUP,
    pytest.mark.timeout(240),
    pytest.mark.skipif(importlib.util.find_spec("torch_npu") is not None,
                       reason="a real torch_npu is installed: the NPU CI job runs this end to end on hardware"),
]

#: Two DAG workers (one per fake NPU), 8 prompts x 4 samples per step, the embedded model and data.
SMALL_NPU_JOB = [
    "device=npu",
    "trainer.n_devices_per_node=2",
    "trainer.total_training_steps=2",
    "data.train_batch_size=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "data.val_batch_size=32",
    "trainer.val_before_train=false",
    "trainer.logger=[console,jsonl]",
]
#: Fused kernels the NPU patches route the model through, and the fused log-prob.
NPU_KERNELS = {"npu_rms_norm", "npu_rotary_mul", "npu_fusion_attention", "npu_cross_entropy_loss"}


def worker_traces(trace_dir: Path) -> dict[int, list[dict[str, Any]]]:
    """Global rank -> calls of each process that joined torch.distributed (its first hccl group is the
    default group, created with the global rank)."""
    from torch_npu.trace import read_traces

    by_rank = {}
    for calls in read_traces(trace_dir).values():
        groups = [c["args"] for c in calls if c["call"] == "hccl_group"]
        if groups:
            by_rank[groups[0][0]] = calls
    return by_rank


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def run_fake_npu_job(run_dir: Path, monkeypatch, *extra: str) -> tuple[int, list[list[dict[str, float]]]]:
    """Run ``main`` in this process on the running Ray; its exit code and the bundles it reserved."""
    reserved: list[list[dict[str, float]]] = []
    real_placement_group = driver.placement_group

    def recording_placement_group(bundles, *args, **kwargs):
        reserved.append([dict(b) for b in bundles])
        return real_placement_group(bundles, *args, **kwargs)

    monkeypatch.setattr(driver, "placement_group", recording_placement_group)
    return main([*SMALL_NPU_JOB, f"trainer.output_dir={run_dir}", *extra]), reserved


def test_grpo_two_steps_through_the_npu_backend(fake_torch_npu, fake_npu_ray, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    exit_code, reserved = run_fake_npu_job(run_dir, monkeypatch)
    assert exit_code == 0

    assert reserved == [[{"CPU": 1.0, "NPU": 1.0}] * 2], "one CPU+NPU bundle per DAG worker"

    workers = worker_traces(fake_npu_ray)
    assert sorted(workers) == [0, 1]
    visible = {}
    for rank, calls in workers.items():
        assert [2] == sorted({c["args"][1] for c in calls if c["call"] == "hccl_group"}), "hccl over both ranks"
        pinned = [c for c in calls if c["call"] == "set_device"]
        assert pinned and all(c["args"] == [0] for c in pinned), "a pinned worker sees its device at index 0"
        assert all(c["ray_resources"].get("NPU") == 1.0 for c in pinned), "the worker actor holds one NPU"
        ids = {c["env"]["ASCEND_RT_VISIBLE_DEVICES"] for c in pinned}
        assert len(ids) == 1 and None not in ids, f"rank {rank} pinned inconsistently: {ids}"
        visible[rank] = ids.pop()
        placed = [c["args"] for c in calls if c["call"] == "device"]
        assert placed and all(args == [0] for args in placed), "models were placed via the NPU backend"
        names = {c["call"] for c in calls}
        assert NPU_KERNELS <= names, f"rank {rank} never ran {sorted(NPU_KERNELS - names)}"
        assert {"manual_seed_all", "is_available"} <= names
    assert len(set(visible.values())) == 2 and all("," not in v for v in visible.values()), visible

    steps = [row for row in read_metrics(run_dir) if "actor/pg_loss" in row]
    assert [row["step"] for row in steps] == [1, 2]
    assert all("reward/mean" in row and "actor/grad_norm" in row for row in steps)
