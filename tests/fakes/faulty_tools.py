"""Tools that misbehave on purpose, plus a chat template with a ``tool`` role for the embedded tokenizer
(importable from spawned environment workers)."""

import time

from siirl.environment.tools import BaseTool

#: The embedded template plus what tool runs need: the tools' names in a system turn, a ``tool`` role
#: rendered as a user turn wrapping ``<tool_response>`` (as Qwen2.5's template does).
TOOL_CHAT_TEMPLATE = (
    "{% if tools %}<|system|>tools:{% for tool in tools %} {{ tool['function']['name'] }}{% endfor %}{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}<|user|>{{ message['content'] }}"
    "{% elif message['role'] == 'assistant' %}<|assistant|>{{ message['content'] }}<|endoftext|>"
    "{% elif message['role'] == 'tool' %}<|user|><tool_response>{{ message['content'] }}</tool_response>"
    "{% else %}{{ raise_exception('unknown chat role: ' + message['role']) }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


class EchoTool(BaseTool):
    """Answers with its arguments; step reward = ``arguments["reward"]``; ``calc_reward`` = calls made."""

    def __init__(self, config, tool_schema):
        super().__init__(config, tool_schema)
        self.calls = {}

    def create(self, instance_id=None, **kwargs):
        instance_id, _ = super().create(instance_id)
        self.calls[instance_id] = 0
        return instance_id, ""

    def execute(self, instance_id, parameters, **kwargs):
        self.calls[instance_id] += 1
        return {"text": f"echo {parameters.get('text', '')}"}, float(parameters.get("reward", 0.0)), {}

    def calc_reward(self, instance_id, **kwargs):
        return float(self.calls[instance_id])

    def release(self, instance_id, **kwargs):
        self.calls.pop(instance_id, None)


class HangingTool(BaseTool):
    """``execute`` sleeps ``config["seconds"]`` (default: far longer than any test)."""

    async def execute(self, instance_id, parameters, **kwargs):
        import asyncio

        await asyncio.sleep(float(self.config.get("seconds", 600)))
        return "woke up", 0.0, {}


class BlockingTool(BaseTool):
    """``execute`` blocks its thread (a synchronous call that never yields)."""

    def execute(self, instance_id, parameters, **kwargs):
        time.sleep(float(self.config.get("seconds", 600)))
        return "woke up", 0.0, {}


class RaisingTool(BaseTool):
    def execute(self, instance_id, parameters, **kwargs):
        raise RuntimeError("the sandbox is down")
