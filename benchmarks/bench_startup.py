"""Where README command 1 spends its time before the first training step, phase by phase.

Each round launches ``python -m siirl.main_dag device=cpu`` as a fresh process with
``trainer.total_training_steps=--steps`` (everything before the first step is the full command's: same
config, checks, data, models, loggers and validation before training), times it from launch to exit, and
reads the start-up phases rank 0 logs with step 1 (``timing_s/startup/<phase>`` in metrics.jsonl: marks
taken by the launcher, the driver and rank 0, see ``siirl/startup_timing.py``). The whole command's wall
is split into the time to the first step, the steps and validations that follow, and the end (reward plot,
Ray shut-down, exit); the CPU seconds of all its processes (launcher, Ray, workers) come last: on a busy
host they move less than the wall.

With ``--repo OTHER_CHECKOUT`` the rounds alternate between this checkout and the other one (e.g. an older
commit), and the table adds the other's medians and the per-round ratio this / other, measured in the same
run. A checkout without the start-up marks shows only its wall and CPU. Prints the table, then one JSON line.

    python benchmarks/bench_startup.py [--rounds 3] [--steps 2] [--repo OTHER_CHECKOUT] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.startup_timing import MARKS, PREFIX, TOTAL  # this checkout's package, not an installed one

FIRST_STEP = "= time to first step"
WALL = "= whole command wall"
CPU = "whole command CPU (all processes)"
#: Table rows after the start-up phases, in print order.
AFTER = ("first step", "later steps and validation", "end: plot, Ray shut-down, exit")
#: Seconds between two reads of the command's processes' CPU times.
POLL_S = 0.25


class TreeCPU:
    """CPU seconds of a process and of every process it starts, Ray's and the workers' included (they are not
    all reaped by their parents, so ``RUSAGE_CHILDREN`` misses them), read from /proc while they run (Linux;
    elsewhere None). A process's last moments before it ends, at most one poll, are missed."""

    def __init__(self, root: int) -> None:
        self.ticks: dict[int, int] = {root: 0}
        self.available = Path(f"/proc/{root}/stat").exists()

    def poll(self) -> None:
        if not self.available:
            return
        parents, ticks = {}, {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # not a process, or it just ended
            pid = int(entry.name)
            parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])  # ppid, utime + stime
        for pid in sorted(ticks):  # parents have lower pids, short of pid wrap-around
            if pid in self.ticks or parents[pid] in self.ticks:
                self.ticks[pid] = max(self.ticks.get(pid, 0), ticks[pid])

    def seconds(self) -> float | None:
        return sum(self.ticks.values()) / os.sysconf("SC_CLK_TCK") if self.available else None


