"""How long a bad input takes to be reported, relative to printing a good config.

Each case launches ``python -m siirl.main_dag`` in a fresh process with one mistake and records the exit
code, the wall time and the last ``siirl:`` line on stderr. The baseline is ``--print-config`` of the
default config in the same run (the cost of starting Python and composing the config), so the ratio says
how much of the launcher a mistake goes through before it is reported. A case past ``--limit`` seconds is
killed and reported as a hang. Prints a table, then one JSON line.
Run: ``python benchmarks/bench_time_to_error.py [--limit 120] [--repo CHECKOUT]`` (worker-side cases start
a local Ray; ``--repo`` measures another checkout, e.g. an older commit, with the same cases).
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

REPO = Path(__file__).resolve().parents[1]
FAST = ["device=cpu", "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.rollout.n=4", "trainer.val_before_train=false", "trainer.logger=[console]"]

CASES: dict[str, list[str]] = {
    "train_batch_size=3 on 2 workers": ["data.train_batch_size=3", "actor_rollout_ref.actor.ppo_mini_batch_size=3"],
    "loss_mode=bogus": ["actor_rollout_ref.actor.policy_loss.loss_mode=bogus"],
    "kl_penalty=bogus (used)": ["algorithm.kl_penalty=bogus", "algorithm.use_kl_in_reward=true"],
    "attn_implementation=bogus": ["actor_rollout_ref.model.attn_implementation=bogus"],
    "reward_manager=bogus": ["reward_model.reward_manager=bogus"],
    "trainer.logger=[bogus]": ["trainer.logger=[bogus]"],
    "ray_address=127.0.0.1:1": ["trainer.ray_address=127.0.0.1:1"],
    "n_devices_per_node=64": ["trainer.n_devices_per_node=64", "data.train_batch_size=64",
                              "actor_rollout_ref.actor.ppo_mini_batch_size=64"],
}


def launch(args: list[str], run_dir: Path, limit_s: float, repo: Path = REPO) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "siirl.main_dag", *FAST, f"trainer.output_dir={run_dir}", *args]
    began = time.perf_counter()
    proc = subprocess.Popen(command, cwd=run_dir.parent, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=limit_s)
        code: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        code = "hang"
    seconds = time.perf_counter() - began
    lines = [line for line in err.splitlines() if line.startswith(("siirl: error", "siirl: job failed"))]
    return {"exit": code, "seconds": round(seconds, 2), "message": lines[-1][:110] if lines else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before a case counts as a hang")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout to launch (to compare versions)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = launch(["--print-config"], Path(tmp) / "baseline", args.limit, args.repo)
        results = {name: launch(overrides, Path(tmp) / f"case{i}", args.limit, args.repo)
                   for i, (name, overrides) in enumerate(CASES.items())}
    print(f"baseline (--print-config, good config): {base['seconds']:.2f}s")
    print(f"{'case':34} {'exit':>5} {'seconds':>8} {'x base':>7}  message")
    for name, row in results.items():
        ratio = row["seconds"] / base["seconds"]
        print(f"{name:34} {row['exit']!s:>5} {row['seconds']:8.2f} {ratio:7.2f}  {row['message']}")
    print(json.dumps({"benchmark": "time_to_error", "baseline_s": base["seconds"], "cases": results}))


if __name__ == "__main__":
    main()
