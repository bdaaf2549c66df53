"""Multi-turn rollout: generation and environment steps alternate in one growing conversation.

Per trajectory the response holds ``[turn 1][observation 1][turn 2]...``: the policy's tokens have
``response_mask = 1``, the observation tokens (the environment's reply rendered as a user turn by the chat
template) have ``response_mask = 0`` but ``attention_mask = 1``, so the actor sees them as context and never
trains on them, on the same padding-free path as single-turn batches. Each turn's reward is kept in
``env_turn_rewards`` with the index of the turn's last policy token in ``env_turn_index``; the reward node
places them there (per-turn rewards; their sum is the trajectory's return). Works with any inner engine
(hf, vllm, sglang): it only asks it for one continuation per context. A vision-language row's images go
with each of its contexts (every context starts with the row's prompt and its image blocks) and stay on
the assembled row for training.

Tool calling is this same loop with :class:`siirl.environment.tools.ToolEnv` as the environment: its
observations are ``tool`` messages (rendered with the template's ``tool`` role), prompts are re-rendered
with the tools' schemas, and the tools' final rewards ride along as ``rollout_reward_scores``. An
interaction (verl's simulated user) is part of that environment: its replies are ``user`` messages.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDict

from siirl.agent_loop.observation import ObservationRenderer
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.engine.rollout.batch_ops import expand_prompts, prompt_position_ids
from siirl.engine.rollout.env_session import EnvSession, EnvSessionRollout, real_prompt_tokens, row_images
from siirl.engine.rollout.tool_prompts import render_tool_prompts
from siirl.environment import StepResult

#: Per-episode counters the tool environment reports in ``info`` (``siirl.environment.tools.env``), by metric.
TOOL_COUNTERS = {
    "tool_calls": "tools/calls", "tool_errors": "tools/errors", "tool_timeouts": "tools/timeouts",
    "interaction_turns": "interaction/turns", "interaction_errors": "interaction/errors",
    "interaction_timeouts": "interaction/timeouts",
}

logger = logging.getLogger(__name__)


@dataclass
class _Trajectory:
    prompt: list[int]
    images: dict[str, Any] = field(default_factory=dict)  # the row's image fields, sent with every turn
    tokens: list[int] = field(default_factory=list)
    policy: list[int] = field(default_factory=list)  # 1 = policy token, 0 = environment token
    turn_rewards: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    done: bool = False
    last: StepResult | None = None

    def add(self, tokens: list[int], from_policy: bool) -> None:
        self.tokens += tokens
        self.policy += [int(from_policy)] * len(tokens)


class MultiTurnRollout(EnvSessionRollout):
    def __init__(
        self,
        session: EnvSession,
        *,
        max_turns: int,
        max_response_length: int,
        max_observation_length: int,
        tool_schemas: list[dict[str, Any]] | None = None,
        sanity_check: str = "strict",
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(session, max_turns)
        self.max_observation_length = max_observation_length
        self.width = max_turns * max_response_length + (max_turns - 1) * max_observation_length
        self.render = ObservationRenderer(session.tokenizer, sanity_check)
        #: Set = tool-calling rollouts: prompts are re-rendered with these OpenAI function schemas.
        self.tool_schemas = tool_schemas
        self.chat_template_kwargs = chat_template_kwargs

    def rollout_metrics(self, out: TensorDict) -> dict[str, float]:
        metrics = {
            "env/success_rate": out["task_success"].mean().item(),
            "env/progress": out["env_progress"].mean().item(),
            "env/turns": out["num_turns"].mean().item(),
            "env/errors": out["env_error"].sum().item(),
            "env/trajectory_reward": out["env_turn_rewards"].sum(-1).mean().item(),
        }
        if self.tool_schemas is not None:
            metrics.update({metric: out[key].sum().item() for key, metric in TOOL_COUNTERS.items()})
        return metrics

    def _turn(self, trajs: list[_Trajectory], venv: Any, validate: bool, last_turn: bool) -> None:
        active = [i for i, t in enumerate(trajs) if not t.done]
        outputs = self.session.generate_tokens(
            [trajs[i].prompt + trajs[i].tokens for i in active], validate, [trajs[i].images for i in active]
        )
        for i, tokens in zip(active, outputs):
            trajs[i].add(tokens, from_policy=True)
            trajs[i].turn_ends.append(len(trajs[i].tokens) - 1 if tokens else -1)
        results = venv.step({i: self.session.decode(tokens) for i, tokens in zip(active, outputs)})
        self.session.note_results("step", results)
        for i, result in zip(active, results):
            traj = trajs[i]
            traj.turn_rewards.append(float(result.reward))
            traj.last = result
            if result.done or last_turn:
                traj.done = True
                continue
            observation = self.render(result.observation)
            if len(observation) > self.max_observation_length:
                traj.done = True
                traj.last.info["truncated"] = True
                continue
            traj.add(observation, from_policy=False)

    def generate(self, batch: TensorDict, validate: bool = False) -> TensorDict:
        if self.tool_schemas is not None:
            batch = batch.clone(recurse=False)
            render_tool_prompts(
                batch, self.session.tokenizer, self.tool_schemas, self.session.pad_id, self.chat_template_kwargs
            )
        rows = expand_prompts(batch, self.session.val_n if validate else self.session.train_n)
        count = rows.batch_size[0]
        venv = self.session.venv(count)
        tasks, seeds = self.session.tasks(rows)
        self.session.note_results("reset", venv.reset(tasks, seeds))
        trajs = [_Trajectory(prompt, images) for prompt, images in zip(real_prompt_tokens(rows), row_images(rows))]
        for turn in range(self.max_turns):
            if all(t.done for t in trajs):
                break
            self._turn(trajs, venv, validate, last_turn=turn == self.max_turns - 1)
        self.session.end_rollout([t.last.info if t.last is not None else {} for t in trajs])
        return self._assemble(rows, trajs)

    def _assemble(self, rows: TensorDict, trajs: list[_Trajectory]) -> TensorDict:
        count, width, pad = len(trajs), self.width, self.session.pad_id
        responses = torch.full((count, width), pad, dtype=torch.long)
        policy = torch.zeros((count, width), dtype=torch.long)
        present = torch.zeros((count, width), dtype=torch.long)
        turn_rewards = torch.zeros((count, self.max_turns), dtype=torch.float32)
        turn_index = torch.full((count, self.max_turns), -1, dtype=torch.long)
        for row, traj in enumerate(trajs):
            n = min(len(traj.tokens), width)
            responses[row, :n] = torch.tensor(traj.tokens[:n], dtype=torch.long)
            policy[row, :n] = torch.tensor(traj.policy[:n], dtype=torch.long)
            present[row, :n] = 1
            turn_rewards[row, : len(traj.turn_rewards)] = torch.tensor(traj.turn_rewards)
            turn_index[row, : len(traj.turn_ends)] = torch.tensor(traj.turn_ends, dtype=torch.long)
        info = [t.last.info if t.last is not None else {} for t in trajs]
        prompt_mask = rows["attention_mask"].long()
        prompt_pos = rows.get("position_ids", None)
        if prompt_pos is None:
            prompt_pos = prompt_position_ids(prompt_mask)
        response_pos = prompt_pos[:, -1:] + torch.arange(1, width + 1)[None, :]
        rows["prompts"] = rows["input_ids"]
        rows["responses"] = responses
        rows["response_mask"] = policy
        rows["input_ids"] = torch.cat([rows["input_ids"], responses], dim=1)
        rows["attention_mask"] = torch.cat([prompt_mask, present], dim=1)
        rows["position_ids"] = torch.cat([prompt_pos, response_pos], dim=1)
        rows["env_turn_rewards"] = turn_rewards
        rows["env_turn_index"] = turn_index
        rows["task_success"] = torch.tensor([float(bool(i.get("success", False))) for i in info])
        rows["env_progress"] = torch.tensor([float(i.get("progress", 0.0)) for i in info])
        rows["env_error"] = torch.tensor([float("error" in i) for i in info])
        rows["num_turns"] = torch.tensor([float(len(t.turn_rewards)) for t in trajs])
        if self.tool_schemas is not None:
            for key in TOOL_COUNTERS:
                rows[key] = torch.tensor([float(i.get(key, 0)) for i in info])
            set_non_tensor_list(rows, "rollout_reward_scores", [dict(i.get("rollout_reward_scores", {})) for i in info])
        return rows
