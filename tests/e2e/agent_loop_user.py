"""A user's agent loop, written as a verl user writes one (only the import differs): the policy answers; a
wrong answer gets a ``No.`` user turn and a second try. The loop judges the trajectory itself."""

from __future__ import annotations

from typing import Any

from siirl.agent_loop import AgentLoopBase, AgentLoopOutput, register

#: The user turn a wrong answer gets.
FEEDBACK = "No."


@register("retry_on_wrong")
class RetryOnWrong(AgentLoopBase):
    def __init__(self, *args: Any, max_tries: int = 2, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_tries = max_tries

    def _tokens(self, messages: list[dict], **kwargs: Any) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        prompt = self._tokens(list(kwargs["raw_prompt"]), add_generation_prompt=True)
        feedback = self._tokens([{"role": "user", "content": FEEDBACK}], add_generation_prompt=True)
        response: list[int] = []
        mask: list[int] = []
        for attempt in range(self.max_tries):
            output = await self.server_manager.generate(prompt_ids=prompt + response, sampling_params=sampling_params)
            response += output.token_ids
            mask += [1] * len(output.token_ids)
            answer = self.tokenizer.decode(output.token_ids, skip_special_tokens=True).strip()
            if answer == str(kwargs["ground_truth"]):
                return AgentLoopOutput(prompt_ids=prompt, response_ids=response, response_mask=mask,
                                       num_turns=2 * attempt + 2, reward_score=1.0 / (attempt + 1))
            if attempt + 1 < self.max_tries:
                response += feedback
                mask += [0] * len(feedback)
        return AgentLoopOutput(prompt_ids=prompt, response_ids=response, response_mask=mask,
                               num_turns=2 * self.max_tries, reward_score=0.0)
