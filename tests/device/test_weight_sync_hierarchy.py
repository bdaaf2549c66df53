"""The broadcast transport across nodes: which groups a sync uses, and, over gloo for real with ranks
assigned to simulated nodes, that each byte crosses to each receiving node once."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from dist_testutils import RANKS_GROUP, spawn

from siirl.device import backend_class
from siirl.device.weight_sync import make_weight_sync, topology, weight_sync_group
from siirl.device.weight_sync.engine_loaders import hf_loader

pytestmark = [RANKS_GROUP]

#: The simulated node of each rank: the source alone, two receivers on node b, one on node c.
NODES = ("node-a", "node-b", "node-b", "node-c")


@pytest.mark.parametrize(("nodes", "hops"), [
    ({0: "a", 1: "b", 2: "c"}, [(0, 1, 2)]),                     # one receiver per node: one flat group
    ({0: "a", 1: "a", 2: "b"}, [(0, 1, 2)]),                     # a receiver beside the source: still flat
    (dict(enumerate(NODES)), [(0, 1, 3), (1, 2)]),               # node b's leader forwards to its neighbour
    ({0: "a", 5: "b", 2: "a", 7: "b", 9: "b"}, [(0, 2, 5), (5, 7, 9)]),
])
def test_hops_cross_each_receiving_node_once(nodes, hops):
    assert topology.plan_hops(list(nodes), nodes) == hops


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Embedding(40, 32), torch.nn.Linear(32, 64), torch.nn.Linear(64, 40))


def _hierarchy_ranks(rank: int, world_size: int) -> None:
    moved: list[tuple[int, int]] = []  # (src, bytes) of every data broadcast this rank took part in
    real = dist.broadcast

    def counted(tensor, src, group):
        moved.append((src, tensor.numel() * tensor.element_size()))
        return real(tensor, src=src, group=group)

    with pytest.MonkeyPatch.context() as patch:  # the rank process runs later jobs: undone when this one ends
        patch.setattr(topology, "local_node_id", lambda: NODES[rank])
        patch.setattr(dist, "broadcast", counted)
        group = weight_sync_group(range(world_size), backend_class("cpu")())  # nodes gathered from every rank
        sync = make_weight_sync("gloo", group=group, src=0, bucket_mb=0.01, dtype=torch.bfloat16)
        model = tiny_model(rank)
        if rank == 0:
            stats = sync.send(model.named_parameters(), version=4).stats
        else:
            stats = sync.receive(hf_loader(dict(model.named_parameters())))
            for name, tensor in tiny_model(0).named_parameters():
                assert torch.equal(dict(model.named_parameters())[name], tensor.to(torch.bfloat16).float()), name
    assert group.hops == [(0, 1, 3), (1, 2)] and stats.version == 4 and stats.buckets > 1
    everyone: list = [None] * world_size
    dist.all_gather_object(everyone, moved)
    sent = sum(n for src, n in everyone[0])
    assert sent < stats.bytes + 16 * stats.tensors  # one broadcast per bucket, alignment padding only
    into: dict[str, int] = {}
    for receiver, taken in enumerate(everyone):
        for src, nbytes in taken:
            if src != receiver and NODES[src] != NODES[receiver]:
                into[NODES[receiver]] = into.get(NODES[receiver], 0) + nbytes
    assert into == {"node-b": sent, "node-c": sent}  # not twice into node b
    assert sum(n for src, n in everyone[2] if src == 1) == sent  # rank 2 took it from its node's leader
    dist.barrier()


def test_gloo_broadcast_crosses_to_each_receiving_node_once():
    spawn(_hierarchy_ranks, len(NODES))
