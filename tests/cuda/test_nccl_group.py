"""An NCCL process group forms through the CUDA backend: two processes on two GPUs, else world size 1."""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from siirl.device import get_backend


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _member(rank: int, world: int, port: int, results) -> None:
    backend = get_backend("cuda")
    backend.set_device(rank)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend.distributed_backend(with_cpu_groups=True), rank=rank, world_size=world)
    try:
        on_gpu = torch.full((4,), float(rank + 1), device=backend.device(rank))
        dist.all_reduce(on_gpu)
        on_host = torch.tensor([rank + 1.0])
        dist.all_reduce(on_host)  # the gloo half of the composite backend
        results[rank] = (dist.get_backend(), on_gpu.cpu().tolist(), on_host.item())
    finally:
        dist.destroy_process_group()


def test_nccl_all_reduce():
    world = 2 if torch.cuda.device_count() >= 2 else 1
    results = mp.Manager().dict()
    mp.spawn(_member, args=(world, _free_port(), results), nprocs=world, join=True)
    total = world * (world + 1) / 2
    for rank in range(world):
        backend_name, gpu_sum, host_sum = results[rank]
        assert "nccl" in backend_name
        assert gpu_sum == [total] * 4 and host_sum == total
