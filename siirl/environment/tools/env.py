"""``ToolEnv``: tool calling as an environment of the multi-turn rollout (one code path for both).

Each ``step`` gets one policy turn as text. Tool calls in it (parsed in the configured chat format) run
concurrently, bounded by ``tool_timeout_s``; their responses come back as ``tool`` messages, which the
rollout renders with the chat template's ``tool`` role and never trains on. A turn without a tool call ends
the episode. A call that is unreadable, names an unknown tool or raises does not end anything: its error
text is that call's tool turn, and it is counted (``tool_errors`` in ``info``). A call that times out ends
the episode with reward 0 and ``info["error"]`` (counted in ``tool_timeouts``), and the step's later calls
into user code are not made (``StepCalls``): a hung tool costs a step one ``tool_timeout_s``. A tool or
interaction failing on every call ends the job (siirl.environment.callback_failures).

With an interaction configured (``interaction_config_path``, with or without tools), a turn without a tool
call goes to the row's interaction instead: it reads the conversation (the row's chat, the policy's turns,
the tool and user turns so far) and answers as the ``user``; its score is that step's reward, and its
``should_terminate`` ends the episode. ``max_user_turns`` counts tool and interaction turns together.

Rewards, as in verl: the step reward is the sum of the executed calls' step rewards (the rollout places
it on the turn's last policy token); ``info["rollout_reward_scores"]`` holds ``{tool: calc_reward}`` of
every tool instance the trajectory created, kept current after each step, for the score function, plus
``user_turn_rewards`` (the interaction's score per user turn) when an interaction is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from siirl.agent_loop.tool_parser import TOOL_PARSERS, ToolCall
from siirl.environment.base import StepResult
from siirl.environment.bounded import StepCalls, ToolTimeout
from siirl.environment.callback_failures import merge_callbacks, note_call
from siirl.environment.interactions import InteractionTurns, build_interactions, load_interaction_config
from siirl.environment.registry import register_env
from siirl.environment.tools.base import response_text
from siirl.environment.tools.config import build_tools, load_tool_config

logger = logging.getLogger(__name__)

#: Episode counters reported in ``info`` (and by the rollout as ``tools/<name>`` metrics).
COUNTERS = ("tool_calls", "tool_errors", "tool_timeouts")


def truncate(text: str, limit: int, keep: str) -> str:
    """``text`` cut to ``limit`` characters, keeping its start (left), end (right) or both ends (middle)."""
    if len(text) <= limit:
        return text
    if keep == "left":
        return text[:limit] + "...(truncated)"
    if keep == "right":
        return "(truncated)..." + text[-limit:]
    half = limit // 2
    return text[:half] + "...(truncated)..." + text[len(text) - half :]


@register_env("tools")
class ToolEnv:
    def __init__(
        self,
        tool_config_path: str | None = None,
        format: str = "hermes",
        max_parallel_calls: int = 1,
        max_tool_response_length: int = 256,
        tool_response_truncate_side: str = "middle",
        tool_timeout_s: float = 10.0,
        max_user_turns: int | None = None,
        interaction_config_path: str | None = None,
    ) -> None:
        self.tools = build_tools(load_tool_config(tool_config_path)) if tool_config_path else {}
        interactions = build_interactions(load_interaction_config(interaction_config_path)) if interaction_config_path else {}
        self.calls = StepCalls(tool_timeout_s)
        self.interaction = InteractionTurns(interactions, self.calls)
        self.parse = TOOL_PARSERS.get(format)
        self.max_parallel_calls, self.timeout_s = max_parallel_calls, tool_timeout_s
        self.response_limit, self.keep = max_tool_response_length, tool_response_truncate_side
        self.max_user_turns = max_user_turns
        self._tools_kwargs: dict[str, Any] = {}
        self._instances: dict[str, str] = {}
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._callbacks: dict[str, list] = {}
        self._hung = ""
        self._user_turns = 0
        self._messages: list[dict[str, Any]] = []

    # ----- episode -----

    def reset(self, task: Mapping[str, Any], seed: int | None = None) -> StepResult:
        self._release_all()
        self.calls.start_step()
        self._tools_kwargs = dict(task.get("tools_kwargs") or {})
        self._counts, self._callbacks, self._hung = dict.fromkeys(COUNTERS, 0), {}, ""
        self._user_turns = 0
        self._messages = _chat(task.get("raw_prompt"), task.get("prompt_text", ""))
        self.interaction.start(task.get("interaction_kwargs"))
        for name, kwargs in self._tools_kwargs.items():  # verl creates the row's tools up front
            if kwargs is not None and name in self.tools:
                self._instance(name)
        return StepResult("", info=self._info())

    def step(self, action: Any) -> StepResult:
        self.calls.start_step()
        self._hung = ""
        calls = self.parse(str(action)) if self.tools else []
        self._messages.append({"role": "assistant", "content": str(action)})
        out_of_turns = self.max_user_turns is not None and self._user_turns >= self.max_user_turns
        if out_of_turns or not (calls or self.interaction.active):
            return self._end()
        self._user_turns += 1
        if calls:
            texts, rewards = self._run_calls(calls[: self.max_parallel_calls])
            if self.calls.hung is not None:
                return self._abandon()
            messages = [{"role": "tool", "content": truncate(t, self.response_limit, self.keep)} for t in texts]
            self._messages += messages
            return StepResult(messages, reward=float(sum(rewards)), done=False, info=self._info())
        reply = self.interaction.respond(self._messages)
        if self.calls.hung is not None:
            return self._abandon()
        if reply is None:
            return self._end()
        terminate, text, score = reply
        self._messages.append({"role": "user", "content": text})
        if terminate:
            return self._end(score)
        return StepResult([self._messages[-1]], reward=score, done=False, info=self._info())

    def _end(self, reward: float = 0.0) -> StepResult:
        info = self._info()
        self._release_all()
        return StepResult("", reward=reward, done=True, info=info)

    def _abandon(self) -> StepResult:
        """A call of this step hung: the episode ends with reward 0, its instances are dropped unreleased
        (the hung call may still use them) and ``info["error"]`` says why (the trajectory scores 0)."""
        info = {**self._info(scores=False), "error": self._hung or f"a call {self.calls.hung}", "success": False}
        self._instances.clear()
        self.interaction.finalize()
        return StepResult("", reward=0.0, done=True, info=info)

    def close(self) -> None:
        self._release_all()

    # ----- calls -----

    def _kwargs(self, name: str, stage: str) -> dict[str, Any]:
        return dict((self._tools_kwargs.get(name) or {}).get(f"{stage}_kwargs") or {})

    def _instance(self, name: str) -> str:
        if name not in self._instances:
            try:
                created = self.calls.call(self.tools[name].create, None, **self._kwargs(name, "create"))
            except Exception as exc:
                note_call(self._callbacks, self._tool_name(name, "create"), f"{type(exc).__name__}: {exc}")
                raise
            self._instances[name] = created[0] if isinstance(created, tuple) else created
        return self._instances[name]

    def _tool_name(self, name: str, method: str) -> str:
        cls = type(self.tools[name])
        return f"tool {name!r} ({cls.__module__}.{cls.__qualname__}.{method})"

    def _failed(self, call: ToolCall, error: BaseException | str) -> str:
        kind = "tool_timeouts" if isinstance(error, ToolTimeout) else "tool_errors"
        self._counts[kind] += 1
        detail = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if kind == "tool_timeouts":
            detail = f"tool {call.name!r} {error}"
            self._hung = self._hung or detail
        return f"Error when executing tool: {detail}"

    def _run_calls(self, calls: list[ToolCall]) -> tuple[list[str], list[float]]:
        """One response text and step reward per call; failures answer with their error text, reward 0."""
        texts: list[str | None] = [None] * len(calls)
        rewards = [0.0] * len(calls)
        jobs, runnable = [], []
        for index, call in enumerate(calls):
            self._counts["tool_calls"] += 1
            if call.error:
                texts[index] = self._failed(call, call.error)
            elif call.name not in self.tools:
                texts[index] = self._failed(call, f"unknown tool {call.name!r}; available: {', '.join(self.tools)}")
            else:
                try:
                    instance = self._instance(call.name)
                except Exception as exc:  # noqa: BLE001 - a user tool may raise anything
                    texts[index] = self._failed(call, exc)
                    continue
                jobs.append((self.tools[call.name].execute, (instance, call.arguments), self._kwargs(call.name, "execute")))
                runnable.append(index)
        for index, (value, error) in zip(runnable, self.calls.call_all(jobs)):
            failure = "" if error is None else f"{type(error).__name__}: {error}"
            note_call(self._callbacks, self._tool_name(calls[index].name, "execute"), failure)
            if error is not None:
                texts[index] = self._failed(calls[index], error)
                continue
            response, reward = (value[0], value[1]) if isinstance(value, tuple) else (value, 0.0)
            texts[index], rewards[index] = response_text(response), float(reward or 0.0)
        return [t or "" for t in texts], rewards

    def _scores(self) -> dict[str, float]:
        """``{tool: calc_reward}`` of the created instances; a failing calc_reward scores 0 and is counted."""
        scores = {}
        for name, instance in self._instances.items():
            try:
                scores[name] = float(self.calls.call(self.tools[name].calc_reward, instance, **self._kwargs(name, "calc_reward")))
            except Exception as exc:  # noqa: BLE001 - a user tool may raise anything
                self._failed(ToolCall(name), exc)
                scores[name] = 0.0
        return scores

    def _info(self, scores: bool = True) -> dict[str, Any]:
        rewards = self._scores() if scores else {}
        if self.interaction.configured:
            rewards["user_turn_rewards"] = list(self.interaction.scores)
        callbacks = merge_callbacks([self._callbacks, self.interaction.callbacks])
        return {"rollout_reward_scores": rewards, **self._counts, **self.interaction.counts, "callbacks": callbacks}

    def _release_all(self) -> None:
        self.interaction.finalize()
        for name, instance in self._instances.items():
            try:
                self.calls.call(self.tools[name].release, instance, **self._kwargs(name, "release"))
            except Exception as exc:  # noqa: BLE001 - releasing must not end the episode
                logger.warning("tool %r: release failed: %s: %s", name, type(exc).__name__, exc)
        self._instances.clear()


def _chat(raw_prompt: Any, prompt_text: str) -> list[dict[str, Any]]:
    """The row's chat (``data.return_raw_chat``) as messages; without it, its prompt as one user turn."""
    if isinstance(raw_prompt, str):
        return [{"role": "user", "content": raw_prompt}]
    if raw_prompt is not None:
        return [dict(m) for m in raw_prompt]
    return [{"role": "user", "content": prompt_text}]
