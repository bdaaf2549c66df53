"""verl's rollout skip (``actor_rollout_ref.rollout.skip.*``): dump each step's rollout, replay it later.

With ``enable``, a step up to ``max_dump_step`` loads its dump when one exists and otherwise generates and
dumps; past it, ``action`` says what runs: ``cache`` (the same as a dump step), ``repeat`` (the first
``max_dump_step`` dumps round-robin) or ``repeat_last`` (the dump of step ``max_dump_step``). A replayed step
trains on the dump's prompts and responses; its loader still advances, as verl's does.

Layout (one file pair per step and rank that rolls out, the plan's layout must match when replaying):
``<dump_dir>/step_<n>/rank_<r>.safetensors`` holds the batch's tensors, ``rank_<r>.json`` its non-tensor
fields (uids, data sources, ground truths, extra info) and the rollout's metrics as JSON. Nothing is unpickled.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tensordict import TensorDict, TensorDictBase, is_non_tensor

from siirl.data_coordinator.tensordict_ops import row_values, set_non_tensor_list
from siirl.errors import SiirlUserError
from siirl.params.model import RolloutSkipConfig

logger = logging.getLogger(__name__)


def dump_root(skip: RolloutSkipConfig) -> Path:
    return Path(os.path.expanduser(str(skip.dump_dir))).absolute()


def source_step(skip: RolloutSkipConfig, step: int) -> int:
    """The step whose dump step ``step`` reads (or writes, when it has none yet)."""
    last = int(skip.max_dump_step)
    if step <= last or skip.action == "cache":
        return step
    if skip.action == "repeat":
        return (step - 1) % last + 1
    return last  # repeat_last


class RolloutDump:
    """One rank's dumps: ``load`` the batch of a step (None when there is none yet), ``save`` one."""

    def __init__(self, skip: RolloutSkipConfig, rank: int) -> None:
        self.skip, self.rank, self.root = skip, rank, dump_root(skip)

    def _paths(self, step: int) -> tuple[Path, Path]:
        folder = self.root / f"step_{source_step(self.skip, step)}"
        return folder / f"rank_{self.rank}.safetensors", folder / f"rank_{self.rank}.json"

    def load(self, step: int) -> tuple[TensorDict, dict[str, float]] | None:
        tensors_path, fields_path = self._paths(step)
        if not (tensors_path.is_file() and fields_path.is_file()):
            return None
        fields = json.loads(fields_path.read_text(encoding="utf-8"))
        batch = TensorDict(load_file(str(tensors_path)), batch_size=[int(fields["rows"])])
        for key, values in fields["non_tensor"].items():
            set_non_tensor_list(batch, key, values)
        logger.info("rollout skip: step %d trains on the dump %s", step, tensors_path.parent)
        return batch, fields.get("metrics", {})

    def save(self, step: int, batch: TensorDict, metrics: dict[str, float]) -> None:
        if source_step(self.skip, step) != step:  # a repeated step reads a dump, it never writes one
            return
        tensors_path, fields_path = self._paths(step)
        nested = [k for k, v in batch.items() if isinstance(v, TensorDictBase) and not is_non_tensor(v)]
        if nested:
            raise SiirlUserError(
                f"actor_rollout_ref.rollout.skip: step {step}'s rollout has nested fields ({', '.join(nested)}), "
                "which the dump does not hold (vision-language inputs); turn the skip off for this run"
            )
        tensors = {k: v.contiguous() for k, v in batch.items() if isinstance(v, torch.Tensor) and not is_non_tensor(v)}
        non_tensor = {k: row_values(batch, k) for k, v in batch.items() if is_non_tensor(v)}
        try:
            # the rollout's own metrics (lengths, ...) come back with the replay; its timings do not
            kept = {k: v for k, v in metrics.items() if not k.startswith("timing_s/")}
            text = json.dumps({"rows": batch.batch_size[0], "non_tensor": non_tensor, "metrics": kept})
        except TypeError as exc:
            raise SiirlUserError(
                f"actor_rollout_ref.rollout.skip: step {step}'s rollout has a field JSON cannot hold ({exc}); the "
                "dump keeps non-tensor fields as JSON"
            ) from None
        tensors_path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(tensors_path))
        fields_path.write_text(text, encoding="utf-8")
