"""``vllm.engine.arg_utils.EngineArgs``: every argument ``LLM(...)`` takes, as dataclass fields with vLLM's
defaults (callers probe it for arguments that only newer releases have, such as ``logprobs_mode``)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from vllm.llm import ENGINE_ARGS, LLM

_EXPLICIT = {
    name: param.default
    for name, param in inspect.signature(LLM.__init__).parameters.items()
    if param.kind is inspect.Parameter.KEYWORD_ONLY
}

_DEFAULTS = {**_EXPLICIT, **ENGINE_ARGS}
EngineArgs = dataclasses.make_dataclass(
    "EngineArgs", [("model", str), *((name, Any, dataclasses.field(default=v)) for name, v in _DEFAULTS.items())]
)
