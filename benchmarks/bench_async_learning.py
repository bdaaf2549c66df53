"""Learning under asynchronous training: does one-step off-policy reach the synchronous run's validation?

Asynchronous training buys overlap with freshness: with ``async_training.staleness_threshold=1`` a step may
train on responses that weights one update old sampled. That is worth having only if the policy learns as well,
so this runs the default command's job (the embedded arithmetic task, GRPO, 32 prompts x 8 responses, its 250
steps, greedy validation before training and every ``trainer.test_freq`` steps) twice per seed: synchronously
(the default) and colocated asynchronous with staleness 1 (``trainer.v1.trainer_mode=colocate_async``). A seed
sets ``data.seed`` (the prompt order) and ``trainer.seed`` (every worker's sampling). All runs share one local
Ray of 2 CPUs. Validation (``val/score``) is compared after the same numbers of trained samples; the verdict:
async is within 0.02 of sync (not more than 0.02 below it) at the last point, and the largest gap over all.

    python benchmarks/bench_async_learning.py [--steps N] [--seeds 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOLERANCE = 0.02
MODES = {"sync": [], "async": ["trainer.v1.trainer_mode=colocate_async", "async_training.staleness_threshold=1"]}


def read_metrics(run_dir: Path) -> list[dict]:
    text = (run_dir / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def val_curve(records: list[dict]) -> dict[int, float]:
    """Trained samples (summed over the steps so far) -> ``val/score`` logged after them."""
    curve: dict[int, float] = {}
    trained = 0.0
    for r in sorted(records, key=lambda r: r["step"]):
        if "timing_s/step" in r:
            trained += r["perf/samples_per_s"] * r["timing_s/step"]
        if "val/score" in r:
            curve[round(trained)] = r["val/score"]
    return curve


def align(sync: dict[int, float], async_: dict[int, float]) -> list[tuple[int, float, float, float]]:
    """(trained samples, sync, async, async - sync) at every point both curves have."""
    return [(n, sync[n], async_[n], async_[n] - sync[n]) for n in sorted(sync.keys() & async_.keys())]


def verdict(points: list[tuple[int, float, float, float]], tolerance: float = TOLERANCE) -> dict:
    """Async reaches sync within ``tolerance`` at the last point (above sync counts as reached), and the
    largest |async - sync| over the points, with where it was."""
    if not points:
        raise ValueError("the two curves share no validation point")
    last = points[-1]
    worst = max(points, key=lambda p: abs(p[3]))
    return {"samples": last[0], "last_gap": last[3], "within": last[3] >= -tolerance,
            "max_abs_gap": abs(worst[3]), "max_gap_at": worst[0], "tolerance": tolerance}


def train(run_dir: Path, seed: int, steps: int, mode: str) -> list[dict]:
    from siirl.main_dag import main as siirl_main

    length = [f"trainer.total_training_steps={steps}"] if steps > 0 else []
    code = siirl_main(["device=cpu", "trainer.logger=[jsonl]", f"trainer.output_dir={run_dir}",
                       f"data.seed={seed}", f"trainer.seed={seed}", *length, *MODES[mode]])
    if code != 0:
        raise SystemExit(f"the {mode} run of seed {seed} exited {code}")
    return read_metrics(run_dir)


def report(seeds: dict[int, list[tuple[int, float, float, float]]], tolerance: float = TOLERANCE) -> list[str]:
    lines = [f"{'seed':>4}{'trained samples':>17}{'sync val':>10}{'async val':>11}{'async-sync':>12}"]
    for seed, points in seeds.items():
        lines += [f"{seed:>4}{n:>17}{s:>10.3f}{a:>11.3f}{d:>+12.3f}" for n, s, a, d in points]
    for seed, points in seeds.items():
        v = verdict(points, tolerance)
        lines.append(f"seed {seed}: async {'within' if v['within'] else 'NOT within'} {tolerance} of sync at the "
                     f"last point ({v['samples']} samples, gap {v['last_gap']:+.3f}); max |gap| over the points "
                     f"{v['max_abs_gap']:.3f} at {v['max_gap_at']} samples")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=-1, help="training steps (-1: the default command's own)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    import ray

    result: dict = {"benchmark": "async_learning", "steps": args.steps, "host_cores": os.cpu_count(),
                    "load_average_1m_before": os.getloadavg()[0], "curves": {}, "staleness_max": {}, "verdicts": {}}
    points = {}
    ray.init(num_cpus=2, logging_level="ERROR")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for seed in args.seeds:
                curves = {}
                for mode in MODES:
                    records = train(Path(tmp) / f"{mode}_{seed}", seed, args.steps, mode)
                    curves[mode] = val_curve(records)
                    result["curves"][f"{mode}/seed{seed}"] = {str(n): v for n, v in curves[mode].items()}
                    if mode == "async":
                        result["staleness_max"][f"seed{seed}"] = max(r.get("async/staleness_max", 0) for r in records)
                points[seed] = align(curves["sync"], curves["async"])
                result["verdicts"][f"seed{seed}"] = verdict(points[seed])
    finally:
        ray.shutdown()
    print(f"greedy validation after the same trained samples, sync vs colocated async (staleness 1); "
          f"host: {result['host_cores']} cores, load {result['load_average_1m_before']:.1f} before the run")
    print("\n".join(report(points)))
    print(f"async staleness max per seed: {result['staleness_max']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
