"""The suite's start-up budget counts what every job started, and fails a run that goes over."""

import json

from siirl.job_ledger import LEDGER_ENV, read_ledger, record_job
from tests.job_budget import BUDGET, over_budget, spent, top_starters


def test_every_job_appends_one_line(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    record_job(world_size=2, workers_started=2, started_ray=True)
    record_job(world_size=2, workers_started=0, started_ray=False)
    jobs = read_ledger(ledger)
    assert [json.loads(line)["workers_started"] for line in ledger.read_text().splitlines()] == [2, 0]
    assert spent(jobs) == {"jobs": 2, "workers_started": 2, "started_ray": 1}
    assert over_budget(jobs) == []


def test_a_run_over_budget_is_named():
    jobs = [{"world_size": 2, "workers_started": 2, "started_ray": 0}] * (BUDGET["workers_started"] // 2 + 1)
    assert [line.split(":")[0] for line in over_budget(jobs)] == ["workers_started"]


def test_no_ledger_no_writes(tmp_path, monkeypatch):
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    record_job(world_size=1, workers_started=1, started_ray=False)
    assert list(tmp_path.iterdir()) == []


def test_jobs_carry_the_test_that_ran_them_and_the_top_starters_are_named(tmp_path, monkeypatch, request):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    record_job(world_size=2, workers_started=2, started_ray=False)
    monkeypatch.setenv("SIIRL_JOB_LABEL", "tests/other.py::test_b")
    record_job(world_size=1, workers_started=1, started_ray=False)
    record_job(world_size=1, workers_started=0, started_ray=False)
    jobs = read_ledger(ledger)
    assert jobs[0]["label"] == request.node.nodeid  # set for every test by the root conftest
    assert top_starters(jobs) == f"{request.node.nodeid} (2), tests/other.py::test_b (1)"
