"""What a warm DAG worker forgets between two jobs: the user code the last job imported.

A pooled worker process (``siirl.worker_pool``) runs job after job. The library, torch and transformers
stay imported (that is the point), but user modules (custom pipelines, rewards, estimators, tools) must
be read afresh by the next job, exactly as a new process would: another job may bring a different module
under the same name, or register a different function under the same registry name.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
from pathlib import Path

import siirl
from siirl.registry import forget_entries_of

#: Where library code lives: anything imported from elsewhere is the user's.
_LIBRARY_ROOTS = tuple(
    str(Path(p).resolve())
    for p in {*(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
              *siirl.__path__}
)


def _is_user_module(module: object) -> bool:
    path = getattr(module, "__file__", None)  # torch.ops and the like carry a bare file name: not user code
    return bool(path) and os.path.isabs(path) and not str(Path(path).resolve()).startswith(_LIBRARY_ROOTS)


def user_modules() -> list[str]:
    """Names of the imported modules that live outside the library roots (stdlib, site-packages, siirl)."""
    return sorted(name for name, module in list(sys.modules.items()) if _is_user_module(module))


def forget_modules(names: list[str]) -> None:
    """Drop ``names`` from ``sys.modules`` and their entries from every registry."""
    for name in names:
        sys.modules.pop(name, None)
    forget_entries_of(set(names))
    importlib.invalidate_caches()


def forget_user_code() -> None:
    forget_modules(user_modules())
