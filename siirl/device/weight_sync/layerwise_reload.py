"""Loading into an engine that re-processes a layer per reload call (vLLM's in-place ``reload_weights``): a layer
split across two calls is processed from half its tensors, so whole layers go together."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from siirl.device.weight_sync.buckets import LayerOf, NamedTensors


class LayerwiseReload:
    """``load(bucket)`` for an engine that re-processes a layer per reload call (``reload``: one call over a
    list of tensors). Whatever layer ends a bucket may continue in the next, so it waits (copied: transports
    reuse their receive buffers) and goes with the next bucket; ``finish()`` sends the rest and runs
    ``after`` (re-packing tied weights) once per sync."""

    def __init__(self, reload: Callable[[NamedTensors], Any], layer_of: LayerOf, after: Callable[[], Any]) -> None:
        self.reload, self.layer_of, self.after = reload, layer_of, after
        self.pending: NamedTensors = []

    def __call__(self, bucket: Iterable[tuple[str, torch.Tensor]]) -> None:
        tensors = self.pending + list(bucket)
        if not tensors:
            return
        last = self.layer_of(tensors[-1][0])
        cut = len(tensors)
        while cut and self.layer_of(tensors[cut - 1][0]) == last:
            cut -= 1
        self.pending = [(name, tensor.clone()) for name, tensor in tensors[cut:]]
        if cut:
            self.reload(tensors[:cut])

    def finish(self) -> None:
        if self.pending:
            self.reload(self.pending)
            self.pending = []
        self.after()
