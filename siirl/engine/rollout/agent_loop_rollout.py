"""The agent-loop rollout: every trajectory of a step runs its agent loop (siirl.agent_loop), all at once on
one event loop, and their generation requests are answered together by the inner engine.

A step alternates two legs until every loop has returned: the loops run (user code) until each trajectory
still running waits on a generation (or, when one is busy elsewhere, e.g. a tool call on a thread, until
no new request has come for :data:`SETTLE_S`); then the engine answers the waiting requests in one batch.
Each user leg is a :class:`siirl.bounded_call.BoundedCalls` call bounded by ``env.timeout_s``; past it the
step's unfinished loops fail (their event loop is abandoned on its thread). A loop that raises, returns
something other than an :class:`AgentLoopOutput` or runs late costs its trajectory (no response, score 0,
``env_error``); the first failure of each loop is logged once, and a loop that has failed on every
trajectory it ever ran ends the job in one line naming it (the rule for tools and score functions).

The row keeps the loop's prompt (left-truncated to the prompt width, as verl does) and its response cut to
``data.max_response_length``; ``response_mask`` is the loop's (tokens it inserted train as context only).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import logging
from collections.abc import Coroutine
from typing import Any

import torch
from tensordict import TensorDict, is_non_tensor

from siirl import user_code
from siirl.agent_loop.base import AgentLoopOutput, TokenOutput
from siirl.agent_loops import LoopSpec
from siirl.bounded_call import BoundedCalls
from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.engine.rollout.batch_ops import expand_prompts, prompt_position_ids
from siirl.engine.rollout.env_session import EnvSession, EnvSessionRollout, real_prompt_tokens
from siirl.environment.callback_failures import CallbackStats, note_call
from siirl.errors import ConfigError

logger = logging.getLogger(__name__)

#: With requests waiting and a trajectory busy elsewhere, the engine answers after this long without news.
SETTLE_S = 0.05
#: Row fields a loop's ``run`` does not receive (tensors are not row fields; ``multi_modal_*`` are engine inputs).
HIDDEN_FIELDS = ("multi_modal_inputs", "multi_modal_data")

_trajectory: contextvars.ContextVar[int] = contextvars.ContextVar("agent_loop_trajectory")


class AgentLoopTimeout(Exception):
    """The step's agent loops ran user code past ``env.timeout_s`` between two generations."""


class BatchingServer:
    """The ``server_manager`` of a step's loops: requests wait until the engine answers them together."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, list[int], asyncio.Future]] = []
        self.changed: asyncio.Event | None = None

    async def generate(
        self, request_id: str | None = None, *, prompt_ids: list[int], sampling_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """One continuation of ``prompt_ids``, sampled with the run's rollout settings."""
        future = asyncio.get_running_loop().create_future()
        self.pending.append((_trajectory.get(), [int(t) for t in prompt_ids], future))
        self.changed.set()
        return await future

    async def until_blocked(self, tasks: list[asyncio.Task]) -> None:
        """Run the loops until all have returned or the waiting requests should be answered."""
        while True:
            running = {i for i, task in enumerate(tasks) if not task.done()}
            if not running or running <= {i for i, _, _ in self.pending}:
                return
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), SETTLE_S if self.pending else None)
            except asyncio.TimeoutError:
                return

    def answer(self, generate: Any) -> None:
        """Answer every waiting request through ``generate(contexts) -> token lists``."""
        requests, self.pending = self.pending, []
        for (_, _, future), tokens in zip(requests, generate([context for _, context, _ in requests])):
            future.set_result(TokenOutput(token_ids=list(tokens)))


