"""Ulysses sequence parallelism: two ranks sharing one micro-batch, each running the model on half of its
packed tokens, give the log-probs, values and updated parameters of one rank running all of them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from dist_testutils import RANKS_GROUP, spawn
from engine_testutils import actor_config, critic_config, make_batch, model_config, save_tiny_model

from siirl.engine.workers import ActorWorker, CriticWorker
from siirl.engine.workers.fsdp import full_named_parameters
from siirl.engine.workers.ulysses import kv_repeats

pytestmark = [RANKS_GROUP]

WORLD = 2
ACTOR = {
    "ppo_mini_batch_size": 8,  # two optimiser steps
    "ppo_max_token_len_per_gpu": 40,  # several micro-batches each
    "entropy_coeff": 0.01,
    "use_kl_loss": True,
    "kl_loss_coef": 0.1,
    "grad_clip": 0.5,
}


#: Parameters after the critic's steps: its split gradients are summed in another order, and AdamW's m/sqrt(v)
#: turns the rounding of a near-zero gradient into an update difference of a few 1e-5 (lr is 1e-2, so a wrong
#: gradient would still show as ~1e-2 here).
STEPPED_ATOL = 5e-5


def _params(worker) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in full_named_parameters(worker.model)}


def _rank_main(rank: int, world: int, model_dir: str, out_dir: str, strategy: str) -> None:
    alone = [dist.new_group([r]) for r in range(world)][rank]  # dp group of one: the sp group holds the data
    mcfg = model_config(Path(model_dir))
    batch = make_batch(16, prompt_len=9, response_len=12, seed=5)
    plain = ActorWorker(mcfg, actor_config(strategy=strategy, **ACTOR), "cpu", process_group=alone)
    split = ActorWorker(
        mcfg, actor_config(strategy=strategy, **ACTOR), "cpu", process_group=alone, sp_group=dist.group.WORLD
    )
    assert split.sp is not None and split.sp.size == world and split.layout == "packed"
    want, got = plain.compute_log_prob(batch), split.compute_log_prob(batch)
    for key in ("old_log_probs", "entropys"):
        torch.testing.assert_close(got[key], want[key], atol=1e-5, rtol=1e-5)
    want_metrics, got_metrics = plain.update_policy(batch), split.update_policy(batch)
    assert abs(got_metrics["actor/pg_loss"] - want_metrics["actor/pg_loss"]) < 1e-5
    assert abs(got_metrics["actor/grad_norm"] - want_metrics["actor/grad_norm"]) < 1e-5
    stepped = _params(plain)
    for name, tensor in _params(split).items():
        torch.testing.assert_close(tensor, stepped[name], atol=1e-5, rtol=1e-5)

    critic_plain = CriticWorker(critic_config(Path(model_dir), strategy=strategy), "cpu", process_group=alone)
    critic_split = CriticWorker(
        critic_config(Path(model_dir), strategy=strategy),
        "cpu",
        process_group=alone,
        sp_group=dist.group.WORLD,
    )
    torch.testing.assert_close(
        critic_split.compute_values(batch), critic_plain.compute_values(batch), atol=1e-5, rtol=1e-5
    )
    critic_plain.update_critic(batch)
    critic_split.update_critic(batch)
    stepped = _params(critic_plain)
    for name, tensor in _params(critic_split).items():
        torch.testing.assert_close(tensor, stepped[name], atol=STEPPED_ATOL, rtol=1e-5)

    # One rank of the group writes the shared checkpoint shard; both read it back.
    split.save_checkpoint(Path(out_dir) / "ckpt")
    dist.barrier()
    assert sorted(p.name for p in (Path(out_dir) / "ckpt").iterdir()) == ["rank_0_of_1.safetensors"]


@pytest.mark.parametrize(("strategy", "kv_heads"), [("replicate", 2), ("fsdp", 1)])
def test_sequence_parallel_matches_one_rank(tmp_path, strategy, kv_heads):
    model_dir = save_tiny_model(tmp_path / "model", heads=2, kv_heads=kv_heads)
    spawn(_rank_main, WORLD, str(model_dir), str(tmp_path), strategy)


def test_kv_heads_are_repeated_up_to_a_multiple_of_the_group():
    assert [kv_repeats(kv, 4) for kv in (1, 2, 4, 8)] == [4, 2, 1, 1]
    assert kv_repeats(2, 8) == 4 and kv_repeats(3, 2) == 2
