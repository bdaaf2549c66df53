"""A process group between the source trainer rank and a rollout engine's own processes.

An engine's ranks (SGLang's schedulers, vLLM's workers) already belong to the engine's own
``torch.distributed`` world, so they cannot join the DAG workers' world; like SGLang's
``init_weights_update_group``, the weight-sync group is a second group built from a TCP rendezvous at an
address the source publishes. The source is rank 0 in it, engine ranks follow at their ``rank_offset``.
Built the way SGLang builds its side, so the source and SGLang's schedulers meet in the same store.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

#: The group's name on every side (SGLang keys its groups by it; it prefixes the rendezvous keys).
GROUP_NAME = "siirl_weight_sync"
TIMEOUT = timedelta(minutes=30)


def source_address() -> tuple[str, int]:
    """Where the source listens: this machine's address (Ray's view of it under Ray) and a free port."""
    try:
        import ray

        host = (
            ray.util.get_node_ip_address()
            if ray.is_initialized()
            else socket.gethostbyname(socket.gethostname())
        )
    except ImportError:
        host = socket.gethostbyname(socket.gethostname())
    with socket.socket() as sock:
        sock.bind(("", 0))
        return host, sock.getsockname()[1]


def join_group(
    address: str, port: int, rank: int, world_size: int, backend: str, name: str = GROUP_NAME
) -> Any:
    """Join the group as ``rank`` of ``world_size`` (blocks until every rank has joined); ``dist.broadcast``
    takes it with group ranks as ``src``."""
    store, rank, world_size = next(
        c10d.rendezvous(f"tcp://{address}:{port}", rank, world_size, timeout=TIMEOUT)
    )
    store.set_timeout(TIMEOUT)
    group, _ = c10d._new_process_group_helper(
        world_size, rank, [], dist.Backend(backend), store, group_name=name, timeout=TIMEOUT
    )
    c10d._world.pg_group_ranks[group] = {i: i for i in range(world_size)}
    return group
