"""What the asynchronous modes run, refused in one line before Ray otherwise (siirl.params.async_training).

An async run is the same task graph with its rollout node fed by a background producer
(siirl.dag_worker.async_rollout): features that restart the graph for more data, drive an environment from
inside the rollout, or train several policies have no producer of their own yet, so they are refused rather
than run synchronously behind the user's back.
"""

from __future__ import annotations

import logging
from typing import Any

from siirl.errors import ConfigError
from siirl.params.async_training import trainer_mode

#: Engines whose generation can stop at a chunk boundary and continue under new weights.
PARTIAL_ROLLOUT_ENGINES = ("hf", "vllm", "sglang")
#: Of those, the ones whose batch ``generate`` cannot stop after an arbitrary token (no pause for newer weights
#: or finished groups): a piece ends only at ``async_training.chunk_tokens``, so a null cap would make every
#: piece a whole response and the partial rollout synchronous.
CHUNK_CAPPED_ENGINES = ("vllm", "sglang")

logger = logging.getLogger(__name__)


def _refusal(cfg: Any, mode: str | None) -> str | None:
    """Why this async run cannot run as configured, or None (``mode``: the run's environment mode)."""
    if mode is not None:
        what = "EMBODIED environment rollouts" if mode == "steps" else "multi-turn rollouts"
        return f"{what} are not implemented in asynchronous training"
    if cfg.actor_rollout_ref.rollout.skip.enable:
        return "replaying dumped rollouts (actor_rollout_ref.rollout.skip.enable) is not implemented in asynchronous training"
    if cfg.algorithm.filter_groups.enable:
        return "dynamic sampling (algorithm.filter_groups.enable) restarts a step for more groups, not implemented in asynchronous training"
    name, section = str(cfg.actor_rollout_ref.rollout.name), cfg.async_training
    if section.partial_rollout and name not in PARTIAL_ROLLOUT_ENGINES:
        return (f"async_training.partial_rollout with the '{name}' rollout engine is not implemented "
                f"({', '.join(PARTIAL_ROLLOUT_ENGINES)} only)")
    if section.partial_rollout and section.chunk_tokens is None and name in CHUNK_CAPPED_ENGINES:
        return (f"async_training.chunk_tokens=null with partial rollouts on the '{name}' rollout engine: its "
                "generate cannot stop mid-piece, so a piece ends only at chunk_tokens; set it (e.g. 8)")
    return None


def check_async(cfg: Any, env_mode: str | None) -> None:
    """What the chosen mode runs (each key's values passed its section's rules); sync runs are untouched.
    ``env_mode``: the run's environment mode (siirl.environment.outputs.env_mode), None without one. The keys
    are read as given: the schedule they make is derived once, by the resolve step (siirl.params.resolved)."""
    if trainer_mode(cfg) == "sync":
        return
    why = _refusal(cfg, env_mode)
    if why is not None:
        raise ConfigError(f"bad config: {why}")
    if cfg.data.gen_batch_size is not None and cfg.data.gen_batch_size != cfg.data.train_batch_size:
        # verl's fully-async recipe sets gen_batch_size=1: its rollout takes prompts one at a time. Here the
        # producer draws each step's train batch and streams it (siirl.params.resolved: prompts_per_draw);
        # there is no DAPO refill to size (refused above).
        logger.info("data.gen_batch_size=%s: asynchronous rollouts draw data.train_batch_size prompts per step",
                    cfg.data.gen_batch_size)
