"""``actor_rollout_ref.*`` and ``critic.*``: models, optimisers, rollout engine."""

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.errors import ConfigError
from siirl.params.checkpoint_contents import CheckpointContentsConfig
from siirl.params.environment import MultiTurnConfig
from siirl.params.fsdp import FSDPConfig
from siirl.params.lora import check_lora_keys
from siirl.params.old_log_prob import SOURCES as OLD_LOG_PROB_SOURCES
from siirl.params.rules import (
    FINITE_NON_NEGATIVE,
    FINITE_POSITIVE,
    NON_NEGATIVE,
    NULL_OR_POSITIVE,
    OPTIONAL_POSITIVE,
    POSITIVE,
    PROBABILITY,
    TOP_K,
    UNIT_INTERVAL,
    UNSET_OR_POSITIVE,
    VALUE_MUST_BE,
    checked,
    is_megatron,
    one_of,
    or_null,
    refused,
)
from siirl.params.sequence_parallel import SP_SIZE

#: ``model.remove_padding_layout`` values (see ``siirl.engine.workers.padding_free.choose_layout``).
REMOVE_PADDING_LAYOUTS = ("auto", "packed", "shared", "trimmed")


def strategy_field(role: str) -> Any:
    """A role's ``strategy``: auto (replicate small models, FSDP2 otherwise) | fsdp (= fsdp2) | replicate; verl's
    megatron is not implemented and refused, naming ``role``."""
    return refused(
        "auto", is_megatron, f"is not implemented; {role} with FSDP2 or replicated (strategy=auto|fsdp|replicate)"
    )


@dataclass
class FusedKernelOptions:
    #: verl's choice of fused-kernel implementation (torch | triton); here the device backend names its one
    #: kernel, so the value is checked and recorded, not used to pick another.
    impl_backend: Optional[str] = checked(  # noqa: UP045 - OmegaConf reads Optional
        None, or_null(one_of("torch", "triton"), "one of torch, triton (or null)")
    )


@dataclass
class ModelConfig:
    #: Local Hugging Face model directory; empty = the embedded tiny Qwen2 model.
    path: str = ""
    tokenizer_path: str = ""
    #: auto (fp32 on CPU, bf16 on accelerators) | float32 | bfloat16 | float16
    dtype: str = "auto"
    #: auto = the device backend's preference (sdpa, flash_attention_2, eager ...)
    attn_implementation: str = "auto"
    enable_gradient_checkpointing: bool = False
    #: verl's: during training forwards, the tensors autograd keeps for backward wait in (pinned) host memory
    #: instead of device memory (``torch.autograd.graph.save_on_cpu``); nothing moves on the CPU backend.
    enable_activation_offload: bool = False
    #: Padding-free micro-batches (packed/trimmed sequences).
    use_remove_padding: bool = True
    #: auto (packed with a varlen kernel, each shared prompt once under siiRL's varlen SDPA; else
    #: length-trimmed) | packed (one prompt copy per response) | shared (each prompt once per micro-batch,
    #: under siiRL's varlen SDPA) | trimmed
    remove_padding_layout: str = checked("auto", one_of(*REMOVE_PADDING_LAYOUTS))
    trust_remote_code: bool = False
    #: Values set on the model's Hugging Face config before its weights load (verl's key), e.g.
    #: ``{attention_dropout: 0.0}``; a name the config does not have is refused at load.
    override_config: dict[str, Any] = field(default_factory=dict)
    #: The device's fused log-prob kernel where it has one (flash-attn's Triton cross-entropy on CUDA,
    #: torch_npu on Ascend); false = the portable PyTorch path everywhere.
    use_fused_kernels: bool = True
    fused_kernel_options: FusedKernelOptions = field(default_factory=lambda: FusedKernelOptions())
    #: verl's: a module (or list of modules) of the user's, imported by the launcher before the config is
    #: checked and by every DAG worker before it builds anything, so what it registers (an estimator, a loss,
    #: a score function, a model class) is selectable by its registered name; null = none.
    external_lib: Any = None


@dataclass
class FSDPModelConfig(ModelConfig):
    """A model section that carries its own ``fsdp_config`` (verl's ``critic.model``, ``reward_model.model``)."""

    fsdp_config: FSDPConfig = field(default_factory=FSDPConfig)


