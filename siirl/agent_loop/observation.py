"""How an environment's reply becomes the tokens of the next turn: the chat template renders it after the
policy's turn. Shared by the multi-turn rollout and the agent loops (siirl.agent_loop.langgraph), so a loop
renders tool replies exactly as the built-in tool rollout does."""

from __future__ import annotations

from typing import Any


def _is_messages(observation: Any) -> bool:
    return isinstance(observation, list) and all(isinstance(m, dict) and "role" in m for m in observation)


class ObservationRenderer:
    """An observation as the chat template renders the turns that follow an assistant turn: a text
    observation is a new user turn, a list of messages (tool responses) is rendered as those messages.

    Rendered as the difference between a two-message conversation and the same with the observation
    appended (plus the generation prompt), so templates that add a default system prompt add none here.
    ``sanity_check`` (verl's ``tokenization_sanity_check_mode``) says how strictly the extended rendering
    must start with the earlier one: ``strict`` exactly, ``ignore_strippable`` up to trailing whitespace,
    ``disable`` not at all.
    """

    def __init__(self, tokenizer: Any, sanity_check: str = "strict") -> None:
        self.tokenizer = tokenizer
        self.sanity_check = sanity_check
        base = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
        self._base = tokenizer.apply_chat_template(base, tokenize=False)
        self._base_messages = base

    def _suffix(self, full: str) -> str:
        if full.startswith(self._base) or self.sanity_check == "disable":
            return full[len(self._base) :]
        stripped = self._base.rstrip()
        if self.sanity_check == "ignore_strippable" and full.startswith(stripped):
            return full[len(stripped) :]
        raise ValueError(
            "the chat template renders an earlier conversation differently when extended "
            "(actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode=strict)"
        )

    def __call__(self, observation: Any) -> list[int]:
        added = observation if _is_messages(observation) else [{"role": "user", "content": str(observation)}]
        full = self.tokenizer.apply_chat_template(
            [*self._base_messages, *added], tokenize=False, add_generation_prompt=True
        )
        return self.tokenizer(self._suffix(full), add_special_tokens=False)["input_ids"]
