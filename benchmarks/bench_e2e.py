"""The default command against a single-process GRPO loop on the same machine, with a per-stage breakdown.

Each round runs, one after the other (the order rotates between rounds, so a busy neighbour hurts
every side alike), as fresh processes timed from launch to exit:

- ours: README command 1, ``python -m siirl.main_dag device=cpu`` (2 DAG workers, Ray, start-up included);
- baseline: ``benchmarks/single_process_grpo.py`` (one process, no Ray, same model, data, batch, algorithms,
  learning rate and validation schedule; padded forwards as mainstream trainers do). The baseline runs the
  actor forward for the PPO old log-probs; ours takes them from the rollout's own recording, which is exact
  here (``actor_rollout_ref.actor.old_log_prob_source=recompute`` makes ours run that forward too);
- trl: ``benchmarks/trl_grpo.py``, the same job with TRL's GRPOTrainer, run by ``--trl-python`` (an
  interpreter whose environment has trl; by default the current one if it can import trl, otherwise this
  run is skipped); ``pip install -e ".[bench]"`` into a separate venv keeps trl out of siiRL's environment.

Reported per round: samples/s over the training steps (validation excluded), the wall time of the whole
command, the reward of the last steps and the final greedy validation score, and ours' ratio to the baseline
and to TRL in the same round; then the learning curves (mean reward per 50 steps, validation scores). Then ours'
step broken down by stage (data, each node, redistribution, and inside the update: forward, backward,
optimizer, collectives, data movement, host overhead), so the parts add up to the step, and the whole
command's wall split into steps, validation, metric reduction and start-up plus shut-down.
Prints the tables, then one JSON line.

    python benchmarks/bench_e2e.py [--rounds 2] [--steps N] [--baseline-layout padded|packed]
        [--trl-python VENV/bin/python] [overrides ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UPDATE_PHASES = ("forward", "backward", "optimizer", "collectives", "data_movement", "host")
#: Steps per point of the printed reward curves.
WINDOW = 50
#: Runs in print order; "trl" is absent when no interpreter with trl is available.
RUNS = ("ours", "baseline", "trl")
#: Ratio columns: ours' samples/s over each other run's.
RATIOS = {"baseline": "speedup", "trl": "vs_trl"}


def run_command(name: str, argv: list[str], out_dir: Path, cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p)}
    began = time.perf_counter()
    with open(cwd / f"{out_dir.name}.log", "w", encoding="utf-8") as log:
        code = subprocess.call(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - began
    if code != 0:
        tail = (cwd / f"{out_dir.name}.log").read_text(encoding="utf-8")[-2000:]
        sys.exit(f"{name} failed with exit code {code}:\n{tail}")
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    return {"wall_s": wall, "rows": rows}


def summarize(run: dict, samples_per_step: int) -> dict:
    rows = run["rows"]
    steps = [r for r in rows if "timing_s/step" in r]
    vals = [r["val/score"] for r in rows if "val/score" in r]
    tail = steps[-max(1, min(50, len(steps) // 5)) :]
    step_total = sum(r["timing_s/step"] for r in steps)
    return {
        "steps": len(steps),
        "samples_per_s": samples_per_step * len(steps) / step_total,
        "wall_s": run["wall_s"],
        "step_s_total": step_total,
        "reward_last": statistics.mean(r["reward/mean"] for r in tail),
        "val_before": vals[0] if len(vals) > 1 else None,
        "val_final": vals[-1] if vals else None,
        "reward_windows": [
            statistics.mean(r["reward/mean"] for r in steps[a : a + WINDOW]) for a in range(0, len(steps), WINDOW)
        ],
        "val_curve": vals,
    }


def breakdown(rows: list[dict], wall_s: float) -> list[tuple[str, float]]:
    """(stage, mean seconds per step) rows that add up to the step, then the whole command's wall."""
    steps = [r for r in rows if "timing_s/step" in r]

    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in steps) / len(steps)

    out = [("data loading", mean("timing_s/data"))]
    nodes = sorted({k for r in steps for k in r if k.startswith("timing_s/node/")})
    updates = sorted({k.split("/")[1] for r in steps for k in r if k.startswith("timing_s/update_") and k.count("/") == 2})
    for key in nodes:
        out.append((f"node {key.removeprefix('timing_s/node/')}", mean(key)))
    for update in updates:  # inside the training nodes: the engine's own split of its update
        out += [(f"  {update}: {phase}", mean(f"timing_s/{update}/{phase}")) for phase in UPDATE_PHASES]
    out.append(("redistribution", mean("timing_s/redistribute")))
    accounted = mean("timing_s/data") + mean("timing_s/redistribute") + sum(mean(k) for k in nodes)
    out.append(("loop overhead", mean("timing_s/step") - accounted))
    out.append(("= step", mean("timing_s/step")))
    total_steps = mean("timing_s/step") * len(steps)
    validate = sum(r.get("timing_s/validate", 0.0) for r in rows)
    reduce = sum(r.get("timing_s/reduce_metrics", 0.0) for r in steps)
    out += [
        ("whole command: training steps", total_steps),
        ("whole command: validation", validate),
        ("whole command: metric all-reduce", reduce),
        ("whole command: start-up, logging, shut-down", wall_s - total_steps - validate - reduce),
        ("= whole command wall", wall_s),
    ]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=-1, help="training steps (-1: the default command's own)")
    parser.add_argument("--baseline-layout", choices=("padded", "packed"), default="padded")
    parser.add_argument("--baseline-threads", type=int, default=0, help="0: torch's default (all cores)")
    parser.add_argument("--trl-python", help="interpreter with trl installed (default: this one if it has trl)")
    args, extra = parser.parse_known_args(argv)
    trl_python = trl_interpreter(args.trl_python)
    sys.path.insert(0, str(ROOT))
    from siirl.config_checks import load_config

    cfg = load_config(["device=cpu", *extra])
    samples = cfg.data.train_batch_size * cfg.actor_rollout_ref.rollout.n
    common = [*extra, *([f"trainer.total_training_steps={args.steps}"] if args.steps > 0 else [])]
    results: list[dict] = []
    last_rows, last_wall = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for r in range(args.rounds):
            ours_dir, base_dir, trl_dir = work / f"ours_{r}", work / f"baseline_{r}", work / f"trl_{r}"
            threads = ["--threads", str(args.baseline_threads)]
            commands = {
                "ours": ([sys.executable, "-m", "siirl.main_dag", "device=cpu", f"trainer.output_dir={ours_dir}",
                          "trainer.logger=[jsonl]", *common], ours_dir),
                "baseline": ([sys.executable, str(ROOT / "benchmarks" / "single_process_grpo.py"), "--out",
                              str(base_dir), "--layout", args.baseline_layout, *threads, *common], base_dir),
            }
            if trl_python:
                commands["trl"] = ([trl_python, str(ROOT / "benchmarks" / "trl_grpo.py"), "--out", str(trl_dir),
                                    *threads, *common], trl_dir)
            names = list(commands)
            order = names[r % len(names) :] + names[: r % len(names)]
            runs = {name: run_command(name, *commands[name], work) for name in order}
            row = {name: summarize(runs[name], samples) for name in names}
            for other in names[1:]:
                row[RATIOS[other]] = row["ours"]["samples_per_s"] / row[other]["samples_per_s"]
            results.append(row)
            last_rows, last_wall = runs["ours"]["rows"], runs["ours"]["wall_s"]
    print_comparison(results)
    print_learning_curves(results)
    stages = breakdown(last_rows, last_wall)
    print(f"\nours, last round: mean seconds per step by stage ({samples} samples per step)")
    for name, seconds in stages:
        print(f"  {name:<46}{seconds:>10.4f}")
    print(json.dumps({"benchmark": "e2e_grpo", "samples_per_step": samples, "baseline_layout": args.baseline_layout,
                      "baseline_threads": args.baseline_threads or os.cpu_count(), "load_avg": os.getloadavg(),
                      "trl_python": trl_python, "rounds": results,
                      "median_speedup": statistics.median(r["speedup"] for r in results),
                      "median_vs_trl": statistics.median(r["vs_trl"] for r in results) if trl_python else None,
                      "breakdown_s": dict(stages)}))


