"""The built-in scorers' former path, ``siirl.user_interface.rewards[.<module>]``, which the migration guide
told users to import in their score files: each name is the same module of :mod:`siirl.reward_score`."""

import importlib
import sys

from siirl.reward_score import *

for _module in ("arithmetic", "code_execution", "geo3k", "gsm8k", "math_boxed", "registry", "sandbox_fusion"):
    sys.modules[f"{__name__}.{_module}"] = importlib.import_module(f"siirl.reward_score.{_module}")
