"""verl's ``fsdp_config.mixed_precision`` on two gloo ranks: ``param_dtype`` / ``reduce_dtype`` become the
``MixedPrecisionPolicy`` every ``fully_shard`` unit runs under; on whole-model replicas the gradient
all-reduce runs in ``reduce_dtype``."""

from __future__ import annotations

from pathlib import Path

import torch
from dist_testutils import RANKS_GROUP, spawn
from engine_testutils import actor_config, model_config
from torch.distributed.fsdp import FSDPModule

from siirl.config_checks import load_config
from siirl.engine.workers import ActorWorker

pytestmark = [RANKS_GROUP]

WORLD = 2
MIXED = {"param_dtype": "bf16", "reduce_dtype": "fp16", "buffer_dtype": "fp32"}


def _fsdp_config(**mixed):
    keys = [f"+actor_rollout_ref.actor.fsdp_config.mixed_precision.{k}={v}" for k, v in mixed.items()]
    return load_config(keys).actor_rollout_ref.actor.fsdp_config


def _rank_main(rank: int, world: int, model_dir: str) -> None:
    mcfg = model_config(Path(model_dir))
    sharded = ActorWorker(mcfg, actor_config(strategy="fsdp", fsdp_config=_fsdp_config(**MIXED)), "cpu")
    units = [m for m in sharded.model.modules() if isinstance(m, FSDPModule)]
    policies = {(p.param_dtype, p.reduce_dtype) for p in (m._get_fsdp_state()._mp_policy for m in units)}
    assert len(units) > 1 and policies == {(torch.bfloat16, torch.float16)}, policies

    replica = ActorWorker(mcfg, actor_config(strategy="replicate", fsdp_config=_fsdp_config(reduce_dtype="bf16")), "cpu")
    params = [p for p in replica.model.parameters() if p.requires_grad]
    # one rank's gradient is 1 + 2**-10 (not a bf16 number), the other's 1: fp32 would average to 1 + 2**-11
    for p in params:
        p.grad = torch.full_like(p, 1.0 + (2.0**-10 if rank == 0 else 0.0))
    replica.strategy.reduce_gradients(replica.model)
    assert all(torch.equal(p.grad, torch.ones_like(p)) for p in params)


def test_mixed_precision_reaches_fully_shard_and_the_replica_all_reduce(tiny_model_dir):
    spawn(_rank_main, WORLD, str(tiny_model_dir))


def test_param_dtype_is_the_compute_dtype():
    fsdp = _fsdp_config(param_dtype="bf16")
    assert fsdp.dtype == "bf16" and fsdp.mixed_precision.reduce_dtype == "fp32"
