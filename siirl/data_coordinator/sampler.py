"""Which rows each data-parallel rank reads in each epoch.

Every rank draws the same permutation (seeded by ``seed`` and the epoch), cuts it into global batches
and takes its own slice of each. Slices of one global batch are disjoint and together are the batch a
single-process loader would have produced, so a step sees the same prompts whatever the dp size.
With ``data.sampler`` the user's sampler draws each epoch's order instead (``custom_sampler.UserSampler``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ShardedBatchSampler:
    """Positions (into the kept rows) of the batches of one rank, per epoch."""

    def __init__(
        self,
        num_rows: int,
        dp_rank: int,
        dp_size: int,
        global_batch_size: int | None,
        shuffle: bool,
        seed: int,
        drop_last: bool,
        custom: Any = None,
    ) -> None:
        self.num_rows = num_rows
        self.dp_rank = dp_rank
        self.dp_size = dp_size
        self.global_batch_size = num_rows if global_batch_size is None else global_batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.custom = custom
        #: ``(epoch, order)`` of the user's sampler: drawn once per epoch (it may change between epochs).
        self.drawn: tuple[int, np.ndarray] | None = None

    @property
    def epoch_size(self) -> int:
        """Rows one epoch yields (the user's sampler may yield more or fewer than there are rows)."""
        return self.num_rows if self.custom is None else self.custom.num_samples

    def order(self, epoch: int) -> np.ndarray:
        """The global row order of ``epoch``: identical on every rank."""
        if self.custom is not None:
            if self.drawn is None or self.drawn[0] != epoch:
                self.drawn = (epoch, self.custom.order(epoch))
            return self.drawn[1]
        if not self.shuffle:
            return np.arange(self.num_rows, dtype=np.int64)
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_rows).astype(np.int64)

    def batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches of ``epoch``; a partial last global batch is kept unless ``drop_last``."""
        order = self.order(epoch)
        size = self.global_batch_size
        full = len(order) // size
        ends = [(b * size, (b + 1) * size) for b in range(full)]
        if not self.drop_last and full * size < len(order):
            ends.append((full * size, len(order)))
        mine = [np.array_split(order[start:end], self.dp_size)[self.dp_rank] for start, end in ends]
        return [batch for batch in mine if len(batch)]
