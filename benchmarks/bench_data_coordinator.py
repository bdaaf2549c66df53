"""Per-node data buffers vs a single controller: moving a batch from 8 producers to 4 consumers.

Ours (``DataCoordinator.put``/``get``): every producer ``ray.put``s its shard once and sends the ref and
its metadata to its node's buffer without waiting; every consumer makes one call to that buffer, computes
the shared assignment, maps the producers' shards zero-copy and copies out exactly its rows; acks are
one-way. The driver only waits. Baseline (single controller, as in designs where the driver owns the
batch): the driver gathers all shards, concatenates them, splits the batch with the same balanced
assignment and scatters the parts to the consumers.

Both start with the shards in the producers' memory and end with each consumer holding its batch;
both use the same wire format and assignment, and the consumers' batches are checked to be identical.
Every process maps the whole object store before timing (``map_object_store``): the state a training
loop reaches once each worker has touched every page of the store; otherwise the first touch of each
page in each process (a page fault per 4 KB) dominates and lands on whichever method meets it first.
Reported per batch size, after untimed warm-up runs: the fastest wall time of ``--repeats`` runs and the
largest driver peak RSS increase (sampled every 2 ms).

    python benchmarks/bench_data_coordinator.py [--sizes 1024,4096,16384,65536] [--repeats 3] [--warmup 1]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import sys
import threading
import time
from hashlib import blake2b
from pathlib import Path

import numpy as np
import psutil
import ray
import torch
from tensordict import TensorDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siirl.data_coordinator import (
    DataCoordinator,
    ProducerMeta,
    assign_samples,
    create_data_buffers,
    describe_shard,
    non_tensor_list,
    set_non_tensor_list,
)
from siirl.data_coordinator.tensordict_ops import WireBatch, from_wires, to_wire, wire_take

MB = 1024**2


class Producer:
    """Holds one shard (a DAG worker after its stage) and hands it over either way."""

    def __init__(
        self, rank: int, num_producers: int, num_consumers: int, floats: int, group_size: int
    ) -> None:
        self.coordinator = DataCoordinator()
        self.rank, self.num_producers, self.num_consumers = rank, num_producers, num_consumers
        self.floats, self.group_size = floats, group_size
        self.shard = None

    def prepare(self, n: int) -> None:
        """A shard of n samples: 4 * floats bytes of payload, an 8-token mask of varying length, uids."""
        x = torch.randn(n, self.floats)
        x[:, 0] = torch.arange(self.rank * n, (self.rank + 1) * n, dtype=torch.float32)
        lengths = 1 + torch.arange(n) % 8
        mask = (torch.arange(8).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.int8)
        self.shard = TensorDict({"x": x, "attention_mask": mask}, batch_size=[n])
        set_non_tensor_list(self.shard, "uid", [f"p{self.rank}-{i // self.group_size}" for i in range(n)])

    def put(self, step: int) -> None:
        self.coordinator.put(
            step,
            "bench",
            self.shard,
            producer_rank=self.rank,
            num_producers=self.num_producers,
            num_consumers=self.num_consumers,
            expected_acks=self.num_consumers,
        )

    def map_object_store(self) -> int:
        return map_object_store()

    def shard_wire(self) -> WireBatch:
        """The baseline's gather: the shard goes back to the driver through the object store."""
        return to_wire(self.shard)


class Consumer:
    """Receives its batch (a DAG worker of the next stage) and reports a digest of it."""

    def __init__(self, rank: int, num_producers: int, num_consumers: int) -> None:
        self.coordinator = DataCoordinator()
        self.rank, self.num_producers, self.num_consumers = rank, num_producers, num_consumers
        self.batch = None

    def _digest(self) -> tuple[int, float, str]:
        """Rows, an order-sensitive sum of the sample ids and a hash of the uids: equal batches match."""
        ids = self.batch["x"][:, 0].double()
        uids = "\n".join(non_tensor_list(self.batch, "uid")).encode()
        return (
            self.batch.batch_size[0],
            float((ids * (1 + torch.arange(len(ids)) % 7)).sum()),
            blake2b(uids).hexdigest(),
        )

    def get(self, step: int) -> tuple[int, float, str]:
        self.batch = self.coordinator.get(
            step,
            "bench",
            consumer_rank=self.rank,
            num_consumers=self.num_consumers,
            num_producers=self.num_producers,
        )
        return self._digest()

    def map_object_store(self) -> int:
        return map_object_store()

    def receive(self, wrapped_ref: list) -> tuple[int, float, str]:
        self.batch = from_wires([ray.get(wrapped_ref[0])])
        return self._digest()

    def release(self) -> None:
        self.batch = None
        gc.collect()


MADV_POPULATE_WRITE = 23  # Linux >= 5.14: fault in a whole range with one call


