"""Long runs stay flat: the default job for many steps, its processes' memory and file descriptors sampled.

Launches ``python -m siirl.main_dag`` (the default job: the embedded task, 32 prompts x 5 samples a step,
250 steps an epoch) for ``--steps`` steps (default 2000: 8 epochs) into a fresh output directory, and every
``--every`` steps (default 50) records the driver's and every DAG worker's RSS and open file descriptors
(psutil, workers found by ``<output_dir>/workers/rank_<r>.pid``; descriptors as the fewest of three reads 0.1 s
apart, so a file open for one write is not counted) and the size of ``metrics.jsonl``. After the
warm-up (the first ``--warmup`` steps, default 10% of the run) the total RSS must grow by less than
``--max-growth`` (5%) and every process's descriptor count must stay the same while it trains (the final
step's sample is taken as the workers close their files).

Prints a table, then one JSON line (``flat``: both held).

    python benchmarks/bench_soak.py [--steps 2000] [--every 50] [--warmup N] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
MB = 1024.0**2


def _process(path: Path) -> psutil.Process | None:
    try:
        return psutil.Process(int(path.read_text()))
    except (OSError, ValueError, psutil.Error):
        return None


#: Descriptor reads per sample and the pause between them: the fewest open is the count. A sample is taken just
#: as a step lands in metrics.jsonl, when a worker may hold a file open for that moment's write (TensorBoard,
#: a log, a checkpoint); a leaked descriptor stays open across every read, a write's closes within them.
FD_READS, FD_READ_GAP_S = 3, 0.1


def _usage(proc: psutil.Process | None) -> tuple[float, int]:
    """(RSS in MB, open fds) of ``proc``; (0, 0) once it is gone."""
    try:
        rss = proc.memory_info().rss / MB
        fds = []
        for read in range(FD_READS):
            time.sleep(FD_READ_GAP_S if read else 0.0)
            fds.append(proc.num_fds())
        return rss, min(fds)
    except (AttributeError, psutil.Error):
        return 0.0, 0


class StepCounter:
    """The last step in ``metrics.jsonl``, reading only what was appended since the last look."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.step, self.partial = path, 0, 0, b""

    def poll(self) -> int:
        if not self.path.is_file():
            return self.step
        with open(self.path, "rb") as file:
            file.seek(self.offset)
            data = self.partial + file.read()
        self.offset += len(data) - len(self.partial)
        *lines, self.partial = data.split(b"\n")
        for line in lines:
            if line.strip():
                self.step = max(self.step, int(json.loads(line).get("step", 0)))
        return self.step


def sample(step: int, driver: psutil.Process, run_dir: Path) -> dict:
    workers = sorted((run_dir / "workers").glob("rank_*.pid"))
    row = {"step": step, "driver": _usage(driver)}
    for pid_file in workers:
        row[pid_file.stem] = _usage(_process(pid_file))
    metrics = run_dir / "metrics.jsonl"
    row["metrics_kb"] = metrics.stat().st_size / 1024 if metrics.is_file() else 0.0
    return row


def soak(steps: int, every: int, overrides: list[str], run_dir: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "siirl.main_dag", f"trainer.output_dir={run_dir}",
               f"trainer.total_training_steps={steps}", *overrides]
    log = open(run_dir.parent / "job.log", "w")  # noqa: SIM115 - a file, not a pipe: a full pipe would stop the job
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    driver, counter, rows, due = psutil.Process(proc.pid), StepCounter(run_dir / "metrics.jsonl"), [], every
    while proc.poll() is None:
        step = counter.poll()
        if step >= due:
            rows.append(sample(step, driver, run_dir))
            print(f"step {step}: total RSS {total_rss(rows[-1]):.0f} MB", file=sys.stderr, flush=True)
            due = (step // every + 1) * every
        time.sleep(0.2)
    log.close()
    if proc.returncode != 0:
        tail = (run_dir.parent / "job.log").read_text().strip().splitlines()[-1:]
        raise SystemExit(f"the job failed ({proc.returncode}): {tail}")
    return rows


def processes(row: dict) -> list[str]:
    return [key for key in row if key == "driver" or key.startswith("rank_")]


def total_rss(row: dict) -> float:
    return sum(row[key][0] for key in processes(row))


def verdict(rows: list[dict], warmup: int, max_growth: float, total: int) -> dict:
    """RSS from the first sample after ``warmup`` to the last; descriptors on the samples before the final
    step (at the final step the workers are already closing their loggers and environments)."""
    after = [row for row in rows if row["step"] >= warmup]
    running = [row for row in after if row["step"] < total] or after
    if len(after) < 2:
        raise SystemExit(f"too few samples after the warm-up ({len(after)}); run more steps")
    first, last = total_rss(after[0]), total_rss(after[-1])
    fds = {key: sorted({row[key][1] for row in running}) for key in processes(after[0])}
    growth = (last - first) / first
    return {
        "steps": rows[-1]["step"], "warmup_steps": warmup, "rss_after_warmup_mb": round(first, 1),
        "rss_end_mb": round(last, 1), "rss_growth": round(growth, 4), "rss_peak_mb": round(max(map(total_rss, after)), 1),
        "fds": {key: values for key, values in fds.items()}, "metrics_kb": round(rows[-1]["metrics_kb"], 1),
        "flat": growth < max_growth and all(len(values) == 1 for values in fds.values()),
    }


def table(rows: list[dict]) -> str:
    names = processes(rows[0])
    head = "| step | " + " | ".join(f"{n} RSS MB / fds" for n in names) + " | total RSS MB | metrics.jsonl KB |"
    lines = [head, "|" + " --- |" * (len(names) + 3)]
    for row in rows:
        cells = " | ".join(f"{row[n][0]:.0f} / {row[n][1]}" for n in names)
        lines.append(f"| {row['step']} | {cells} | {total_rss(row):.0f} | {row['metrics_kb']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--warmup", type=int, help="steps before the baseline sample (default: 10%% of --steps)")
    parser.add_argument("--max-growth", type=float, default=0.05)
    args, overrides = parser.parse_known_args()
    warmup = args.warmup if args.warmup is not None else max(args.every, args.steps // 10)
    with tempfile.TemporaryDirectory(prefix="siirl-soak-") as folder:
        rows = soak(args.steps, args.every, overrides, Path(folder) / "run")
    result = verdict(rows, warmup, args.max_growth, args.steps)
    print(table(rows))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
