"""The weight-sync transports (``siirl.device.weight_sync``): buckets on the wire, in place, the object
store (bytes counted per node with a store that moves objects between nodes as Ray does) and the gloo
broadcast for real in three processes."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from dist_testutils import RANKS_GROUP, spawn

from siirl.device import backend_class
from siirl.device.weight_sync import SyncTicket, make_weight_sync, weight_sync_group
from siirl.device.weight_sync.buckets import pack, unpack
from siirl.device.weight_sync.engine_loaders import hf_loader
from siirl.errors import ConfigError

pytestmark = [RANKS_GROUP]


def tiny_model(seed: int) -> torch.nn.Module:
    """A few thousand parameters in several tensors (plain torch: the spawned ranks start fast)."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Embedding(40, 32), torch.nn.Linear(32, 64), torch.nn.LayerNorm(64),
                               torch.nn.Linear(64, 32), torch.nn.Linear(32, 40, bias=False))


def params(model) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters(remove_duplicate=False))


def model_bytes(model, dtype=None) -> int:
    size = (lambda t: torch.empty(0, dtype=dtype).element_size()) if dtype else (lambda t: t.element_size())
    return sum(t.numel() * size(t) for t in params(model).values())


def assert_same_weights(a, b, dtype=None) -> None:
    for name, tensor in params(a).items():
        expected = tensor.detach().to(dtype) if dtype else tensor.detach()
        assert torch.equal(params(b)[name].detach().to(expected.dtype), expected), name


def test_pack_round_trips_every_dtype_and_shape_aligned():
    bucket = [("w", torch.randn(3, 5).to(torch.bfloat16)), ("step", torch.tensor(7)),
              ("mask", torch.tensor([True, False, True])), ("ids", torch.arange(5, dtype=torch.int64))]
    flat, metas = pack(bucket)
    assert flat.dtype == torch.uint8 and all(m.offset % 16 == 0 for m in metas)
    for (name, tensor), (got_name, got) in zip(bucket, unpack(flat, metas), strict=True):
        assert got_name == name and got.dtype == tensor.dtype and torch.equal(got, tensor)


def test_in_place_streams_into_the_colocated_engine_and_counts_bytes():
    source, engine = tiny_model(0), tiny_model(1)
    loads = []
    load = hf_loader(params(engine))
    sync = make_weight_sync("naive", load=lambda b: loads.append(load(b)), bucket_mb=0.01)  # verl's name
    ticket = sync.send(source.named_parameters(), version=3)
    assert_same_weights(source, engine)
    assert ticket.version == 3 and ticket.stats.bytes == model_bytes(source)
    assert ticket.stats.buckets == len(loads) > 1 and sum(loads) == ticket.stats.tensors == len(params(source))
    assert sync.receive(load, ticket).bytes == 0  # nothing left to move


def test_in_place_without_buckets_hands_the_engine_the_stream_it_buckets_itself():
    """The colocated policy's path (siirl.dag_worker.policy): one ``load`` call, fed as the trainer yields."""
    source, engine = tiny_model(0), tiny_model(1)
    load, calls = hf_loader(params(engine)), []

    def engine_load(stream):
        calls.append(type(stream))
        return load(stream)

    ticket = make_weight_sync("in_place", load=engine_load, bucket_mb=None).send(source.named_parameters(), 2)
    assert_same_weights(source, engine)
    assert len(calls) == 1 and not issubclass(calls[0], list)  # a stream, not a bucket held in memory
    assert (ticket.stats.tensors, ticket.stats.bytes) == (len(params(source)), model_bytes(source))


class NodeObjectStore:
    """Objects live on the node that put them; a node's first ``get`` of an object copies it there (counted),
    later gets on that node read the local copy, as Ray's object manager does."""

    def __init__(self) -> None:
        self.objects, self.on_node, self.moved = {}, set(), {}
        self.put_bytes = 0

    def put(self, array):
        ref = len(self.objects)
        self.objects[ref] = array
        self.put_bytes += array.nbytes
        return ref

    def getter(self, node: str):
        def get(ref):
            if (node, ref) not in self.on_node:
                self.on_node.add((node, ref))
                self.moved[node] = self.moved.get(node, 0) + self.objects[ref].nbytes
            return self.objects[ref]

        return get


def test_object_store_moves_each_byte_once_per_receiving_node():
    store = NodeObjectStore()
    source = tiny_model(0)
    sender = make_weight_sync("ray", bucket_mb=0.01, dtype=torch.bfloat16, put=store.put, get=None)
    ticket = sender.send(source.named_parameters(), version=5)
    payload = model_bytes(source, torch.bfloat16)
    assert ticket.stats.bytes == payload and len(ticket.payload) == ticket.stats.buckets > 1
    assert payload <= store.put_bytes < payload + 16 * ticket.stats.tensors  # one put per bucket, padding only
    ranks = {("node-a", 0): tiny_model(1), ("node-a", 1): tiny_model(2), ("node-b", 0): tiny_model(3)}
    for (node, _), engine in ranks.items():
        receiver = make_weight_sync("object_store", bucket_mb=1, get=store.getter(node))
        stats = receiver.receive(hf_loader(params(engine)), ticket)
        assert (stats.version, stats.bytes, stats.tensors) == (5, payload, ticket.stats.tensors)
        assert_same_weights(source, engine, torch.bfloat16)
    assert store.moved == {"node-a": store.put_bytes, "node-b": store.put_bytes}  # not once per rank
    with pytest.raises(ValueError, match="needs the ticket"):
        receiver.receive(print, SyncTicket(5, ticket.stats))


def _broadcast_ranks(rank: int, world_size: int, version: int) -> None:
    group = weight_sync_group(list(range(world_size)), backend_class("cpu")())
    wire = []
    real = dist.broadcast
    with pytest.MonkeyPatch.context() as patch:  # the rank process runs later jobs: undone when this one ends
        patch.setattr(dist, "broadcast", lambda tensor, src, group: (
            wire.append(tensor.numel() * tensor.element_size()), real(tensor, src=src, group=group))[1])
        sync = make_weight_sync("gloo", group=group, src=0, bucket_mb=0.01, dtype=torch.bfloat16)
        model = tiny_model(rank)
        payload = model_bytes(model, torch.bfloat16)
        if rank == 0:
            stats = sync.send(model.named_parameters(), version).stats
        else:
            stats = sync.receive(hf_loader(params(model)))
            assert_same_weights(tiny_model(0), model, torch.bfloat16)
    assert stats.version == version and stats.bytes == payload and stats.buckets == len(wire) > 1
    assert payload <= sum(wire) < payload + 16 * stats.tensors  # each bucket crossed once, on every rank
    dist.barrier()


def test_gloo_broadcast_reaches_every_rollout_rank_once():
    spawn(_broadcast_ranks, 3, 7)


def test_group_uses_the_device_family_collective_library(monkeypatch):
    made = []
    monkeypatch.setattr(dist, "new_group", lambda ranks, backend: made.append((ranks, backend)))
    for family in ("cpu", "cuda", "npu"):
        weight_sync_group((0, 2, 3), backend_class(family)(), nodes={0: "a", 2: "b", 3: "c"})
    assert made == [([0, 2, 3], "gloo"), ([0, 2, 3], "nccl"), ([0, 2, 3], "hccl")]


def test_unknown_backend_is_a_one_line_error():
    with pytest.raises(ConfigError, match="weight-sync backend"):
        make_weight_sync("nixl", bucket_mb=1)