def map_object_store() -> int:
    """Map every page of this node's object store into the calling process; returns the bytes mapped.

    A process pays a page fault (~1.5 us here) the first time it touches each 4 KB page of the store, and
    the very first touch of a page anywhere also allocates and zeroes it (~0.5 GB/s on this host). A long
    training run reaches the state where every worker has touched the whole store and writes and reads
    it at memcpy speed; a few warm-up steps do not (each object lands somewhere new), so without this the
    timings below would mostly be page faults, charged at random to either method.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    ray.get(ray.put(np.zeros(MB, dtype=np.uint8)))  # ensure this process has attached to the store
    mapped = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and "/plasma" in fields[5] and fields[1].startswith("rw"):
                start, end = (int(a, 16) for a in fields[0].split("-"))
                if libc.madvise(start, end - start, MADV_POPULATE_WRITE) != 0:
                    raise OSError(ctypes.get_errno(), "madvise(MADV_POPULATE_WRITE) of the object store failed")
                mapped += end - start
    return mapped


class RssSampler:
    """Peak RSS of this process above its value at start, sampled by a background thread."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.proc, self.interval_s = psutil.Process(), interval_s
        self.start = self.peak = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.interval_s)

    def __enter__(self):
        gc.collect()
        self.start = self.peak = self.proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def increase_mb(self) -> float:
        return (self.peak - self.start) / MB


def run_ours(producers, consumers, step: int) -> list:
    puts = [p.put.remote(step) for p in producers]
    digests = ray.get([c.get.remote(step) for c in consumers])
    ray.get(puts)
    return digests


def run_baseline(producers, consumers) -> list:
    """The driver owns the batch: gather, concatenate, split with the same assignment, scatter."""
    wires = ray.get([p.shard_wire.remote() for p in producers])
    sizes = [w.num_rows for w in wires]
    batch = from_wires(wires)
    del wires
    whole = describe_shard(batch, 0, "")
    bounds = [0, *itertools.accumulate(sizes)]
    metas = [
        ProducerMeta(r, "", whole.group_keys[a:b], whole.lengths[a:b])
        for r, (a, b) in enumerate(itertools.pairwise(bounds))
    ]
    wire = to_wire(batch)
    refs = [ray.put(wire_take(wire, rows)) for rows in assign_samples(metas, len(consumers))]
    del batch, wire
    return ray.get([c.receive.remote([ref]) for c, ref in zip(consumers, refs)])


def measure(fn, *args) -> tuple[float, float, list]:
    with RssSampler() as rss:
        start = time.perf_counter()
        digests = fn(*args)
        elapsed = time.perf_counter() - start
    return elapsed, rss.increase_mb, digests


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="1024,4096,16384,65536", help="comma-separated batch sizes (samples)"
    )
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--floats", type=int, default=4096, help="float32 per sample (4096 = 16 KB)")
    parser.add_argument(
        "--group-size", type=int, default=8, help="samples per uid group (responses per prompt)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per size and method; the fastest is kept"
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed runs per size first (first-use costs of each process)"
    )
    parser.add_argument("--object-store-gb", type=float, default=3.0)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if any(s % args.producers for s in sizes):
        parser.error(f"every size must be a multiple of --producers={args.producers}")

    ray.init(
        address="local",  # a fresh instance, never a cluster some other job left running
        num_cpus=args.producers + args.consumers + 2,
        object_store_memory=int(args.object_store_gb * 1024**3),
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    create_data_buffers()
    producers = [
        ray.remote(num_cpus=1)(Producer).remote(
            r, args.producers, args.consumers, args.floats, args.group_size
        )
        for r in range(args.producers)
    ]
    consumers = [
        ray.remote(num_cpus=1)(Consumer).remote(r, args.producers, args.consumers)
        for r in range(args.consumers)
    ]
    mapped = map_object_store()  # the first call also allocates the store's pages
    if not mapped:
        print("note: object store mapping not found; timings include first-touch page faults")
    ray.get([a.map_object_store.remote() for a in producers + consumers])
    rows, step = [], 0
    for size in sizes:
        ray.get([p.prepare.remote(size // args.producers) for p in producers])
        ours, base = [], []
        for attempt in range(args.warmup + args.repeats):
            step += 1
            mine = measure(run_ours, producers, consumers, step)
            ray.get([c.release.remote() for c in consumers])
            theirs = measure(run_baseline, producers, consumers)
            ray.get([c.release.remote() for c in consumers])
            if mine[2] != theirs[2]:
                raise RuntimeError(f"size {size}: consumers got different batches from the two methods")
            if attempt >= args.warmup:
                ours.append(mine)
                base.append(theirs)
        best_ours, best_base = min(ours), min(base)
        rows.append(
            {
                "samples": size,
                "payload_mb": round(size * args.floats * 4 / MB, 1),
                "ours_s": round(best_ours[0], 3),
                "baseline_s": round(best_base[0], 3),
                "speedup": round(best_base[0] / best_ours[0], 2),
                "ours_driver_rss_mb": round(max(r[1] for r in ours), 1),
                "baseline_driver_rss_mb": round(max(r[1] for r in base), 1),
            }
        )
        print_row(rows[-1], header=len(rows) == 1)
    ray.shutdown()
    print(
        json.dumps(
            {
                "benchmark": "data_coordinator",
                "producers": args.producers,
                "consumers": args.consumers,
                "cpus": os.cpu_count(),
                "results": rows,
            }
        )
    )


COLUMNS = [
    ("samples", 8),
    ("payload_mb", 11),
    ("ours_s", 8),
    ("baseline_s", 11),
    ("speedup", 8),
    ("ours_driver_rss_mb", 19),
    ("baseline_driver_rss_mb", 23),
]


def print_row(row: dict, header: bool) -> None:
    if header:
        print(" ".join(name.rjust(width) for name, width in COLUMNS))
    print(" ".join(str(row[name]).rjust(width) for name, width in COLUMNS), flush=True)


if __name__ == "__main__":
    main()
