"""Which machine each member of a weight-sync group runs on, and the groups that make a sync cross to each
receiving node once.

A collective library's broadcast over one flat group may send the whole buffer from the source to every
member (gloo does), so two rollout ranks on one remote node would pull each byte over the network twice.
When a node other than the source's holds several members, the sync is split in hops: the source
broadcasts to its own node's receivers plus one leader per other node, and each leader re-broadcasts
inside its node. When every other node holds one receiver, one flat group already crosses each node once.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from siirl.device.base import DeviceBackend

Ranks = tuple[int, ...]


def local_node_id() -> str:
    """Ray's id of this machine under Ray (containers on one host may share a hostname), else the hostname."""
    try:
        import ray
    except ImportError:
        return socket.gethostname()
    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else socket.gethostname()


def gather_nodes() -> list[str]:
    """Every world rank's node id, indexed by global rank (a collective over the whole world)."""
    nodes: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(nodes, local_node_id())
    return nodes


def plan_hops(members: Sequence[int], nodes: Sequence[str] | dict[int, str]) -> list[Ranks]:
    """The groups of one sync, each listed from the rank that broadcasts in it. The first is the source
    (``members[0]``), its node's receivers and the first member of every other node; then one group per
    other node holding several members, led by that first member."""
    by_node: dict[str, list[int]] = {}
    for rank in members:
        by_node.setdefault(nodes[rank], []).append(rank)
    home = nodes[members[0]]
    top = [*by_node[home], *(ranks[0] for node, ranks in by_node.items() if node != home)]
    inner = [tuple(ranks) for node, ranks in by_node.items() if node != home and len(ranks) > 1]
    return [tuple(top), *inner]


@dataclass(frozen=True)
class SyncGroup:
    """The torch groups of one sync (``hops[i]`` broadcasts from ``hops[i][0]`` over ``groups[i]``)."""

    members: Ranks
    hops: list[Ranks]
    groups: list[Any]
    backend: str

    def route(self, rank: int) -> list[tuple[Any, int]]:
        """``(group, src)`` of the broadcasts ``rank`` joins per bucket, in order: the one it receives in
        (none on the source), then the one it forwards in (leaders of a node and the source only)."""
        into = [(g, hop[0]) for hop, g in zip(self.hops, self.groups, strict=True) if rank in hop[1:]]
        out = [(g, hop[0]) for hop, g in zip(self.hops, self.groups, strict=True) if hop[0] == rank]
        return into + out


def weight_sync_group(
    ranks: Sequence[int], backend: DeviceBackend, nodes: Sequence[str] | dict[int, str] | None = None
) -> SyncGroup:
    """The groups of a sync over ``ranks`` (global ranks, the source first) on ``backend``'s collective
    library. ``nodes``: each global rank's node; by default gathered from every rank (Ray node id or
    hostname). Like every ``new_group``, every rank of the world must call it, members or not."""
    members = tuple(int(r) for r in ranks)
    hops = plan_hops(members, gather_nodes() if nodes is None else nodes)
    groups = [dist.new_group(ranks=list(hop), backend=backend.dist_backend) for hop in hops]
    return SyncGroup(members, hops, groups, backend.dist_backend)
