"""Packed causal attention kernels on this host: the per-sequence SDPA loop vs the batched kernels.

Shape of the actor's packed micro-batches (sequences of 40-160 tokens, 14 query / 2 KV heads, head dim
64). Forward only, because FlexAttention has no CPU backward; ``varlen_attn`` runs only on a CUDA build.
Prints a table and a JSON line; times are ratios to the loop measured in the same run.

    python benchmarks/bench_varlen_attention.py [--sequences 32] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch

from siirl.device import get_backend
from siirl.device.kernels.attention import sdpa_varlen_kernel
from siirl.device.kernels.cuda_attention import flex_varlen_kernel, torch_varlen_attn, torch_varlen_kernel
from siirl.device.kernels.varlen import Segments


def packed_inputs(sequences: int, device: torch.device, dtype: torch.dtype):
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(40, 161, (sequences,), generator=gen)
    cu = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32).to(device)
    total = int(lengths.sum())
    seg = Segments(None, None, cu, cu, int(lengths.max()), int(lengths.max()))
    q = torch.randn(total, 14, 64, generator=gen).to(device, dtype)
    k, v = (torch.randn(total, 2, 64, generator=gen).to(device, dtype) for _ in range(2))
    return q, k, v, seg


def timed(fn: Callable[[], torch.Tensor], repeats: int, sync: Callable[[], None]) -> float:
    fn()  # warm-up (and compilation)
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    backend = get_backend("auto")
    device, dtype, sync = backend.device(0), backend.default_dtype, backend.synchronize
    q, k, v, seg = packed_inputs(args.sequences, device, dtype)
    kernels = {"sdpa_loop": sdpa_varlen_kernel, "flex_attention": flex_varlen_kernel}
    if device.type != "cpu" and torch_varlen_attn() is not None:
        kernels["torch_varlen_attn"] = torch_varlen_kernel
    scale = 64**-0.5
    reference = sdpa_varlen_kernel(q, k, v, seg, scale, 0.0)
    rows = []
    with torch.no_grad():
        for name, kernel in kernels.items():
            seconds = timed(lambda kernel=kernel: kernel(q, k, v, seg, scale, 0.0), args.repeats, sync)
            diff = (kernel(q, k, v, seg, scale, 0.0).float() - reference.float()).abs().max().item()
            rows.append({"kernel": name, "ms": seconds * 1e3, "max_abs_diff": diff})
    base = rows[0]["ms"]
    print(f"device={device.type} dtype={str(dtype).removeprefix('torch.')} tokens={q.shape[0]} sequences={args.sequences}")
    print(f"{'kernel':<20}{'ms':>10}{'x loop':>10}{'max|diff|':>12}")
    for row in rows:
        row["ratio_to_loop"] = row["ms"] / base
        print(f"{row['kernel']:<20}{row['ms']:>10.2f}{row['ratio_to_loop']:>10.2f}{row['max_abs_diff']:>12.2e}")
    print(json.dumps({"device": device.type, "tokens": q.shape[0], "results": rows}))


if __name__ == "__main__":
    main()
