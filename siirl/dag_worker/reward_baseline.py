"""ReMax's baseline node: one greedy response per prompt, scored by the run's reward, as ``reward_baselines``.

ReMax (arXiv 2310.10505) subtracts from each sampled response's return the reward of the greedy response
to the same prompt. The node regenerates the prompts of the batch (one per uid group) with the rollout
engine's greedy parameters (``rollout.val_kwargs``, checked at config time to be greedy with n=1), scores
them like the sampled responses and writes each group's baseline onto every row of that group.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict, TensorDictBase

from siirl.data_coordinator.tensordict_ops import non_tensor_list, select_rows, set_non_tensor_list
from siirl.execution.dag import NodeOutput
from siirl.execution.dag.contract import node_contract

if TYPE_CHECKING:
    from siirl.dag_worker.context import WorkerContext

_CARRIED = ("uid", "data_source", "ground_truth", "extra_info", "index")


def greedy_prompt_batch(batch: TensorDictBase) -> tuple[TensorDict, list[int]]:
    """One row per uid group holding only its prompt (left-padded), plus each row's group number."""
    uids = non_tensor_list(batch, "uid")
    first: dict[Any, int] = {}
    group_of = [first.setdefault(uid, len(first)) for uid in uids]
    rows = select_rows(batch, [uids.index(uid) for uid in first])
    width = rows["prompts"].shape[1]
    prompts = TensorDict(
        {
            "input_ids": rows["prompts"],
            "attention_mask": rows["attention_mask"][:, :width],
            "position_ids": rows["position_ids"][:, :width],
        },
        batch_size=[len(first)],
    )
    for key in _CARRIED:
        if key in rows.keys():  # noqa: SIM118 - keys() works on every tensordict release
            set_non_tensor_list(prompts, key, non_tensor_list(rows, key))
    return prompts, group_of


@node_contract(
    reads=("prompts", "attention_mask", "position_ids", "uid", "data_source", "ground_truth"),
    writes=("reward_baselines",),
    roles=("rollout",),
)
def compute_reward_baseline(
    batch: TensorDictBase, config: Any = None, *, ctx: WorkerContext, **_: Any
) -> NodeOutput:
    """``reward_baselines[i]``: the reward of the greedy response to row i's prompt."""
    start = time.perf_counter()
    prompts, group_of = greedy_prompt_batch(batch)
    policy = ctx.policy()
    policy.refresh()
    greedy = policy.rollout.generate(prompts, validate=True)
    policy.done()
    scores, _ = ctx.reward_manager(greedy, ctx.tokenizer)
    per_prompt = scores.to(torch.float32).sum(-1)
    batch["reward_baselines"] = per_prompt[torch.tensor(group_of, dtype=torch.long)]
    metrics = {
        "reward_baseline/mean": per_prompt.mean().item(),
        "timing_s/reward_baseline": time.perf_counter() - start,
    }
    return NodeOutput(batch, metrics=metrics)
