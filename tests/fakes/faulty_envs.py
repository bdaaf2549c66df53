"""Environments that misbehave on purpose, to test containment (importable from spawned workers)."""

import os
import time

from siirl.environment.arithmetic import ArithmeticChainEnv


class HangOnStep(ArithmeticChainEnv):
    """Hangs when the action is ``"hang"``, dies when it is ``"crash"``, raises on ``"raise"``, sleeps 0.4 s on
    ``"nap"`` (then answers like a wrong answer)."""

    def step(self, action):
        if action == "nap":
            time.sleep(0.4)
        if action == "hang":
            time.sleep(600)
        if action == "crash":
            os._exit(3)
        if action == "raise":
            raise RuntimeError("broken simulator")
        return super().step(action)


class HangOnPrompt(ArithmeticChainEnv):
    """Hangs in ``reset`` for the task whose prompt holds ``5+7=``."""

    def reset(self, task, seed=None):
        if "5+7=" in str(task.get("prompt_text", "")):
            time.sleep(600)
        return super().reset(task, seed)
