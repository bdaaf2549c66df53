"""verl's ``ray_kwargs``: ``ray_init`` holds the keyword arguments of ``ray.init`` (``num_cpus``, ``num_gpus``,
``runtime_env``, ...), passed on as verl passes them (``siirl.cluster.ray_init_options``).

verl's launch scripts run Ray's workers under uv (``ray_init.runtime_env.py_executable="uv run ..."``). siiRL's
DAG workers run the interpreter that launched siiRL, the one siiRL is installed in, so the key is dropped when
the config loads, with one warning when it names another interpreter.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, open_dict

logger = logging.getLogger(__name__)

PY_EXECUTABLE_KEY = "ray_kwargs.ray_init.runtime_env.py_executable"


@dataclass
class RayKwargsConfig:
    #: Keyword arguments of ``ray.init`` for a Ray the job starts or joins, as in verl; ``runtime_env`` is
    #: merged over the one siiRL gives the workers (its ``env_vars`` key by key).
    ray_init: dict[str, Any] = field(default_factory=dict)


def drop_py_executable(cfg: DictConfig) -> None:
    """Remove ``runtime_env.py_executable`` (verl's uv launcher and its ``null`` opt-out), warning once when it
    asks for an interpreter other than this one."""
    runtime_env = cfg.ray_kwargs.ray_init.get("runtime_env")
    if not isinstance(runtime_env, DictConfig) or "py_executable" not in runtime_env:
        return
    wanted = runtime_env.py_executable
    if wanted is not None and str(wanted) != sys.executable:
        logger.warning(
            "%s=%r is not applied: siiRL's DAG workers run the interpreter siiRL was launched with (%s); "
            "install siiRL in the environment you want and launch it from there",
            PY_EXECUTABLE_KEY, str(wanted), sys.executable,
        )
    with open_dict(runtime_env):
        del runtime_env["py_executable"]
