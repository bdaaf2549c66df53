"""Group filters that run as DAG nodes: drop prompt groups that carry no learning signal.

A group is the responses sampled for one prompt (same ``uid``). Group-relative advantages are zero when
every response in a group scored the same, so such groups only cost compute: DAPO drops them after the
reward (``dynamic_sampling``); SRPO-style embodied training drops tasks that always or never succeed
(``embodied_sampling``). Both return the kept rows plus counts the worker uses to decide on resampling.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from siirl.algorithms import filter_zero_variance_groups
from siirl.algorithms.group_filter_metrics import group_filter_values, metric_reads
from siirl.data_coordinator.gen_batches import DistExchange, KeptGroupCollector
from siirl.data_coordinator.tensordict_ops import row_values, select_rows
from siirl.execution.dag.contract import NodeContract, node_contract
from siirl.execution.dag.node import NEED_MORE_DATA, NodeOutput
from siirl.params.root import SiirlConfig, or_defaults


def _sequence_sum(batch: TensorDictBase, key: str) -> torch.Tensor:
    if key not in batch:
        raise ValueError(f"batch has no {key!r} field (run the reward node before this filter)")
    scores = batch.get(key)
    if "response_mask" in batch:
        scores = scores * batch.get("response_mask").to(scores.dtype)
    return scores.sum(dim=-1)


def _keep_varied_groups(
    batch: TensorDictBase, values: list[float], keep_singletons: bool, name: str
) -> NodeOutput:
    """Keep the rows whose uid group's ``values`` are not all equal."""
    kept, stats = filter_zero_variance_groups(row_values(batch, "uid"), values, keep_singletons)
    metrics = {
        f"{name}/kept_groups": stats["groups_kept"],
        f"{name}/dropped_groups": stats["groups_total"] - stats["groups_kept"],
        f"{name}/kept_ratio": stats["samples_kept"] / max(stats["samples_total"], 1),
    }
    info = {"num_kept_groups": stats["groups_kept"], "num_kept_samples": stats["samples_kept"]}
    return NodeOutput(batch=select_rows(batch, kept), metrics=metrics, info=info)


def _dynamic_sampling_reads(cfg: SiirlConfig) -> NodeContract:
    groups = cfg.algorithm.filter_groups
    return NodeContract(reads=(metric_reads(groups.metric),)) if groups.enable else NodeContract()


@node_contract(reads=("uid", "response_mask"), when=_dynamic_sampling_reads)
def dynamic_sampling(batch: TensorDictBase, config: SiirlConfig | None = None, **kwargs: Any) -> NodeOutput:
    """DAPO: drop uid groups whose ``algorithm.filter_groups.metric`` has zero variance, then (on a worker)
    generate further chunks until ``data.train_batch_size`` groups are kept.

    A group of a single response has no variance to measure and is kept, as in verl. With
    ``filter_groups.enable=false`` the batch passes through, as in verl's DAPO recipe. ``config=None``:
    the defaults.
    """
    groups = or_defaults(config).algorithm.filter_groups
    if not groups.enable:
        return NodeOutput(batch)
    values = group_filter_values(batch, groups.metric).tolist()
    output = _keep_varied_groups(batch, values, True, "dynamic_sampling")
    ctx = kwargs.get("ctx")
    return output if ctx is None else _accumulate(output, ctx)


def _accumulate(output: NodeOutput, ctx: Any, name: str = "dynamic_sampling") -> NodeOutput:
    """Collect kept groups over generation chunks until the train batch is full; every rank of the rollout
    dp group agrees on when (``siirl.data_coordinator.gen_batches``), and each ends with an equal share."""
    collector = ctx.extras.get(name)
    if collector is None:
        collector = KeptGroupCollector(
            ctx.cfg.data.train_batch_size,
            ctx.cfg.algorithm.filter_groups.max_num_gen_batches,
            DistExchange(ctx.groups.get("rollout")),
        )
        ctx.extras[name] = collector
    if not collector.add(output.batch):
        return NodeOutput(output.batch, output.metrics, {**output.info, NEED_MORE_DATA: True})
    output.metrics.update({
        "train/num_gen_batches": collector.num_gen_batches,
        f"{name}/kept_groups_total": collector.kept_groups,
        f"{name}/surplus_groups": collector.kept_groups - collector.train_groups,
    })
    batch = collector.take()
    collector.reset()
    return NodeOutput(batch, output.metrics, output.info)


