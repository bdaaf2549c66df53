"""Metric sinks and the end-of-run plot."""

import json
from pathlib import Path

import pytest
from dist_testutils import RANKS_GROUP, spawn
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from siirl.dag_worker.metrics import MetricsLogger, RunInfo, reduce_metrics
from siirl.dag_worker.plot import plot_run

pytestmark = [RANKS_GROUP]


def test_jsonl_and_tensorboard_sinks(tmp_path):
    log = MetricsLogger(tmp_path, ["console", "jsonl", "tensorboard"], enabled=True)
    log.log(1, {"reward/mean": 0.25, "val/score": 0.5})
    log.log(2, {"reward/mean": 0.5})
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"step": 1, "reward/mean": 0.25, "val/score": 0.5}, {"step": 2, "reward/mean": 0.5}]
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert scalars == {"reward/mean": [(1, 0.25), (2, 0.5)], "val/score": [(1, 0.5)]}
    assert plot_run(tmp_path).stat().st_size > 1000


def test_disabled_logger_writes_nothing(tmp_path):
    MetricsLogger(tmp_path, ["jsonl"], enabled=False).log(1, {"a": 1.0})
    assert not (tmp_path / "metrics.jsonl").exists()


def test_unknown_sink_is_named(tmp_path):
    with pytest.raises(ValueError, match="wandbx"):
        MetricsLogger(tmp_path, ["wandbx"], enabled=True)


def test_reduce_without_process_group_is_identity():
    assert reduce_metrics({"a": 1.0, "b/max": 2.0}) == {"a": 1.0, "b/max": 2.0}


def _reduce_rank(rank: int, world_size: int, out_dir: str) -> None:
    got = reduce_metrics({"a": 1.0 + 2 * rank, "len/max": 3.0 - rank, "len/min": 5.0 + rank, "reward/errors": 9.0 + rank})
    # workers of different placement groups report different keys: each key over those that have it
    own = {"a": 1.0 + 2 * rank, f"only{rank}/max": 7.0 + rank, "len/min": 5.0 + rank}
    got["union"] = reduce_metrics(own, same_keys=False)
    (Path(out_dir) / f"{rank}.json").write_text(json.dumps(got))


def test_reduce_over_two_ranks_means_maxes_mins_and_sums_counters(tmp_path):
    spawn(_reduce_rank, 2, str(tmp_path))
    union = {"a": 2.0, "len/min": 5.0, "only0/max": 7.0, "only1/max": 8.0}
    want = {"a": 2.0, "len/max": 3.0, "len/min": 5.0, "reward/errors": 19.0, "union": union}
    assert [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)] == [want, want]


def _reduce_rank_extra_keys(rank: int, world_size: int, out_dir: str) -> None:
    own = {"reward/mean": float(rank), **({"reward_extra/carry": 1.0} if rank == 0 else {})}
    (Path(out_dir) / f"{rank}.json").write_text(json.dumps(reduce_metrics(own)))


def test_score_function_extra_keys_that_differ_between_ranks_still_reduce(tmp_path):
    """A score function's extra values depend on the data sources a rank drew: the ranks' keys may differ."""
    spawn(_reduce_rank_extra_keys, 2, str(tmp_path))
    want = {"reward/mean": 0.5, "reward_extra/carry": 1.0}
    assert [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)] == [want, want]


def test_a_resumed_run_records_each_step_once(tmp_path):
    first = MetricsLogger(tmp_path, ["jsonl"], enabled=True)
    for step in (0, 1, 2, 3):
        first.log(step, {"reward/mean": float(step)})
    first.close()  # the first attempt died after step 3; its newest intact checkpoint is step 2
    resumed = MetricsLogger(tmp_path, ["jsonl"], enabled=True, run=RunInfo(resumed_at=2))
    resumed.log(3, {"reward/mean": 30.0})
    resumed.close()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["reward/mean"]) for r in records] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 30.0)]


@pytest.mark.parametrize("where", ["default", "VERL_FILE_LOGGER_ROOT", "VERL_FILE_LOGGER_PATH"])
def test_verls_file_logger_writes_verls_records_where_verl_does(tmp_path, monkeypatch, where):
    monkeypatch.delenv("VERL_FILE_LOGGER_ROOT", raising=False)
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    expected = {
        "default": tmp_path / "run" / "exp.jsonl",
        "VERL_FILE_LOGGER_ROOT": tmp_path / "root" / "proj" / "exp.jsonl",
        "VERL_FILE_LOGGER_PATH": tmp_path / "mine.jsonl",
    }[where]
    if where != "default":
        monkeypatch.setenv(where, str(tmp_path / ("root" if where.endswith("ROOT") else "mine.jsonl")))
    log = MetricsLogger(tmp_path / "run", ["file"], enabled=True, run=RunInfo("proj", "exp"))
    log.log(1, {"reward/mean": 0.25})
    log.log(2, {"reward/mean": 0.5})
    log.close()
    rows = [json.loads(line) for line in expected.read_text().splitlines()]
    assert rows == [{"step": 1, "data": {"reward/mean": 0.25}}, {"step": 2, "data": {"reward/mean": 0.5}}]
    assert (tmp_path / "run" / "metrics.jsonl").is_file()  # the run's own record is written as always


def test_trainer_logger_file_is_accepted():
    from siirl.config_checks import load_config

    assert list(load_config(["device=cpu", "trainer.logger=[console,file]"]).trainer.logger) == ["console", "file"]
