"""Weight-sync time per step vs model size, for each transport of ``siirl.device.weight_sync`` this host runs.

Models: the embedded tiny Qwen2 and two Qwen2 models built from a config (no download), ~30M and ~100M
parameters, synced in float32 (the CPU's training dtype) in buckets of ``--bucket-mb``. A step's sync is
timed from the source's first bucket to the receiver's last load:

- ``in_place``: the colocated hf rollout engine's own copy of the model, in the trainer's process;
- ``object_store``: the trainer (this driver, Ray node 1) puts, a rollout actor on Ray node 2 gets and loads
  (``ray.cluster_utils.Cluster``: two raylets and object stores, so every byte crosses between nodes);
- ``broadcast``: gloo over a ``torch.distributed`` group of the trainer rank and one rollout rank
  (two processes).

Each row is the median of ``--steps`` syncs after one warm-up sync. Prints a table and one JSON line.

    python benchmarks/bench_weight_sync.py [--steps 3] [--bucket-mb 64] [--sizes embedded,30m,100m]

``measure(backend, size, steps, bucket_mb)`` is the same measurement for one cell, for other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.device import backend_class
from siirl.device.weight_sync import make_weight_sync, weight_sync_group
from siirl.device.weight_sync.engine_loaders import hf_loader

#: Config-built Qwen2 shapes with tied embeddings (vocab of a real tokenizer's order, so embeddings weigh what
#: they do in practice).
SHAPES = {
    "30m": {"vocab_size": 32000, "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 5,
            "num_attention_heads": 8, "num_key_value_heads": 4},
    "100m": {"vocab_size": 32000, "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12,
             "num_attention_heads": 12, "num_key_value_heads": 4},
}
BACKENDS = ("in_place", "object_store", "broadcast")


def build_model(size: str, seed: int = 0) -> torch.nn.Module:
    """The embedded tiny Qwen2, or a freshly initialised Qwen2 of ``SHAPES[size]`` (float32)."""
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    if size == "embedded":
        from siirl.embedded_assets import default_model_path

        return AutoModelForCausalLM.from_pretrained(default_model_path(), dtype=torch.float32)
    return Qwen2ForCausalLM(Qwen2Config(tie_word_embeddings=True, **SHAPES[size]))


def _params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters(remove_duplicate=False))


def _timed(steps: int, one_sync: Callable[[int], float]) -> list[float]:
    """``one_sync(version)`` -> seconds, once to warm up and then ``steps`` times."""
    one_sync(0)
    return [one_sync(version) for version in range(1, steps + 1)]


def _in_place(size: str, steps: int, bucket_mb: float) -> list[float]:
    trainer, engine = build_model(size, 0), build_model(size, 1)
    sync = make_weight_sync("in_place", load=hf_loader(_params(engine)), bucket_mb=bucket_mb)
    return _timed(steps, lambda v: sync.send(trainer.named_parameters(), v).stats.seconds)


class _Receiver:
    """The rollout side of the object store on the other Ray node: its own copy of the model."""

    def __init__(self, size: str, bucket_mb: float) -> None:
        torch.set_num_threads(1)
        self.load = hf_loader(_params(build_model(size, 1)))
        self.sync = make_weight_sync("object_store", bucket_mb=bucket_mb)

    def receive(self, ticket) -> int:
        return self.sync.receive(self.load, ticket).bytes


def _object_store(size: str, steps: int, bucket_mb: float) -> list[float]:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1, resources={"rollout_node": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}})
    try:
        receiver = ray.remote(num_cpus=1, resources={"rollout_node": 1})(_Receiver).remote(size, bucket_mb)
        trainer = build_model(size, 0)
        sync = make_weight_sync("object_store", bucket_mb=bucket_mb)

        def one_sync(version: int) -> float:
            start = time.perf_counter()
            ticket = sync.send(trainer.named_parameters(), version)
            assert ray.get(receiver.receive.remote(ticket)) == ticket.stats.bytes
            return time.perf_counter() - start

        return _timed(steps, one_sync)
    finally:
        ray.shutdown()
        cluster.shutdown()


def _broadcast_rank(rank: int, port: int, size: str, steps: int, bucket_mb: float, out) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        group = weight_sync_group([0, 1], backend_class("cpu")())
        sync = make_weight_sync("broadcast", group=group, src=0, bucket_mb=bucket_mb)
        model = build_model(size, rank)
        load = hf_loader(_params(model))

        def one_sync(version: int) -> float:
            dist.barrier(group)
            start = time.perf_counter()
            if rank == 0:
                sync.send(model.named_parameters(), version)
            else:
                sync.receive(load)
            return time.perf_counter() - start

        out.put((rank, _timed(steps, one_sync)))
    finally:
        dist.destroy_process_group()


def _broadcast(size: str, steps: int, bucket_mb: float) -> list[float]:
    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_broadcast_rank, args=(r, port, size, steps, bucket_mb, out)) for r in (0, 1)]
    for proc in procs:
        proc.start()
    times = dict(out.get(timeout=600) for _ in procs)
    for proc in procs:
        proc.join()
    return [max(pair) for pair in zip(times[0], times[1], strict=True)]  # the sync ends at the slower side


MEASURES: dict[str, Callable[[str, int, float], list[float]]] = {
    "in_place": _in_place,
    "object_store": _object_store,
    "broadcast": _broadcast,
}


def measure(backend: str, size: str, steps: int = 3, bucket_mb: float = 64) -> dict:
    """One cell: the median seconds of ``steps`` syncs of model ``size`` through ``backend``."""
    model = build_model(size)
    numel = sum(p.numel() for p in model.parameters())
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    seconds = statistics.median(MEASURES[backend](size, steps, bucket_mb))
    return {"backend": backend, "model": size, "params_m": round(numel / 1e6, 2), "mb": round(nbytes / 2**20, 1),
            "sync_s": round(seconds, 4), "gb_per_s": round(nbytes / 2**30 / seconds, 3)}


def table(rows: list[dict]) -> str:
    lines = ["| model | params (M) | MiB | backend | sync s / step | GiB/s |", "|---|---:|---:|---|---:|---:|"]
    lines += [f"| {r['model']} | {r['params_m']} | {r['mb']} | {r['backend']} | {r['sync_s']:.4f} | {r['gb_per_s']:.2f} |"
              for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--bucket-mb", type=float, default=64)
    parser.add_argument("--sizes", default="embedded,30m,100m")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = [measure(backend, size, args.steps, args.bucket_mb)
            for size in args.sizes.split(",") for backend in args.backends.split(",")]
    print(table(rows))
    print(json.dumps({"bench": "weight_sync", "bucket_mb": args.bucket_mb, "steps": args.steps,
                      "torch_threads": 1, "rows": rows}))


if __name__ == "__main__":
    main()
