"""Rollout engines behind one interface: ``make_rollout_engine(rollout.name, ...)``.

Importing this package registers the built-in engines (``hf``, ``vllm``, ``sglang``); the latter two
import their optional package only when an engine is built. A new engine is one module with a
``@register_rollout_engine`` class, imported here.
"""

from siirl.engine.rollout import hf, sglang_engine, vllm_engine  # noqa: F401  (registration side effects)
from siirl.engine.rollout.base import (
    RolloutEngine,
    make_rollout_engine,
    register_rollout_engine,
    rollout_engine_class,
    rollout_engine_names,
)
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.engine.rollout.sampling import SamplingParams

__all__ = [
    "HFRolloutEngine",
    "RolloutEngine",
    "SamplingParams",
    "make_rollout_engine",
    "register_rollout_engine",
    "rollout_engine_class",
    "rollout_engine_names",
]
