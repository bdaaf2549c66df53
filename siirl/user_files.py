"""Loading a name from a user's Python file (a reward function, a dataset class), as verl does for
``custom_reward_function.path`` and ``data.custom_cls.path``; every mistake is one ``ConfigError`` line naming
the config key.

The file runs once per process: it is imported under a name derived from its path, so the functions and
classes it defines keep one identity however often they are looked up (the reward manager's worker
processes unpickle a reward function for every call).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from typing import Any

from siirl.errors import ConfigError


def import_user_file(path: str, key: str) -> Any:
    """The module of the Python file ``path`` (``key``: the config key that named it, for errors)."""
    module_name = "siirl_user_file_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{key}: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ConfigError(f"{key}: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def load_from_user_file(path: str, name: str, section: str) -> Any:
    """``name`` as defined in the file ``path`` (``section.path`` / ``section.name`` named them)."""
    key = f"{section}.path"
    if not path:
        raise ConfigError(f"{key} is empty; give the path of a .py file")
    if not os.path.isfile(path):
        raise ConfigError(f"{key}: file not found: {path}")
    if not path.endswith(".py"):
        raise ConfigError(f"{key} must be a .py file, got {path}")
    module = import_user_file(path, key)
    if not hasattr(module, name):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise ConfigError(f"{section}.name: {name!r} not found in {path} (callables there: {defined})")
    return getattr(module, name)
