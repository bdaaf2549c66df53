"""The per-worker prompt loader: each DAG worker reads, tokenizes and batches only its own shard.

There is no central loader feeding workers: every worker builds a ``DistributedDataLoader`` for its
rollout dp rank, all ranks agree on the row order through a shared seed, and each reads only the rows
(and row groups) of its slices. The loader is resumable mid-epoch via ``state_dict``.

Over-long prompts must be dropped identically everywhere before the order is drawn. Given a ``ScanShare``
(the DAG workers pass one over their process group), each worker tokenizes only a 1/size slice of the
rows to find them and the workers exchange the (few) over-long row ids; without one, a single process
scans everything.
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from tensordict import TensorDict

from siirl.data_coordinator.custom_dataset import build_dataset, dataset_class, item_tensors
from siirl.data_coordinator.custom_sampler import RowsView, UserSampler, order_digest, sampler_class
from siirl.data_coordinator.errors import DataError, EmptyDatasetError
from siirl.data_coordinator.images import ImagePrompts, image_list
from siirl.data_coordinator.parquet_source import ParquetRows
from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.sampler import ShardedBatchSampler
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.params.data import DataConfig

logger = logging.getLogger(__name__)

STATE_KEYS = ("epoch", "position", "num_rows", "global_batch_size")
#: Prompt token counts of recent scans of text rows: planning the same data again in one process (a sweep,
#: a notebook, the driver's check and then a local run) reads and tokenizes it once.
_COUNTED: OrderedDict[tuple, np.ndarray] = OrderedDict()
_COUNTED_KEPT = 8
#: ``extra_info`` fields carried as their own columns with ``data.return_raw_chat`` (verl's names).
CHAT_EXTRA_FIELDS = ("tools_kwargs", "interaction_kwargs")
#: verl's column naming the agent loop each row runs (siirl.agent_loops), carried with ``data.return_raw_chat``.
AGENT_NAME = "agent_name"
#: Rows the launcher scans for over-long prompts before Ray starts; beyond it the DAG workers find them (its time
#: and memory stay those of a small dataset: the driver holds no data).
PREFLIGHT_SCAN_ROWS = 8192


@dataclass(frozen=True)
class ScanShare:
    """This process's part in the over-long-prompt scan: it scans slice ``rank`` of ``size`` equal row
    slices; ``gather`` collects every participant's over-long row ids (in rank order)."""

    rank: int
    size: int
    gather: Callable[[np.ndarray], list[np.ndarray]]


