"""Status of the keys of verl's own YAML tree (``ppo_trainer.yaml`` and its groups, at its 2025 commit, after its
February 2026 reward move and its current one) that have no siiRL field.

verl's tree sets every option of every role, so a user starting from it passes hundreds of keys at their
defaults. Each has a status in ``TREE`` (merged into ``siirl.params.verl_inert_keys``): ``Renamed``, ``Inert``
(accepted only at verl's default, the value that leaves the feature off, refused in one line otherwise) or not
read (a string: why its value cannot change results here). A section switched off by its ``enable`` (or
``mode``) switch has the switch inert and its options not read (``switched``): verl reads them only when the
section is on, which is refused.
verl's on-policy distillation section (``distillation.*``) is a role of its own, not here.
docs/migrating-from-verl.md lists every entry; tests/cli/test_verl_tree_keys.py keeps the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: A value-map entry meaning "keep no override".
DROP = object()


@dataclass(frozen=True)
class Renamed:
    #: The key it means; for a ``prefix.*`` entry a ``prefix.*`` too (the rest of the key carries over).
    to: str
    #: parsed value -> new value (``DROP``: no override is kept); None = the value as written.
    values: dict[Any, Any] | None = None
    #: verl generations this spelling is newer than ``to`` (verl moved the key here): when spellings of one key
    #: disagree, the newest wins (``siirl.params.override_screen``).
    newer: int = 0


@dataclass(frozen=True)
class Inert:
    #: The values that leave the feature off (parsed as YAML); empty: every value is refused.
    off: tuple[Any, ...]
    why: str


def not_wired(feature: str, *off: object) -> Inert:
    """A verl feature siiRL does not implement: accepted only at verl's default values ``off``."""
    return Inert(off, f"{feature} is not implemented; accepted only at verl's default")


#: A key's status: renamed, inert, or why it is not read.
Status = Renamed | Inert | str


def each(why: str, *keys: str) -> dict[str, str]:
    """Keys that share one status reason, written once."""
    return dict.fromkeys(keys, why)


def switched(switch: str, off: Inert, options: str) -> dict[str, Status]:
    """A section verl reads only with ``switch`` on: the switch inert (``off``), the section's other keys not read."""
    return {switch: off, switch.rpartition(".")[0] + ".*": options}


def of_kind(table: dict[str, Status], kind: type) -> dict[str, Any]:
    """The entries of ``table`` whose status is a ``kind`` (``str``: not read)."""
    return {key: status for key, status in table.items() if isinstance(status, kind)}


#: The prefixes verl's keys are written under, shared by the status tables.
ACTOR, REF, ROLLOUT, MODEL = (f"actor_rollout_ref.{part}." for part in ("actor", "ref", "rollout", "model"))
SPEED = "a speed or memory knob; siiRL's log-prob path is not torch.compiled nor chunked, results are the same"
_MTP = "multi-token-prediction heads are not implemented (false only)"

_SEED = "siiRL seeds every worker from trainer.seed; verl's per-engine seed is accepted only at its default 42"
_ROUTER = "MoE router replay is not implemented (router_replay.mode=disabled only)"
_QAT = "quantization-aware training is not implemented (qat.enable=false only)"
_QAT_OPTIONS = ("mode", "group_size", "ignore_patterns", "activation_observer", "quantization_config_path")
_MEGATRON_LORA = (
    "an option of verl's Megatron LoRA (model.lora.*); FSDP LoRA is lora_rank / lora_alpha / target_modules, "
    "in verl and here"
)
_PAD = "padding each micro-batch to a fixed length (a compile knob of verl's); siiRL packs or trims, same results"
_FUNCTION_TOOLS = not_wired("tools from a Python function file", None)
_TRANSFER_QUEUE = (
    "verl's transfer queue streams batches between its roles without the controller; siiRL's data "
    "coordinator (per-node data buffers, workers fetching the samples they need) does that in every run"
)