class AgentLoopRollout(EnvSessionRollout):
    def __init__(
        self, session: EnvSession, loops: dict[str, LoopSpec], *, default_loop: str, loop_config: Any,
        max_response_length: int, timeout_s: float,
    ) -> None:
        super().__init__(session, max_turns=1)
        self.loops, self.default_loop, self.loop_config = loops, default_loop, loop_config
        self.width = max_response_length
        self.calls = BoundedCalls(timeout_s, AgentLoopTimeout, "siirl-agent-loop")
        self._warned_long_prompt = False

    def sampling_params(self, validate: bool) -> dict[str, Any]:
        source = self.loop_config.actor_rollout_ref.rollout
        source = source.val_kwargs if validate else source
        return {"temperature": float(source.temperature), "top_p": float(source.top_p), "top_k": int(source.top_k),
                "repetition_penalty": 1.0, "logprobs": False}

    def rollout_metrics(self, out: TensorDict) -> dict[str, float]:
        inserted = (out["attention_mask"][:, -self.width:] - out["response_mask"]).sum(-1).float()
        return {
            "agent/turns": out["num_turns"].mean().item(), "agent/errors": out["env_error"].sum().item(),
            "agent/inserted_tokens": inserted.mean().item(),
            "agent/own_reward_rate": out["agent_reward_set"].mean().item(),
        }

    def _row_kwargs(self, rows: TensorDict) -> list[dict[str, Any]]:
        fields = rows.keys()  # iterating a TensorDict itself gives its rows
        keys = [k for k in fields if is_non_tensor(rows.get(k)) and k not in HIDDEN_FIELDS]
        columns = {k: non_tensor_list(rows, k) for k in keys}
        fields = [{k: column[i] for k, column in columns.items()} for i in range(rows.batch_size[0])]
        for row in fields:  # verl's loops read the answer where verl's dataset keeps it
            row.setdefault("reward_model", {"ground_truth": row.get("ground_truth")})
        return fields

    async def _run_one(self, index: int, name: str, server: BatchingServer, params: dict, kwargs: dict) -> Any:
        _trajectory.set(index)
        spec = self.loops[name]
        try:
            loop = spec.cls(trainer_config=self.loop_config, server_manager=server,
                            tokenizer=self.session.tokenizer, processor=None, **spec.kwargs)
            output = await loop.run(dict(params), **kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's loop may raise anything: it costs its trajectory
            return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if not isinstance(output, AgentLoopOutput) or len(output.response_ids) != len(output.response_mask):
            return "its run returned no AgentLoopOutput with as many response_mask values as response_ids"
        return output

    def _run_all(self, jobs: list[Coroutine], server: BatchingServer, validate: bool, names: list[str]) -> list[Any]:
        """Every loop to its end (an output, or why it failed), generation between the user legs."""
        running = "agent loops " + ", ".join(sorted(set(names)))  # what a crashed worker was running
        loop = asyncio.new_event_loop()
        server.changed = asyncio.Event()
        tasks = [loop.create_task(job) for job in jobs]
        for task in tasks:
            task.add_done_callback(lambda _task: server.changed.set())
        self.calls.start_step()
        try:
            while not all(task.done() for task in tasks):
                with user_code.running(running):
                    self.calls.call(loop.run_until_complete, server.until_blocked(tasks))
                if server.pending:
                    server.answer(lambda contexts: self.session.generate_tokens(contexts, validate))
        except AgentLoopTimeout as late:  # the loop is abandoned on its thread, mid-leg
            why = f"{type(late).__name__}: {late} (env.timeout_s)"
            return [task.result() if task.done() else why for task in tasks]
        except BaseException:  # the engine failed: the loops are cancelled (bounded) before the error goes on
            for task in tasks:
                task.cancel()
            self.calls.call_all([(loop.run_until_complete, (asyncio.gather(*tasks, return_exceptions=True),), {})])
            raise
        finally:
            if self.calls.hung is None:
                loop.close()
        return [task.result() for task in tasks]

    def generate(self, batch: TensorDict, validate: bool = False) -> TensorDict:
        rows = expand_prompts(batch, self.session.val_n if validate else self.session.train_n)
        kwargs = self._row_kwargs(rows)
        names = [str(row.get("agent_name") or self.default_loop) for row in kwargs]
        unknown = sorted(set(names) - set(self.loops))
        if unknown:
            raise ConfigError(f"bad data: rows name agent loops that are not registered: {', '.join(unknown)} "
                             f"(registered: {', '.join(sorted(self.loops))})")
        server, params = BatchingServer(), self.sampling_params(validate)
        outcomes = self._run_all(
            [self._run_one(i, name, server, params, kw) for i, (name, kw) in enumerate(zip(names, kwargs))],
            server, validate, names,
        )
        stats: CallbackStats = {}
        for name, outcome in zip(names, outcomes):
            cls = self.loops[name].cls
            note_call(stats, f"agent loop {name!r} ({cls.__module__}.{cls.__qualname__})",
                      "" if isinstance(outcome, AgentLoopOutput) else outcome)
        self.session.failures.end_step(stats)
        return self._assemble(rows, outcomes)

    def _prompt(self, output: AgentLoopOutput, width: int) -> list[int]:
        if len(output.prompt_ids) > width and not self._warned_long_prompt:
            self._warned_long_prompt = True
            logger.warning("an agent loop's prompt of %d tokens is longer than the prompt width %d "
                           "(data.max_prompt_length): left-truncated", len(output.prompt_ids), width)
        return list(output.prompt_ids)[-width:]

    def _assemble(self, rows: TensorDict, outcomes: list[Any]) -> TensorDict:
        count, width, pad = len(outcomes), self.width, self.session.pad_id
        prompt_width = rows["input_ids"].shape[1]
        prompts = torch.full((count, prompt_width), pad, dtype=torch.long)
        prompt_mask = torch.zeros((count, prompt_width), dtype=torch.long)
        responses = torch.full((count, width), pad, dtype=torch.long)
        policy = torch.zeros((count, width), dtype=torch.long)
        present = torch.zeros((count, width), dtype=torch.long)
        turns, errors, own_reward, reward_set = ([0.0] * count for _ in range(4))
        originals = real_prompt_tokens(rows)
        for row, outcome in enumerate(outcomes):
            done = isinstance(outcome, AgentLoopOutput)
            prompt = self._prompt(outcome, prompt_width) if done else originals[row]
            if prompt:
                prompts[row, -len(prompt):] = torch.tensor(prompt, dtype=torch.long)
                prompt_mask[row, -len(prompt):] = 1
            if not done:
                errors[row] = 1.0
                continue
            n = min(len(outcome.response_ids), width)
            responses[row, :n] = torch.tensor(outcome.response_ids[:n], dtype=torch.long)
            policy[row, :n] = torch.tensor([int(bool(m)) for m in outcome.response_mask[:n]], dtype=torch.long)
            present[row, :n] = 1
            turns[row] = float(outcome.num_turns)
            if outcome.reward_score is not None:
                own_reward[row], reward_set[row] = float(outcome.reward_score), 1.0
        prompt_pos = prompt_position_ids(prompt_mask)
        rows["prompts"], rows["responses"], rows["response_mask"] = prompts, responses, policy
        rows["input_ids"] = torch.cat([prompts, responses], dim=1)
        rows["attention_mask"] = torch.cat([prompt_mask, present], dim=1)
        rows["position_ids"] = torch.cat([prompt_pos, prompt_pos[:, -1:] + torch.arange(1, width + 1)[None, :]], dim=1)
        for key, values in (("num_turns", turns), ("env_error", errors), ("agent_reward", own_reward),
                            ("agent_reward_set", reward_set)):
            rows[key] = torch.tensor(values, dtype=torch.float32)
        return rows


def loop_config(cfg: Any, prompt_length: int, response_length: int) -> Any:
    """The config the loops are given: ``rollout.prompt_length`` / ``response_length`` filled in (verl's loops
    read them), the rest the run's (shallow copies: the run's own sections are untouched)."""
    rollout = copy.copy(cfg.actor_rollout_ref.rollout)
    rollout.prompt_length, rollout.response_length = prompt_length, response_length
    actor_rollout_ref = copy.copy(cfg.actor_rollout_ref)
    actor_rollout_ref.rollout = rollout
    out = copy.copy(cfg)
    out.actor_rollout_ref = actor_rollout_ref
    return out
