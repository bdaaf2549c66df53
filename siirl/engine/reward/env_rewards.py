"""Rewards that come from the environment instead of a score function.

``TurnRewards`` (multi-turn rollouts): every turn's reward sits on that turn's last policy token, so the
trajectory return is their sum and estimators that look at token positions credit each turn.
``ToolCallRewards`` (tool-calling rollouts) adds the rule score of the policy's text to those.
``AgentLoopRewards`` (agent-loop rollouts): the loop's own reward where it gave one, else the rule score.

``ProgressRewards`` (step-wise embodied rollouts), after SRPO (Fei et al., "SRPO: Self-Referential Policy
Optimization for Vision-Language-Action Models", arXiv:2511.15605): a failed trajectory is rewarded by how
close it came to the successful trajectories the policy itself produced for the same task in the same
batch. The formula implemented here (a concrete choice in the spirit of the paper, whose encoder is a
pretrained world model; ours is the trajectory signature the rollout records, i.e. the per-step rewards):

    R_i = 1                                           if trajectory i succeeded
    R_i = a * exp(-d_i^2 / (2 s^2)),  d_i = min_{j in S_g} || phi_i - phi_j ||_2   if it failed and S_g != {}
    R_i = a * progress_i                               if it failed and its task has no success (S_g = {})
    R_i = 0                                            if its environment timed out or crashed

where ``S_g`` are the successful trajectories of i's task group (same ``uid``), ``phi`` is
``traj_signature``, ``progress_i`` the environment's own progress estimate in [0, 1], ``a`` =
``algorithm.embodied.progress_reward.failure_scale`` (< 1, so any success beats any failure) and ``s`` =
``...sigma``. Every step row of a trajectory gets R_i on its last response token.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import torch
from tensordict import TensorDictBase

from siirl.data_coordinator.tensordict_ops import non_tensor_list, row_values, set_non_tensor_list


def _last_token_scores(response_mask: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    scores = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = (response_mask.long().sum(-1) - 1).clamp(min=0)
    scores[torch.arange(scores.shape[0]), last] = values.to(torch.float32)
    return scores


class TurnRewards:
    def __call__(self, batch: TensorDictBase, tokenizer: Any = None) -> tuple[torch.Tensor, dict[str, list]]:
        rewards, index = batch["env_turn_rewards"].float(), batch["env_turn_index"].long()
        scores = torch.zeros(batch["response_mask"].shape, dtype=torch.float32)
        valid = index >= 0
        rows = torch.arange(index.shape[0])[:, None].expand_as(index)
        scores.index_put_((rows[valid], index[valid]), rewards[valid], accumulate=True)
        return scores, {"trajectory_reward": rewards.sum(-1).tolist()}


class ToolCallRewards:
    """Tool-calling rollouts: the rule score of the policy's text (the ``rule`` manager, on the last policy
    token) plus each turn's tool step rewards or interaction score (on that turn's last policy token).

    As in verl, the score function is told what the tools reported: its ``extra_info`` carries
    ``rollout_reward_scores`` (``{tool: calc_reward}`` at the end of the trajectory) and ``num_turns``,
    so a score function can use the tools' verdict (verl's built-in scorers ignore it, and so do ours).
    A trajectory whose tool or interaction call timed out (``env_error``) scores 0.
    With an interaction, ``rollout_reward_scores["user_turn_rewards"]`` (the original siiRL's name) and
    ``turn_scores`` (verl's) hold its score per user turn.
    """

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self.turns = TurnRewards()

    def __call__(self, batch: TensorDictBase, tokenizer: Any = None) -> tuple[torch.Tensor, dict[str, list]]:
        extra_infos = row_values(batch, "extra_info", None)
        tool_scores = row_values(batch, "rollout_reward_scores")
        turns = batch["num_turns"].tolist()
        set_non_tensor_list(batch, "extra_info", [
            {**(info or {}), "rollout_reward_scores": dict(scores or {}), "num_turns": int(n),
             "turn_scores": list((scores or {}).get("user_turn_rewards", []))}
            for info, scores, n in zip(extra_infos, tool_scores, turns)
        ])
        rule_scores, extra = self.rule(batch, tokenizer)
        turn_scores, turn_extra = self.turns(batch)
        kept = 1.0 - batch["env_error"].float()[:, None]
        return (rule_scores + turn_scores) * kept, {**extra, "tool_reward": turn_extra["trajectory_reward"]}

    def failure_metrics(self) -> dict[str, float]:
        return self.rule.failure_metrics()

    def close(self) -> None:
        self.rule.close()


class AgentLoopRewards:
    """Agent-loop rollouts, as verl scores them: a trajectory whose loop returned a ``reward_score`` gets it
    (on its last policy token), the others the rule score of the policy's text; a failed loop scores 0.
    The score function's ``extra_info`` carries ``num_turns``."""

    def __init__(self, rule: Any) -> None:
        self.rule = rule

    def __call__(self, batch: TensorDictBase, tokenizer: Any = None) -> tuple[torch.Tensor, dict[str, list]]:
        turns = batch["num_turns"].tolist()
        set_non_tensor_list(batch, "extra_info", [
            {**(info or {}), "num_turns": int(n)} for info, n in zip(row_values(batch, "extra_info", None), turns)
        ])
        rule_scores, extra = self.rule(batch, tokenizer)
        own = _last_token_scores(batch["response_mask"], batch["agent_reward"])
        scores = torch.where(batch["agent_reward_set"].bool()[:, None], own, rule_scores)
        return scores * (1.0 - batch["env_error"].float()[:, None]), extra

    def failure_metrics(self) -> dict[str, float]:
        return self.rule.failure_metrics()

    def close(self) -> None:
        self.rule.close()


def progress_rewards(
    uids: list[Any],
    success: torch.Tensor,
    signature: torch.Tensor,
    progress: torch.Tensor,
    error: torch.Tensor,
    failure_scale: float,
    sigma: float,
) -> torch.Tensor:
    """Per-row trajectory reward (formula in the module docstring)."""
    references: dict[Any, list[int]] = defaultdict(list)
    for row, uid in enumerate(uids):
        if success[row] > 0:
            references[uid].append(row)
    out = torch.zeros(len(uids), dtype=torch.float32)
    for row, uid in enumerate(uids):
        if error[row] > 0:
            continue
        if success[row] > 0:
            out[row] = 1.0
        elif references[uid]:
            distance = torch.cdist(signature[row : row + 1].float(), signature[references[uid]].float()).min()
            out[row] = failure_scale * math.exp(-(distance.item() ** 2) / (2 * sigma**2))
        else:
            out[row] = failure_scale * float(progress[row])
    return out


class ProgressRewards:
    def __init__(self, failure_scale: float, sigma: float, enable: bool = True, scale: float = 1.0) -> None:
        if not 0.0 <= failure_scale < 1.0 or sigma <= 0:
            raise ValueError(f"need 0 <= failure_scale < 1 and sigma > 0, got {failure_scale}, {sigma}")
        self.failure_scale, self.sigma, self.enable, self.scale = failure_scale, sigma, enable, scale

    def __call__(self, batch: TensorDictBase, tokenizer: Any = None) -> tuple[torch.Tensor, dict[str, list]]:
        success = batch["task_success"].float()
        if self.enable:
            values = progress_rewards(
                non_tensor_list(batch, "uid"), success, batch["traj_signature"], batch["env_progress"],
                batch["env_error"], self.failure_scale, self.sigma,
            )
        else:
            values = success * (1 - batch["env_error"].float())
        values = values * self.scale
        return _last_token_scores(batch["response_mask"], values), {"trajectory_reward": values.tolist()}
