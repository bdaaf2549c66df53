"""Environments that misbehave on purpose, to test containment (importable from spawned workers)."""

import os
import time

from siirl.environment.arithmetic import ArithmeticChainEnv


class HangOnStep(ArithmeticChainEnv):
    """Hangs when the action is ``"hang"``, dies when it is ``"crash"``, raises on ``"raise"``."""

    def step(self, action):
        if action == "hang":
            time.sleep(600)
        if action == "crash":
            os._exit(3)
        if action == "raise":
            raise RuntimeError("broken simulator")
        return super().step(action)
