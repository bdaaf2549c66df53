"""Start-up of the sharded prompt loader at 4 ranks x 1M rows: shared over-long scan vs every rank scanning all.

Writes a verl-format parquet of ``--rows`` arithmetic prompts (row groups of 64k rows), then starts
``--ranks`` processes joined by a gloo group, as DAG workers are, each building its train loader for its
dp rank and reading ``--batches`` batches. Two ways, in the same run:

- shared scan (siiRL): each rank tokenizes only its 1/ranks slice of the rows to find over-long prompts,
  and the ranks exchange the (few) over-long row ids with one all-gather;
- every rank scans all rows (the baseline: what a loader without the exchange must do to agree on the
  kept rows).

Reported: wall time until every rank has its first batches, the slowest rank's loader build time and
the largest per-rank peak RSS increase. Prints a table, then one JSON line.

    python benchmarks/bench_dataloader.py [--rows 1000000] [--ranks 4] [--batches 4]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.config_checks import load_config
from siirl.data_coordinator import build_train_dataloader
from siirl.data_coordinator.dataloader import dist_scan_share
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.tasks.arithmetic import format_prompt

MB = 1024.0**2


class PeakRss:
    """Peak RSS of this process above its value at entry, sampled every 5 ms by a background thread."""

    def __enter__(self):
        self.proc = psutil.Process()
        self.start = self.peak = self.proc.memory_info().rss
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.wait(0.005):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def write_dataset(path: Path, rows: int) -> None:
    """``rows`` prompts ``a+b=`` in the verl format, in row groups of 64k rows."""
    a = [i % 1000 for i in range(rows)]
    b = [(i * 7919) % 1000 for i in range(rows)]
    table = pa.table({
        "data_source": ["arith"] * rows,
        "prompt": [[{"role": "user", "content": format_prompt(x, y)}] for x, y in zip(a, b)],
        "ability": ["math"] * rows,
        "reward_model": [{"style": "rule", "ground_truth": str(x + y)} for x, y in zip(a, b)],
        "extra_info": [{"split": "train", "index": i} for i in range(rows)],
    })
    pq.write_table(table, path, row_group_size=65536)


def _rank(rank: int, ranks: int, port: int, data: str, shared: bool, batches: int, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    cfg = load_config(["device=cpu", f"data.train_files=[{data}]", "data.train_batch_size=256"])
    tokenizer = load_tokenizer(cfg.actor_rollout_ref.model)
    dist.barrier()
    with PeakRss() as rss:
        began = time.perf_counter()
        scan = dist_scan_share() if shared else None
        loader = build_train_dataloader(cfg.data, tokenizer, rank, ranks, scan=scan)
        built = time.perf_counter() - began
        iterator = iter(loader)
        rows = sum(next(iterator).batch_size[0] for _ in range(batches))
        total = time.perf_counter() - began
    Path(out, f"{rank}.json").write_text(json.dumps({"build_s": built, "ready_s": total, "rows": rows,
                                                     "rss_mb": (rss.peak - rss.start) / MB}))
    dist.destroy_process_group()


def run(ranks: int, data: Path, shared: bool, batches: int) -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        began = time.perf_counter()
        mp.spawn(_rank, args=(ranks, port, str(data), shared, batches, out), nprocs=ranks, join=True)
        wall = time.perf_counter() - began
        per_rank = [json.loads(Path(out, f"{r}.json").read_text()) for r in range(ranks)]
    return {
        "wall_s": wall,
        "slowest_build_s": max(r["build_s"] for r in per_rank),
        "slowest_ready_s": max(r["ready_s"] for r in per_rank),
        "max_rank_rss_mb": max(r["rss_mb"] for r in per_rank),
        "rows_read": sum(r["rows"] for r in per_rank),
    }


#: The launcher planning a job (``--plan``: config, pre-flight data checks, the plan) in its own process; it
#: prints its peak RSS (VmHWM: a fresh process image, unlike ru_maxrss after fork). The driver must not hold the data: its cost may not grow with the dataset.
LAUNCHER = (
    "import re, sys, time; from siirl.main_dag import main; t = time.perf_counter(); "
    "code = main(['--plan', 'device=cpu', 'data.train_files=[' + sys.argv[1] + ']', 'trainer.output_dir=' + sys.argv[2]]); "
    "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
    "print('LAUNCHER', code, time.perf_counter() - t, int(hwm) / 1024)"
)


def launcher_startup(data: Path, out: Path) -> dict:
    """Wall time and peak RSS of the launcher planning a job on ``data``."""
    done = subprocess.run([sys.executable, "-c", LAUNCHER, str(data), str(out)], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    line = next(text for text in done.stdout.splitlines() if text.startswith("LAUNCHER"))
    _, code, wall, rss = line.split()
    if code != "0":
        raise RuntimeError(f"the launcher refused {data}: {done.stderr[-500:]}")
    return {"wall_s": float(wall), "peak_rss_mb": float(rss)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "prompts.parquet"
        write_dataset(data, args.rows)
        small = Path(tmp) / "small.parquet"
        write_dataset(small, 1000)
        launcher = {"1k rows (baseline)": launcher_startup(small, Path(tmp) / "out_small"),
                    f"{args.rows} rows": launcher_startup(data, Path(tmp) / "out_big")}
        results = {
            "shared scan": run(args.ranks, data, True, args.batches),
            "every rank scans all (baseline)": run(args.ranks, data, False, args.batches),
        }
    base = results["every rank scans all (baseline)"]
    print(f"{args.ranks} ranks x {args.rows} rows, {args.batches} batches of 256 prompts per step")
    print(f"{'variant':<34}{'wall s':>9}{'slowest build s':>17}{'peak RSS/rank MB':>18}{'speedup':>9}")
    for name, r in results.items():
        print(f"{name:<34}{r['wall_s']:>9.1f}{r['slowest_build_s']:>17.1f}{r['max_rank_rss_mb']:>18.1f}"
              f"{base['slowest_ready_s'] / r['slowest_ready_s']:>8.2f}x")
    small_run, big_run = launcher.values()
    print("\nlauncher --plan (the driver: config, pre-flight data checks, plan)")
    print(f"{'dataset':<34}{'wall s':>9}{'peak RSS MB':>13}{'wall ratio':>12}{'RSS +MB':>9}")
    for name, r in launcher.items():
        print(f"{name:<34}{r['wall_s']:>9.1f}{r['peak_rss_mb']:>13.0f}{r['wall_s'] / small_run['wall_s']:>11.2f}x"
              f"{r['peak_rss_mb'] - small_run['peak_rss_mb']:>9.0f}")
    print(json.dumps({"benchmark": "dataloader_startup", "rows": args.rows, "ranks": args.ranks,
                      "results": results,
                      "speedup": base["slowest_ready_s"] / results["shared scan"]["slowest_ready_s"],
                      "launcher": launcher, "launcher_wall_ratio": big_run["wall_s"] / small_run["wall_s"],
                      "launcher_rss_growth_mb": big_run["peak_rss_mb"] - small_run["peak_rss_mb"]}))


if __name__ == "__main__":
    main()
