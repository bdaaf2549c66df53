"""verl's ``single_turn_agent`` as an agent loop: one generation for the row's prompt. Rows that name it
run beside a user's loops in one rollout (a run of it alone is the plain rollout, without this class)."""

from __future__ import annotations

from typing import Any

from siirl.agent_loop.base import AgentLoopBase, AgentLoopOutput, register


@register("single_turn_agent")
class SingleTurnAgentLoop(AgentLoopBase):
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        text = self.tokenizer.apply_chat_template(
            list(kwargs["raw_prompt"]), add_generation_prompt=True, tokenize=False,
            **dict(self.config.data.apply_chat_template_kwargs),
        )
        prompt_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        output = await self.server_manager.generate(prompt_ids=prompt_ids, sampling_params=sampling_params)
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids), response_ids=list(output.token_ids),
            response_mask=[1] * len(output.token_ids), num_turns=2,
        )
