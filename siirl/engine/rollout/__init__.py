"""Rollout engines behind one interface: ``make_rollout_engine(rollout.name, ...)``.

Importing this package registers the built-in engines (``hf``, ``vllm``, ``sglang``); the latter two
import their optional package only when an engine is built. A new engine is one module with a
``@ROLLOUT_ENGINES.register`` class, imported here.
"""

from siirl.engine.rollout import hf, sglang_engine, vllm_engine  # noqa: F401  (registration side effects)
from siirl.engine.rollout.base import ROLLOUT_ENGINES, RolloutEngine, make_rollout_engine
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.engine.rollout.sampling import SamplingParams

__all__ = [
    "ROLLOUT_ENGINES",
    "HFRolloutEngine",
    "RolloutEngine",
    "SamplingParams",
    "make_rollout_engine",
]