def _per_role() -> dict[str, Status]:
    """The options verl repeats per role: profiler, router replay, FSDP engine, QAT, optimizer, model extras."""
    table: dict[str, Status] = {}
    for role in (ACTOR, REF, ROLLOUT, "critic.", "reward_model."):
        table[role + "profiler.enable"] = (
            "verl's per-role profiler switch: global_profiler.tool=torch traces each profiled step whole, every "
            "role on every rank (profiling one role's part of a step is not implemented)"
        )
        table[role + "profiler.*"] = (
            "options of verl's per-role profiler (its ranks, tool options): global_profiler.tool=torch traces "
            "every rank"
        )
    for role in (ACTOR, REF):
        table.update(switched(role + "router_replay.mode", Inert(("disabled",), _ROUTER),
                              "router replay files, read only with router_replay.mode set (refused)"))
    # each role's FSDP engine section (the critic's sits under its model): (role, section, forward-only)
    for role, fsdp, forward_only in ((ACTOR, ACTOR + "fsdp_config.", False), (REF, REF + "fsdp_config.", True),
                                     ("critic.", "critic.model.fsdp_config.", False)):
        table[fsdp + "seed"] = Inert((42,), _SEED)
        table[fsdp + "full_determinism"] = not_wired("verl's full-determinism mode", False)
        table[fsdp + "ulysses_sequence_parallel_size"] = (
            "verl fills it from the role's ulysses_sequence_parallel_size, which siiRL reads"
        )
        table[fsdp + "forward_only"] = Inert(
            (forward_only,), "whether a role trains is fixed by its section (verl's default for the section only)"
        )
        table.update(each(SPEED, *(fsdp + k for k in ("entropy_from_logits_with_chunking", "use_torch_compile",
                                                      "entropy_checkpointing", "entropy_from_logits_chunk_size"))))
        table[fsdp + "turbo_config.*"] = (
            "options of verl's FSDP-Turbo engine, read only with strategy=fsdp_turbo (refused)"
        )
        table[role + "entropy_from_logits_chunk_size"] = SPEED
        table.update(each(_PAD, fsdp + "pad_to_length", fsdp + "pad_to_length_bucket", role + "pad_to_length"))
    for qat in (ACTOR + "qat.", ACTOR + "fsdp_config.qat.", REF + "fsdp_config.qat.", "critic.model.fsdp_config.qat."):
        table[qat + "enable"] = Inert((False,), _QAT)
        table.update(each("a QAT option, read only with qat.enable=true (refused)", *(qat + o for o in _QAT_OPTIONS)))
    for role in (ACTOR, "critic."):  # the trained roles
        optim = role + "optim."
        table[role + "loss_scale_factor"] = not_wired("verl's constant loss scale", None)
        table[role + "data_loader_seed"] = Inert((42,), _SEED)
        table[role + "checkpoint.async_save"] = not_wired("asynchronous checkpoint saving", False)
        table[role + "checkpoint.mbridge_config"] = (
            "Megatron checkpoint options (mbridge), read only by verl's Megatron engine"
        )
        table[optim + "optimizer"] = Inert(("AdamW",), "siiRL's optimizer is torch AdamW (AdamW only)")
        table[optim + "optimizer_impl"] = Inert(("torch.optim",), "siiRL's optimizer is torch AdamW (torch.optim only)")
        table[optim + "num_cycles"] = Inert((0.5,), "the cosine schedule decays over half a cycle (0.5 only)")
        table[optim + "override_optimizer_config"] = Inert((None,), "Megatron optimizer options (null only)")
        table[optim + "zero_indexed_step"] = Inert((True,), "the scheduler counts steps from 0, as verl's default (true only)")
        table[optim + "clip_grad"] = Renamed(role + "grad_clip")
        table[optim + "warmup_style"] = Renamed(
            optim + "lr_scheduler_type", {None: DROP, "constant": "constant", "cosine": "cosine"}
        )
    for model in ("critic.model.", "reward_model.model."):  # the policy's use_shm is implemented
        table[model + "use_shm"] = "loads the checkpoint through shared memory: a speed knob, same weights"
    for model in (MODEL, "critic.model."):
        table[model + "hf_config_path"] = Inert((None,), "the model config is read from model.path (null only)")
        table[model + "use_liger"] = not_wired("Liger kernels", False)
        table.update(switched(
            model + "tiled_mlp.enabled",
            Inert((False,), "tiled MLP (sharded MLP activations) is not implemented (tiled_mlp.enabled=false only)"),
            "tiled MLP options, read only with tiled_mlp.enabled=true (refused)",
        ))
    for mtp in (MODEL + "mtp.", ROLLOUT + "mtp.", "critic.model.mtp."):
        table.update({mtp + switch: Inert((False,), _MTP) for switch in ("enable", "enable_train", "enable_rollout")})
        table[mtp + "*"] = "multi-token-prediction options, read only with mtp enabled (refused)"
    table[MODEL + "lora.rank"] = Inert((0,), "verl's Megatron LoRA (model.lora.rank; 0 only): FSDP LoRA is model.lora_rank")
    table.update(each(_MEGATRON_LORA, *(MODEL + "lora." + option for option in (
        "type", "alpha", "dropout", "target_modules", "exclude_modules", "dropout_position", "lora_A_init_method",
        "lora_B_init_method", "a2a_experimental", "dtype", "adapter_path", "freeze_vision_model",
        "freeze_vision_projection", "freeze_language_model",
    ))))
    # verl's per-role copies of rollout.n (their default interpolates it)
    table.update({role + "rollout_n": Renamed(ROLLOUT + "n") for role in (ACTOR, REF, "critic.")})
    return table