@dataclass
class LoraSection:
    """verl's ``model.lora`` section. siiRL reads ``merge``; the other keys are verl's Megatron LoRA options
    (FSDP LoRA is ``lora_rank`` / ``lora_alpha`` / ``target_modules``, in verl and here)."""

    #: Sync the policy to the rollout engine as merged weights (``W + scaling * B @ A``, peft's merge) instead
    #: of serving the adapter beside the base weights (vLLM's ``LoRARequest``), as verl's ``lora.merge``: the
    #: engine runs without LoRA, each sync sends every weight. The adapter is still what trains and is saved.
    merge: bool = False


@dataclass
class PolicyModelConfig(ModelConfig):
    """``actor_rollout_ref.model``: the policy's model plus verl's LoRA and loading keys."""

    #: LoRA rank of the adapters trained through peft; 0 = full fine-tuning (verl's default).
    lora_rank: int = checked(0, (lambda v: v >= 0, ">= 0 (0 = off)"))
    lora_alpha: int = 16
    #: Module names (or suffixes) that get adapters, or ``all-linear`` (every linear layer but the LM head).
    target_modules: Any = "all-linear"
    #: Module names (or suffixes) left without adapters; null = none.
    exclude_modules: Any = None
    #: A saved peft adapter (adapter_config.json + weights) to start from; its rank and targets win. null or
    #: empty = none (verl's default is null).
    lora_adapter_path: Optional[str] = None  # noqa: UP045
    lora: LoraSection = field(default_factory=LoraSection)
    #: Read the model files from a copy in /dev/shm, made once per host and shared by its workers.
    use_shm: bool = False
    #: A Jinja chat template that replaces the tokenizer's own wherever the run renders chats (prompts,
    #: tool prompts, multi-turn observations, validation); null = the tokenizer's template.
    custom_chat_template: Optional[str] = None  # noqa: UP045

    def validate(self, cfg: Any, key: str) -> None:
        """LoRA's rank, alpha and module lists are well formed; a custom chat template compiles."""
        check_lora_keys(self, key)
        check_chat_template(self.custom_chat_template, f"{key}.custom_chat_template")


def check_chat_template(template: Any, key: str) -> None:
    """verl's ``custom_chat_template``: null, or a Jinja template that compiles in the sandboxed environment
    transformers renders chat templates in (so it fails here, not on a worker's first prompt)."""
    if template is None:
        return
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"bad config: {key} must be a Jinja chat template string (or null), got {template!r}")
    from jinja2 import TemplateSyntaxError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    try:
        environment.from_string(template)
    except TemplateSyntaxError as exc:
        raise ConfigError(f"bad config: {key} is not a valid Jinja template (line {exc.lineno}: {exc.message})") from None


@dataclass
class OptimConfig:
    #: Small on purpose: Adam's first steps move every weight by ~lr, which wrecks a tiny policy at 1e-3.
    lr: float = checked(1e-4, FINITE_NON_NEGATIVE)
    weight_decay: float = checked(0.0, FINITE_NON_NEGATIVE)
    #: Adam's two moment decays, as ``torch.optim.AdamW`` takes them: refused before Ray, not on a worker.
    betas: list[float] = checked([0.9, 0.999], (lambda v: len(v) == 2 and all(0.0 <= b < 1.0 for b in v),
                                                "two values in [0, 1)"))
    eps: float = checked(1e-8, FINITE_POSITIVE)
    #: Warmup as a fraction of total steps (used when lr_warmup_steps < 0).
    lr_warmup_steps_ratio: float = checked(0.0, UNIT_INTERVAL)
    lr_warmup_steps: int = -1
    #: constant | cosine
    lr_scheduler_type: str = "constant"
    #: The floor the cosine schedule decays to, as a fraction of ``lr``.
    min_lr_ratio: float = checked(0.0, UNIT_INTERVAL)
    #: -1: the run's length (siirl.params.resolved.ResolvedRun.run_steps), as verl's trainer fills it.
    total_training_steps: int = -1


@dataclass
class PolicyLossConfig:
    #: auto (follows algorithm.adv_estimator: cpgd -> cpgd, gspo -> gspo, else vanilla) | vanilla | gspo |
    #: cpgd | sapo | ... | module:function (registered in siirl.algorithms)
    loss_mode: str = "auto"
    #: SAPO's gate temperatures as verl's current scripts write them (``+policy_loss.tau_pos``); null = the
    #: actor's ``tau_pos`` / ``tau_neg``.
    tau_pos: Optional[float] = checked(None, OPTIONAL_POSITIVE)  # noqa: UP045 - OmegaConf reads Optional
    tau_neg: Optional[float] = checked(None, OPTIONAL_POSITIVE)  # noqa: UP045