def trl_interpreter(requested: str | None) -> str | None:
    """The interpreter for the TRL run: the one asked for (which must import trl), else this one if it has trl."""
    if requested is None:
        if importlib.util.find_spec("trl") is None:
            print("trl is not importable here and no --trl-python was given: skipping the TRL baseline")
            return None
        return sys.executable
    if subprocess.call([requested, "-c", "import trl"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        sys.exit(f"--trl-python {requested} cannot import trl")
    return requested


def print_comparison(results: list[dict]) -> None:
    ratios = [name for name in RATIOS if RATIOS[name] in results[0]]
    header = f"{'round':<7}{'run':<10}{'samples/s':>11}{'wall s':>9}{'reward(last)':>14}{'val before':>12}{'val final':>11}"
    print(header + "".join(f"{'vs ' + ('TRL' if n == 'trl' else n):>13}" for n in ratios))
    for k, row in enumerate(results):
        for name in (n for n in RUNS if n in row):
            s = row[name]
            cells = "".join(f"{(f'{row[RATIOS[n]]:.2f}x' if name == 'ours' else ''):>13}" for n in ratios)
            before = "-" if s["val_before"] is None else f"{s['val_before']:.3f}"
            final = "-" if s["val_final"] is None else f"{s['val_final']:.3f}"
            print(f"{k:<7}{name:<10}{s['samples_per_s']:>11.1f}{s['wall_s']:>9.1f}{s['reward_last']:>14.3f}"
                  f"{before:>12}{final:>11}{cells}")


def print_learning_curves(results: list[dict]) -> None:
    """Mean reward per WINDOW steps and the validation scores, side by side: the same learning or not."""
    print(f"\nlearning curves: mean reward per {WINDOW} steps | greedy validation scores")
    for k, row in enumerate(results):
        for name in (n for n in RUNS if n in row):
            rewards = " ".join(f"{v:.3f}" for v in row[name]["reward_windows"])
            vals = " ".join(f"{v:.3f}" for v in row[name]["val_curve"])
            print(f"{k:<7}{name:<10}{rewards} | {vals}")


if __name__ == "__main__":
    main()
