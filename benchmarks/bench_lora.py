"""LoRA against full fine-tuning on the default job (GRPO on the embedded tiny Qwen2), in the same run.

Two measurements, each with full fine-tuning and LoRA side by side:

- in this process, one actor (the embedded model, replicated on a world of one): trainable parameters,
  bytes of optimizer state after an update, and the mean time of ``--updates`` updates on one synthetic
  batch of the default job's shape (32 prompts x 8 responses);
- as fresh processes, README command 1 (``python -m siirl.main_dag device=cpu``, 2 DAG workers) with each
  setting: samples/s over the training steps, the actor-update time per step, and the greedy validation
  score before training and at the end (does LoRA still learn?).

LoRA usually needs a larger learning rate than full fine-tuning (verl's scripts: 3e-6 full, 3e-5 LoRA);
``--lora-lr`` sets it. Prints a table (ratios are LoRA / full, measured in the same run), then one JSON line.

    python benchmarks/bench_lora.py [--rank 8] [--alpha 16] [--lora-lr 2e-3] [--steps N] [overrides ...]
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
PROMPTS, SAMPLES, PROMPT_LEN, RESPONSE_LEN = 32, 8, 16, 8


def lora_overrides(args: argparse.Namespace) -> list[str]:
    return [
        f"actor_rollout_ref.model.lora_rank={args.rank}",
        f"actor_rollout_ref.model.lora_alpha={args.alpha}",
        f"actor_rollout_ref.actor.optim.lr={args.lora_lr}",
    ]


def synthetic_batch(vocab: int):
    """One default-sized training batch with random tokens and advantages (the content does not matter
    for time and memory)."""
    import torch
    from tensordict import TensorDict

    gen = torch.Generator().manual_seed(0)
    rows, width = PROMPTS * SAMPLES, PROMPT_LEN + RESPONSE_LEN
    ids = torch.randint(3, vocab, (rows, width), generator=gen)
    mask = torch.ones(rows, width, dtype=torch.long)
    return TensorDict(
        {
            "input_ids": ids, "attention_mask": mask, "position_ids": torch.arange(width).expand(rows, width).clone(),
            "prompts": ids[:, :PROMPT_LEN], "responses": ids[:, PROMPT_LEN:],
            "response_mask": torch.ones(rows, RESPONSE_LEN, dtype=torch.long),
            "old_log_probs": torch.full((rows, RESPONSE_LEN), -2.0),
            "advantages": torch.randn(rows, RESPONSE_LEN, generator=gen),
        },
        batch_size=[rows],
    )


def measure_actor(overrides: list[str], updates: int) -> dict:
    """Trainable parameters, optimizer-state bytes and mean update time of one in-process actor."""
    import torch
    import torch.distributed as dist

    from siirl.config_checks import load_config
    from siirl.engine.workers import ActorWorker

    cfg = load_config(["device=cpu", *overrides])
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    arr = cfg.actor_rollout_ref
    actor = ActorWorker(arr.model, arr.actor, "cpu", rollout_n=SAMPLES, init_seed=0)
    batch = synthetic_batch(actor.model.config.vocab_size)
    actor.update_policy(batch)  # warm-up; creates the optimizer state
    began = time.perf_counter()
    for _ in range(updates):
        actor.update_policy(batch)
    per_update = (time.perf_counter() - began) / updates
    state = [t for s in actor.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return {
        "params": sum(p.numel() for p in actor.model.parameters()),
        "trainable_params": sum(p.numel() for p in actor.model.parameters() if p.requires_grad),
        "optimizer_state_bytes": sum(t.numel() * t.element_size() for t in state),
        "update_s": per_update,
    }


def run_job(name: str, overrides: list[str], workdir: Path) -> dict:
    out = workdir / name
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p)}
    argv = [sys.executable, "-m", "siirl.main_dag", "device=cpu", f"trainer.output_dir={out}", *overrides]
    began = time.perf_counter()
    with open(workdir / f"{name}.log", "w", encoding="utf-8") as log:
        code = subprocess.call(argv, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - began
    if code:
        sys.exit(f"{name} failed with exit code {code}:\n{(workdir / f'{name}.log').read_text()[-2000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "timing_s/step" in r]
    vals = [r["val/score"] for r in rows if "val/score" in r]
    return {
        "steps": len(steps),
        "wall_s": wall,
        "samples_per_s": sum(r.get("batch/samples", PROMPTS * SAMPLES) for r in steps)
        / sum(r["timing_s/step"] for r in steps),
        "update_actor_s": statistics.mean(r["timing_s/update_actor"] for r in steps),
        "val_before": vals[0] if len(vals) > 1 else None,
        "val_final": vals[-1] if vals else None,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def print_table(result: dict) -> None:
    rows = [
        ("trainable parameters", "trainable_params", "{:,.0f}"),
        ("optimizer state (bytes)", "optimizer_state_bytes", "{:,.0f}"),
        ("actor update, in process (s)", "update_s", "{:.3f}"),
        ("actor update per step, job (s)", "update_actor_s", "{:.3f}"),
        ("samples/s over training steps", "samples_per_s", "{:.1f}"),
        ("validation before", "val_before", "{:.3f}"),
        ("validation final", "val_final", "{:.3f}"),
    ]
    full, lora = result["full"], result["lora"]
    print(f"{'':34s} {'full FT':>14s} {'LoRA':>14s} {'LoRA/full':>10s}")
    for label, key, fmt in rows:
        a, b = full.get(key), lora.get(key)
        cells = [fmt.format(v) if v is not None else "-" for v in (a, b)]
        r = ratio(b, a)
        print(f"{label:34s} {cells[0]:>14s} {cells[1]:>14s} {(f'{r:.3f}' if r is not None else '-'):>10s}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--alpha", type=int, default=16)
    parser.add_argument("--lora-lr", type=float, default=2e-3)
    parser.add_argument("--updates", type=int, default=5, help="timed in-process updates per setting")
    parser.add_argument("--steps", type=int, default=0, help="training steps per job (0: the default epoch)")
    parser.add_argument("--skip-jobs", action="store_true", help="only the in-process measurement")
    parser.add_argument("overrides", nargs="*", help="extra overrides for both settings")
    args = parser.parse_args(argv)
    shared = [*args.overrides, *([f"trainer.total_training_steps={args.steps}"] if args.steps else [])]
    settings = {"full": shared, "lora": [*shared, *lora_overrides(args)]}
    result: dict = {name: measure_actor(overrides, args.updates) for name, overrides in settings.items()}
    if not args.skip_jobs:
        with tempfile.TemporaryDirectory(prefix="bench_lora_") as tmp:
            for name, overrides in settings.items():
                result[name].update(run_job(name, overrides, Path(tmp)))
    print_table(result)
    keys = ("trainable_params", "optimizer_state_bytes", "update_s", "update_actor_s", "samples_per_s")
    ratios = {k: ratio(result["lora"].get(k), result["full"].get(k)) for k in keys}
    print(json.dumps({"benchmark": "lora", "rank": args.rank, "alpha": args.alpha, "lora_lr": args.lora_lr,
                      **result, "lora_over_full": ratios}))


if __name__ == "__main__":
    main()
