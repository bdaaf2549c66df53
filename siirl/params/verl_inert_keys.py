"""verl / original-siiRL keys that have no field here, screened before composing: ``STATUS`` holds each key's
(or ``prefix.*`` family's) status, of three kinds (``siirl.params.verl_tree_keys``, where verl's own tree's
keys are listed):

- ``RENAMED``: the key means the same as a siiRL key; the override is rewritten to it (optionally with a
  value map, e.g. ``use_cpgd_loss=True`` -> ``policy_loss.loss_mode=cpgd``); a ``prefix.*`` entry moves a
  whole section (``MOVED``: keys verl moved, at their new place, renamed onto the siiRL key that keeps the old
  one; screened again where they land, so a move onto a renamed key or a key with a status ends where the old
  spelling ends; where two spellings are set to different values the newest wins, with one warning).
- ``INERT``: the feature is not implemented; the key is accepted only at the value that leaves it off
  (the override is then dropped) and refused, naming the feature, otherwise.
- ``NOT_READ``: a speed / memory / serving knob whose every value leaves the results as they are here; it
  is accepted at any value and dropped (docs/migrating-from-verl.md says what siiRL does instead).

A key (or ``prefix.*`` family) listed here is never an "unknown key": the user meant it, siiRL says why.
"""

from __future__ import annotations

from typing import Any

from siirl.params.verl_tree_keys import (
    ACTOR,
    DROP,
    MODEL,
    REF,
    ROLLOUT,
    SPEED,
    TREE,
    Inert,
    Renamed,
    Status,
    each,
    of_kind,
    switched,
)

MOVED: dict[str, Renamed] = {
    # verl's reward section (February 2026): reward.* replaces reward_model.* and custom_reward_function.*
    "reward.reward_model.*": Renamed("reward_model.*", newer=1),
    "reward.num_workers": Renamed("reward_model.num_workers", newer=1),
    "reward.reward_manager.name": Renamed("reward_model.reward_manager.name", newer=1),
    "reward.reward_manager.*": Renamed("reward_manager.*", newer=1),  # source, module.*: the older tree's keys
    "reward.custom_reward_function.*": Renamed("custom_reward_function.*", newer=1),
    "reward.reward_kwargs.*": Renamed("reward_model.reward_kwargs.*", newer=1),
    "reward.sandbox_fusion.*": Renamed("reward_model.sandbox_fusion.*", newer=1),
    # the weeks between (verl's reward_model section before the move)
    "reward_model.model_path": Renamed("reward_model.model.path", newer=1),
    "reward_model.reward_manager.name": Renamed("reward_model.reward_manager", newer=1),
    # verl's critic engine section (April 2026)
    "critic.fsdp.*": Renamed("critic.model.fsdp_config.*", newer=1),
}

_EMBODIED = (
    "is the original siiRL's embodied layout; here embodied runs use algorithm.workflow_type=EMBODIED with "
    "env.* and algorithm.embodied.*"
)

