"""Status of the keys verl's YAML tree gained in 2026 (the trees after its February reward move and its
current one), merged into ``siirl.params.verl_tree_keys``: renamed, inert (verl's default only) or not read.

verl's on-policy distillation section (``distillation.*``) is not here: it is a role of its own.
"""

from __future__ import annotations

from siirl.params.verl_key_kinds import MTP, SPEED, Inert, Renamed, not_wired

_ARR = "actor_rollout_ref."
_ACTOR, _REF, _ROLLOUT, _MODEL = _ARR + "actor.", _ARR + "ref.", _ARR + "rollout.", _ARR + "model."
_QAT = "quantization-aware training is not implemented (qat.enable=false only)"
_TURBO = "options of verl's FSDP-Turbo engine, read only with strategy=fsdp_turbo (refused)"
_PAD = "padding each micro-batch to a fixed length (a compile knob of verl's); siiRL packs or trims, same results"
_MEGATRON_LORA = (
    "an option of verl's Megatron LoRA (model.lora.*); FSDP LoRA is lora_rank / lora_alpha / target_modules, "
    "in verl and here"
)
_SKIP = "replaying dumped rollouts (verl's skip manager) is not implemented (enable=false only)"
_PROFILER_AFTER = (
    "what verl's profilers do after a trace (move nsys / engine output, run a hook); tool=torch writes its traces "
    "under <output_dir>/profile itself"
)
_ASYNC_V1 = "an option of verl's asynchronous V1 trainer modes, read only with trainer.v1.trainer_mode other than sync"


def _per_role() -> tuple[dict[str, Inert], dict[str, str]]:
    inert: dict[str, Inert] = {}
    not_read: dict[str, str] = {}
    for role, fsdp in ((_ACTOR, _ACTOR + "fsdp_config."), (_REF, _REF + "fsdp_config."), ("critic.", "critic.model.fsdp_config.")):
        inert[fsdp + "qat.enable"] = Inert((False,), _QAT)
        for option in ("mode", "group_size", "ignore_patterns", "activation_observer", "quantization_config_path"):
            not_read[fsdp + "qat." + option] = "a QAT option, read only with qat.enable=true (refused)"
        not_read[fsdp + "turbo_config.*"] = _TURBO
        not_read[fsdp + "entropy_from_logits_chunk_size"] = SPEED
        not_read[role + "entropy_from_logits_chunk_size"] = SPEED
        not_read[fsdp + "pad_to_length"] = _PAD
        not_read[fsdp + "pad_to_length_bucket"] = _PAD
        not_read[role + "pad_to_length"] = _PAD
    inert[_ACTOR + "qat.enable"] = Inert((False,), _QAT)
    for option in ("mode", "group_size", "ignore_patterns", "activation_observer", "quantization_config_path"):
        not_read[_ACTOR + "qat." + option] = "a QAT option, read only with qat.enable=true (refused)"
    for optim in (_ACTOR + "optim.", "critic.optim."):
        inert[optim + "zero_indexed_step"] = Inert(
            (True,), "the scheduler counts steps from 0, as verl's default (true only)"
        )
    lora = _MODEL + "lora."
    inert[lora + "rank"] = Inert((0,), "verl's Megatron LoRA (model.lora.rank; 0 only): FSDP LoRA is model.lora_rank")
    for option in (
        "type", "alpha", "dropout", "target_modules", "exclude_modules", "dropout_position", "lora_A_init_method",
        "lora_B_init_method", "a2a_experimental", "dtype", "adapter_path", "freeze_vision_model",
        "freeze_vision_projection", "freeze_language_model",
    ):
        not_read[lora + option] = _MEGATRON_LORA
    return inert, not_read


_ROLE_INERT, _ROLE_NOT_READ = _per_role()

RENAMED_2026: dict[str, Renamed] = {
    # verl's legacy reward section put the sandbox at the top level (reward_model.sandbox_fusion before it)
    "sandbox_fusion.*": Renamed("reward_model.sandbox_fusion.*", newer=1),
    # verl's V1 trainer sizes its standalone rollout pool here; its fully-async recipe at the top level
    _ROLLOUT + "nnodes": Renamed("rollout.nnodes"),
    _ROLLOUT + "n_gpus_per_node": Renamed("rollout.n_gpus_per_node"),
}