TREE: dict[str, Status] = {
    **_per_role(),
    ACTOR + "use_fused_kernels": Renamed(MODEL + "use_fused_kernels"),
    ACTOR + "use_remove_padding": Renamed(MODEL + "use_remove_padding"),
    ACTOR + "calculate_entropy": not_wired("entropy metrics without an entropy loss", False),
    ACTOR + "checkpoint.strict": Inert((True,), "a checkpoint loads strictly, every key present (true only)"),
    **each(
        "an option of verl's clip_cov / kl_cov / kl-penalty loss modes, read only under those loss_mode values "
        "(refused)",
        *(ACTOR + "policy_loss." + option for option in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub",
                                                          "kl_cov_ratio", "ppo_kl_coef")),
    ),
    ACTOR + "policy_loss.dro_beta": "an option of verl's DRO loss mode, read only under that loss_mode (refused)",
    ACTOR + "sum_pi_squared_checkpointing": SPEED,
    # verl's first spelling of the rollout skip
    ROLLOUT + "skip_rollout": Renamed(ROLLOUT + "skip.enable"),
    ROLLOUT + "skip_dump_dir": Renamed(ROLLOUT + "skip.dump_dir"),
    # the original siiRL's multi-turn server scripts' spelling of verl's default_agent_loop
    ROLLOUT + "agent.agent_name": Renamed(ROLLOUT + "agent.default_agent_loop"),
    # verl's engine names are the weight-sync registry's aliases (naive, verl's default, reads as auto: each
    # layout's own transport); the resolve step refuses the engines siiRL does not ship in one line
    ROLLOUT + "checkpoint_engine.backend": Renamed(ROLLOUT + "weight_sync"),
    # verl's V1 trainer sizes its standalone rollout pool here; its fully-async recipe at the top level
    ROLLOUT + "nnodes": Renamed("rollout.nnodes"),
    ROLLOUT + "n_gpus_per_node": Renamed("rollout.n_gpus_per_node"),
    ROLLOUT + "ignore_eos": not_wired("generating past the end-of-sequence token", False),
    ROLLOUT + "pipeline_model_parallel_size": not_wired("pipeline-parallel rollout", 1),
    ROLLOUT + "logprobs_mode": not_wired("choosing which log-probs the engine records", "processed_logprobs"),
    ROLLOUT + "scheduling_policy": not_wired("the engine's request scheduling policy", "fcfs"),
    ROLLOUT + "over_sample_rate": not_wired("over-sampling and cancelling the slowest rollouts", 0),
    ROLLOUT + "multi_turn.num_repeat_rollouts": not_wired("repeating multi-turn rollouts", None),
    ROLLOUT + "checkpoint_engine.engine_kwargs": not_wired("weight-transfer backend options", {}),
    ROLLOUT + "checkpoint_engine.custom_backend_module": not_wired("a custom weight-transfer backend", None),
    **switched(ROLLOUT + "trace.backend", not_wired("rollout tracing (weave, mlflow)", None),
               "rollout tracing options, read only with trace.backend set (refused)"),
    ROLLOUT + "enable_rollout_routing_replay": Inert((False,), _ROUTER),
    ROLLOUT + "quantization_config_file": not_wired("a quantization config file for the engine", None),
    ROLLOUT + "agent.custom_async_server.path": not_wired("a custom async rollout server", None),
    ROLLOUT + "agent.custom_async_server.name": "read only with custom_async_server.path set (refused)",
    **switched(
        ROLLOUT + "prometheus.enable", Inert((False,), "the engine's Prometheus metrics server is not started"),
        "Prometheus options, read only with prometheus.enable=true (refused)",
    ),
    ROLLOUT + "full_determinism": not_wired("verl's deterministic rollout mode", False),
    ROLLOUT + "seed": Inert((42,), "siiRL seeds every worker from trainer.seed; verl's rollout seed only at 42"),
    ROLLOUT + "multi_turn.function_tool_path": _FUNCTION_TOOLS,
    **switched(ROLLOUT + "disaggregation.enabled", not_wired("prefill/decode disaggregated rollout", False),
               "disaggregated-rollout options, read only with disaggregation.enabled=true (refused)"),
    ROLLOUT + "mtp": "verl's per-role copy of a shared option (its default interpolates it); siiRL reads the shared "
    "one (actor_rollout_ref.model.mtp, screened there)",
    ROLLOUT + "qat": "verl's per-role copy of the actor's QAT section (screened there)",
    ROLLOUT + "skip_tokenizer_init": "an engine start-up knob; siiRL's engines detokenize as they need",
    ROLLOUT + "agent.num_workers": "how many agent-loop workers verl starts; siiRL rolls out inside each DAG worker",
    ROLLOUT + "moe_load_balance_metrics_interval": "an MoE load-balance metric of the engine; no results change",
    "model_engine": Inert(
        ("dp",), "verl's choice of training engine: siiRL trains with FSDP2 or replicated, verl's dp engine (dp only)"
    ),
    "data.tokenizer": Inert((None,), "the tokenizer is the policy's (actor_rollout_ref.model.path; null only)"),
    "data.train_max_samples": not_wired("capping the number of training samples", -1),
    "data.val_max_samples": not_wired("capping the number of validation samples", -1),
    "data.tool_config_path": Inert((None,), "tools come from actor_rollout_ref.rollout.multi_turn.tool_config_path"),
    "data.return_raw_input_ids": not_wired("returning unpadded prompt ids", False),
    "data.return_full_prompt": not_wired("returning the rendered prompt text", False),
    "data.validation_shuffle": not_wired("shuffling the validation set", False),
    "data.datagen.path": not_wired("a dynamic data generator", None),
    "data.datagen.name": not_wired("a dynamic data generator", None),
    "data.function_tool_path": _FUNCTION_TOOLS,
    "data.audio_key": not_wired("audio inputs", "audios"),
    "data.mm_processor_kwargs": not_wired("extra processor arguments for images and videos", {}),
    "data.use_shm": "loads the data through shared memory: a speed knob, same rows",
    "data.dataloader_num_workers": "loader worker processes: a speed knob, same rows",
    "data.return_multi_modal_inputs": "where the image inputs are computed: verl's false leaves them to the "
    "rollout, which runs the same processor on the same images; siiRL computes them once as the images load",
    "reward_manager.source": Inert(("register",), "choose the reward manager with reward_model.reward_manager"),
    "reward_manager.name": Inert(("naive",), "choose the reward manager with reward_model.reward_manager"),
    "reward_manager.module.path": Inert((None,), "choose the reward manager with reward_model.reward_manager"),
    "reward_manager.module.name": "read only with reward_manager.module.path set (refused)",
    "critic.model.lora_rank": not_wired("LoRA on the critic", 0),
    "critic.model.lora_adapter_path": not_wired("LoRA on the critic", None),
    **each("a LoRA option, read only with critic.model.lora_rank > 0 (refused)",
           "critic.model.lora_alpha", "critic.model.target_modules", "critic.model.exclude_modules"),
    "critic.model.lora.*": _MEGATRON_LORA,
    "critic.model.custom_chat_template": not_wired("a chat template for the critic of its own", None),
    "critic.shuffle": not_wired("shuffling the critic's mini-batches separately", False),
    **dict.fromkeys(("critic.checkpoint.save_contents", "critic.checkpoint.load_contents"), Inert(
        (["model", "optimizer", "extra"],),
        "a checkpoint holds the whole step (models, optimizers, trainer state); verl's default list only",
    )),
    **each("a memory knob: siiRL computes values under critic.ppo_max_token_len_per_gpu",
           "critic.forward_max_token_len_per_gpu", "critic.forward_micro_batch_size",
           "critic.forward_micro_batch_size_per_gpu"),
    # verl's legacy reward section put the sandbox at the top level (reward_model.sandbox_fusion before it)
    "sandbox_fusion.*": Renamed("reward_model.sandbox_fusion.*", newer=1),
    # verl's trees after its reward move write null on the old reward_model keys: "not set"
    "reward_model.enable_resource_pool": not_wired("a separate resource pool for the reward model", False, None),
    **each("read only with reward_model.enable_resource_pool=true (refused)",
           "reward_model.n_gpus_per_node", "reward_model.nnodes"),
    "reward_model.micro_batch_size": not_wired("verl's global reward-model micro-batch size", None),
    "reward_model.ulysses_sequence_parallel_size": Inert(
        (1,), "a reward model runs without Ulysses sequence parallelism (ulysses_sequence_parallel_size=1 only)"
    ),
    **each("verl's reward loop (reward_model.use_reward_loop), not used here", "reward_model.reward_loop_source",
           "reward_model.reward_loop_module_path", "reward_model.reward_loop_class_name"),
    "reward_model.launch_reward_fn_async": "computing rewards in a background task: a speed knob, same scores",
    "algorithm.filter_groups.max_inflight_gen_batches": (
        "how many generation batches verl's asynchronous DAPO keeps in flight; siiRL fills the batch in order"
    ),
    "trainer.rollout_data_dir": not_wired("dumping each step's rollouts", None),
    "trainer.validation_data_dir": Inert(
        (None,), "validation samples go to <trainer.output_dir>/val_generations.jsonl (trainer.log_val_generations)"
    ),
    "trainer.esi_redundant_time": not_wired("saving before an elastic instance expires", 0),
    "trainer.val_only": not_wired("a validation-only run", False),
    "trainer.default_hdfs_dir": not_wired("copying checkpoints to HDFS", None),
    "trainer.ray_wait_register_center_timeout": "a start-up timeout of verl's workers; siiRL's DAG workers have none",
    "trainer.use_v1": "which of verl's trainer implementations runs (its V1 trainer is the default); one here",
    **each(
        "an option of verl's asynchronous V1 trainer modes, read only with trainer.v1.trainer_mode other than sync",
        "trainer.v1.separate_async.hybrid_rollout.*", *("trainer.v1." + option for option in (
            "sync", "colocate_async.num_warmup_batches", "separate_async.num_warmup_batches",
            "separate_async.parameter_sync_step", "sampler.sync_refill_failed_groups", "sampler.custom_sampler.path",
            "sampler.custom_sampler.name", "sampler.sampler_kwargs",
        )),
    ),
    "ray_kwargs.timeline_json_file": not_wired("writing a Ray timeline", None),
    **each(
        "what verl's profilers do after a trace (move nsys / engine output, run a hook); tool=torch writes its "
        "traces under <output_dir>/profile itself",
        *(f"global_profiler.{key}" for key in ("relocate_results", "finish_hook_cmd", "finish_hook_all_ranks",
                                               "finish_hook_ranks")),
    ),
    **{f"skip.{part}.enable": Inert(
        (False,), "replaying dumped rollouts (verl's skip manager) is not implemented (enable=false only)"
    ) for part in ("rollout", "rollout_tq", "async_rollout")},
    "skip.*": "options of verl's skip manager, read only with its enable=true (refused)",
    **each(_TRANSFER_QUEUE, "transfer_queue.enable", "transfer_queue.*"),
}