STATUS: dict[str, Status] = {
    MODEL + "torch_dtype": Renamed(MODEL + "dtype"),
    ACTOR + "optim.lr_decay_style": Renamed(ACTOR + "optim.lr_scheduler_type"),
    ROLLOUT + "checkpoint_engine.update_weights_bucket_megabytes": Renamed(ROLLOUT + "weight_sync_bucket_mb"),
    ACTOR + "use_cpgd_loss": Renamed(ACTOR + "policy_loss.loss_mode", {True: "cpgd", False: DROP}),
    "critic.use_critic_model": Renamed("critic.enable"),
    **{f"reward_model.reward_kwargs.overlong_buffer_cfg.{leaf}": Renamed(f"reward_model.overlong_buffer.{leaf}")
       for leaf in ("enable", "len", "penalty_factor", "log")},
    "reward_model.reward_kwargs.max_resp_len": Renamed("reward_model.overlong_buffer.max_resp_len"),
    **MOVED,
    # (``*.megatron.*`` keys are refused before this screen, by ``siirl.params.validate.refuse_unsupported``.)
    ACTOR + "optim.override_optimizer_config.*": Inert(
        (), "Megatron-LM training is not implemented; siiRL trains with FSDP2 (drop the megatron.* keys)"
    ),
    **switched(
        "profiler.enable",
        Inert((False,), "the original siiRL's profiler drives torch_npu's profiler, which siiRL does not wrap "
              "(profiler.enable=false only); each step's time split is in metrics.jsonl (timing_s/...)"),
        "the original siiRL's profiler options, read only with profiler.enable=true (refused)",
    ),
    **dict.fromkeys((MODEL + "model_type", "actor_rollout_ref.embodied.*", "data.dataset_type",
                     "algorithm.embodied_sampling.*", "reward_model.reward_kwargs.action_token_len",
                     "reward_model.reward_kwargs.reward_coef"), Inert((), _EMBODIED)),
    REF + "strategy": Inert(("fsdp", "fsdp2"), "the reference shards as the actor does (actor.strategy)"),
    ROLLOUT + "data_parallel_size": Inert((1,), "rollout data parallelism follows the plan (world / tp); 1 only"),
    ROLLOUT + "expert_parallel_size": Inert((1,), "expert-parallel rollout is not implemented (1 only)"),
    ROLLOUT + "multi_turn.use_all_traj": Inert((False,), (
        "training on every round of a multi-round agent team (the original siiRL's MARFT) is not implemented; "
        "each agent trains on its last round's turn (false only)"
    )),
    ROLLOUT + "agent.*": Inert(
        (), "verl's agent-loop options other than default_agent_loop and agent_loop_config_path are not implemented; "
        "tool rollouts use rollout.multi_turn.*"
    ),
    **each(SPEED, *(role + knob for role in (ACTOR, REF) for knob in (
        "use_torch_compile", "entropy_checkpointing", "entropy_from_logits_with_chunking"))),
    **each(
        "how verl serves a reward model (its reward loop and engine); siiRL scores it on the reward model's own "
        "FSDP2 or replicated copy (reward_model.strategy)",
        "reward_model.use_reward_loop", "reward_model.rollout.*",
    ),
    "actor_rollout_ref.nccl_timeout": "the DAG workers' process groups wait up to 30 minutes on a collective",
    "data.auto_repeat": "the dataloader starts the next (reshuffled) epoch whenever one runs out",
    "dag.enable_perf": "the original siiRL's per-node timing switch; siiRL logs them every step (timing_s/node/*)",
    ROLLOUT + "sglang_rollout_mode": (
        "verl's choice of running SGLang in-process (engine) or behind its HTTP server (server) generates the "
        "same way; siiRL runs SGLang in-process in each DAG worker"
    ),
    ROLLOUT + "server.*": "the HTTP client options of verl's SGLang server mode; siiRL calls SGLang in-process",
    **TREE,
}
RENAMED: dict[str, Renamed] = of_kind(STATUS, Renamed)
INERT: dict[str, Inert] = of_kind(STATUS, Inert)
NOT_READ: dict[str, str] = of_kind(STATUS, str)
_INERT_OR_NOT_READ: dict[str, Inert | str] = {**INERT, **NOT_READ}


def _governing(key: str, table: dict) -> str | None:
    """The entry of ``table`` governing ``key``: the key itself, else its longest ``prefix.*``."""
    parts = key.split(".")
    entries = (key, *(".".join(parts[:cut]) + ".*" for cut in range(len(parts) - 1, 0, -1)))
    return next((entry for entry in entries if entry in table), None)


def _family(key: str) -> str | None:
    """The INERT entry governing ``key``, unless a more specific NOT_READ entry does (e.g. one option of a
    refused family that verl reads in a mode siiRL also runs): the closest entry of the two tables decides."""
    entry = _governing(key, _INERT_OR_NOT_READ)
    return entry if entry in INERT else None


def is_not_read(key: str) -> bool:
    return _governing(key, NOT_READ) is not None


def inert_refusal(key: str, value: Any) -> str | None:
    """None when ``key=value`` leaves an unimplemented feature off; else the one-line reason.
    Raises ``KeyError`` when no INERT entry governs ``key``."""
    family = _family(key)
    if family is None:
        raise KeyError(key)
    entry = INERT[family]
    if any(value is off or (type(value) is type(off) and value == off) for off in entry.off):
        return None
    return f"{key}={value!r}: {entry.why}"


def is_inert(key: str) -> bool:
    return _family(key) is not None


def rename_of(key: str) -> str | None:
    """The RENAMED entry governing ``key`` (the key itself, else its longest ``prefix.*``), or None."""
    return _governing(key, RENAMED)


def renamed(key: str, value: Any) -> tuple[str, Any] | None:
    """``(siiRL key, value)`` for a renamed verl key, None when the override is to be dropped; ``KeyError``
    when ``key`` is not a renamed one."""
    entry_key = rename_of(key)
    if entry_key is None:
        raise KeyError(key)
    entry = RENAMED[entry_key]
    target = entry.to.removesuffix("*") + key.removeprefix(entry_key.removesuffix("*"))
    if entry.values is None:
        return target, value
    if value not in entry.values:
        raise ValueError(f"{key}={value!r}: expected one of {', '.join(map(repr, entry.values))}")
    new = entry.values[value]
    return None if new is DROP else (target, new)
