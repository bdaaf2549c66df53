"""Status of the keys of verl's own YAML tree (``ppo_trainer.yaml`` and its groups) that have no siiRL field.

verl's tree sets every option of every role, so a user starting from it passes hundreds of keys at their
defaults. Each has a status here (merged into ``siirl.params.verl_inert_keys``): renamed, inert (accepted
only at verl's default, the value that leaves the feature off, refused in one line otherwise) or not read
(its value cannot change results here). A section switched off by its ``enable`` (or ``mode``) switch has the
switch inert and its options not read: verl reads them only when the section is on, which is refused.
docs/migrating-from-verl.md lists every entry; tests/cli/test_verl_tree_keys.py keeps the two in step.
"""

from __future__ import annotations

from siirl.params.verl_key_kinds import DROP, MTP, SPEED, Inert, Renamed, not_wired
from siirl.params.verl_tree_keys_2026 import INERT_2026, NOT_READ_2026, RENAMED_2026

_ARR = "actor_rollout_ref."
_ACTOR, _REF, _ROLLOUT, _MODEL = _ARR + "actor.", _ARR + "ref.", _ARR + "rollout.", _ARR + "model."
#: Sections that carry verl's per-role profiler, FSDP engine options and optimizer options.
_PROFILED = (_ACTOR, _REF, _ROLLOUT, "critic.", "reward_model.")
_FSDP_ROLES = {_ACTOR: False, _REF: True, "critic.model.": False}  # role prefix -> verl's forward_only
_OPTIMIZED = (_ACTOR, "critic.")

_PROFILER = (
    "verl's per-role profiler switch: global_profiler.tool=torch traces each profiled step whole, every role on "
    "every rank (profiling one role's part of a step is not implemented)"
)
_PROFILER_OPTIONS = (
    "options of verl's per-role profiler (its ranks, tool options): global_profiler.tool=torch traces every rank"
)
_ROUTER = "MoE router replay is not implemented (router_replay.mode=disabled only)"
_TILED_MLP = "tiled MLP (sharded MLP activations) is not implemented (tiled_mlp.enabled=false only)"
_SEED = "siiRL seeds every worker from trainer.seed; verl's per-engine seed is accepted only at its default 42"
_WHOLE_STEP = "a checkpoint holds the whole step (models, optimizers, trainer state); verl's default list only"
_TRANSFER_QUEUE = (
    "verl's transfer queue streams batches between its roles without the controller; siiRL's data "
    "coordinator (per-node data buffers, workers fetching the samples they need) does that in every run"
)
_ROLE_COPY = "verl's per-role copy of a shared option (its default interpolates it); siiRL reads the shared one"


def _per_role() -> tuple[dict[str, Inert], dict[str, str]]:
    inert: dict[str, Inert] = {}
    not_read: dict[str, str] = {}
    for role in _PROFILED:
        not_read[role + "profiler.enable"] = _PROFILER
        not_read[role + "profiler.*"] = _PROFILER_OPTIONS
    for role in (_ACTOR, _REF):
        inert[role + "router_replay.mode"] = Inert(("disabled",), _ROUTER)
        not_read[role + "router_replay.*"] = "router replay files, read only with router_replay.mode set (refused)"
    for role, forward_only in _FSDP_ROLES.items():
        fsdp = role + "fsdp_config."
        inert[fsdp + "seed"] = Inert((42,), _SEED)
        inert[fsdp + "full_determinism"] = not_wired("verl's full-determinism mode", False)
        not_read[fsdp + "ulysses_sequence_parallel_size"] = (
            "verl fills it from the role's ulysses_sequence_parallel_size, which siiRL reads"
        )
        inert[fsdp + "forward_only"] = Inert(
            (forward_only,), "whether a role trains is fixed by its section (verl's default for the section only)"
        )
        for knob in ("entropy_from_logits_with_chunking", "use_torch_compile", "entropy_checkpointing"):
            not_read[fsdp + knob] = SPEED
    for role in _OPTIMIZED:
        optim = role + "optim."
        inert[optim + "optimizer"] = Inert(("AdamW",), "siiRL's optimizer is torch AdamW (AdamW only)")
        inert[optim + "optimizer_impl"] = Inert(("torch.optim",), "siiRL's optimizer is torch AdamW (torch.optim only)")
        inert[optim + "num_cycles"] = Inert((0.5,), "the cosine schedule decays over half a cycle (0.5 only)")
        inert[optim + "override_optimizer_config"] = Inert((None,), "Megatron optimizer options (null only)")
    for model in ("critic.model.", "reward_model.model."):  # the policy's use_shm is implemented
        not_read[model + "use_shm"] = "loads the checkpoint through shared memory: a speed knob, same weights"
    for model in (_MODEL, "critic.model."):
        inert[model + "tiled_mlp.enabled"] = Inert((False,), _TILED_MLP)
        not_read[model + "tiled_mlp.*"] = "tiled MLP options, read only with tiled_mlp.enabled=true (refused)"
    return inert, not_read


