"""The workers' torch.distributed rendezvous listens on the node IP Ray uses, not on every interface."""

import os
from datetime import timedelta

import psutil
import ray
import torch.distributed as dist

from siirl.dag_worker.worker import _listen_on


def _listening(port: int) -> list[str]:
    return [
        c.laddr.ip
        for c in psutil.Process(os.getpid()).net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]


def test_store_serves_on_the_node_ip_only():
    host = ray.util.get_node_ip_address()
    listener = _listen_on(host)
    port = listener.getsockname()[1]
    store = dist.TCPStore(host, port, 1, True, timedelta(seconds=30), master_listen_fd=listener.detach())
    try:
        store.set("key", "value")
        client = dist.TCPStore(host, port, 1, False, timedelta(seconds=30))
        assert client.get("key") == b"value"
        assert _listening(port) == [host]
    finally:
        del store
