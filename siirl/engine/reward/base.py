"""Common skeleton of the rule-based reward managers.

A manager turns a rollout batch into ``token_level_scores`` (B, R): it decodes each response, scores it
with a compute_score function and puts the score on the response's last valid token (as verl does), so
the advantage estimators see one sparse reward per sequence. Subclasses only decide *how* the score
function is called (sequentially, once per batch, in a process pool) and may post-process scores.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from tensordict import TensorDictBase

from siirl import user_code
from siirl.bounded_call import BoundedCalls
from siirl.engine.reward.batch_fields import get_ground_truths, get_list, get_str_list
from siirl.engine.reward.bounded import MAX_ABS_SCORE, FailureLog, RewardTimeout
from siirl.errors import RewardFunctionError, SiirlUserError

logger = logging.getLogger(__name__)


@dataclass
class RewardInputs:
    """Per-sample inputs of the score functions, in batch order."""

    data_sources: list[str]
    solutions: list[str]
    ground_truths: list[str]
    extra_infos: list[Any]
    response_lengths: list[int]

    def __len__(self) -> int:
        return len(self.solutions)


def split_result(result: Any, data_source: str) -> tuple[float, dict[str, Any]]:
    """(score, extra values) of one score-function result: a number, or a dict holding ``"score"``."""
    if isinstance(result, dict):
        if "score" not in result:
            raise RewardFunctionError(
                f"score function for {data_source!r} returned a dict without a 'score' key"
            )
        extra = {k: v for k, v in result.items() if k != "score"}
        result = result["score"]
    else:
        extra = {}
    try:
        return float(result), extra
    except (TypeError, ValueError):
        raise RewardFunctionError(
            f"score function for {data_source!r} returned {result!r}; expected a number"
        ) from None


#: What ``call_score`` returns for a call that produced no result (a score function may return None).
FAILED = object()


def function_name(fn: Callable[..., Any]) -> str:
    """How a message names the user's score function."""
    return repr(fn) if type(fn).__repr__ is not object.__repr__ else getattr(fn, "__qualname__", repr(fn))


def _samples(what: str) -> int:
    """Samples one failed call stands for: ``batch of N`` or one sample."""
    return int(what.split()[2]) if what.startswith("batch of ") else 1