_ROLE_INERT, _ROLE_NOT_READ = _per_role()

TREE_RENAMED: dict[str, Renamed] = {
    **{
        role + "optim.warmup_style": Renamed(
            role + "optim.lr_scheduler_type", {None: DROP, "constant": "constant", "cosine": "cosine"}
        )
        for role in _OPTIMIZED
    },
    "critic.optim.clip_grad": Renamed("critic.grad_clip"),
    # verl's per-role copies of rollout.n (their default interpolates it)
    **{role + "rollout_n": Renamed(_ROLLOUT + "n") for role in (_ACTOR, _REF, "critic.")},
    _ACTOR + "use_fused_kernels": Renamed(_MODEL + "use_fused_kernels"),
    _ACTOR + "use_remove_padding": Renamed(_MODEL + "use_remove_padding"),
    # verl's first spelling of the rollout skip
    _ROLLOUT + "skip_rollout": Renamed(_ROLLOUT + "skip.enable"),
    _ROLLOUT + "skip_dump_dir": Renamed(_ROLLOUT + "skip.dump_dir"),
    # the original siiRL's multi-turn server scripts' spelling of verl's default_agent_loop
    _ROLLOUT + "agent.agent_name": Renamed(_ROLLOUT + "agent.default_agent_loop"),
    # verl's engine names are the weight-sync registry's aliases (naive, verl's default, reads as auto: each
    # layout's own transport); the resolve step refuses the engines siiRL does not ship in one line
    _ROLLOUT + "checkpoint_engine.backend": Renamed(_ROLLOUT + "weight_sync"),
    **RENAMED_2026,
}

TREE_INERT: dict[str, Inert] = {
    **_ROLE_INERT,
    **INERT_2026,
    _ACTOR + "loss_scale_factor": not_wired("verl's constant loss scale", None),
    _ACTOR + "calculate_entropy": not_wired("entropy metrics without an entropy loss", False),
    _ACTOR + "data_loader_seed": Inert((42,), _SEED),
    _ACTOR + "checkpoint.async_save": not_wired("asynchronous checkpoint saving", False),
    _MODEL + "mtp.enable": Inert((False,), MTP),
    _MODEL + "mtp.enable_train": Inert((False,), MTP),
    _MODEL + "mtp.enable_rollout": Inert((False,), MTP),
    _MODEL + "hf_config_path": Inert((None,), "the model config is read from model.path (null only)"),
    _MODEL + "use_liger": not_wired("Liger kernels", False),
    _ROLLOUT + "ignore_eos": not_wired("generating past the end-of-sequence token", False),
    _ROLLOUT + "pipeline_model_parallel_size": not_wired("pipeline-parallel rollout", 1),
    _ROLLOUT + "logprobs_mode": not_wired("choosing which log-probs the engine records", "processed_logprobs"),
    _ROLLOUT + "scheduling_policy": not_wired("the engine's request scheduling policy", "fcfs"),
    _ROLLOUT + "over_sample_rate": not_wired("over-sampling and cancelling the slowest rollouts", 0),
    _ROLLOUT + "multi_turn.num_repeat_rollouts": not_wired("repeating multi-turn rollouts", None),
    _ROLLOUT + "checkpoint_engine.engine_kwargs": not_wired("weight-transfer backend options", {}),
    _ROLLOUT + "trace.backend": not_wired("rollout tracing (weave, mlflow)", None),
    _ROLLOUT + "enable_rollout_routing_replay": Inert((False,), _ROUTER),
    _ROLLOUT + "quantization_config_file": not_wired("a quantization config file for the engine", None),
    _ROLLOUT + "mtp.enable": Inert((False,), MTP),
    _ROLLOUT + "mtp.enable_train": Inert((False,), MTP),
    _ROLLOUT + "mtp.enable_rollout": Inert((False,), MTP),
    _ROLLOUT + "agent.custom_async_server.path": not_wired("a custom async rollout server", None),
    _ROLLOUT + "prometheus.enable": Inert((False,), "the engine's Prometheus metrics server is not started"),
    "data.tokenizer": Inert((None,), "the tokenizer is the policy's (actor_rollout_ref.model.path; null only)"),
    "data.train_max_samples": not_wired("capping the number of training samples", -1),
    "data.val_max_samples": not_wired("capping the number of validation samples", -1),
    "data.tool_config_path": Inert((None,), "tools come from actor_rollout_ref.rollout.multi_turn.tool_config_path"),
    "data.return_raw_input_ids": not_wired("returning unpadded prompt ids", False),
    "data.return_full_prompt": not_wired("returning the rendered prompt text", False),
    "data.validation_shuffle": not_wired("shuffling the validation set", False),
    "data.datagen.path": not_wired("a dynamic data generator", None),
    "data.datagen.name": not_wired("a dynamic data generator", None),
    "reward_manager.source": Inert(("register",), "choose the reward manager with reward_model.reward_manager"),
    "reward_manager.name": Inert(("naive",), "choose the reward manager with reward_model.reward_manager"),
    "reward_manager.module.path": Inert((None,), "choose the reward manager with reward_model.reward_manager"),
    "critic.model.lora_rank": not_wired("LoRA on the critic", 0),
    "critic.shuffle": not_wired("shuffling the critic's mini-batches separately", False),
    "critic.data_loader_seed": Inert((42,), _SEED),
    "critic.checkpoint.save_contents": Inert((["model", "optimizer", "extra"],), _WHOLE_STEP),
    "critic.checkpoint.load_contents": Inert((["model", "optimizer", "extra"],), _WHOLE_STEP),
    "critic.checkpoint.async_save": not_wired("asynchronous checkpoint saving", False),
    # verl's trees after its reward move write null on the old reward_model keys: "not set"
    "reward_model.enable_resource_pool": not_wired("a separate resource pool for the reward model", False, None),
    "reward_model.micro_batch_size": not_wired("verl's global reward-model micro-batch size", None),
    "reward_model.ulysses_sequence_parallel_size": Inert(
        (1,), "a reward model runs without Ulysses sequence parallelism (ulysses_sequence_parallel_size=1 only)"
    ),
    "trainer.rollout_data_dir": not_wired("dumping each step's rollouts", None),
    "trainer.validation_data_dir": Inert(
        (None,), "validation samples go to <trainer.output_dir>/val_generations.jsonl (trainer.log_val_generations)"
    ),
    "trainer.esi_redundant_time": not_wired("saving before an elastic instance expires", 0),
    "trainer.val_only": not_wired("a validation-only run", False),
    "trainer.default_hdfs_dir": not_wired("copying checkpoints to HDFS", None),
    "ray_kwargs.timeline_json_file": not_wired("writing a Ray timeline", None),
}

