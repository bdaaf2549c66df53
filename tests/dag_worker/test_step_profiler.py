"""``global_profiler.tool=torch``: one Chrome trace per profiled step and rank, under the run's folder."""

import json

import pytest
import torch

from siirl.config_checks import load_config
from siirl.dag_worker.step_profiler import profiled_step
from siirl.errors import ConfigError


def test_profiled_steps_write_a_trace_per_rank_and_others_nothing(tmp_path):
    cfg = load_config([f"trainer.output_dir={tmp_path}", "global_profiler.tool=torch", "global_profiler.steps=[2]"])
    for step in (1, 2):
        with profiled_step(cfg, step, rank=1):
            torch.ones(64, 64) @ torch.ones(64, 64)
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json")] == ["profile/step_2/rank_1.json"]
    trace = json.loads((tmp_path / "profile" / "step_2" / "rank_1.json").read_text())
    assert any("mm" in event.get("name", "") for event in trace["traceEvents"])


def test_verls_device_profilers_stay_refused_naming_torch():
    with pytest.raises(ConfigError, match="use torch"):
        load_config(["global_profiler.tool=nsys"])
