"""Several Ray nodes run as fast as one: the default GRPO job on one Ray node of 2 CPUs vs two Ray nodes of
1 CPU each (``ray.cluster_utils.Cluster`` on this host: separate raylets and object stores, so every hand-off
between the two DAG workers crosses nodes), same 2 DAG workers, same steps.

Reported: the mean ``timing_s/step`` after the first step (warm-up), and the two-node / one-node ratio (goal
<= 1.15x). The metrics other than timings must be equal: the same job, placed differently.

    python benchmarks/bench_two_nodes.py [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.main_dag import main as siirl_main
from tests.e2e.e2e_helpers import FAST as SMALL_JOB  # the e2e tests' job: 2 DAG workers, 8 prompts x 4

#: Key parts that measure time (or throughput), not what was trained (also under an agent's prefix).
TIMING_PARTS = ("timing_s/", "perf/")


@contextmanager
def ray_nodes(nodes: int) -> Iterator[Cluster]:
    """A fresh Ray cluster of ``nodes`` nodes sharing 2 CPUs on this host, joined by this driver."""
    cpus = 2 // nodes
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus)
    cluster.wait_for_nodes()
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    ray.init(address=cluster.address, runtime_env={"env_vars": {"PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"}},
             logging_level="ERROR")
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def run_job(
    nodes: int, run_dir: Path, *overrides: str, cluster: Cluster | None = None,
    while_running: Callable[[Cluster], None] | None = None,
) -> tuple[int, list[dict]]:
    """The small job placed on ``nodes`` nodes of the Ray this driver joined (``while_running(cluster)`` in a
    thread beside it, e.g. to take a node away); the launcher's exit code and the job's metrics records."""
    side = threading.Thread(target=while_running, args=(cluster,), daemon=True) if while_running else None
    if side is not None:
        side.start()
    code = siirl_main([*SMALL_JOB, f"trainer.nnodes={nodes}", f"trainer.n_devices_per_node={2 // nodes}",
                       f"trainer.output_dir={run_dir}", *overrides])
    metrics = run_dir / "metrics.jsonl"
    text = metrics.read_text() if metrics.is_file() else ""
    return code, [json.loads(line) for line in text.splitlines() if line.strip()]


def run_on_nodes(nodes: int, run_dir: Path, *overrides: str) -> tuple[int, list[dict]]:
    """The small job on a fresh cluster of ``nodes`` nodes (see ``ray_nodes``)."""
    with ray_nodes(nodes) as cluster:
        return run_job(nodes, run_dir, *overrides, cluster=cluster)


def trained(records: list[dict]) -> list[dict]:
    """What the records say about training: every metric but the timings."""
    return [{k: v for k, v in r.items() if not any(part in k for part in TIMING_PARTS)} for r in records]


def mean_step_s(records: list[dict]) -> float:
    steps = [r["timing_s/step"] for r in records if "timing_s/step" in r][1:]
    return sum(steps) / len(steps)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for nodes in (1, 2):
            code, runs[nodes] = run_on_nodes(nodes, Path(tmp) / f"nodes_{nodes}", f"trainer.total_training_steps={args.steps}")
            if code != 0:
                raise SystemExit(f"the job on {nodes} node(s) exited {code}")
    one, two = mean_step_s(runs[1]), mean_step_s(runs[2])
    same = trained(runs[1]) == trained(runs[2])
    print(f"default GRPO job, 2 DAG workers, {args.steps} steps (mean step time after the first)")
    print(f"{'placement':<36}{'step s':>8}{'ratio':>8}")
    print(f"{'1 Ray node x 2 CPUs (baseline)':<36}{one:>8.3f}{1.0:>7.2f}x")
    print(f"{'2 Ray nodes x 1 CPU':<36}{two:>8.3f}{two / one:>7.2f}x")
    print(f"metrics other than timings equal: {same}")
    print(json.dumps({"benchmark": "two_nodes", "steps": args.steps, "one_node_step_s": one, "two_node_step_s": two,
                      "ratio": two / one, "same_metrics": same}))


if __name__ == "__main__":
    main()