def _success(batch: TensorDictBase) -> list[float]:
    """Per-row success: ``task_success`` from the environment, else a positive sequence score."""
    if "task_success" in batch:
        return [float(bool(v)) for v in row_values(batch, "task_success")]
    if "token_level_scores" in batch:
        return [float(v > 0) for v in _sequence_sum(batch, "token_level_scores").tolist()]
    raise ValueError("embodied_sampling needs a 'task_success' or 'token_level_scores' field in the batch")


def _trajectory_ids(batch: TensorDictBase) -> list[Any]:
    """One id per row naming its trajectory: ``traj_uid`` for step-wise rollouts, else the row itself."""
    return row_values(batch, "traj_uid") if "traj_uid" in batch else list(range(batch.batch_size[0]))


def _group_success_rates(uids: list[Any], trajs: list[Any], success: list[float]) -> dict[Any, float]:
    """Success rate per uid group, counting each trajectory once (step rows repeat their trajectory's)."""
    per_traj: dict[Any, tuple[Any, float]] = {}
    for uid, traj, ok in zip(uids, trajs, success):
        per_traj[traj] = (uid, ok)
    totals: dict[Any, list[float]] = {}
    for uid, ok in per_traj.values():
        totals.setdefault(uid, []).append(ok)
    return {uid: sum(values) / len(values) for uid, values in totals.items()}


@node_contract(reads=("uid", "task_success"))
def embodied_sampling(batch: TensorDictBase, config: SiirlConfig | None = None, **kwargs: Any) -> NodeOutput:
    """Embodied filtering before scoring (``algorithm.embodied.sampling``).

    Drops trajectories whose environment timed out or crashed (``env_error``), then task groups (uid)
    where every trajectory succeeded (nothing to improve) and, with ``drop_all_failed``, where every one
    failed: with binary rewards those carry no signal; with SRPO-style progress rewards (the default)
    their failures are still ranked, so they are kept by default. Groups whose success rate lies outside
    ``[min_success_rate, max_success_rate]`` are dropped too. On a worker (``ctx``) the kept groups
    accumulate over generation batches until the worker's share of the train batch is full.
    ``config=None``: the defaults.
    """
    success = _success(batch)
    sampling = or_defaults(config).algorithm.embodied.sampling
    drop_failed, drop_succeeded = sampling.drop_all_failed, sampling.drop_all_succeeded
    drop_errors = sampling.drop_env_errors
    low, high = sampling.min_success_rate, sampling.max_success_rate
    uids, trajs = row_values(batch, "uid"), _trajectory_ids(batch)
    errors = row_values(batch, "env_error") if "env_error" in batch else [0.0] * len(success)
    rates = _group_success_rates(uids, trajs, success)
    keep = [
        row for row, uid in enumerate(uids)
        if not (drop_errors and errors[row])
        and not (drop_succeeded and rates[uid] == 1.0)
        and not (drop_failed and rates[uid] == 0.0)
        and low <= rates[uid] <= high
    ]
    kept_groups = len({uids[row] for row in keep})
    traj_success = [rate for rate in rates.values()]
    metrics = {
        "embodied_sampling/success_rate": sum(success) / max(len(success), 1),
        "embodied_sampling/task_solved_any": sum(r > 0 for r in traj_success) / max(len(traj_success), 1),
        "embodied_sampling/kept_groups": kept_groups,
        "embodied_sampling/dropped_groups": len(rates) - kept_groups,
        "embodied_sampling/env_errors": float(sum(bool(e) for e in errors)),
    }
    info = {"num_kept_groups": kept_groups, "num_kept_samples": len(keep)}
    output = NodeOutput(batch=select_rows(batch, keep), metrics=metrics, info=info)
    ctx = kwargs.get("ctx")
    return output if ctx is None else _accumulate(output, ctx, "embodied_sampling")
