"""Which consumer dp rank receives which sample: a pure function of the producers' metadata.

Every producer and every consumer evaluates it on the same metadata and gets the same answer, so no
process has to decide for the others and no assignment is ever sent around.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from hashlib import blake2b

import numpy as np
from tensordict import TensorDictBase

from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.native import group_balanced_partitions

#: Keys of samples without a uid have the top bit set, so they can never equal a uid's key.
_LONE_SAMPLE = np.uint64(1 << 63)
_KEY_BITS = (1 << 63) - 1


def uid_keys(uids: Sequence[Hashable]) -> np.ndarray:
    """A stable 63-bit key per uid: the same in every process, unlike ``hash()``, and 8 bytes on the wire.

    Each distinct uid is hashed once (a GRPO batch repeats every uid once per response).
    """
    texts = [repr(u) for u in uids]
    distinct = dict.fromkeys(texts)
    for text in distinct:
        distinct[text] = int.from_bytes(blake2b(text.encode(), digest_size=8).digest(), "little") & _KEY_BITS
    return np.fromiter((distinct[t] for t in texts), dtype=np.uint64, count=len(texts))


@dataclass
class ProducerMeta:
    """What a producer tells the buffers about its shard: enough to plan, none of the data."""

    producer_rank: int
    node_id: str
    #: Group key per sample: samples with equal keys (same uid) stay on one consumer.
    group_keys: np.ndarray
    #: Token workload per sample.
    lengths: np.ndarray

    @property
    def num_samples(self) -> int:
        return len(self.lengths)


def describe_shard(
    batch: TensorDictBase,
    producer_rank: int,
    node_id: str,
    group_key: str = "uid",
    length_key: str = "attention_mask",
) -> ProducerMeta:
    """Metadata of a shard: groups from the ``group_key`` field, lengths from row sums of ``length_key``.

    Without ``group_key`` every sample is its own group; without ``length_key`` every sample weighs 1.
    """
    n = batch.batch_size[0]
    if batch.get(group_key, None) is not None:
        keys = uid_keys(non_tensor_list(batch, group_key))
    else:
        keys = _LONE_SAMPLE | (np.uint64(producer_rank) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    mask = batch.get(length_key, None)
    if mask is not None:
        lengths = mask.reshape(n, -1).sum(dim=-1).cpu().numpy().astype(np.int64)
    else:
        lengths = np.ones(n, dtype=np.int64)
    return ProducerMeta(producer_rank, node_id, keys, lengths)


def assign_samples(metas: Sequence[ProducerMeta], num_consumers: int, balance: bool = True) -> list[np.ndarray]:
    """Global sample indices (producers in rank order, samples in shard order) per consumer dp rank.

    ``balance`` (verl's ``trainer.balance_batch``): ``group_balanced_partitions`` balances the token loads of
    whole groups. It is handed one entry per group (its summed tokens) rather than one per sample: the same
    partition problem, numbered by sorted key so every process builds identical input, at a fraction of the
    cost on 64k samples. Off, the groups are dealt out in order, a contiguous run per consumer, as verl
    splits an unbalanced batch. Each consumer's indices come out ascending, which fixes the order of its batch.
    """
    ordered = sorted(metas, key=lambda m: m.producer_rank)
    ranks = [m.producer_rank for m in ordered]
    if ranks != list(range(len(ordered))):
        raise ValueError(f"producer ranks must be exactly 0..{len(ordered) - 1}, got {ranks}")
    keys, group_of_sample = np.unique(np.concatenate([m.group_keys for m in ordered]), return_inverse=True)
    if len(keys) < num_consumers:
        raise ValueError(f"{len(keys)} sample groups cannot be spread over {num_consumers} consumer dp ranks")
    if balance:
        group_tokens = np.bincount(group_of_sample, weights=np.concatenate([m.lengths for m in ordered]))
        parts = group_balanced_partitions(
            group_tokens.astype(np.int64), np.arange(len(keys)), num_consumers, workload="tokens"
        )
    else:
        parts = np.array_split(_groups_in_order(group_of_sample, len(keys)), num_consumers)
    consumer_of_group = np.empty(len(keys), dtype=np.int64)
    for consumer, groups in enumerate(parts):
        consumer_of_group[groups] = consumer
    consumer_of_sample = consumer_of_group[group_of_sample]
    return [np.flatnonzero(consumer_of_sample == c) for c in range(num_consumers)]


def _groups_in_order(group_of_sample: np.ndarray, num_groups: int) -> np.ndarray:
    """Group numbers ordered by their first sample (producer rank, then shard order)."""
    first = np.full(num_groups, len(group_of_sample), dtype=np.int64)
    np.minimum.at(first, group_of_sample, np.arange(len(group_of_sample)))
    return np.argsort(first, kind="stable")


def _offsets(metas: Sequence[ProducerMeta]) -> np.ndarray:
    """Global index of each producer's first sample (producers in rank order), plus the total."""
    counts = [m.num_samples for m in sorted(metas, key=lambda m: m.producer_rank)]
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def rows_by_producer(metas: Sequence[ProducerMeta], part: np.ndarray) -> list[np.ndarray]:
    """For one consumer (its global sample indices ``part``): the local row indices it takes from each
    producer, producers in rank order."""
    offsets = _offsets(metas)
    return [part[(part >= offsets[r]) & (part < offsets[r + 1])] - offsets[r] for r in range(len(metas))]
