"""Multi-turn rollout: generation and environment steps alternate in one growing conversation.

Per trajectory the response holds ``[turn 1][observation 1][turn 2]...``: the policy's tokens have
``response_mask = 1``, the observation tokens (the environment's reply rendered as a user turn by the chat
template) have ``response_mask = 0`` but ``attention_mask = 1``, so the actor sees them as context and never
trains on them, on the same padding-free path as single-turn batches. Each turn's reward is kept in
``env_turn_rewards`` with the index of the turn's last policy token in ``env_turn_index``; the reward node
places them there (per-turn rewards; their sum is the trajectory's return). Works with any inner engine
(hf, vllm, sglang): it only asks it for one continuation per context.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDict

from siirl.engine.rollout.batch_ops import expand_prompts, prompt_position_ids
from siirl.engine.rollout.env_session import EnvSession, EnvSessionRollout, real_prompt_tokens
from siirl.environment import StepResult

logger = logging.getLogger(__name__)


@dataclass
class _Trajectory:
    prompt: list[int]
    tokens: list[int] = field(default_factory=list)
    policy: list[int] = field(default_factory=list)  # 1 = policy token, 0 = environment token
    turn_rewards: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    done: bool = False
    last: StepResult | None = None

    def add(self, tokens: list[int], from_policy: bool) -> None:
        self.tokens += tokens
        self.policy += [int(from_policy)] * len(tokens)


class ObservationRenderer:
    """An observation as the chat template renders a new user turn after an assistant turn.

    Rendered as the difference between a two-message conversation and the same with the observation
    appended (plus the generation prompt), so templates that add a default system prompt add none here.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        base = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
        self._base = tokenizer.apply_chat_template(base, tokenize=False)
        self._base_messages = base

    def __call__(self, observation: Any) -> list[int]:
        messages = [*self._base_messages, {"role": "user", "content": str(observation)}]
        full = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if not full.startswith(self._base):
            raise ValueError("the chat template renders an earlier conversation differently when extended")
        return self.tokenizer(full[len(self._base) :], add_special_tokens=False)["input_ids"]


class MultiTurnRollout(EnvSessionRollout):
    def __init__(
        self, session: EnvSession, *, max_turns: int, max_response_length: int, max_observation_length: int
    ) -> None:
        super().__init__(session, max_turns)
        self.max_observation_length = max_observation_length
        self.width = max_turns * max_response_length + (max_turns - 1) * max_observation_length
        self.render = ObservationRenderer(session.tokenizer)

    def rollout_metrics(self, out: TensorDict) -> dict[str, float]:
        return {
            "env/success_rate": out["task_success"].mean().item(),
            "env/progress": out["env_progress"].mean().item(),
            "env/turns": out["num_turns"].mean().item(),
            "env/errors": out["env_error"].sum().item(),
            "env/trajectory_reward": out["env_turn_rewards"].sum(-1).mean().item(),
        }

    def _turn(self, trajs: list[_Trajectory], venv: Any, validate: bool, last_turn: bool) -> None:
        active = [i for i, t in enumerate(trajs) if not t.done]
        outputs = self.session.generate_tokens([trajs[i].prompt + trajs[i].tokens for i in active], validate)
        for i, tokens in zip(active, outputs):
            trajs[i].add(tokens, from_policy=True)
            trajs[i].turn_ends.append(len(trajs[i].tokens) - 1 if tokens else -1)
        results = venv.step({i: self.session.decode(tokens) for i, tokens in zip(active, outputs)})
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
        rows = expand_prompts(batch, self.session.val_n if validate else self.session.train_n)
        count = rows.batch_size[0]
        venv = self.session.venv(count)
        tasks, seeds = self.session.tasks(rows)
        venv.reset(tasks, seeds)
        trajs = [_Trajectory(prompt) for prompt in real_prompt_tokens(rows)]
        for turn in range(self.max_turns):
            if all(t.done for t in trajs):
                break
            self._turn(trajs, venv, validate, last_turn=turn == self.max_turns - 1)
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
        return rows