TREE_NOT_READ: dict[str, str] = {
    **_ROLE_NOT_READ,
    **NOT_READ_2026,
    _MODEL + "mtp.*": "multi-token-prediction options, read only with mtp enabled (refused)",
    _ROLLOUT + "mtp": _ROLE_COPY + " (actor_rollout_ref.model.mtp, screened there)",
    _ROLLOUT + "mtp.*": "multi-token-prediction options, read only with mtp enabled (refused)",
    _ROLLOUT + "prometheus.*": "Prometheus options, read only with prometheus.enable=true (refused)",
    _ROLLOUT + "trace.*": "rollout tracing options, read only with trace.backend set (refused)",
    _ROLLOUT + "skip_tokenizer_init": "an engine start-up knob; siiRL's engines detokenize as they need",
    _ROLLOUT + "agent.num_workers": "how many agent-loop workers verl starts; siiRL rolls out inside each DAG worker",
    _ROLLOUT + "agent.custom_async_server.name": "read only with custom_async_server.path set (refused)",
    **{
        _ACTOR + "policy_loss." + option: "an option of verl's clip_cov / kl_cov / kl-penalty loss modes, read only "
        "under those loss_mode values (refused)"
        for option in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef")
    },
    _ACTOR + "sum_pi_squared_checkpointing": SPEED,
    "data.use_shm": "loads the data through shared memory: a speed knob, same rows",
    "data.dataloader_num_workers": "loader worker processes: a speed knob, same rows",
    "data.return_multi_modal_inputs": "where the image inputs are computed: verl's false leaves them to the "
    "rollout, which runs the same processor on the same images; siiRL computes them once as the images load",
    "reward_manager.module.name": "read only with reward_manager.module.path set (refused)",
    "critic.model.lora_alpha": "a LoRA option, read only with critic.model.lora_rank > 0 (refused)",
    "critic.model.target_modules": "a LoRA option, read only with critic.model.lora_rank > 0 (refused)",
    "critic.forward_max_token_len_per_gpu": "a memory knob: siiRL computes values under critic.ppo_max_token_len_per_gpu",
    "critic.forward_micro_batch_size": "a memory knob: siiRL computes values under critic.ppo_max_token_len_per_gpu",
    "critic.forward_micro_batch_size_per_gpu": "a memory knob: siiRL computes values under critic.ppo_max_token_len_per_gpu",
    "reward_model.n_gpus_per_node": "read only with reward_model.enable_resource_pool=true (refused)",
    "reward_model.nnodes": "read only with reward_model.enable_resource_pool=true (refused)",
    "reward_model.reward_loop_source": "verl's reward loop (reward_model.use_reward_loop), not used here",
    "reward_model.reward_loop_module_path": "verl's reward loop (reward_model.use_reward_loop), not used here",
    "reward_model.reward_loop_class_name": "verl's reward loop (reward_model.use_reward_loop), not used here",
    "reward_model.launch_reward_fn_async": "computing rewards in a background task: a speed knob, same scores",
    "trainer.ray_wait_register_center_timeout": "a start-up timeout of verl's workers; siiRL's DAG workers have none",
    "transfer_queue.enable": _TRANSFER_QUEUE,
    "transfer_queue.*": _TRANSFER_QUEUE,
}