@dataclass
class UpdateConfig:
    """The PPO update keys the actor and the critic share (verl's names)."""

    #: Prompts per optimiser step (x rollout.n responses), summed over dp ranks.
    ppo_mini_batch_size: int = checked(16, POSITIVE)
    #: null = not set (64). Setting it without ``use_dynamic_bsz`` turns token-budget batching off, as the
    #: command asked for micro-batches of this size (see ``siirl.params.micro_batch_keys``).
    ppo_micro_batch_size_per_gpu: Optional[int] = checked(None, UNSET_OR_POSITIVE)  # noqa: UP045
    #: verl's deprecated global form (summed over dp ranks): folded into the per-device key at load.
    ppo_micro_batch_size: Optional[int] = None  # noqa: UP045
    #: null = true unless ``ppo_micro_batch_size_per_gpu`` is set.
    use_dynamic_bsz: Optional[bool] = None  # noqa: UP045
    ppo_max_token_len_per_gpu: int = checked(4096, POSITIVE)
    ppo_epochs: int = checked(1, POSITIVE)
    #: Ulysses sequence parallelism: this many ranks share each micro-batch, each running the model on a
    #: slice of its packed tokens (needs model.use_remove_padding); data parallelism is world / this.
    ulysses_sequence_parallel_size: int = checked(1, SP_SIZE, says=VALUE_MUST_BE)
    loss_agg_mode: str = "token-mean"
    #: Constant divisor of seq-mean-token-sum-norm (0: the response width); applies to every loss term
    #: (policy, entropy, KL).
    loss_agg_horizon: int = checked(0, NON_NEGATIVE)
    grad_clip: float = 1.0


@dataclass
class LogProbBatchingConfig:
    """The micro-batching keys of a forward-only log-prob pass (the rollout's policy, the reference)."""

    #: null = not set; as for the actor's ppo_micro_batch_size_per_gpu / use_dynamic_bsz.
    log_prob_micro_batch_size_per_gpu: Optional[int] = checked(None, UNSET_OR_POSITIVE)  # noqa: UP045
    #: verl's deprecated global form (summed over dp ranks): folded into the per-device key at load.
    log_prob_micro_batch_size: Optional[int] = None  # noqa: UP045
    log_prob_use_dynamic_bsz: Optional[bool] = None  # noqa: UP045
    log_prob_max_token_len_per_gpu: int = checked(8192, POSITIVE)


@dataclass
class ActorConfig(UpdateConfig):
    #: Also the reference's (it shards as the actor does).
    strategy: str = strategy_field("the actor trains")
    #: auto | recompute | rollout: where the PPO old log-probs come from (see siirl.params.old_log_prob).
    old_log_prob_source: str = checked("auto", one_of(*OLD_LOG_PROB_SOURCES))
    #: verl's: the policy's vision tower (a VLM's image encoder) is not trained; nothing to freeze in a text LM.
    freeze_vision_tower: bool = False
    #: verl's PrefixGrouper: the actor's forward passes run a prompt once for all its responses. Here that is
    #: the ``shared`` layout (padding-free, prompt groups planned into one micro-batch), whatever
    #: ``model.use_remove_padding`` says (verl's grouper needs it false; the reference keeps the model's).
    use_prefix_grouper: bool = False
    shuffle: bool = False
    #: Token-ratio clip range where clip_ratio_low/high are not set.
    clip_ratio: float = 0.2
    #: null = clip_ratio. Under loss_mode gspo, a value set here is GSPO's range (unless gspo_clip_ratio_* is).
    clip_ratio_low: Optional[float] = None  # noqa: UP045
    clip_ratio_high: Optional[float] = None  # noqa: UP045
    clip_ratio_c: float = 3.0
    #: GSPO's own (tiny) clip range on the sequence-level ratio; null = clip_ratio_low/high when those are
    #: set, else 3e-4 / 4e-4.
    gspo_clip_ratio_low: Optional[float] = None  # noqa: UP045
    gspo_clip_ratio_high: Optional[float] = None  # noqa: UP045
    #: CPGD policy-drift regulariser: coefficient and gradient clip.
    policy_drift_coeff: float = 0.0
    policy_drift_clip: float = 2.0
    #: SAPO's soft-gate temperatures for tokens with positive / non-positive advantage (verl's keys).
    tau_pos: float = checked(1.0, POSITIVE)  # SAPO's gate divides by its temperatures
    tau_neg: float = checked(1.05, POSITIVE)
    policy_loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    #: verl's: the old-log-prob forward also returns ``sum_pi_squared`` (sum over the vocabulary of pi^2
    #: per response token), which ``adv_estimator=optimal_token_baseline`` needs; forces that forward.
    calculate_sum_pi_squared: bool = False
    optim: OptimConfig = field(default_factory=OptimConfig)
    fsdp_config: FSDPConfig = field(default_factory=FSDPConfig)
    #: verl's checkpoint contents; ``hf_model`` in save_contents also writes a Hugging Face model folder.
    checkpoint: CheckpointContentsConfig = field(default_factory=CheckpointContentsConfig)