class RewardManager(ABC):
    """Scores a batch: ``manager(batch, tokenizer=None) -> (token_level_scores, extra_info)``.

    ``extra_info`` maps names to one value per sample: always ``"score"`` and ``"acc"`` (the score function's
    ``acc``, else its score), plus any extra keys the score function returned in a dict (missing ones are
    None).
    """

    def __init__(
        self,
        tokenizer: Any = None,
        compute_score: Callable[..., Any] | None = None,
        timeout_s: float = 10.0,
        services: dict[str, Any] | None = None,
        **opts: Any,
    ):
        if opts:
            raise ValueError(f"{type(self).__name__} got unknown options: {sorted(opts)}")
        self.tokenizer = tokenizer
        #: ``services`` (e.g. the code sandbox) reach the built-in scorers; a custom function gets none, as in verl.
        self.compute_score = compute_score or partial(self.default_score_fn(), **(services or {}))
        #: Every score-function call is bounded by ``timeout_s``; a late one scores 0 and is counted.
        self.caller = BoundedCalls(timeout_s, RewardTimeout, "siirl-reward")
        self.failures = FailureLog(type(self).__name__)

    def default_score_fn(self) -> Callable[..., Any]:
        """Score function used when none is given: the data_source registry."""
        from siirl.reward_score import default_compute_score

        return default_compute_score

    @abstractmethod
    def score(self, inputs: RewardInputs) -> list[Any]:
        """One score-function result (number or dict with ``"score"``) per sample."""

    def failure_metrics(self) -> dict[str, float]:
        """``reward/timeouts|errors|crashes`` since the last call (same keys on every rank)."""
        return self.failures.pop_metrics()

    def close(self) -> None:
        """Release what the manager started (the bounded-call threads; subclasses add pools)."""
        self.caller.close()

    def collect_inputs(self, batch: TensorDictBase, tokenizer: Any) -> RewardInputs:
        """Decode responses (valid tokens only, special tokens dropped) and gather the per-sample fields."""
        responses, mask = batch["responses"], batch["response_mask"].bool()
        if responses.shape != mask.shape:
            raise ValueError(
                f"responses {tuple(responses.shape)} and response_mask {tuple(mask.shape)} differ"
            )
        # One conversion of each tensor to lists, one batched decode (not one tensor index + decode per row).
        valid_ids = [
            [t for t, keep in zip(ids, m) if keep] for ids, m in zip(responses.tolist(), mask.tolist())
        ]
        solutions = tokenizer.batch_decode(valid_ids, skip_special_tokens=True)
        return RewardInputs(
            data_sources=get_str_list(batch, "data_source"),
            solutions=solutions,
            ground_truths=get_ground_truths(batch),
            extra_infos=get_list(batch, "extra_info", None),
            response_lengths=mask.sum(-1).tolist(),
        )

    def __call__(self, batch: TensorDictBase, tokenizer: Any = None) -> tuple[torch.Tensor, dict[str, list]]:
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        if tokenizer is None:
            raise ValueError(f"{type(self).__name__} needs a tokenizer (pass it to the factory or the call)")
        inputs = self.collect_inputs(batch, tokenizer)
        self.caller.start_step()
        self.failures.start_step()
        with user_code.running(f"reward function {user_code.callable_name(self.compute_score)}"):
            scores, extra = self.score_batch(inputs)
        self.failures.end_step(len(inputs), function_name(self.compute_score))
        return self.place_scores(batch["response_mask"], scores), extra

    def call_score(self, what: str, *args: Any, **kwargs: Any) -> Any:
        """One bounded call of the score function for ``what`` (a sample or a batch): its result, or ``FAILED``
        when it timed out or raised (counted; the caller scores those samples 0). User errors propagate."""
        return self.call_scores([what], [(args, kwargs)])[0]

    def call_scores(self, whats: list[str], calls: list[tuple[tuple, dict[str, Any]]]) -> list[Any]:
        """``call_score`` for each of ``calls`` (``(args, kwargs)``, described by ``whats``), handed to the
        bounded-call thread at once: one thread hand-off per batch, each call still bounded by ``timeout_s``."""
        outcomes = self.caller.call_in_turn(self.compute_score, calls, stop_on=(SiirlUserError,))
        results = []
        for what, (value, error) in zip(whats, outcomes):
            if isinstance(error, RewardTimeout):
                self.failures.record("timeouts", f"{what}: {error}", samples=_samples(what))
            elif isinstance(error, SiirlUserError):
                raise error
            elif isinstance(error, Exception):
                self.failures.record(
                    "errors", f"{what}: {type(error).__name__}: {error}", samples=_samples(what)
                )
            elif error is not None:
                raise error
            results.append(FAILED if error is not None else value)
        return results

    def score_batch(self, inputs: RewardInputs) -> tuple[list[float], dict[str, list]]:
        """Scores and per-sample extra info; subclasses that reshape rewards (DAPO) extend this."""
        results = self.score(inputs)
        if len(results) != len(inputs):
            raise RewardFunctionError(
                f"{type(self).__name__} produced {len(results)} scores for {len(inputs)} samples"
            )
        split = [split_result(r, ds) for r, ds in zip(results, inputs.data_sources)]
        scores = [
            self._bounded(score, i, ds) for i, ((score, _), ds) in enumerate(zip(split, inputs.data_sources))
        ]
        extra: dict[str, list] = {"score": scores}
        for key in sorted({k for _, e in split for k in e}):
            extra[key] = [e.get(key) for _, e in split]
        # verl's DAPO manager reports a numeric score as the response's accuracy; every manager does here.
        extra["acc"] = [e.get("acc", score) for score, e in split]
        return scores, extra

    def _bounded(self, score: float, index: int, data_source: str) -> float:
        """NaN/inf scores 0 and a magnitude beyond ``MAX_ABS_SCORE`` is clipped; both are counted."""
        if not math.isfinite(score):
            self.failures.record("nonfinite", f"sample {index} (data_source {data_source!r}) scored {score}")
            return 0.0
        if abs(score) > MAX_ABS_SCORE:
            self.failures.record(
                "clipped",
                f"sample {index} (data_source {data_source!r}) scored {score:g}",
                outcome=f"clipped to +-{MAX_ABS_SCORE:g}",
            )
            return math.copysign(MAX_ABS_SCORE, score)
        return score

    @staticmethod
    def place_scores(response_mask: torch.Tensor, scores: list[float]) -> torch.Tensor:
        """(B, R) float tensor with each score on its row's last valid token; empty responses stay 0."""
        mask = response_mask.bool()
        out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
        positions = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
        last = torch.where(mask, positions, -1).max(dim=-1).values
        rows = torch.nonzero(last >= 0).flatten()
        out[rows, last[rows]] = torch.tensor(scores, dtype=torch.float32, device=mask.device)[rows]
        return out
