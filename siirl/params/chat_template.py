"""verl's ``actor_rollout_ref.model.custom_chat_template``: a Jinja chat template that replaces the
tokenizer's. A template that does not compile would fail on the first prompt a worker renders, so it is
compiled here, on the driver, with the sandboxed Jinja environment transformers renders chat templates in.
"""

from __future__ import annotations

from typing import Any

from siirl.errors import ConfigError

KEY = "actor_rollout_ref.model.custom_chat_template"


def check_custom_chat_template(template: Any) -> None:
    """Null, or a non-empty string that compiles as a Jinja template."""
    if template is None:
        return
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"bad config: {KEY} must be a Jinja chat template string (or null), got {template!r}")
    from jinja2 import TemplateSyntaxError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    try:
        environment.from_string(template)
    except TemplateSyntaxError as exc:
        raise ConfigError(f"bad config: {KEY} is not a valid Jinja template (line {exc.lineno}: {exc.message})") from None
