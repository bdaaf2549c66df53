"""SGLang's weight updates over a ``torch.distributed`` group (``Engine.init_weights_update_group`` /
``update_weights_from_distributed`` / ``destroy_weights_update_group``), with SGLang's signatures and
semantics: the engine's scheduler (here the engine itself, one TP rank) joins a group built from a TCP
rendezvous at ``rank_offset``, then receives each named tensor by its own broadcast from group rank 0,
loads them, and flushes its cache when asked. Calls answer ``(success, message)``.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d


def init_custom_process_group(backend, init_method, world_size, rank, group_name, timeout=timedelta(minutes=10)):
    """As SGLang's helper of the same name: a second group next to the scheduler's own world."""
    store, rank, world_size = next(c10d.rendezvous(init_method, rank, world_size, timeout=timeout))
    store.set_timeout(timeout)
    group, _ = c10d._new_process_group_helper(world_size, rank, [], dist.Backend(backend), store,
                                              group_name=group_name, timeout=timeout)
    c10d._world.pg_group_ranks[group] = {i: i for i in range(world_size)}
    return group


class DistributedWeights:
    """Mixed into the fake ``Engine``: uses its ``lm``, ``released``, ``flush_cache`` and ``_calls`` (``CALLS``)."""

    _weight_groups: dict

    def init_weights_update_group(self, master_address: str, master_port: int, rank_offset: int, world_size: int,
                                  group_name: str, backend: str = "nccl"):
        self._calls.append(("init_weights_update_group", {
            "master_address": master_address, "master_port": master_port, "rank_offset": rank_offset,
            "world_size": world_size, "group_name": group_name, "backend": backend}))
        self._weight_groups[group_name] = init_custom_process_group(
            backend, f"tcp://{master_address}:{master_port}", world_size, rank_offset, group_name)
        return True, "Succeeded to initialize custom process group."

    def update_weights_from_distributed(self, names: list[str], dtypes: list[str], shapes: list[list[int]],
                                        group_name: str = "weight_update_group", flush_cache: bool = True,
                                        load_format: str | None = None):
        if "weights" in self.released:
            raise RuntimeError("update_weights_from_distributed while the weights are released")
        self._calls.append(("update_weights_from_distributed", {
            "names": list(names), "dtypes": list(dtypes), "shapes": [list(s) for s in shapes],
            "group_name": group_name, "flush_cache": flush_cache}))
        group = self._weight_groups.get(group_name)
        if group is None:
            return False, f"Group {group_name} not in weight update groups"
        weights = []
        for name, dtype, shape in zip(names, dtypes, shapes, strict=True):
            tensor = torch.empty(shape, dtype=getattr(torch, dtype))
            dist.broadcast(tensor, src=0, group=group)
            weights.append((name, tensor))
        self.lm.load_weights(weights)
        if flush_cache:
            self.flush_cache()
        return True, "Succeeded to update parameter online from distributed."

    def destroy_weights_update_group(self, group_name: str):
        self._calls.append(("destroy_weights_update_group", group_name))
        dist.destroy_process_group(self._weight_groups.pop(group_name))
        return True, "Succeeded to destroy custom process group."
