"""The memory order around a weight sync: an engine's weights come back before the sync, its KV cache only
before generation. How the weights travel is ``siirl.device.weight_sync``'s business."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class StagedMemory:
    """Which parts of an engine's device memory are released, and the order they come back in.

    Weights come back first (the sync writes into them while the trainer still holds its memory); the
    KV cache, the big allocation, only right before generation.
    """

    WEIGHTS, KV_CACHE = "weights", "kv_cache"

    def __init__(self, resume: Callable[..., Any], staged: bool, release: Callable[[], Any] | None = None) -> None:
        """``resume``: the engine's call that brings memory back, all of it without arguments, the parts named
        by ``tags=[...]`` where ``staged``; ``release``: its call that frees it (None: it keeps its memory)."""
        self._resume, self._release = resume, release
        #: Whether the engine can resume parts separately (older releases resume all at once).
        self.staged = staged
        self.released: set[str] = set()

    def release(self) -> None:
        """Free the engine's memory while the trainer uses the device, once, where the engine can."""
        if self._release is not None and not self.released:
            self._release()
            self.released = {self.WEIGHTS, self.KV_CACHE}

    def ensure(self, part: str) -> None:
        """Bring back ``part`` (and, without staging, everything) if it is released."""
        if part not in self.released:
            return
        if self.staged:
            self._resume(tags=[part])
            self.released.discard(part)
        else:
            self._resume()
            self.released.clear()
