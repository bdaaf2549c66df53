"""The ``parallel`` manager: score samples in a process pool with a per-call timeout.

For slow or fragile score functions (math verifiers, code execution): a call that raises or runs past
``timeout_s`` scores 0 instead of failing or stalling the step (its worker process is killed); the first
failure of each kind is logged and all are counted in ``reward/timeouts|errors|crashes``. The pool is created
once and reused across steps.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable
from typing import Any

from siirl.engine.reward.base import RewardInputs, RewardManager
from siirl.engine.reward.process_pool import TimeoutProcessPool
from siirl.engine.reward.registry import REWARD_MANAGERS

logger = logging.getLogger(__name__)


@REWARD_MANAGERS.register("parallel", "prime")
class ParallelRewardManager(RewardManager):
    """Options: ``num_workers`` (default min(4, CPUs)), ``timeout_s`` (default 10), ``mp_context``.
    ``prime`` is verl's name for the same thing (PRIME's manager: a process pool, failed calls score 0).

    ``compute_score`` must be picklable (a module-level function, a ``functools.partial`` of one, or a
    function loaded with ``load_custom_reward_fn``), because the workers are separate processes.
    """

    def __init__(
        self,
        tokenizer: Any = None,
        compute_score: Callable[..., Any] | None = None,
        num_workers: int | None = None,
        timeout_s: float = 10.0,
        mp_context: str = "spawn",
        **opts: Any,
    ):
        super().__init__(tokenizer, compute_score, timeout_s=timeout_s, **opts)
        self.failures.log = logger
        try:
            pickle.dumps(self.compute_score)
        except Exception as exc:  # noqa: BLE001 - pickling can fail in many ways; all mean the same here
            raise ValueError(
                f"parallel reward manager needs a picklable compute_score (define it at module level or use "
                f"custom_reward_function.path): {type(exc).__name__}: {exc}"
            ) from None
        workers = num_workers if num_workers is not None else min(4, os.cpu_count() or 1)
        self.pool = TimeoutProcessPool(workers, timeout_s, mp_context)

    def score(self, inputs: RewardInputs) -> list[Any]:
        args = list(zip(inputs.data_sources, inputs.solutions, inputs.ground_truths, inputs.extra_infos))
        outcomes = self.pool.map(self.compute_score, args)
        results: list[Any] = []
        for i, outcome in enumerate(outcomes):
            if outcome.ok:
                results.append(outcome.value)
            else:
                self.failures.record(
                    outcome.kind, f"sample {i} (data_source {inputs.data_sources[i]!r}): {outcome.error}"
                )
                results.append(0.0)
        return results

    def close(self) -> None:
        """Stop the worker processes (they restart on the next call)."""
        super().close()
        self.pool.close()
