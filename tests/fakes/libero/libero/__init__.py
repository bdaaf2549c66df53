"""Fake ``libero.libero``: ``get_libero_path`` as in LIBERO (keys: bddl_files, init_states, ...)."""

import os

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_data")
_PATHS = {"benchmark_root": _ROOT, "bddl_files": os.path.join(_ROOT, "bddl_files"),
          "init_states": os.path.join(_ROOT, "init_files"), "datasets": os.path.join(_ROOT, "datasets")}

CALLS: list = []


def get_libero_path(query_key):
    if query_key not in _PATHS:
        raise KeyError(f"{query_key} is not a valid key")
    return _PATHS[query_key]
