"""Asynchronous training vs synchronous, ratios measured in one run on this host.

1. Separate placements: two Ray nodes of 1 CPU (``ray.cluster_utils.Cluster``), the rollout on one and the
   training on the other (``trainer.v1.trainer_mode=separate_async``). Sync is the same placement with
   ``async_training.staleness_threshold=0`` (each step's rollout waits for the previous update); async is
   ``staleness_threshold=1`` (one-step off-policy). The ideal overlap ``(R + T) / max(R, T)`` comes from the
   sync run's own times: R the rollout's time sampling a step's batch (``async/generate_s``), T the
   trainers' time in their nodes (every ``timing_s/node/*`` but the rollout's).
Both cases run the embedded long-tail task (``task=running_sums``: answers 1 to 23 tokens), 32 prompts x 8.

2. The long-tail task on the default placement (2 DAG workers, one local
   Ray node): colocated async with partial rollouts (``colocate_async``, staleness 1, ``partial_rollout``)
   vs sync.

3. The same long-tail job on one local Ray node of 2 CPUs (what a laptop user has): sync on the default 2 DAG
   workers vs ``trainer.v1.trainer_mode=separate_async`` with no other key (its default split: one rollout
   worker, one trainer, each with the node's CPUs / 2 threads).

Samples/s is trained samples over the steps' wall time after the first step (warm-up). ``--engine vllm`` runs
case 2 on vLLM's CPU build (continuous batching and a prefix cache, which partial rollouts lean on);
cases 1 and 3 stay on hf (their figures are the schedule's, without an engine's build cost; vLLM rolls out apart
too, in a process of its own, see docs/hardware.md).

    python benchmarks/bench_async.py [--steps 8] [--only 1|2|3] [--engine hf|vllm]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import ray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_two_nodes import ray_nodes
from siirl.main_dag import main as siirl_main
from tests.e2e.e2e_helpers import FAST as SMALL_JOB

#: The long-tail task at a batch where sampling and training each take a good part of a step (the e2e tests'
#: 8 prompts x 4 three-token answers leave both dwarfed by each step's fixed hand-off and collective costs).
SHAPE = ["task=running_sums", "data.train_batch_size=32", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
         "actor_rollout_ref.rollout.n=8"]
SEPARATE = [*SHAPE, "trainer.v1.trainer_mode=separate_async", "trainer.nnodes=1", "trainer.n_devices_per_node=1",
            "rollout.nnodes=1", "rollout.n_gpus_per_node=1"]
LONG_TAIL = SHAPE
PARTIAL = ["trainer.v1.trainer_mode=colocate_async", "async_training.partial_rollout=true"]


def run(run_dir: Path, steps: int, *overrides: str) -> list[dict]:
    code = siirl_main([*SMALL_JOB, f"trainer.total_training_steps={steps}", f"trainer.output_dir={run_dir}",
                       "trainer.test_freq=0", *overrides])
    if code != 0:
        raise SystemExit(f"the job {' '.join(overrides)} exited {code}")
    text = (run_dir / "metrics.jsonl").read_text()
    return [r for r in (json.loads(line) for line in text.splitlines() if line.strip()) if r["step"] > 0]


def samples_per_s(records: list[dict]) -> float:
    """Trained samples per second of step wall time, the first step (warm-up) left out."""
    later = records[1:]
    samples = sum(r["perf/samples_per_s"] * r["timing_s/step"] for r in later)
    return samples / sum(r["timing_s/step"] for r in later)


def _mean(records: list[dict], key) -> float:
    values = [key(r) for r in records[1:]]
    return sum(values) / len(values)


def rollout_and_training_s(records: list[dict]) -> tuple[float, float]:
    """(R, T) per step: the rollout's sampling time and the trainers' time in their nodes."""
    rollout = _mean(records, lambda r: r["async/generate_s"])
    training = _mean(records, lambda r: sum(v for k, v in r.items()
                                            if k.startswith("timing_s/node/") and k != "timing_s/node/rollout_actor"))
    return rollout, training


def separate_placements(tmp: Path, steps: int) -> dict:
    with ray_nodes(2):
        sync = run(tmp / "separate_sync", steps, *SEPARATE, "async_training.staleness_threshold=0")
        async_ = run(tmp / "separate_async", steps, *SEPARATE, "async_training.staleness_threshold=1")
    rollout, training = rollout_and_training_s(sync)
    ideal = (rollout + training) / max(rollout, training)
    ratio = samples_per_s(async_) / samples_per_s(sync)
    return {"sync_samples_per_s": samples_per_s(sync), "async_samples_per_s": samples_per_s(async_),
            "ratio": ratio, "rollout_s": rollout, "training_s": training, "ideal_ratio": ideal,
            "of_ideal": ratio / ideal, "async_staleness_max": max(r["async/staleness_max"] for r in async_)}


def long_tail_partial(tmp: Path, steps: int, engine: str = "hf") -> dict:
    ray.init(num_cpus=2, logging_level="ERROR")
    task = [*LONG_TAIL, f"actor_rollout_ref.rollout.name={engine}"]
    try:
        sync = run(tmp / "long_tail_sync", steps, *task)
        partial = run(tmp / "long_tail_partial", steps, *task, *PARTIAL, "async_training.staleness_threshold=1")
    finally:
        ray.shutdown()
    return {"sync_samples_per_s": samples_per_s(sync), "partial_samples_per_s": samples_per_s(partial),
            "ratio": samples_per_s(partial) / samples_per_s(sync),
            "partial_fraction": _mean(partial, lambda r: r["async/partial_fraction"]),
            "carried_groups": _mean(partial, lambda r: r["async/carried_groups"]),
            "restarted_groups": _mean(partial, lambda r: r["async/restarted_groups"]),
            "staleness_max": max(r["async/staleness_max"] for r in partial)}


def separate_alone(tmp: Path, steps: int) -> dict:
    ray.init(num_cpus=2, logging_level="ERROR")
    try:
        sync = run(tmp / "alone_sync", steps, *SHAPE)
        separate = run(tmp / "alone_separate", steps, *SHAPE, "trainer.v1.trainer_mode=separate_async")
    finally:
        ray.shutdown()
    return {"sync_samples_per_s": samples_per_s(sync), "separate_samples_per_s": samples_per_s(separate),
            "ratio": samples_per_s(separate) / samples_per_s(sync),
            "staleness_max": max(r["async/staleness_max"] for r in separate)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--only", choices=("1", "2", "3"))
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="case 2's rollout engine")
    args = parser.parse_args(argv)
    result: dict = {"benchmark": "async", "steps": args.steps, "engine": args.engine, "host_cores": os.cpu_count(),
                    "load_average_1m_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "1"):
            result["separate"] = separate_placements(Path(tmp), args.steps)
        if args.only in (None, "2"):
            result["long_tail"] = long_tail_partial(Path(tmp), args.steps, args.engine)
        if args.only in (None, "3"):
            result["separate_alone"] = separate_alone(Path(tmp), args.steps)
    print(f"asynchronous vs synchronous training, {args.steps} steps each (samples/s after the first step); "
          f"host: {result['host_cores']} cores, load {result['load_average_1m_before']:.1f} before the run")
    print(f"{'case':<52}{'sync':>9}{'async':>9}{'ratio':>8}{'ideal':>8}")
    if "separate" in result:
        s = result["separate"]
        print(f"{'1. rollout | training on 2 Ray nodes x 1 CPU':<52}{s['sync_samples_per_s']:>9.2f}"
              f"{s['async_samples_per_s']:>9.2f}{s['ratio']:>7.2f}x{s['ideal_ratio']:>7.2f}x")
        print(f"   R={s['rollout_s']:.2f}s T={s['training_s']:.2f}s per step; async reached "
              f"{s['of_ideal']:.2f} of the ideal overlap; staleness max {s['async_staleness_max']:.0f}")
    if "long_tail" in result:
        lt = result["long_tail"]
        print(f"{f'2. long-tail task, colocated, partial rollouts ({args.engine})':<52}{lt['sync_samples_per_s']:>9.2f}"
              f"{lt['partial_samples_per_s']:>9.2f}{lt['ratio']:>7.2f}x{'':>8}")
        print(f"   partial fraction {lt['partial_fraction']:.2f}; groups carried into the next step "
              f"{lt['carried_groups']:.1f}, sampled again {lt['restarted_groups']:.1f} per step and worker; "
              f"staleness max {lt['staleness_max']:.0f}")
    if "separate_alone" in result:
        sa = result["separate_alone"]
        print(f"{'3. separate_async alone vs sync, one 2-CPU Ray node':<52}{sa['sync_samples_per_s']:>9.2f}"
              f"{sa['separate_samples_per_s']:>9.2f}{sa['ratio']:>7.2f}x{'':>8}")
        print(f"   staleness max {sa['staleness_max']:.0f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