def launch(repo: Path, run_dir: Path, steps: int, overrides: list[str]) -> dict:
    """One command, launch to exit: its wall seconds, the CPU seconds of all its processes, its metrics rows."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(repo), os.environ.get("PYTHONPATH")] if p)}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "siirl.main_dag", "device=cpu", f"trainer.output_dir={run_dir}",
               f"trainer.total_training_steps={steps}", *overrides]
    log = run_dir.parent / f"{run_dir.name}.log"
    began = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT)
        cpu = TreeCPU(proc.pid)
        while proc.poll() is None:
            cpu.poll()
            time.sleep(POLL_S)
    wall, code = time.perf_counter() - began, proc.returncode
    if code != 0:
        sys.exit(f"{command} failed with exit code {code}:\n{log.read_text(encoding='utf-8')[-2000:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"wall_s": wall, "cpu_s": cpu.seconds(), "rows": rows}


def split(rows: list[dict], wall_s: float, cpu_s: float | None = None) -> dict[str, float]:
    """Seconds per table row: the start-up phases present, the time to the first step, what follows it,
    and the wall; the phases add up to the time to the first step, and that and what follows to the wall.
    Then the CPU seconds of the whole command, where measured."""
    steps = [row for row in rows if "timing_s/step" in row]
    first = steps[0]
    out = {name: first[f"{PREFIX}{name}"] for name in MARKS if f"{PREFIX}{name}" in first}
    cpu = {} if cpu_s is None else {CPU: cpu_s}
    if TOTAL not in first:
        return {WALL: wall_s, **cpu}
    later = sum(row["timing_s/step"] + row.get("timing_s/reduce_metrics", 0.0) for row in steps[1:])
    validation = sum(row.get("timing_s/validate", 0.0) for row in steps)
    first_step = first["timing_s/step"] + first.get("timing_s/reduce_metrics", 0.0)
    out[FIRST_STEP] = first[TOTAL]
    out["first step"] = first_step
    out["later steps and validation"] = later + validation
    out["end: plot, Ray shut-down, exit"] = wall_s - first[TOTAL] - first_step - later - validation
    out[WALL] = wall_s
    return {**out, **cpu}


def summarize(rounds: list[dict[str, dict[str, float]]], sides: list[str]) -> dict:
    """Median seconds per row and side; with two sides, the median of the per-round ratios first / second."""
    names = [n for n in (*MARKS, FIRST_STEP, *AFTER, WALL, CPU) if any(n in r[side] for r in rounds for side in sides)]
    medians = {side: {n: statistics.median(r[side][n] for r in rounds) for n in names if all(n in r[side] for r in rounds)}
               for side in sides}
    ratios = {}
    if len(sides) == 2:
        mine, other = sides
        ratios = {n: statistics.median(r[mine][n] / r[other][n] for r in rounds)
                  for n in names if all(n in r[mine] and n in r[other] and r[other][n] > 0 for r in rounds)}
    return {"rows": names, "median_s": medians, "ratio": ratios}


def print_table(summary: dict, sides: list[str], n_rounds: int) -> None:
    print(f"seconds, median of {n_rounds} rounds")
    header = f"{'phase':<34}" + "".join(f"{side:>12}" for side in sides)
    print(header + (f"{sides[0] + ' / ' + sides[1]:>16}" if len(sides) == 2 else ""))
    for name in summary["rows"]:
        cells = "".join(
            f"{summary['median_s'][side][name]:>12.2f}" if name in summary["median_s"][side] else f"{'-':>12}"
            for side in sides
        )
        ratio = summary["ratio"].get(name)
        print(f"{name:<34}{cells}" + (f"{ratio:>15.2f}x" if ratio is not None else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="training steps per command (the start-up is the same)")
    parser.add_argument("--repo", type=Path, help="another checkout to alternate with (e.g. an older commit)")
    args, overrides = parser.parse_known_args(argv)
    repos = {"this": ROOT, **({"other": args.repo.resolve()} if args.repo else {})}
    sides = list(repos)
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = sides[r % len(sides):] + sides[: r % len(sides)]  # a busy neighbour hurts both alike
            runs = {side: launch(repos[side], Path(tmp) / f"{side}_{r}", args.steps, overrides) for side in order}
            rounds.append({side: split(runs[side]["rows"], runs[side]["wall_s"], runs[side]["cpu_s"]) for side in sides})
            print(f"round {r}: " + ", ".join(
                f"{side} wall {rounds[-1][side][WALL]:.1f}s, first step after "
                + (f"{rounds[-1][side][FIRST_STEP]:.1f}s" if FIRST_STEP in rounds[-1][side] else "-")
                for side in sides), flush=True)
    summary = summarize(rounds, sides)
    print_table(summary, sides, len(rounds))
    print(json.dumps({"benchmark": "startup", "steps": args.steps, "overrides": overrides,
                      "repos": {side: str(path) for side, path in repos.items()}, "load_avg": os.getloadavg(),
                      "rounds": rounds, "median_s": summary["median_s"], "ratio": summary["ratio"]}))


if __name__ == "__main__":
    main()
