"""One JSON line per job in ``$SIIRL_JOB_LEDGER`` (when set): how many DAG worker processes it started.

Start-up, not training, is what a short job costs, so whoever runs many jobs (a test suite, a sweep) can
count what each one started, across every process that inherits the variable (subprocess launches
included), and hold the total to a budget.
"""

from __future__ import annotations

import json
import os

LEDGER_ENV = "SIIRL_JOB_LEDGER"
#: Who ran the job (a test's id, a sweep's trial), written beside its counts so a total can be traced back.
LABEL_ENV = "SIIRL_JOB_LABEL"


def record_job(*, world_size: int, workers_started: int, started_ray: bool) -> None:
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    line = json.dumps({"pid": os.getpid(), "world_size": world_size, "workers_started": workers_started,
                       "started_ray": started_ray, "label": os.environ.get(LABEL_ENV, "")})
    with open(path, "a", encoding="utf-8") as ledger:  # one short append: whole lines even from several processes
        ledger.write(line + "\n")


def read_ledger(path: str | os.PathLike) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as ledger:
            return [json.loads(line) for line in ledger if line.strip()]
    except FileNotFoundError:
        return []
