"""LIBERO environments stepping in parallel processes: steps/s for 1, 2 and 4 environments, with and without
cameras, and episodes per minute.

One ``VectorEnv`` per camera setting holds the largest count of simulators, one per worker process
(``env.num_workers`` = environments); each row steps only its first ``n`` of them, so the rows of a table
share their simulators and differ only in how many step at once. Ratios are against one environment with
cameras, measured in the same run (the host may be shared: absolute figures move with its load, the ratios
much less). Episodes per minute are those of ``--episode-steps``-step episodes (reset included) and, from the
measured step and reset costs, of the suite's standard budget (220 steps for libero_spatial).

    python benchmarks/bench_libero_envs.py [--envs 1 2 4] [--steps 12] [--episode-steps 20]

Needs ``pip install -e ".[libero]"``; each simulator takes about 2.2 GB, so 4 take about 9 GB.
"""

from __future__ import annotations

import argparse
import json
import time

from siirl.environment import VectorEnv
from siirl.environment.libero import MAX_STEPS

ACTION = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]


def measure(count: int, cameras: bool, counts: list[int], steps: int, episode_steps: int, suite: str) -> list[dict]:
    kwargs = {"suite": suite, "cameras": cameras, "camera_size": 128, "num_steps_wait": 0, "max_steps": 10_000}
    rows = []
    with VectorEnv("libero", count, kwargs, num_workers=count, timeout_s=900.0) as venv:
        tasks = [{"index": 0, "task_id": 0, "trial_id": slot} for slot in range(count)]
        venv.reset(tasks, [0] * count)  # builds every simulator (not timed)
        for n in counts:
            began = time.perf_counter()
            venv.reset(tasks[:n], [0] * n)
            reset_s = time.perf_counter() - began
            began = time.perf_counter()
            for _ in range(steps):
                results = venv.step({slot: ACTION for slot in range(n)})
                assert not any(r.failed for r in results), [r.info for r in results if r.failed]
            step_s = (time.perf_counter() - began) / steps  # one step of all n at once
            per_episode = reset_s + episode_steps * step_s
            rows.append({
                "envs": n, "cameras": cameras, "steps_per_s": n / step_s, "ms_per_step": 1000 * step_s,
                "reset_s": reset_s, "episodes_per_min": 60 * n / per_episode,
                "standard_episodes_per_min": 60 * n / (reset_s + MAX_STEPS[suite] * step_s),
            })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=12, help="timed steps per row")
    parser.add_argument("--episode-steps", type=int, default=20)
    parser.add_argument("--suite", default="libero_spatial")
    args = parser.parse_args()
    counts = sorted(set(args.envs))
    rows = [r for cameras in (True, False)
            for r in measure(max(counts), cameras, counts, args.steps, args.episode_steps, args.suite)]
    base = next(r for r in rows if r["envs"] == counts[0] and r["cameras"])
    print(f"{'envs':>4} {'cameras':>7} {'steps/s':>8} {'x base':>7} {'ms/step':>8} {'reset s':>8} "
          f"{'ep/min':>7} {'ep/min@' + str(MAX_STEPS[args.suite]):>11}")
    for r in rows:
        r["ratio_vs_base"] = r["steps_per_s"] / base["steps_per_s"]
        print(f"{r['envs']:>4} {r['cameras']!s:>7} {r['steps_per_s']:>8.2f} {r['ratio_vs_base']:>7.2f} "
              f"{r['ms_per_step']:>8.0f} {r['reset_s']:>8.1f} {r['episodes_per_min']:>7.2f} "
              f"{r['standard_episodes_per_min']:>11.3f}")
    print(json.dumps({"benchmark": "libero_envs", "suite": args.suite, "episode_steps": args.episode_steps,
                      "baseline": f"{counts[0]} env with cameras", "rows": rows}))


if __name__ == "__main__":
    main()
