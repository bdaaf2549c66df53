"""The prompt of an agent in the original siiRL's MARFT workflow files (``pre_process_kwargs`` /
``post_process_kwargs`` of their ``process.py``), as a team ``prompt_fn``.

As there, the episode is one running transcript: the question, then each turn's speaker tag (its agent's
``post_chat_template``, e.g. ``" <|im_start|> reasoner: "``) and answer, in turn order across rounds; a
wrong final answer of a round ends with the environment's ``" This answer is wrong."``. An agent's prompt
is its ``pre_chat_template`` with ``${prompt}`` = the transcript so far; the chat template then wraps it
as the user turn, as their ``pre_process`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from string import Template


def template_prompt(
    question: str, previous: Sequence[str], *, pre_templates: Sequence[str], post_templates: Sequence[str]
) -> str:
    """The prompt of the agent taking turn ``len(previous)``; the templates are the team's, in agent order
    (turn ``t`` is agent ``t % len(pre_templates)``'s)."""
    team = len(pre_templates)
    transcript = question + "".join(post_templates[t % team] + answer for t, answer in enumerate(previous))
    return Template(pre_templates[len(previous) % team]).safe_substitute(prompt=transcript)