INERT_2026: dict[str, Inert] = {
    **_ROLE_INERT,
    "model_engine": Inert(
        ("dp",), "verl's choice of training engine: siiRL trains with FSDP2 or replicated, verl's dp engine (dp only)"
    ),
    _ACTOR + "checkpoint.strict": Inert((True,), "a checkpoint loads strictly, every key present (true only)"),
    _ROLLOUT + "full_determinism": not_wired("verl's deterministic rollout mode", False),
    _ROLLOUT + "seed": Inert((42,), "siiRL seeds every worker from trainer.seed; verl's rollout seed only at 42"),
    _ROLLOUT + "multi_turn.function_tool_path": not_wired("tools from a Python function file", None),
    "data.function_tool_path": not_wired("tools from a Python function file", None),
    _ROLLOUT + "checkpoint_engine.custom_backend_module": not_wired("a custom weight-transfer backend", None),
    _ROLLOUT + "disaggregation.enabled": not_wired("prefill/decode disaggregated rollout", False),
    "data.audio_key": not_wired("audio inputs", "audios"),
    "data.mm_processor_kwargs": not_wired("extra processor arguments for images and videos", {}),
    "critic.loss_scale_factor": not_wired("verl's constant loss scale", None),
    "critic.model.hf_config_path": Inert((None,), "the model config is read from model.path (null only)"),
    "critic.model.custom_chat_template": not_wired("a chat template for the critic of its own", None),
    "critic.model.lora_adapter_path": not_wired("LoRA on the critic", None),
    "critic.model.use_liger": not_wired("Liger kernels", False),
    "critic.model.mtp.enable": Inert((False,), MTP),
    "critic.model.mtp.enable_train": Inert((False,), MTP),
    "critic.model.mtp.enable_rollout": Inert((False,), MTP),
    "skip.rollout.enable": Inert((False,), _SKIP),
    "skip.rollout_tq.enable": Inert((False,), _SKIP),
    "skip.async_rollout.enable": Inert((False,), _SKIP),
}

NOT_READ_2026: dict[str, str] = {
    **_ROLE_NOT_READ,
    _ACTOR + "checkpoint.mbridge_config": "Megatron checkpoint options (mbridge), read only by verl's Megatron engine",
    "critic.checkpoint.mbridge_config": "Megatron checkpoint options (mbridge), read only by verl's Megatron engine",
    _ACTOR + "policy_loss.dro_beta": "an option of verl's DRO loss mode, read only under that loss_mode (refused)",
    _ROLLOUT + "qat": "verl's per-role copy of the actor's QAT section (screened there)",
    _ROLLOUT + "moe_load_balance_metrics_interval": "an MoE load-balance metric of the engine; no results change",
    _ROLLOUT + "disaggregation.*": "disaggregated-rollout options, read only with disaggregation.enabled=true (refused)",
    "critic.model.exclude_modules": "a LoRA option, read only with critic.model.lora_rank > 0 (refused)",
    "critic.model.lora.*": _MEGATRON_LORA,
    "critic.model.mtp.*": "multi-token-prediction options, read only with mtp enabled (refused)",
    "algorithm.filter_groups.max_inflight_gen_batches": (
        "how many generation batches verl's asynchronous DAPO keeps in flight; siiRL fills the batch in order"
    ),
    "trainer.use_v1": "which of verl's trainer implementations runs (its V1 trainer is the default); one here",
    **{
        "trainer.v1." + option: _ASYNC_V1
        for option in (
            "sync", "colocate_async.num_warmup_batches", "separate_async.num_warmup_batches",
            "separate_async.parameter_sync_step", "sampler.sync_refill_failed_groups", "sampler.custom_sampler.path",
            "sampler.custom_sampler.name", "sampler.sampler_kwargs",
        )
    },
    "trainer.v1.separate_async.hybrid_rollout.*": _ASYNC_V1,
    "global_profiler.relocate_results": _PROFILER_AFTER,
    "global_profiler.finish_hook_cmd": _PROFILER_AFTER,
    "global_profiler.finish_hook_all_ranks": _PROFILER_AFTER,
    "global_profiler.finish_hook_ranks": _PROFILER_AFTER,
    "skip.*": "options of verl's skip manager, read only with its enable=true (refused)",
}
