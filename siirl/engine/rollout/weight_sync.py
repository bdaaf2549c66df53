"""The memory order around a weight sync: an engine's weights come back before the sync, its KV cache only
before generation. How the weights travel is ``siirl.device.weight_sync``'s business."""

from __future__ import annotations

from collections.abc import Callable


class StagedMemory:
    """Which parts of an engine's device memory are released, and the order they come back in.

    Weights come back first (the sync writes into them while the trainer still holds its memory); the
    KV cache, the big allocation, only right before generation. ``resume(parts)`` is the engine's call
    that brings back the listed parts (None: everything).
    """

    WEIGHTS, KV_CACHE = "weights", "kv_cache"

    def __init__(self, resume: Callable[[list[str] | None], None], staged: bool) -> None:
        self._resume = resume
        #: Whether the engine can resume parts separately (older releases resume all at once).
        self.staged = staged
        self.released: set[str] = set()

    def mark_released(self) -> None:
        self.released = {self.WEIGHTS, self.KV_CACHE}

    def ensure(self, part: str) -> None:
        """Bring back ``part`` (and, without staging, everything) if it is released."""
        if part not in self.released:
            return
        if self.staged:
            self._resume([part])
            self.released.discard(part)
        else:
            self._resume(None)
            self.released.clear()
