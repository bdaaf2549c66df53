"""Actor update time: padding-free micro-batches vs plain padded ones, on a batch whose lengths spread 4x.

One PPO update (forward + backward + AdamW) of a small Qwen2 on 64 sequences with total lengths drawn
evenly from 64..256 tokens. All runs use the same model, the same seed, the same batch and the same
per-micro-batch token budget (``micro x width`` of the padded run); they differ only in layout:

- ``padded``: fixed micro-batches in batch order, every row padded to the batch's width;
- ``padding-free``: what ``model.use_remove_padding=true`` picks: packed sequences with token-budget
  micro-batches, attention through flash attention's varlen kernel or ``siirl_varlen_sdpa``;
- ``trimmed (forced)``: length-sorted micro-batches trimmed to their own longest row, for reference.

Variants take turns, repeat after repeat. On the CPU the speedup is computed from the process's CPU time
with one torch thread (``--threads``), which stays meaningful when other jobs share the cores; elsewhere
from wall time. Prints a table and one JSON line (also written to ``--json-out`` when given).

    python benchmarks/bench_packing.py [--device auto] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict
from transformers import Qwen2Config, Qwen2ForCausalLM

from siirl.device import get_backend
from siirl.engine.workers import ActorWorker
from siirl.params.model import ActorConfig, ModelConfig, OptimConfig

PROMPT_LEN = 32


def build_model(path: Path, hidden: int, layers: int, vocab: int, seed: int) -> None:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(hidden // 32, 1),
        num_key_value_heads=max(hidden // 64, 1),
        max_position_embeddings=1024,
        tie_word_embeddings=True,
    )
    Qwen2ForCausalLM(config).save_pretrained(path)


def build_batch(rows: int, min_len: int, max_len: int, vocab: int, seed: int) -> TensorDict:
    """Left-padded prompts of PROMPT_LEN, right-padded responses; total lengths evenly spread."""
    gen = torch.Generator().manual_seed(seed)
    totals = torch.linspace(min_len, max_len, rows).round().long()[torch.randperm(rows, generator=gen)]
    resp_width = max_len - PROMPT_LEN
    width = PROMPT_LEN + resp_width
    input_ids = torch.randint(2, vocab, (rows, width), generator=gen)
    attention_mask = torch.zeros(rows, width, dtype=torch.long)
    for r, total in enumerate(totals.tolist()):
        attention_mask[r, :total] = 1
    input_ids = input_ids * attention_mask
    response_mask = attention_mask[:, PROMPT_LEN:].clone()
    return TensorDict(
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": (attention_mask.cumsum(-1) - 1).clamp(min=0),
            "responses": input_ids[:, PROMPT_LEN:].clone(),
            "response_mask": response_mask,
            "old_log_probs": torch.full((rows, resp_width), -float(torch.log(torch.tensor(vocab)))),
            "advantages": torch.randn(rows, resp_width, generator=gen),
        },
        batch_size=[rows],
    )


def make_actor(model_dir: Path, batch: TensorDict, args: argparse.Namespace, **model_kw: Any) -> ActorWorker:
    """Padded runs use fixed micro-batches of ``--micro`` rows; padding-free ones the same token budget."""
    width = batch["input_ids"].shape[1]
    actor_cfg = ActorConfig(
        ppo_mini_batch_size=batch.batch_size[0],
        use_dynamic_bsz=model_kw.get("use_remove_padding", True),
        ppo_micro_batch_size_per_gpu=args.micro,
        ppo_max_token_len_per_gpu=args.micro * width,
        optim=OptimConfig(lr=1e-4),
    )
    return ActorWorker(ModelConfig(path=str(model_dir), **model_kw), actor_cfg, args.device)


def timed_update(actor: ActorWorker, batch: TensorDict) -> tuple[float, float, float]:
    """(wall seconds, process CPU seconds, pg_loss) of one update."""
    actor.backend.synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    metrics = actor.update_policy(batch)
    actor.backend.synchronize()
    return time.perf_counter() - wall, time.process_time() - cpu, metrics["actor/pg_loss"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--min-len", type=int, default=64)
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument(
        "--micro", type=int, default=8, help="rows per padded micro-batch (sets the token budget)"
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1: stable on a shared host)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-trimmed", action="store_true", help="leave out the length-trimmed layout")
    parser.add_argument("--json-out", type=Path, default=None)
    return parser.parse_args()


def run(args: argparse.Namespace, model_dir: Path) -> list[dict[str, Any]]:
    """Variants take turns, repeat after repeat, so that load changes on the host hit all of them alike."""
    batch = build_batch(args.rows, args.min_len, args.max_len, args.vocab, args.seed)
    variants = {"padded": {"use_remove_padding": False}, "padding-free": {"use_remove_padding": True}}
    if not args.skip_trimmed:
        variants["trimmed (forced)"] = {"remove_padding_layout": "trimmed"}
    actors = {name: make_actor(model_dir, batch, args, **kw) for name, kw in variants.items()}
    timed_update(make_actor(model_dir, batch[: args.micro], args), batch[: args.micro])  # warm-up
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in actors}
    for _ in range(args.repeats):  # weights move between repeats; the work per update does not
        for name, actor in actors.items():
            samples[name].append(timed_update(actor, batch))
    return [
        {
            "variant": name,
            "layout": actors[name].layout,
            "wall_s": statistics.median(s[0] for s in runs),
            "cpu_s": statistics.median(s[1] for s in runs),
            "pg_loss": runs[0][2],
        }
        for name, runs in samples.items()
    ]


def report(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    # On a CPU the process's CPU time is the robust measure when other jobs share the cores.
    key = "cpu_s" if args.device == "cpu" else "wall_s"
    base = results[0]
    print(
        f"device={args.device} threads={args.threads} rows={args.rows} lengths={args.min_len}..{args.max_len} "
        f"hidden={args.hidden} layers={args.layers} vocab={args.vocab} budget={args.micro * args.max_len} tokens "
        f"(speedup from {key})"
    )
    print(
        f"{'variant':<16} {'layout':<8} {'wall s/update':>14} {'cpu s/update':>13} {'speedup':>8} {'pg_loss':>12}"
    )
    for row in results:
        row["speedup"] = base[key] / row[key]
        print(
            f"{row['variant']:<16} {row['layout']:<8} {row['wall_s']:>14.3f} {row['cpu_s']:>13.3f} "
            f"{row['speedup']:>7.2f}x {row['pg_loss']:>12.6f}"
        )
    losses_close = all(
        abs(r["pg_loss"] - base["pg_loss"]) <= 1e-4 * max(1.0, abs(base["pg_loss"])) for r in results
    )
    print(f"losses allclose: {losses_close}")
    record = {
        "benchmark": "packing",
        "device": args.device,
        "speedup_from": key,
        "losses_allclose": losses_close,
        "results": results,
    }
    line = json.dumps(record)
    print(line)
    if args.json_out is not None:
        args.json_out.write_text(line + "\n", encoding="utf-8")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    backend = get_backend(args.device)
    args.device = backend.name
    dist.init_process_group(
        backend.distributed_backend(), init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    with tempfile.TemporaryDirectory() as tmp:
        build_model(Path(tmp), args.hidden, args.layers, args.vocab, args.seed)
        results = run(args, Path(tmp))
    dist.destroy_process_group()
    report(args, results)


if __name__ == "__main__":
    main()
