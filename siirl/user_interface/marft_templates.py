"""The prompt of an agent in the original siiRL's MARFT workflow files (``pre_process_kwargs`` /
``post_process_kwargs`` of their ``process.py``), as a team ``prompt_fn``.

Agent 0's prompt is its ``pre_chat_template`` with ``${prompt}`` = the question. Agent ``k``'s ``${prompt}``
is what agent ``k-1`` saw and said: agent ``k-1``'s prompt, its ``post_chat_template`` (the speaker tag,
e.g. ``" <|im_start|> reasoner: "``) and its answer; the chat template then wraps the result as the user
turn, as their ``pre_process`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from string import Template


def template_prompt(
    question: str, previous: Sequence[str], *, pre_templates: Sequence[str], post_templates: Sequence[str]
) -> str:
    """The prompt of agent ``len(previous)``; ``pre_templates`` / ``post_templates`` are agent 0's to its own."""
    text = Template(pre_templates[0]).safe_substitute(prompt=question)
    for position, answer in enumerate(previous):
        context = text + post_templates[position] + answer
        text = Template(pre_templates[position + 1]).safe_substitute(prompt=context)
    return text