def preview_scan(num_rows: int, limit: int) -> ScanShare | None:
    """The driver's look at a large dataset before Ray starts: it scans only the first of
    ``ceil(num_rows / limit)`` slices (about ``limit`` rows), so its time and memory do not grow with the
    dataset; the DAG workers scan every row between them. None (scan all) when the dataset is small."""
    slices = -(-num_rows // limit)
    return None if slices <= 1 else ScanShare(0, slices, lambda ids: [ids])


def dist_scan_share(group: Any = None) -> ScanShare | None:
    """A ``ScanShare`` over a torch.distributed group (all its ranks build their loaders together), or
    ``None`` outside torch.distributed."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None

    def gather(ids: np.ndarray) -> list[np.ndarray]:
        out: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(out, ids, group=group)
        return out

    return ScanShare(dist.get_rank(group), dist.get_world_size(group), gather)


class DistributedDataLoader:
    """Yields ``TensorDict`` prompt batches of one dp rank: ``input_ids``, ``attention_mask``,
    ``position_ids`` (left-padded to ``max_prompt_length``) and non-tensor ``data_source``,
    ``ground_truth``, ``index`` and, with ``data.return_raw_chat``, ``raw_prompt`` plus the rows'
    ``extra_info.tools_kwargs`` / ``extra_info.interaction_kwargs`` (``{}`` where absent) and the
    ``agent_name`` column where rows have one, as verl does. With an ``image_processor`` (a vision policy), ``data.image_key`` images expand their ``<image>``
    placeholders and each row carries verl's ``multi_modal_inputs`` (``pixel_values``, ``image_grid_thw``)
    and ``multi_modal_data`` (the decoded images, for vLLM).

    ``global_batch_size`` prompts per step are split over the ``dp_size`` ranks (``None``: the whole
    dataset is one global batch). Iterating runs the rest of the current epoch, then moves to the next.
    """

    def __init__(
        self,
        files: Sequence[str],
        tokenizer: Any,
        config: DataConfig,
        *,
        dp_rank: int,
        dp_size: int,
        global_batch_size: int | None,
        shuffle: bool,
        drop_last: bool,
        scan: ScanShare | None = None,
        image_processor: Any = None,
        user_sampler: bool = False,
    ) -> None:
        if dp_size < 1 or not 0 <= dp_rank < dp_size:
            raise DataError(f"dp_rank must be in [0, dp_size), got dp_rank={dp_rank}, dp_size={dp_size}")
        if global_batch_size is not None and global_batch_size < dp_size:
            raise DataError(
                f"a batch of {global_batch_size} prompts cannot give each of {dp_size} dp ranks one"
            )
        self._config = config
        self._files = list(files)
        cls = dataset_class(config)
        #: ``data.custom_cls``: the user's dataset supplies the rows (and filters them), else the parquet files.
        self._dataset = build_dataset(cls, self._files, tokenizer, config) if cls is not None else None
        self._rows = ParquetRows(self._files, [config.prompt_key]) if cls is None else None
        self._images = (
            ImagePrompts(image_processor, config.image_patch_size) if image_processor is not None else None
        )
        self._encoder = PromptEncoder(
            tokenizer,
            config.max_prompt_length,
            config.truncation,
            config.apply_chat_template,
            config.apply_chat_template_kwargs,
            images=self._images,
        )
        self._media = [config.image_key, config.video_key]
        self._columns = [
            config.prompt_key, config.reward_fn_key, "reward_model", "extra_info", AGENT_NAME, *self._media
        ]
        self._kept, self.num_filtered = self._scan(dp_rank, scan)
        num_rows = len(self._kept)
        if num_rows == 0:
            raise EmptyDatasetError(
                f"no rows left in {', '.join(self._files)} after filtering over-long prompts"
            )
        if num_rows < dp_size:
            raise EmptyDatasetError(
                f"{num_rows} rows in {', '.join(self._files)} cannot feed {dp_size} dp ranks"
            )
        cls = sampler_class(config) if user_sampler else None
        #: ``data.sampler``: the user's sampler orders the rows (the custom dataset's, else the kept parquet rows).
        custom = None if cls is None else UserSampler(
            cls, self._dataset if self._dataset is not None else RowsView(self._rows, self._kept, self._columns), config
        )
        self._sampler = ShardedBatchSampler(
            num_rows, dp_rank, dp_size, global_batch_size, shuffle, config.seed, drop_last, custom
        )
        if len(self) == 0:
            raise EmptyDatasetError(
                f"{num_rows} rows in {', '.join(self._files)} are fewer than one batch of {global_batch_size}"
            )
        self._epoch = 0
        self._position = 0

    def _image_sizes(self, rows: list[dict], describe: Callable[[int], str]) -> list | None:
        """Per row, its images' sizes (files checked), or ``None`` for a text policy; refuses videos, and
        images a text policy cannot see."""
        image_key, video_key = self._media
        for i, row in enumerate(rows):
            if image_list(row.get(video_key), describe(i)):
                raise DataError(f"{describe(i)}: has videos (data.video_key={video_key}); video input is not supported")
            if self._images is None and image_list(row.get(image_key), describe(i)):
                raise DataError(
                    f"{describe(i)}: has images (data.image_key={image_key}) but the policy model has no vision "
                    "tower / image processor"
                )
        if self._images is None:
            return None
        return [self._images.sizes(row.get(image_key), describe(i)) for i, row in enumerate(rows)]

    def _too_long(self, start: int, end: int) -> np.ndarray:
        """Row ids in ``[start, end)`` whose rendered prompt (images expanded) exceeds ``max_prompt_length``
        tokens; every image file is checked on the way."""
        if self._images is None:  # text rows: the same files and tokenizer counted before count the same
            key = (self._rows.identity(), self._config.prompt_key, start, end, self._encoder.text_identity())
            lengths = _COUNTED.get(key)
            if lengths is None:
                lengths = _COUNTED[key] = self._lengths(start, end)
                while len(_COUNTED) > _COUNTED_KEPT:
                    _COUNTED.popitem(last=False)
        else:
            lengths = self._lengths(start, end)
        return (start + np.flatnonzero(lengths > self._encoder.max_prompt_length)).astype(np.int64)

    def _lengths(self, start: int, end: int) -> np.ndarray:
        """Token count of each row's rendered prompt in ``[start, end)``, in row order."""
        counted = [np.zeros(0, dtype=np.int64)]
        prompt_key = self._config.prompt_key
        for first, columns in self._rows.iter_columns([prompt_key, *self._media], start, end):
            describe = lambda i, o=first: self._rows.describe(o + i)
            rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
            sizes = self._image_sizes(rows, describe)
            counted.append(self._encoder.lengths(columns[prompt_key], describe, sizes))
        return np.concatenate(counted)

    def _scan(self, dp_rank: int, scan: ScanShare | None) -> tuple[np.ndarray, int]:
        """Kept row ids and the number filtered; over-long prompts are found before training starts,
        each process tokenizing only its ``scan`` slice of the rows."""
        if self._dataset is not None:
            return np.arange(len(self._dataset), dtype=np.int64), 0
        all_rows = np.arange(self._rows.num_rows, dtype=np.int64)
        # Image rows are always scanned: a missing or broken file must fail before training starts.
        if not self._config.filter_overlong_prompts and self._encoder.truncation != "error" and not self._images:
            return all_rows, 0
        if scan is None or scan.size == 1:
            too_long = self._too_long(0, len(all_rows))
        else:
            bounds = np.linspace(0, len(all_rows), scan.size + 1).astype(np.int64)
            mine = self._too_long(int(bounds[scan.rank]), int(bounds[scan.rank + 1]))
            too_long = np.sort(np.concatenate(scan.gather(mine)))
        if not self._config.filter_overlong_prompts:
            if len(too_long) and self._encoder.truncation == "error":
                first = int(too_long[0])
                row = self._rows.read([first], [self._config.prompt_key, *self._media])
                describe = lambda i: self._rows.describe(first)
                sizes = self._image_sizes(row, describe)
                length = int(self._encoder.lengths([row[0].get(self._config.prompt_key)], describe, sizes)[0])
                raise self._encoder.too_long_error(self._rows.describe(first), length)
            return all_rows, 0
        num_filtered = len(too_long)
        if num_filtered and dp_rank == 0:
            logger.info(
                "filtered %d of %d prompts longer than data.max_prompt_length=%d",
                num_filtered,
                len(all_rows),
                self._encoder.max_prompt_length,
            )
        keep = np.ones(len(all_rows), dtype=bool)
        keep[too_long] = False
        return all_rows[keep], num_filtered

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def batch_size_per_rank(self) -> int:
        """Prompts in a full batch of this rank (the last batch may be smaller without ``drop_last``)."""
        sampler = self._sampler
        return len(np.array_split(np.arange(sampler.global_batch_size), sampler.dp_size)[sampler.dp_rank])

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        s = self._sampler
        full, rest = divmod(s.epoch_size, s.global_batch_size)
        rest_mine = rest // s.dp_size + (1 if s.dp_rank < rest % s.dp_size else 0)
        return full + (1 if rest_mine and not s.drop_last else 0)

    def row_ids(self, epoch: int) -> np.ndarray:
        """Parquet row ids in the order this rank reads them in ``epoch`` (filtered and shuffled), so another
        trainer can be fed exactly the prompts of each of this loader's batches."""
        batches = self._sampler.batches(epoch)
        return self._kept[np.concatenate(batches)] if batches else np.zeros(0, dtype=np.int64)

    def __iter__(self) -> Iterator[TensorDict]:
        epoch, start = self._epoch, self._position
        todo = self._sampler.batches(epoch)[start:]
        row_ids = self._kept[np.concatenate(todo)] if todo else np.zeros(0, dtype=np.int64)
        # One columnar read of this rank's rows for the epoch; Python objects exist one batch at a time.
        table = self._rows.read_table(row_ids, self._columns) if self._dataset is None else None
        offset = 0
        for i, positions in enumerate(todo):
            end = offset + len(positions)
            if table is None:
                batch = self._dataset_batch(row_ids[offset:end])
            else:
                batch = self._make_batch(table.slice(offset, end - offset).to_pylist(), row_ids[offset:end])
            offset = end
            self._position = start + i + 1
            yield batch
        self._epoch, self._position = epoch + 1, 0

    def peek(self) -> TensorDict:
        """The next batch, reading only its rows and without advancing: the launcher's look at the data, whose
        memory must not grow with the dataset (iterating reads a rank's whole epoch at once)."""
        row_ids = self._kept[self._sampler.batches(self._epoch)[self._position]]
        if self._dataset is not None:
            return self._dataset_batch(row_ids)
        return self._make_batch(self._rows.read(row_ids, self._columns), row_ids)

    def _make_batch(self, rows: list[dict], row_ids: np.ndarray) -> TensorDict:
        prompts = [row.get(self._config.prompt_key) for row in rows]
        describe = lambda i: self._rows.describe(int(row_ids[i]))
        tensors = self._encoder.encode(prompts, describe, self._image_sizes(rows, describe))
        batch = TensorDict(tensors, batch_size=[len(rows)])
        if self._images is not None:
            image_key = self._config.image_key
            inputs, data = zip(*(self._images.row_inputs(row.get(image_key), describe(i)) for i, row in enumerate(rows)))
            set_non_tensor_list(batch, "multi_modal_inputs", list(inputs))
            set_non_tensor_list(batch, "multi_modal_data", list(data))
        return self._with_row_fields(batch, rows, row_ids, prompts)

    def _dataset_batch(self, row_ids: np.ndarray) -> TensorDict:
        """A batch of ``data.custom_cls`` items: verl's items carry the row's columns next to their tensors."""
        items = [self._dataset[int(r)] for r in row_ids]
        tensors = item_tensors(items, row_ids, self._config, type(self._dataset).__name__)
        batch = TensorDict(tensors, batch_size=[len(items)])
        return self._with_row_fields(batch, items, row_ids, [item.get("raw_prompt") for item in items])

    def _with_row_fields(
        self, batch: TensorDict, rows: list[dict], row_ids: np.ndarray, prompts: list
    ) -> TensorDict:
        """The non-tensor fields every batch carries (reward inputs, index, raw chat)."""
        set_non_tensor_list(batch, "data_source", [row.get(self._config.reward_fn_key) for row in rows])
        set_non_tensor_list(
            batch, "ground_truth", [(row.get("reward_model") or {}).get("ground_truth") for row in rows]
        )
        # the row's extra_info, as verl hands it to the score function (fn(data_source, solution, truth, extra_info))
        extra_infos = [dict(row.get("extra_info") or {}) for row in rows]
        set_non_tensor_list(batch, "extra_info", extra_infos)
        indices = [extra.get("index") for extra in extra_infos]
        set_non_tensor_list(batch, "index", [int(r) if i is None else i for i, r in zip(indices, row_ids)])
        if self._config.return_raw_chat:
            set_non_tensor_list(batch, "raw_prompt", prompts)
            for key in CHAT_EXTRA_FIELDS:  # what a multi-turn rollout needs of the row besides its chat
                set_non_tensor_list(batch, key, [extra.get(key) or {} for extra in extra_infos])
            agent_names = [row.get(AGENT_NAME) for row in rows]
            if any(agent_names):
                set_non_tensor_list(batch, AGENT_NAME, agent_names)
        return batch

    @property
    def user_sampler(self) -> UserSampler | None:
        """The ``data.sampler`` instance of this worker (None: siiRL's seeded shuffle)."""
        return self._sampler.custom

    def order_digest(self) -> int:
        """Checksum of the current epoch's global order: the workers compare theirs (``data.sampler``)."""
        return order_digest(self._sampler.order(self._epoch))

    def state_dict(self) -> dict[str, Any]:
        """Epoch and batches consumed in it; independent of the dp size (positions count global batches).
        With ``data.sampler``: also the current epoch's drawn order and the sampler's own state."""
        state = {
            "epoch": self._epoch,
            "position": self._position,
            "num_rows": self._sampler.num_rows,
            "global_batch_size": self._sampler.global_batch_size,
        }
        if self.user_sampler is not None:
            state["user_sampler"] = self.user_sampler.state_dict(self._sampler.drawn)
        return state

    def load_state_dict(self, state: dict[str, int]) -> None:
        missing = [key for key in STATE_KEYS if key not in state]
        if missing:
            raise DataError(f"dataloader state lacks {missing[0]!r} (expected keys {', '.join(STATE_KEYS)})")
        position = int(state["position"])
        for key in ("num_rows", "global_batch_size"):
            if int(state[key]) != self.state_dict()[key] and (key == "num_rows" or self.user_sampler is not None):
                raise DataError(
                    f"dataloader state was saved with {key}={state[key]}, this loader has {self.state_dict()[key]}"
                )
        saved_batch = int(state["global_batch_size"])
        saved_batches = -(-self._sampler.epoch_size // saved_batch)
        if not 0 <= position <= (len(self) if saved_batch == self._sampler.global_batch_size else saved_batches):
            raise DataError(f"dataloader state position {state['position']} is outside [0, {len(self)}]")
        if saved_batch != self._sampler.global_batch_size:
            position = self._rebatch(int(state["epoch"]), position, saved_batch)
        self._epoch, self._position = int(state["epoch"]), position
        if self.user_sampler is not None and "user_sampler" in state:
            self._sampler.drawn = self.user_sampler.load_state_dict(state["user_sampler"])

    def _rebatch(self, epoch: int, position: int, saved_batch: int) -> int:
        """The position in batches of this loader's size where a run saved with ``saved_batch`` prompts per
        batch goes on: the epoch's row order does not depend on the batch size, so the prompts already trained
        stay trained; a batch the new size cuts in two is trained again whole, so nothing is skipped. Said in
        one line (rank 0), with what is trained again."""
        size = self._sampler.global_batch_size
        done = min(position * saved_batch, self._sampler.epoch_size)
        position = min(done // size, len(self))
        again = done - position * size if position < len(self) else 0  # an ended epoch trains nothing again
        if self._sampler.dp_rank == 0:
            logger.warning(
                "resuming with %d prompts per batch (the checkpoint's run took %d): epoch %d goes on after prompt "
                "%d of %d; %s, none skipped",
                size, saved_batch, epoch, position * size, self._sampler.epoch_size,
                f"the {again} prompts after it were trained before the checkpoint and are trained again"
                if again else "nothing is trained twice",
            )
        return position


def build_train_dataloader(
    config: DataConfig, tokenizer: Any, dp_rank: int, dp_size: int, files: Sequence[str] | None = None,
    scan: ScanShare | None = None, image_processor: Any = None, prompts_per_draw: int | None = None,
) -> DistributedDataLoader:
    """Shuffled, ``drop_last`` loader of ``prompts_per_draw`` prompts per batch over all ranks: the run's
    resolved draw (siirl.params.resolved), else ``data.gen_batch_size`` when set (DAPO's group filter then
    fills a train batch from several of them), else ``data.train_batch_size``. That the draw splits evenly
    over the ranks is the plan's rule, checked before Ray (``siirl.preflight.check_batch_sizes``)."""
    files = _split_files(config, "train", files)
    draw = config.prompts_per_generation() if prompts_per_draw is None else prompts_per_draw
    return DistributedDataLoader(
        files, tokenizer, config, dp_rank=dp_rank, dp_size=dp_size, scan=scan, image_processor=image_processor,
        global_batch_size=draw, shuffle=config.shuffle, drop_last=True, user_sampler=True,
    )


def build_val_dataloader(
    config: DataConfig, tokenizer: Any, dp_rank: int, dp_size: int, files: Sequence[str] | None = None,
    scan: ScanShare | None = None, image_processor: Any = None,
) -> DistributedDataLoader:
    """The whole validation set, sharded in file order, nothing dropped (``val_batch_size=-1``: one batch)."""
    files = _split_files(config, "val", files)
    batch = None if config.val_batch_size == -1 else config.val_batch_size
    return DistributedDataLoader(
        files, tokenizer, config, dp_rank=dp_rank, dp_size=dp_size, scan=scan, image_processor=image_processor,
        global_batch_size=batch, shuffle=False, drop_last=False,
    )


def first_batches(
    config: DataConfig, tokenizer: Any, image_processor: Any, dp_size: int, prompts_per_draw: int
) -> Iterator[TensorDict]:
    """Rank 0's first train then val batch, built as the workers build them (row types, over-long prompts,
    rows left after filtering) from about ``PREFLIGHT_SCAN_ROWS`` rows: the driver's look before Ray."""
    train = functools.partial(build_train_dataloader, prompts_per_draw=prompts_per_draw)
    custom = dataset_class(config) is not None  # the user's dataset filters its own rows
    # Every prompt of one batch goes through the encoder (types, truncation=error) as the worker would: the
    # first rows, in file order, which the preview scanned (a shuffled batch would read every row group).
    first_rows = replace(config, shuffle=False)
    for build, files in ((train, config.train_files), (build_val_dataloader, config.val_files)):
        if files:
            rows = None if custom else ParquetRows(files, [config.prompt_key]).num_rows
            scan = None if rows is None else preview_scan(rows, PREFLIGHT_SCAN_ROWS)
            yield build(first_rows, tokenizer, 0, dp_size, scan=scan, image_processor=image_processor).peek()


def _split_files(config: DataConfig, split: str, files: Sequence[str] | None) -> list[str]:
    """The files given, else ``data.<split>_files``; none is an error naming the key."""
    files = list(getattr(config, f"{split}_files") if files is None else files)
    if not files:
        raise DataError(f"data.{split}_files is empty")
    return files
