"""Start-up without garbage-collecting the same objects over and over.

Importing torch, transformers and siiRL's engines creates most of a million objects that live as long as the
process. The cyclic collector, triggered by allocation counts, scans them again and again while they are
created (about a fifth of the import time on a DAG worker or the launcher) and once more when the interpreter
exits (seconds for the launcher). A process that owns its start-up pauses the collector while it imports and
sets up, then freezes what it built (``gc.freeze``: later collections skip it) and collects as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_paused = False


def pause() -> None:
    """Stop collecting until ``settle`` (the launcher's process entry: its whole start-up)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def settle() -> None:
    """End a ``pause``: freeze what start-up built and collect again (no-op where nothing was paused)."""
    global _paused
    if _paused:
        gc.freeze()
        gc.enable()
        _paused = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """A block of heavy imports; where the collector ran, what they built is frozen afterwards."""
    if not gc.isenabled():  # inside a pause already: its owner settles
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
