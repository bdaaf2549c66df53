"""What one run of the test suite may start: a count, not a time, so a busy host cannot flake it.

Every ``run_job`` in any process of the run (subprocess launches included) appends a line to the ledger
(``siirl.job_ledger``). Jobs of the e2e suite borrow the session's warm DAG workers
(``tests/e2e/conftest.py::ray_session``) and start none; a job that starts its own workers or its own Ray
pays here. A new test that must (faults, several Ray nodes, a subprocess launch) raises the budget and
says why beside it.
"""

from __future__ import annotations

#: Ledger field -> most the whole suite may spend.
#: Measured on the 2-core host with two processes: 98 jobs, 43 worker start-ups, 8 Rays started (a fresh-clone
#: `.ci/run`). Each more process (`-n 4` on a 4-core host) starts its own session Ray and pool (+1 Ray, +2 workers
#: at least, more where one of its jobs changes the pool's shape), hence the margin; the groups (own Ray, shared
#: trainings) stay in one process whatever the count.
BUDGET = {
    "jobs": 120,
    # +2 workers, +1 Ray: tests/e2e/test_nothing_outside_run_dir.py launches a job with its own HOME and TMPDIR;
    # +2 workers, +2 Ray connections: tests/e2e/test_shared_cluster.py's two launchers join the session's Ray
    # +2 workers, +1 Ray: tests/e2e/test_faults.py kills the rollout rank of a separate_async job (its own Ray)
    "workers_started": 56,
    "started_ray": 12,
}


def spent(jobs: list[dict]) -> dict[str, int]:
    return {"jobs": len(jobs), **{key: sum(int(job[key]) for job in jobs) for key in BUDGET if key != "jobs"}}


def over_budget(jobs: list[dict]) -> list[str]:
    """One line per ledger field over its budget."""
    total = spent(jobs)
    return [f"{key}: {total[key]} > {limit} (tests/job_budget.py)" for key, limit in BUDGET.items() if total[key] > limit]


def top_starters(jobs: list[dict], count: int = 16) -> str:
    """The tests whose jobs started the most DAG workers: where the next saving is."""
    started: dict[str, int] = {}
    for job in jobs:
        label = job.get("label") or "?"
        started[label] = started.get(label, 0) + int(job["workers_started"])
    top = sorted(((n, label) for label, n in started.items() if n), reverse=True)[:count]
    return ", ".join(f"{label} ({n})" for n, label in top) or "none"
