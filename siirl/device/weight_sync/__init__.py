"""The one weight-sync layer: how the trainer's weights reach the rollout engines, on every device.

Nothing else in siiRL moves weights from trainer to rollout. Four transports, registered by name in
``WEIGHT_SYNC_BACKENDS`` (verl's ``rollout.checkpoint_engine.backend`` names are aliases):

==================  ==========================  ==============================================================
name (aliases)      when                        how
==================  ==========================  ==============================================================
``in_place``        rollout colocated with the  ``send`` streams buckets straight into the engine's ``load``
(``naive``)         trainer (today's default)
``object_store``    separate placements, any    one ``ray.put`` per bucket; receivers ``ray.get`` the refs in
(``ray``)           device, no shared group     the ticket; Ray moves each byte to each node once
``broadcast``       separate placements joined  bucketed ``dist.broadcast`` from the source rank; gloo on the
(``nccl``,          by a torch.distributed      CPU, NCCL on CUDA, HCCL on Ascend (``weight_sync_group`` takes
``hccl``, ``gloo``) group                       the device backend's ``dist_backend``); through one leader per
                                                node when a node holds several receivers (``topology``)
==================  ==========================  ==============================================================

``engine_broadcast`` is ``broadcast`` with the rollout engine's own processes (SGLang's schedulers, vLLM's
workers) as receivers: the headers travel the DAG workers' group, each bucket a second group the engine
joined, in the engine's wire format (``engine_receivers``, a registry by rollout engine name).

Use (source = one trainer rank holding full parameters, e.g. FSDP rank 0 after the gather)::

    sync = make_weight_sync("object_store", bucket_mb=cfg.rollout.weight_sync_bucket_mb, dtype=torch.bfloat16)
    ticket = sync.send(actor.named_parameters_for_sync(), version=step)   # source rank
    stats = sync.receive(rollout_engine.sync_weights, ticket)              # each rollout rank (Ray call)

    group = weight_sync_group([trainer_rank, *rollout_ranks], get_backend(device))   # every rank calls
    sync = make_weight_sync("broadcast", group=group, src=trainer_rank, bucket_mb=512, device=dev)
    sync.send(named_params, version)   # source        |   sync.receive(engine.sync_weights)  # receivers

    receiver = ENGINE_RECEIVERS.get("sglang")(sglang_engine)                 # rollout ranks; None on the source
    sync = make_weight_sync("engine_broadcast", group=group, src=trainer_rank, bucket_mb=512, engine="sglang",
                            receiver=receiver)                              # every member builds it
    sync.send(named_params, version)   # source        |   sync.receive(None)  # receivers: the engine loads

``send`` returns a :class:`SyncTicket` (version, source :class:`SyncStats`, object refs for the object
store); ``receive`` returns the receiver's :class:`SyncStats` (version, tensors, buckets, bytes, seconds:
``async/weight_sync_s``). ``load`` is any ``Callable[[list[(name, tensor)]], object]``: a rollout engine's
``sync_weights``, whose last hop is ``engine_loaders`` (hf in place, vLLM / vLLM-Ascend ``load_weights``,
SGLang ``update_weights_from_tensor``). Buckets are ``rollout.weight_sync_bucket_mb`` (verl's
``checkpoint_engine.update_weights_bucket_megabytes``) MiB, one flat buffer each (``buckets.pack``).
"""

from siirl.device.weight_sync import broadcast, engine_broadcast, in_place, object_store  # noqa: F401  (registration)
from siirl.device.weight_sync.base import (
    WEIGHT_SYNC_BACKENDS,
    SyncStats,
    SyncTicket,
    WeightSync,
    make_weight_sync,
)
from siirl.device.weight_sync.broadcast import BroadcastSync
from siirl.device.weight_sync.buckets import Loader, NamedTensors, iter_buckets, stream_weights
from siirl.device.weight_sync.engine_broadcast import EngineBroadcastSync
from siirl.device.weight_sync.in_place import InPlaceSync
from siirl.device.weight_sync.object_store import ObjectStoreSync
from siirl.device.weight_sync.topology import SyncGroup, weight_sync_group

__all__ = [
    "WEIGHT_SYNC_BACKENDS",
    "BroadcastSync",
    "EngineBroadcastSync",
    "InPlaceSync",
    "Loader",
    "NamedTensors",
    "ObjectStoreSync",
    "SyncGroup",
    "SyncStats",
    "SyncTicket",
    "WeightSync",
    "iter_buckets",
    "make_weight_sync",
    "stream_weights",
    "weight_sync_group",
]
