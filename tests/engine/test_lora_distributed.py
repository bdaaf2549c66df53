"""peft LoRA on two gloo ranks, FSDP2 (``fully_shard``) and replicated: the step equals one process's,
the reference with adapters off equals the base model, merged weights and checkpoints work sharded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from dist_testutils import RANKS_GROUP, spawn
from engine_testutils import actor_config, make_batch
from safetensors.torch import load_file, save_file

from siirl.engine.manifest import write_manifest
from siirl.engine.workers import ActorWorker, ReferenceWorker
from siirl.engine.workers.reference import BaseModelReference
from siirl.params.model import ModelConfig, PolicyModelConfig, RefConfig

pytestmark = [RANKS_GROUP]

ROWS, WORLD = 16, 2


def _actor(model_dir: str, strategy: str) -> ActorWorker:
    model = PolicyModelConfig(path=model_dir, lora_rank=4, lora_alpha=16)
    return ActorWorker(model, actor_config(strategy=strategy, ppo_mini_batch_size=ROWS, lr=1e-3), "cpu")


def _merged(actor: ActorWorker) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in actor.named_parameters_for_sync()}


def _rank_main(rank: int, world: int, model_dir: str, out_dir: str, strategy: str) -> None:
    out = Path(out_dir)
    share = ROWS // world
    batch = make_batch(ROWS, seed=21)[rank * share : (rank + 1) * share]
    actor = _actor(model_dir, strategy)
    assert actor.strategy.name == {"fsdp2": "fsdp"}.get(strategy, strategy)
    actor.update_policy(batch)

    base = ReferenceWorker(ModelConfig(path=model_dir), RefConfig(), "cpu", strategy=strategy)
    reference = BaseModelReference(actor, RefConfig(log_prob_max_token_len_per_gpu=30))
    torch.testing.assert_close(reference.compute_ref_log_prob(batch), base.compute_ref_log_prob(batch))

    merged = _merged(actor)
    if rank == 0:
        save_file(merged, out / "merged.safetensors")

    actor.save_checkpoint(out / "ckpt")
    dist.barrier()
    if rank == 0:
        write_manifest(out / "ckpt")
    dist.barrier()
    actor.update_policy(batch)
    actor.load_checkpoint(out / "ckpt")
    for name, tensor in _merged(actor).items():
        torch.testing.assert_close(tensor, merged[name], atol=0, rtol=0)


@pytest.mark.parametrize("strategy", ["fsdp2", "replicate"])
def test_two_rank_lora_step_matches_one_process(tiny_model_dir, tmp_path, single_process_group, strategy):
    spawn(_rank_main, WORLD, str(tiny_model_dir), str(tmp_path), strategy)
    single = _actor(str(tiny_model_dir), "replicate")
    single.update_policy(make_batch(ROWS, seed=21))
    want = _merged(single)
    got = load_file(tmp_path / "merged.safetensors")
    assert set(got) == set(want)
    for name, tensor in want.items():
        torch.testing.assert_close(got[name], tensor, atol=1e-5, rtol=1e-5)
    # only the adapter (model + optimizer state) was checkpointed, one shard per rank
    for rank in range(WORLD):
        shard = load_file(tmp_path / "ckpt" / f"rank_{rank}_of_{WORLD}.safetensors")
        assert all(".lora_" in key for key in shard if not key.startswith("lr_scheduler/"))
    assert (tmp_path / "ckpt" / "lora_adapter" / "adapter_model.safetensors").is_file()
