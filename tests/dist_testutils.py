"""Tests that need several ranks: a free local port and ``fn`` run in processes joined by a gloo group."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def init_group(rank: int, world_size: int, port: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)


def _spawned(rank: int, world_size: int, port: int, fn: Callable[..., None], args: tuple) -> None:
    torch.set_num_threads(1)
    init_group(rank, world_size, port)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()


def spawn(fn: Callable[..., None], world_size: int, *args: Any) -> None:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` processes joined by a gloo group."""
    mp.spawn(_spawned, args=(world_size, free_port(), fn, args), nprocs=world_size, join=True)
