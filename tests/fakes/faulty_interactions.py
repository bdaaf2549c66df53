"""User interactions that misbehave (or keep state) for the interaction tests; imported by ``module:Class``."""

import asyncio

from siirl.environment.interactions import BaseInteraction


class CountingInteraction(BaseInteraction):
    """An async user who asks for ``config["rounds"]`` answers, scoring the n-th 0.1 * n, then ends."""

    def __init__(self, config):
        super().__init__(config)
        self.seen = {}

    async def start_interaction(self, instance_id=None, **kwargs):
        self.seen[instance_id] = 0
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        self.seen[instance_id] += 1
        n = self.seen[instance_id]
        return n >= int(self.config.get("rounds", 2)), f"round {n} of {messages[-1]['content']}", 0.1 * n, {}

    async def finalize_interaction(self, instance_id, **kwargs):
        del self.seen[instance_id]


class RaisingInteraction(BaseInteraction):
    def generate_response(self, instance_id, messages, **kwargs):
        raise RuntimeError("the user left")


class HangingInteraction(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        await asyncio.sleep(600)
