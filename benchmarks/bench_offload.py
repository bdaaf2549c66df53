"""What ``fsdp_config`` offload saves on the CPU backend: two gloo ranks, an actor and a reference.

What is measurable here, and true: on the CPU backend the "device" IS host memory, so FSDP2's
``CPUOffloadPolicy`` and the optimizer-state offload move no byte (placement is already the host); a
number claiming otherwise would be invented. What offload does change on this backend is the layout:
``param_offload=true`` makes ``strategy=auto`` shard the model with FSDP2 (the default replicates models
under 100M parameters), and a frozen model is resharded after each forward, so the reference holds only
its shard while the actor trains. That drop is real memory and is what this script measures.

Three layouts of the same job, each in fresh processes (so nothing of one run stays in the next):

- ``default``: ``strategy=auto`` (whole replicas here), no offload;
- ``fsdp``: ``strategy=fsdp``, no offload (sharding alone);
- ``offload``: ``strategy=auto`` + ``actor.fsdp_config.param_offload=true optimizer_offload=true`` +
  ``ref.fsdp_config.param_offload=true``.

Per rank, after one warm-up update: the bytes each model keeps between phases (parameters, gradients and
optimizer state, local shards; tensor census) and the peak resident set of the process during the reference
forward and during the actor update (Linux ``VmHWM``, reset before each phase through ``/proc/self/clear_refs``).
Ratios are ``offload / default`` and ``offload / fsdp`` from the same run. ``offload / fsdp`` near 1.0 is the
expected, honest result: on the CPU, offload saves what sharding saves. On an accelerator the same options
move the state off the device (checked by ``tests/engine/test_fsdp_offload.py::test_offload_moves_state_off_the_gpu``).

    python benchmarks/bench_offload.py [--hidden 512] [--layers 8] [--rows 16]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.tensor import DTensor
from transformers import Qwen2Config, Qwen2ForCausalLM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "engine"))

from engine_testutils import free_port, make_batch

from siirl.engine.workers import ActorWorker, ReferenceWorker
from siirl.params.fsdp import FSDPConfig
from siirl.params.model import ActorConfig, ModelConfig, OptimConfig, RefConfig

WORLD, VOCAB = 2, 32
LAYOUTS = {
    "default": ("auto", FSDPConfig(), FSDPConfig()),
    "fsdp": ("fsdp", FSDPConfig(), FSDPConfig()),
    "offload": ("auto", FSDPConfig(param_offload=True, optimizer_offload=True), FSDPConfig(param_offload=True)),
}


def build_model(path: Path, hidden: int, layers: int) -> int:
    """A random Qwen2 of the given size (vocab 32, as the engine tests' batches use); returns its parameters."""
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=1, pad_token_id=0)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


def _bytes(tensors) -> int:
    local = [t.to_local() if isinstance(t, DTensor) else t for t in tensors if t is not None]
    return sum(t.untyped_storage().nbytes() for t in {t.untyped_storage().data_ptr(): t for t in local}.values())


def state_bytes(worker, optimizer=None) -> int:
    """Parameter, gradient and optimizer-state bytes this rank holds for ``worker``'s model."""
    params = list(worker.model.parameters())
    total = _bytes(params) + _bytes(p.grad for p in params)
    if optimizer is not None:
        total += _bytes(v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor))
    return total


def _reset_peak() -> None:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")


def _peak_rss() -> int:
    return int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024


def _rank(rank: int, model_dir: str, port: int, layout: str, rows: int, results) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    try:
        strategy, actor_fsdp, ref_fsdp = LAYOUTS[layout]
        mcfg = ModelConfig(path=model_dir)
        actor_cfg = ActorConfig(strategy=strategy, fsdp_config=actor_fsdp, ppo_mini_batch_size=rows,
                                ppo_max_token_len_per_gpu=4096, optim=OptimConfig(lr=1e-4))
        ref = ReferenceWorker(mcfg, RefConfig(fsdp_config=ref_fsdp), "cpu", strategy=strategy)
        actor = ActorWorker(mcfg, actor_cfg, "cpu")
        batch = make_batch(rows * WORLD, prompt_len=32, response_len=64, seed=rank)[rank * rows : (rank + 1) * rows]
        actor.update_policy(batch)  # warm-up: Adam's state exists from here on
        _reset_peak()
        ref.compute_ref_log_prob(batch)
        ref_peak = _peak_rss()
        _reset_peak()
        actor.update_policy(batch)
        update_peak = _peak_rss()
        results[(layout, rank)] = {
            "strategy": actor.strategy.name, "ref_strategy": ref.strategy.name,
            "ref_state_mb": state_bytes(ref) / 2**20, "actor_state_mb": state_bytes(actor, actor.optimizer) / 2**20,
            "peak_rss_ref_forward_mb": ref_peak / 2**20, "peak_rss_actor_update_mb": update_peak / 2**20,
        }
    finally:
        dist.destroy_process_group()


def run(hidden: int, layers: int, rows: int) -> dict:
    results = mp.Manager().dict()
    with tempfile.TemporaryDirectory(prefix="bench_offload_") as folder:
        params = build_model(Path(folder), hidden, layers)
        for layout in LAYOUTS:
            mp.spawn(_rank, args=(folder, free_port(), layout, rows, results), nprocs=WORLD, join=True)
    table = {layout: {k: (results[(layout, 0)][k] if isinstance(results[(layout, 0)][k], str)
                          else max(results[(layout, r)][k] for r in range(WORLD)))
                      for k in results[(layout, 0)]} for layout in LAYOUTS}
    return {"params": params, "world": WORLD, "rows_per_rank": rows, "layouts": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rows", type=int, default=8, help="responses per rank")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    report = run(args.hidden, args.layers, args.rows)
    table = report["layouts"]
    keys = ["ref_state_mb", "actor_state_mb", "peak_rss_ref_forward_mb", "peak_rss_actor_update_mb"]
    print(f"{report['params'] / 1e6:.1f}M parameters, {WORLD} gloo ranks, {args.rows} responses per rank; max over ranks")
    print(f"{'layout':<9} {'actor/ref':<17} " + " ".join(f"{k:>25}" for k in keys))
    for layout, row in table.items():
        print(f"{layout:<9} {row['strategy'] + '/' + row['ref_strategy']:<17} "
              + " ".join(f"{row[k]:>25.1f}" for k in keys))
    ratios = {f"{k}_offload_vs_{base}": round(table["offload"][k] / table[base][k], 3)
              for base in ("default", "fsdp") for k in keys}
    for name, value in ratios.items():
        print(f"  {name:<50} {value:.3f}")
    print(json.dumps({"benchmark": "offload", **report, "ratios": ratios}))


if __name__ == "__main__":
    main()
