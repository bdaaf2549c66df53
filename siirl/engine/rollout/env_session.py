"""What both environment-driven rollouts share: the vector env, per-row tasks and seeds, token plumbing.

The inner engine (hf / vllm / sglang) is built with ``n = 1``: the wrapper expands each prompt into its
``n`` trajectories itself, because from the second turn on every trajectory has its own context.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from tensordict import TensorDict

from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.engine.rollout.base import RolloutEngine
from siirl.engine.rollout.batch_ops import prompt_position_ids
from siirl.engine.rollout.sampling import SamplingParams
from siirl.engine.rollout.vision_requests import MULTIMODAL_DATA
from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS
from siirl.environment import StepResult, VectorEnv
from siirl.environment.callback_failures import CallbackFailures, CallbackStats, merge_callbacks, note_call
from siirl.environment.registry import resolve_env_factory
from siirl.params.environment import EnvConfig
from siirl.params.model import RolloutConfig

#: Dataset fields handed to ``Env.reset`` as the task, when the batch has them.
TASK_FIELDS = (
    "ground_truth", "index", "data_source", "task_id", "trial_id", "tools_kwargs", "interaction_kwargs", "raw_prompt",
)
#: Per-row image fields of a vision-language policy's rows (the HF engine's and vLLM / SGLang's): every
#: context of a trajectory starts with the row's prompt, so each generation call gets the row's images.
IMAGE_FIELDS = (MULTIMODAL_INPUTS, MULTIMODAL_DATA)


def row_images(rows: TensorDict) -> list[dict[str, Any]]:
    """Each row's image fields (``{}`` per row for a text-only batch)."""
    present = [key for key in IMAGE_FIELDS if key in set(rows.keys())]
    columns = {key: non_tensor_list(rows, key) for key in present}
    return [{key: column[i] for key, column in columns.items()} for i in range(rows.batch_size[0])]


def single_sample_config(rollout_cfg: RolloutConfig) -> RolloutConfig:
    """A copy of the rollout section with ``n = 1`` for training and validation."""
    return dataclasses.replace(rollout_cfg, n=1, val_kwargs=dataclasses.replace(rollout_cfg.val_kwargs, n=1))


def env_max_envs(env_cfg: EnvConfig) -> int:
    """``env.max_envs``, or the environment's own bound (``max_envs`` on its class, e.g. LIBERO's, set by its
    memory per simulator) when unset; 0 = no bound."""
    if env_cfg.max_envs is not None:
        return int(env_cfg.max_envs)
    factory = resolve_env_factory(str(env_cfg.name))
    return int(getattr(factory, "max_envs", 0) or 0)


def group_seed(uid: Any) -> int:
    """One seed per prompt group: all ``n`` trajectories of a task meet the same environment dynamics."""
    return zlib.crc32(str(uid).encode()) & 0x7FFFFFFF


class EnvSession:
    """Owns the inner engine and a vector env that grows to the largest batch seen."""

    def __init__(
        self, inner: RolloutEngine, tokenizer: Any, rollout_cfg: RolloutConfig, env_cfg: EnvConfig
    ) -> None:
        self.inner, self.tokenizer = inner, tokenizer
        self.env_cfg = env_cfg
        self.train_n = SamplingParams.from_config(rollout_cfg).n
        self.val_n = SamplingParams.from_config(rollout_cfg.val_kwargs).n
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
        self._venv: VectorEnv | None = None
        #: Environments alive at once (0: one per episode of the batch).
        self.max_envs = env_max_envs(env_cfg)
        self.failures = CallbackFailures()
        self._env_calls: CallbackStats = {}

    def venv(self, rows: int) -> VectorEnv:
        if self._venv is None or self._venv.num_envs < rows:
            if self._venv is not None:
                self._venv.close()
            self._venv = VectorEnv(
                str(self.env_cfg.name), rows, dict(self.env_cfg.kwargs),
                num_workers=int(self.env_cfg.num_workers), timeout_s=float(self.env_cfg.timeout_s),
            )
        return self._venv

    def tasks(self, rows: TensorDict) -> tuple[list[dict[str, Any]], list[int]]:
        """Per-row task dicts (prompt text plus the dataset fields present) and per-group seeds."""
        count = rows.batch_size[0]
        texts = [
            self.tokenizer.decode(ids[mask.bool()].tolist(), skip_special_tokens=True)
            for ids, mask in zip(rows["input_ids"], rows["attention_mask"])
        ]
        keys = set(rows.keys())
        columns = {key: non_tensor_list(rows, key) for key in TASK_FIELDS if key in keys}
        tasks = [{"prompt_text": texts[i], **{k: v[i] for k, v in columns.items()}} for i in range(count)]
        return tasks, [group_seed(uid) for uid in non_tensor_list(rows, "uid")]

    def generate_tokens(
        self, contexts: Sequence[list[int]], validate: bool, images: Sequence[dict[str, Any]] | None = None
    ) -> list[list[int]]:
        """One response per context (token lists), through the inner engine, without its padding.
        ``images``: each context's image fields (see :func:`row_images`), passed on to the engine."""
        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):
            ids[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
            mask[row, width - len(context) :] = 1
        batch = TensorDict(
            {"input_ids": ids, "attention_mask": mask, "position_ids": prompt_position_ids(mask)},
            batch_size=[len(contexts)],
        )
        for key in images[0] if images else ():
            set_non_tensor_list(batch, key, [row[key] for row in images])
        out = self.inner.generate(batch, validate=validate)
        lengths = out["response_mask"].sum(-1).tolist()
        return [out["responses"][row, : int(n)].tolist() for row, n in enumerate(lengths)]

    def note_results(self, op: str, results: Sequence[StepResult]) -> None:
        """Count the outcomes of a ``reset`` or ``step`` (``op``) for the failure rule; tool environments
        report their own calls."""
        for result in results:
            if "callbacks" not in result.info:
                name = f"environment {self.env_cfg.name!r} ({op})"
                note_call(self._env_calls, name, str(result.info.get("error", "")))

    def end_rollout(self, last_infos: Sequence[dict[str, Any]]) -> None:
        """Apply the failure rule to this rollout's calls (``last_infos``: each episode's final ``info``)."""
        stats = merge_callbacks([*(info.get("callbacks") for info in last_infos), self._env_calls])
        self._env_calls = {}
        self.failures.end_step(stats)

    def decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)

    def close(self) -> None:
        if self._venv is not None:
            self._venv.close()
            self._venv = None


def real_prompt_tokens(rows: TensorDict) -> list[list[int]]:
    """Each row's prompt without its left padding."""
    return [ids[mask.bool()].tolist() for ids, mask in zip(rows["input_ids"], rows["attention_mask"])]


class EnvSessionRollout(RolloutEngine):
    """A rollout engine driven by an :class:`EnvSession`: weights and memory go to the wrapped engine."""

    def __init__(self, session: EnvSession, max_turns: int) -> None:
        self.session = session
        self.max_turns = max_turns

    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.session.inner.sync_weights(named_tensors)

    def sleep(self) -> None:
        self.session.inner.sleep()

    def wake_up(self) -> None:
        self.session.inner.wake_up()

    def close(self) -> None:
        self.session.close()
