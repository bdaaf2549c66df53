"""User reward functions loaded from a Python file (config ``custom_reward_function.path`` + ``name``).

The loaded function is wrapped in ``FileRewardFunction``, which pickles as (path, name, kwargs) and
re-loads the file on the other side: a module executed from a file path is not importable by name, so
plain pickling would fail in the parallel manager's worker processes (``siirl.user_files`` runs the file
once per process).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

from siirl.errors import ConfigError
from siirl.params.algorithm import CustomRewardFunctionConfig
from siirl.user_files import load_from_user_file


def _load_function(path: str, name: str) -> Callable[..., Any]:
    fn = load_from_user_file(path, name, "custom_reward_function")
    if not callable(fn):
        raise ConfigError(
            f"custom_reward_function.name: {name!r} in {path} is not callable ({type(fn).__name__})"
        )
    return fn


class FileRewardFunction:
    """A reward function defined in a user file; extra ``kwargs`` are passed on every call."""

    def __init__(self, path: str, name: str = "compute_score", kwargs: Mapping[str, Any] | None = None):
        self.path = os.path.abspath(os.path.expanduser(path)) if path else path
        self.name = name
        self.kwargs = dict(kwargs or {})
        self._fn = _load_function(self.path, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **{**self.kwargs, **kwargs})

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "kwargs": self.kwargs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["name"], state["kwargs"])

    def __repr__(self) -> str:
        return f"FileRewardFunction({self.path!r}, {self.name!r})"


def load_custom_reward_fn(
    path: str, name: str = "compute_score", kwargs: Mapping[str, Any] | None = None
) -> FileRewardFunction:
    """Load ``name`` from the Python file ``path``; errors are one-line ``ConfigError`` (a ValueError)."""
    return FileRewardFunction(path, name, kwargs)


#: How each reward manager calls the score function: per sample with four positional arguments, or the batch
#: manager once per batch with keywords (``**reward_kwargs`` ride along either way).
_BATCH_CALL = {"data_sources": [], "solution_strs": [], "ground_truths": [], "extra_infos": []}
_SAMPLE_CALL = ("data_source", "solution_str", "ground_truth", {})


def check_call_signature(fn: FileRewardFunction, manager: str) -> None:
    """The function accepts the call ``manager`` makes (checked before Ray: a wrong signature would otherwise
    fail every sample of the first step, inside the workers)."""
    try:
        signature = inspect.signature(fn._fn)
    except (TypeError, ValueError):  # a builtin or C callable without a readable signature: called as is
        return
    batched = manager == "batch"
    try:
        if batched:
            signature.bind(**_BATCH_CALL, **fn.kwargs)
        else:
            signature.bind(*_SAMPLE_CALL, **fn.kwargs)
    except TypeError as exc:
        call = (
            "compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=, **reward_kwargs)" if batched
            else "compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)"
        )
        raise ConfigError(
            f"custom_reward_function.name: {fn.name}{signature} in {fn.path} cannot take the {manager} reward "
            f"manager's call {call}: {exc}"
        ) from None


def custom_reward_fn_from_config(config: CustomRewardFunctionConfig) -> FileRewardFunction | None:
    """The function the ``custom_reward_function`` section names, or None when its ``path`` is unset."""
    if not config.path:
        return None
    return load_custom_reward_fn(config.path, config.name or "compute_score", config.reward_kwargs)
