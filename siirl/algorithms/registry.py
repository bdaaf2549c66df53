"""The config reader shared by every algorithm family."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["config_value"]


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """Read ``key`` from a mapping (dict, OmegaConf DictConfig) or an attribute object (dataclass).

    A missing key or an explicit ``None`` gives ``default``, so partially filled configs work.
    """
    if config is None:
        return default
    value = config.get(key, None) if isinstance(config, Mapping) else getattr(config, key, None)
    return default if value is None else value
