"""Step-wise (embodied) rollout: at every step the policy sees only the current observation.

This is how embodied policies act (a VLA sees the current camera frame and instruction, not the whole
history), and it keeps every training sample as short as one step. Each environment step becomes one
row: ``prompts`` = the observation rendered as a fresh single-turn chat, ``responses`` = the action. Rows
of one trajectory share ``traj_uid`` and are adjacent; rows of one task share ``uid`` (the ``n``
trajectories of a prompt, all seeded alike). Trajectory-level fields repeated on every step row:
``task_success``, ``env_progress``, ``env_error``, ``traj_steps`` and ``traj_signature`` (the per-step
rewards, zero-padded to ``max_turns``: the trajectory representation the progress reward compares).

A vision-language-action policy (``VlaPrompts``, ``ActionTokenizer``): an observation with a camera image
becomes an image + instruction prompt (the step row keeps its image inputs), and the response is read as
action tokens, an action chunk the environment executes whole. Rollout metrics then also give the success
rate of each task (``env/success_rate/task_<id>``) when the environment names its tasks.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from siirl.data_coordinator.tensordict_ops import concat, non_tensor_list, select_rows, set_non_tensor_list
from siirl.engine.rollout.action_tokens import ActionTokenizer
from siirl.engine.rollout.batch_ops import assemble_sequences, expand_prompts, pad_right
from siirl.engine.rollout.env_session import EnvSessionRollout
from siirl.engine.rollout.vla_prompts import VlaPrompts
from siirl.environment import StepResult

#: Step (one row) = (prompt tokens, response tokens, reward, the prompt's image fields).
Step = tuple[list[int], list[int], float, dict[str, Any]]


class EnvStepRollout(EnvSessionRollout):
    def __init__(
        self, session: Any, *, max_turns: int, max_prompt_length: int, max_response_length: int,
        vla_prompts: VlaPrompts | None = None, actions: ActionTokenizer | None = None, noop: list[float] | None = None,
    ) -> None:
        super().__init__(session, max_turns)
        self.max_prompt_length, self.max_response_length = max_prompt_length, max_response_length
        self.vla_prompts, self.actions, self.noop = vla_prompts, actions, noop

    def rollout_metrics(self, out: TensorDict) -> dict[str, float]:
        """Per trajectory (a trajectory's step rows repeat its fields): weight each row by 1 / its steps."""
        weight = 1.0 / out["traj_steps"].clamp(min=1)
        trajectories = weight.sum()
        return {
            "env/success_rate": ((out["task_success"] * weight).sum() / trajectories).item(),
            "env/progress": ((out["env_progress"] * weight).sum() / trajectories).item(),
            "env/steps": (out["traj_steps"] * weight).sum().item() / trajectories.item(),
            "env/errors": (out["env_error"] * weight).sum().item(),
            **self._task_metrics(out, weight),
        }

    @staticmethod
    def _task_metrics(out: TensorDict, weight: torch.Tensor) -> dict[str, float]:
        if "env_task_id" not in set(out.keys()):
            return {}
        tasks = out["env_task_id"]
        metrics = {}
        for task in sorted({int(t) for t in tasks.tolist() if t >= 0}):
            mine = weight * (tasks == task)
            metrics[f"env/success_rate/task_{task}"] = ((out["task_success"] * mine).sum() / mine.sum()).item()
        return metrics

    def _prompt(self, observation: Any) -> tuple[list[int], dict[str, Any]]:
        if self.vla_prompts is not None and self.vla_prompts.accepts(observation):
            return self.vla_prompts(observation)
        return self._prompt_tokens(observation), {}

    def _action(self, tokens: list[int]) -> Any:
        return self.session.decode(tokens) if self.actions is None else self.actions.decode(tokens, self.noop)

    def _prompt_tokens(self, observation: Any) -> list[int]:
        """The observation as a one-message chat, truncated from the left to ``max_prompt_length``."""
        tok = self.session.tokenizer
        text = tok.apply_chat_template(
            [{"role": "user", "content": str(observation)}], tokenize=False, add_generation_prompt=True
        )
        return tok(text, add_special_tokens=False)["input_ids"][-self.max_prompt_length :]

    def generate(self, batch: TensorDict, validate: bool = False) -> TensorDict:
        """Every episode of the batch; in waves of ``session.max_envs`` environments when that is set."""
        rows = expand_prompts(batch, self.session.val_n if validate else self.session.train_n)
        count, wave = rows.batch_size[0], self.session.max_envs or rows.batch_size[0]
        parts = [
            self._episodes(select_rows(rows, list(range(first, min(first + wave, count)))), validate, first)
            for first in range(0, count, wave)
        ]
        return parts[0] if len(parts) == 1 else concat(parts)

    def _episodes(self, rows: TensorDict, validate: bool, first: int) -> TensorDict:
        """The episodes of ``rows`` at once; ``first`` numbers their trajectories within the batch."""
        count = rows.batch_size[0]
        venv = self.session.venv(count)
        tasks, seeds = self.session.tasks(rows)
        current = venv.reset(tasks, seeds)
        self.session.note_results("reset", current)
        steps: list[list[Step]] = [[] for _ in range(count)]
        task_ids = [int(r.info.get("task_id", -1)) if r.info.get("task_id") is not None else -1 for r in current]
        last: list[StepResult] = list(current)
        done = [r.done for r in current]
        for _ in range(self.max_turns):
            active = [i for i in range(count) if not done[i]]
            if not active:
                break
            prompts, images = zip(*(self._prompt(current[i].observation) for i in active))
            actions = self.session.generate_tokens(prompts, validate, images=list(images) if images[0] else None)
            results = venv.step({i: self._action(a) for i, a in zip(active, actions)})
            self.session.note_results("step", results)
            for i, prompt, action, result, image in zip(active, prompts, actions, results, images):
                steps[i].append((prompt, action, float(result.reward), image))
                current[i] = last[i] = result
                done[i] = result.done
        self.session.end_rollout([result.info for result in last])
        return self._assemble(rows, steps, last, task_ids, first)

    def _assemble(
        self, rows: TensorDict, steps: list[list[Step]], last: list[StepResult], task_ids: list[int], first: int = 0
    ) -> TensorDict:
        owner = [traj for traj, traj_steps in enumerate(steps) for _ in traj_steps]
        if not owner:
            errors = {r.info.get("error") for r in last if r.info.get("error")}
            reason = f": {min(errors)}" if errors else ""
            raise RuntimeError(f"the environment ended every episode before the first action{reason}")
        out = select_rows(rows, owner)
        flat = [step for traj_steps in steps for step in traj_steps]
        pad, width = self.session.pad_id, self.max_prompt_length
        prompt_ids = torch.full((len(flat), width), pad, dtype=torch.long)
        prompt_mask = torch.zeros((len(flat), width), dtype=torch.long)
        responses = torch.full((len(flat), self.max_response_length), pad, dtype=torch.long)
        lengths = torch.zeros(len(flat), dtype=torch.long)
        for row, (prompt, action, _, _) in enumerate(flat):
            prompt_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            prompt_mask[row, width - len(prompt) :] = 1
            action = action[: self.max_response_length]
            responses[row] = pad_right(torch.tensor([action], dtype=torch.long), self.max_response_length, pad)[0]
            lengths[row] = len(action)
        prompts = TensorDict({"input_ids": prompt_ids, "attention_mask": prompt_mask}, batch_size=[len(flat)])
        for key, value in assemble_sequences(prompts, responses, lengths, pad).items():
            out[key] = value
        signature = torch.zeros((len(steps), self.max_turns), dtype=torch.float32)
        for traj, traj_steps in enumerate(steps):
            signature[traj, : len(traj_steps)] = torch.tensor([step[2] for step in traj_steps])
        info = [result.info for result in last]
        per_traj = {
            "task_success": [float(bool(i.get("success", False))) for i in info],
            "env_progress": [float(i.get("progress", 0.0)) for i in info],
            "env_error": [float("error" in i) for i in info],
            "traj_steps": [float(len(s)) for s in steps],
        }
        index = torch.tensor(owner, dtype=torch.long)
        for key, values in per_traj.items():
            out[key] = torch.tensor(values, dtype=torch.float32)[index]
        out["traj_signature"] = signature[index]
        out["env_step_reward"] = torch.tensor([step[2] for step in flat], dtype=torch.float32)
        if any(t >= 0 for t in task_ids):
            out["env_task_id"] = torch.tensor(task_ids, dtype=torch.long)[index]
        for key in flat[0][3]:
            set_non_tensor_list(out, key, [step[3][key] for step in flat])
        out["env_step"] = torch.tensor([t for s in steps for t in range(len(s))], dtype=torch.long)
        uids = [str(u) for u in non_tensor_list(out, "uid")]
        set_non_tensor_list(out, "traj_uid", [f"{uid}/{first + traj}" for uid, traj in zip(uids, owner)])
        return out