@dataclass
class ValSamplingConfig:
    temperature: float = checked(0.0, (lambda v: 0 <= v < math.inf, "finite and >= 0 (0: greedy)"))
    top_p: float = checked(1.0, PROBABILITY)
    top_k: int = checked(-1, TOP_K)
    n: int = checked(1, POSITIVE)
    do_sample: bool = False


@dataclass
class EngineKwargs:
    """Keyword arguments handed unchanged to one engine's constructor (vLLM ``LLM`` / SGLang ``Engine``);
    they win over the values siiRL derives from the keys above."""

    vllm: dict[str, Any] = field(default_factory=dict)
    sglang: dict[str, Any] = field(default_factory=dict)
    #: Accepted for verl's scripts; there is no TensorRT-LLM engine here (rollout.name=trtllm is refused).
    trtllm: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutSkipConfig:
    """verl's ``rollout.skip``: dump each step's rollout under ``dump_dir`` and train later runs from it."""

    enable: bool = False
    dump_dir: str = "~/.verl/rollout_dump"
    #: Steps from the start whose rollouts are dumped (or loaded, once dumped).
    max_dump_step: int = checked(1, POSITIVE)
    #: What a step past ``max_dump_step`` runs (siirl.dag_worker.rollout_dump).
    action: str = checked("cache", one_of("cache", "repeat", "repeat_last"))


@dataclass
class TeamRolloutConfig:
    """The original siiRL's ``rollout.agent`` section (its multi-agent teams) and verl's agent-loop file.

    verl's agent loops (siirl.agent_loops, checked before Ray): ``single_turn_agent`` alone is the plain
    rollout, ``tool_agent`` the multi-turn tool rollout, a user's loop the agent-loop rollout."""

    #: The loop a row without an ``agent_name`` column runs; null = single_turn_agent.
    default_agent_loop: Optional[str] = None  # noqa: UP045 - OmegaConf reads Optional
    #: verl's YAML list of named agent loops (``- name: ..., _target_: module.Class``).
    agent_loop_config_path: Optional[str] = None  # noqa: UP045
    #: MARFT workflows: the agent whose node names an environment (``env_path``) is rewarded by it for its
    #: turn, instead of by the workflow's reward node (docs/agents.md). Read by MARFT workflow files only.
    rewards_with_env: bool = False


