"""fsdp_config on two gloo ranks: host offload engages FSDP2's CPUOffloadPolicy and trains exactly as without
it; resharding, prefetching and optimizer-state offload change no result; a frozen model holds only its
shard after a forward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from dist_testutils import RANKS_GROUP, spawn
from engine_testutils import actor_config, make_batch, model_config
from safetensors.torch import load_file, save_file
from torch.distributed.fsdp import FSDPModule
from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
from torch.distributed.fsdp._fully_shard._fsdp_param import ShardedState

from siirl.engine.workers import ActorWorker, ReferenceWorker
from siirl.params.fsdp import FSDPConfig, host_offload
from siirl.params.model import RefConfig

pytestmark = [RANKS_GROUP]

ROWS, WORLD = 16, 2
ACTOR = {"ppo_mini_batch_size": ROWS // 2, "ppo_max_token_len_per_gpu": 30, "grad_clip": 0.5}
#: name -> (strategy, fsdp_config, the variant it must train exactly like: same strategy, no option).
VARIANTS = {
    "fsdp": ("fsdp", FSDPConfig(), "fsdp"),
    "param_offload": ("fsdp", FSDPConfig(param_offload=True, optimizer_offload=True), "fsdp"),
    "offload_policy_auto": ("auto", FSDPConfig(offload_policy=True), "fsdp"),
    "no_reshard_prefetch": ("fsdp", FSDPConfig(reshard_after_forward=False, forward_prefetch=True), "fsdp"),
    "replicate": ("replicate", FSDPConfig(), "replicate"),
    "replicate_optimizer_offload": ("replicate", FSDPConfig(optimizer_offload=True), "replicate"),
}


def _fsdp_params(model: torch.nn.Module) -> list:
    return [p for m in model.modules() if isinstance(m, FSDPModule)
            for p in m._get_fsdp_state()._fsdp_param_group.fsdp_params]


def _check_host_offload(actor: ActorWorker) -> None:
    """Every FSDP parameter runs under CPUOffloadPolicy: its shard and its gradient are host tensors."""
    params = _fsdp_params(actor.model)
    assert params and all(p.offload_to_cpu for p in params)
    grads_seen = []

    def on_step(optimizer, args, kwargs):
        grads_seen.extend(p.grad.to_local().device.type for g in optimizer.param_groups for p in g["params"])

    handle = actor.optimizer.register_step_pre_hook(on_step)
    actor.update_policy(make_batch(ROWS, seed=5)[: ROWS // WORLD])
    handle.remove()
    assert grads_seen and set(grads_seen) == {"cpu"}
    assert {p.to_local().device.type for p in actor.model.parameters()} == {"cpu"}


def _train(rank: int, strategy: str, fsdp: FSDPConfig, mcfg) -> tuple[ActorWorker, dict[str, torch.Tensor]]:
    batch = make_batch(ROWS, seed=11)[rank * (ROWS // WORLD) : (rank + 1) * (ROWS // WORLD)]
    actor = ActorWorker(mcfg, actor_config(strategy=strategy, fsdp_config=fsdp, **ACTOR), "cpu")
    for _ in range(2):  # the second update steps with the Adam state the first one left (offloaded or not)
        actor.update_policy(batch)
    return actor, {name: t.clone() for name, t in actor.named_parameters_for_sync()}


def _rank_main(rank: int, world: int, model_dir: str, out_dir: str) -> None:
    mcfg = model_config(Path(model_dir))
    for name, (strategy, fsdp, _) in VARIANTS.items():
        actor, params = _train(rank, strategy, fsdp, mcfg)
        assert actor.strategy.name == ("replicate" if strategy == "replicate" else "fsdp"), name
        if host_offload(fsdp):
            _check_host_offload(actor)
        if fsdp.optimizer_offload:  # on the CPU backend host and device are one memory: nothing to move
            assert host_offload(fsdp) or (actor.state_offload is not None and not actor.state_offload.active)
        if rank == 0:
            save_file(params, str(Path(out_dir) / f"{name}.safetensors"))

    batch = make_batch(ROWS, seed=3)[rank * (ROWS // WORLD) : (rank + 1) * (ROWS // WORLD)]
    plain = ReferenceWorker(mcfg, RefConfig(), "cpu", strategy="fsdp")
    offloaded = ReferenceWorker(mcfg, RefConfig(fsdp_config=FSDPConfig(param_offload=True)), "cpu")
    assert offloaded.strategy.name == "fsdp"  # auto shards a model asked to offload, however small
    torch.testing.assert_close(offloaded.compute_ref_log_prob(batch), plain.compute_ref_log_prob(batch),
                               atol=1e-6, rtol=0)
    for ref in (plain, offloaded):  # after the forward no unit, the root included, stays gathered
        params = _fsdp_params(ref.model)
        assert {p.sharded_state for p in params} == {ShardedState.SHARDED}
        assert all(m._get_fsdp_state()._training_state == TrainingState.IDLE
                   for m in ref.model.modules() if isinstance(m, FSDPModule))
    full = sum(p.numel() for p in plain.model.parameters())
    resident = sum(p.to_local().numel() for p in offloaded.model.parameters())
    assert resident <= full // WORLD + 64  # a shard (+ padding of odd rows), not the whole model


def test_offload_variants_train_like_plain_fsdp(tiny_model_dir, tmp_path):
    spawn(_rank_main, WORLD, str(tiny_model_dir), str(tmp_path))
    for name, (_, _, baseline) in VARIANTS.items():
        result = load_file(str(tmp_path / f"{name}.safetensors"))
        reference = load_file(str(tmp_path / f"{baseline}.safetensors"))
        for key, tensor in reference.items():
            torch.testing.assert_close(result[key], tensor, atol=1e-6, rtol=0, msg=f"{name}: {key}")


def _gpu_main(rank: int, world: int, model_dir: str, port: int, results) -> None:
    """One GPU: optimizer state waits on the host between updates; host-offloaded shards train on the host."""
    import os

    import torch.distributed as dist

    from siirl.device import get_backend

    backend = get_backend("cuda")
    backend.set_device(0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend.distributed_backend(with_cpu_groups=True), rank=0, world_size=1)
    try:
        mcfg, batch = model_config(Path(model_dir)), make_batch(ROWS, seed=11)
        trained = {}
        for name, fsdp in {"plain": FSDPConfig(), "optimizer_offload": FSDPConfig(optimizer_offload=True),
                           "param_offload": FSDPConfig(param_offload=True)}.items():
            actor = ActorWorker(mcfg, actor_config(strategy="fsdp", fsdp_config=fsdp, **ACTOR), backend)
            where_stepped = []
            actor.optimizer.register_step_pre_hook(lambda opt, a, k, seen=where_stepped: seen.extend(
                v.device.type for s in opt.state.values() for v in s.values() if v.dim() > 0))
            for _ in range(2):
                actor.update_policy(batch)
            between = {v.device.type for s in actor.optimizer.state.values() for v in s.values() if v.dim() > 0}
            results[name] = (sorted(set(where_stepped)), sorted(between),
                             sorted({p.to_local().device.type for p in actor.model.parameters()}))
            trained[name] = {k: t.detach().cpu() for k, t in actor.named_parameters_for_sync()}
        for name in ("optimizer_offload", "param_offload"):
            for key, tensor in trained["plain"].items():
                torch.testing.assert_close(trained[name][key], tensor, atol=1e-5, rtol=0, msg=f"{name}: {key}")
    finally:
        dist.destroy_process_group()


@pytest.mark.cuda
def test_offload_moves_state_off_the_gpu(tiny_model_dir):
    import torch.multiprocessing as mp
    from dist_testutils import free_port

    results = mp.Manager().dict()
    mp.spawn(_gpu_main, args=(1, str(tiny_model_dir), free_port(), results), nprocs=1, join=True)
    stepped, between, params = results["optimizer_offload"]
    assert stepped == ["cuda"] and between == ["cpu"] and params == ["cuda"]
    stepped, between, params = results["param_offload"]
    assert stepped == ["cpu"] and between == ["cpu"] and params == ["cpu"]
    assert results["plain"][1] == ["cuda"]