@dataclass
class RolloutConfig(LogProbBatchingConfig):
    #: hf | vllm | sglang (the device backend says which are available; on device=cpu vllm/sglang fall
    #: back to hf with a warning)
    name: str = refused(
        "hf", lambda v: v == "trtllm", "is not implemented: there is no TensorRT-LLM rollout engine; use vllm, sglang or hf"
    )
    #: sync | async (verl's default): both generate inside the DAG worker; whether rollout and training
    #: overlap is ``trainer.v1.trainer_mode`` / ``async_training.*`` (siirl.params.async_training).
    mode: str = checked("sync", one_of("sync", "async"))
    #: Generation limits; null = data.max_prompt_length / data.max_response_length. response_length may
    #: not exceed data.max_response_length (the width training holds), prompt_length not undercut
    #: data.max_prompt_length (prompts the dataloader keeps).
    prompt_length: Optional[int] = None  # noqa: UP045 - OmegaConf reads Optional
    response_length: Optional[int] = None  # noqa: UP045
    #: Engine weights/activations dtype; auto = the model's (actor_rollout_ref.model.dtype).
    dtype: str = "auto"
    n: int = checked(8, POSITIVE)
    temperature: float = checked(1.0, (
        lambda v: 0 < v < math.inf,
        (
            "finite and > 0: the policy's log-probs are taken at the sampling temperature; greedy validation is "
            "actor_rollout_ref.rollout.val_kwargs.temperature=0"
        ),
    ))
    top_p: float = checked(1.0, PROBABILITY)
    top_k: int = checked(-1, TOP_K)
    do_sample: bool = True
    tensor_model_parallel_size: int = checked(1, POSITIVE)
    gpu_memory_utilization: float = 0.5
    #: Release engine memory while the actor trains (colocated engines).
    free_cache_engine: bool = True
    enforce_eager: bool = False
    #: vLLM/SGLang engine knobs (no-ops on hf); null = the engine's own default. See
    #: docs/migrating-from-verl.md for the argument each becomes.
    max_model_len: Optional[int] = checked(None, NULL_OR_POSITIVE)  # noqa: UP045
    max_num_batched_tokens: Optional[int] = checked(None, NULL_OR_POSITIVE)  # noqa: UP045
    max_num_seqs: Optional[int] = checked(None, NULL_OR_POSITIVE)  # noqa: UP045
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    disable_log_stats: bool = True
    cudagraph_capture_sizes: Optional[list[int]] = None  # noqa: UP045
    #: vLLM / SGLang ``quantization`` (e.g. ``fp8``: the engine quantizes the weights it loads); null = the
    #: model's own. The hf engine generates in the policy's dtype and says so once.
    quantization: Optional[str] = None  # noqa: UP045
    #: Wake a sleeping engine weights first and KV cache just before generating (halves peak memory).
    multi_stage_wake_up: bool = True
    engine_kwargs: EngineKwargs = field(default_factory=EngineKwargs)
    #: verl's key: the rollout records the log-probs it samples with, and the old-log-prob node logs how far
    #: they are from the actor's (``training/rollout_probs_diff_*``). HF engine only.
    calculate_log_probs: bool = False
    #: Sequences generated per forward batch by the HF engine.
    micro_batch_size: int = checked(256, POSITIVE)
    #: Bucket size (MB) for streaming weights from the trainer into the engine (verl's
    #: ``checkpoint_engine.update_weights_bucket_megabytes``).
    weight_sync_bucket_mb: int = checked(512, POSITIVE)
    #: How the trainer's weights reach the engine (verl's ``checkpoint_engine.backend``): auto (the layout's
    #: own), in_place (naive), object_store (ray), broadcast (nccl, hccl, gloo) or engine_broadcast; the
    #: resolve step (siirl.weight_transport.resolve_weight_sync) fixes it per trainer mode.
    weight_sync: str = "auto"
    #: Seconds one generation call of the engine may take (``generate``; with partial rollouts, each piece):
    #: past it the step fails in one line naming the engine, the step and this key. null (default) = no
    #: bound: a healthy generation's length depends on the model, the batch and the response length, and the
    #: stall watchdog (``trainer.stall_timeout_s``) already ends a rank that hangs.
    generation_timeout_s: Optional[float] = checked(  # noqa: UP045
        None, or_null(FINITE_POSITIVE, "null (no bound) or finite and > 0")
    )
    #: How vLLM / SGLang read the model dir at start-up (``dummy``: random weights, replaced by the first weight
    #: sync). The HF engine always reads the dir.
    load_format: str = checked("auto", one_of("auto", "safetensors", "pt", "dummy"))
    #: verl's memory-saving LoRA sync (merge and send one layer at a time). siiRL always syncs parameter
    #: by parameter, merging each adapted layer as it goes, so both values behave alike.
    layered_summon: bool = False
    stop: list[str] = field(default_factory=list)
    val_kwargs: ValSamplingConfig = field(default_factory=ValSamplingConfig)
    multi_turn: MultiTurnConfig = field(default_factory=MultiTurnConfig)
    agent: TeamRolloutConfig = field(default_factory=TeamRolloutConfig)
    skip: RolloutSkipConfig = field(default_factory=RolloutSkipConfig)


@dataclass
class RefConfig(LogProbBatchingConfig):
    #: null = the actor's ``ulysses_sequence_parallel_size`` (verl's default).
    ulysses_sequence_parallel_size: Optional[int] = checked(  # noqa: UP045
        None, or_null(SP_SIZE, f"{SP_SIZE[1]} (or null)"), says=VALUE_MUST_BE
    )
    #: siiRL's earlier spelling of ``fsdp_config.param_offload``; folded into it when the config loads.
    param_offload: bool | None = None
    fsdp_config: FSDPConfig = field(default_factory=FSDPConfig)


@dataclass
class ActorRolloutRefConfig:
    model: PolicyModelConfig = field(default_factory=PolicyModelConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    ref: RefConfig = field(default_factory=RefConfig)
    #: verl: the rollout engine lives beside the actor (true); false is verl's fully-async launch, where the
    #: rollout has devices of its own (``trainer.v1.trainer_mode=separate_async``, siirl.params.async_training).
    hybrid_engine: bool = True


@dataclass
class CriticConfig(UpdateConfig):
    enable: bool = False
    strategy: str = strategy_field("the critic trains")
    model: FSDPModelConfig = field(default_factory=FSDPModelConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=5e-4))
    cliprange_value: float = checked(0.5, NON_NEGATIVE)
