"""``actor_rollout_ref.*`` and ``critic.*``: models, optimisers, rollout engine."""

from dataclasses import dataclass, field
from typing import Any

from siirl.params.environment import MultiTurnConfig

#: ``model.remove_padding_layout`` values (see ``siirl.engine.workers.padding_free.choose_layout``).
REMOVE_PADDING_LAYOUTS = ("auto", "packed", "trimmed")
#: ``rollout.load_format`` values: how vLLM / SGLang read the model dir at start-up (``dummy``: random
#: weights, replaced by the first weight sync). The HF engine always reads the dir.
ROLLOUT_LOAD_FORMATS = ("auto", "safetensors", "pt", "dummy")


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
    #: Padding-free micro-batches (packed/trimmed sequences).
    use_remove_padding: bool = True
    #: auto (packed with a varlen kernel, each shared prompt once under siiRL's varlen SDPA; else
    #: length-trimmed) | packed (one prompt copy per response) | trimmed
    remove_padding_layout: str = "auto"
    trust_remote_code: bool = False


@dataclass
class PolicyModelConfig(ModelConfig):
    """``actor_rollout_ref.model``: the policy's model plus verl's LoRA and loading keys."""

    #: LoRA rank of the adapters trained through peft; 0 = full fine-tuning (verl's default).
    lora_rank: int = 0
    lora_alpha: int = 16
    #: Module names (or suffixes) that get adapters, or ``all-linear`` (every linear layer but the LM head).
    target_modules: Any = "all-linear"
    #: Module names (or suffixes) left without adapters; null = none.
    exclude_modules: Any = None
    #: A saved peft adapter (adapter_config.json + weights) to start from; its rank and targets win.
    lora_adapter_path: str = ""
    #: Read the model files from a copy in /dev/shm, made once per host and shared by its workers.
    use_shm: bool = False


@dataclass
class OptimConfig:
    #: Small on purpose: Adam's first steps move every weight by ~lr, which wrecks a tiny policy at 1e-3.
    lr: float = 1e-4
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    #: Warmup as a fraction of total steps (used when lr_warmup_steps < 0).
    lr_warmup_steps_ratio: float = 0.0
    lr_warmup_steps: int = -1
    #: constant | cosine
    lr_scheduler_type: str = "constant"
    min_lr_ratio: float = 0.0
    #: Filled by the trainer from the dataloader size and epochs; -1 = unknown.
    total_training_steps: int = -1


@dataclass
class PolicyLossConfig:
    #: auto (follows algorithm.adv_estimator: cpgd -> cpgd, gspo -> gspo, else vanilla) | vanilla | gspo |
    #: cpgd | module:function (registered in siirl.algorithms)
    loss_mode: str = "auto"


@dataclass
class ActorConfig:
    #: auto (replicate small models, FSDP2 otherwise) | fsdp (= fsdp2) | replicate; also used by the reference.
    #: megatron is not implemented and refused.
    strategy: str = "auto"
    #: auto | recompute | rollout: where the PPO old log-probs come from (see siirl.params.old_log_prob).
    old_log_prob_source: str = "auto"
    #: Prompts per optimiser step (x rollout.n responses), summed over dp ranks.
    ppo_mini_batch_size: int = 16
    ppo_micro_batch_size_per_gpu: int = 64
    use_dynamic_bsz: bool = True
    ppo_max_token_len_per_gpu: int = 4096
    ppo_epochs: int = 1
    shuffle: bool = False
    clip_ratio: float = 0.2
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    clip_ratio_c: float = 3.0
    loss_agg_mode: str = "token-mean"
    #: Constant divisor of seq-mean-token-sum-norm (0: the response width); applies to every loss term
    #: (policy, entropy, KL).
    loss_agg_horizon: int = 0
    #: GSPO's own (tiny) clip range on the sequence-level ratio.
    gspo_clip_ratio_low: float = 3e-4
    gspo_clip_ratio_high: float = 4e-4
    #: CPGD policy-drift regulariser: coefficient and gradient clip.
    policy_drift_coeff: float = 0.0
    policy_drift_clip: float = 2.0
    policy_loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    grad_clip: float = 1.0
    optim: OptimConfig = field(default_factory=OptimConfig)


@dataclass
class ValSamplingConfig:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    n: int = 1
    do_sample: bool = False


@dataclass
class RolloutConfig:
    #: hf | vllm | sglang (the device backend says which are available)
    name: str = "hf"
    n: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    do_sample: bool = True
    tensor_model_parallel_size: int = 1
    gpu_memory_utilization: float = 0.5
    #: Release engine memory while the actor trains (colocated engines).
    free_cache_engine: bool = True
    enforce_eager: bool = False
    #: Sequences generated per forward batch by the HF engine.
    micro_batch_size: int = 256
    log_prob_micro_batch_size_per_gpu: int = 64
    log_prob_use_dynamic_bsz: bool = True
    log_prob_max_token_len_per_gpu: int = 8192
    #: Bucket size (MB) for streaming weights from the trainer into the engine.
    weight_sync_bucket_mb: int = 512
    #: auto | safetensors | pt | dummy: how vLLM / SGLang load the model dir (see ROLLOUT_LOAD_FORMATS).
    load_format: str = "auto"
    #: verl's memory-saving LoRA sync (merge and send one layer at a time). siiRL always syncs parameter
    #: by parameter, merging each adapted layer as it goes, so both values behave alike.
    layered_summon: bool = False
    stop: list[str] = field(default_factory=list)
    val_kwargs: ValSamplingConfig = field(default_factory=ValSamplingConfig)
    multi_turn: MultiTurnConfig = field(default_factory=MultiTurnConfig)


@dataclass
class RefConfig:
    log_prob_micro_batch_size_per_gpu: int = 64
    log_prob_use_dynamic_bsz: bool = True
    log_prob_max_token_len_per_gpu: int = 8192
    param_offload: bool = False


@dataclass
class ActorRolloutRefConfig:
    model: PolicyModelConfig = field(default_factory=PolicyModelConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    ref: RefConfig = field(default_factory=RefConfig)


@dataclass
class CriticConfig:
    enable: bool = False
    #: auto | fsdp (= fsdp2) | replicate, as ``actor_rollout_ref.actor.strategy`` (megatron: refused)
    strategy: str = "auto"
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=5e-4))
    ppo_mini_batch_size: int = 16
    ppo_micro_batch_size_per_gpu: int = 64
    use_dynamic_bsz: bool = True
    ppo_max_token_len_per_gpu: int = 4096
    ppo_epochs: int = 1
    cliprange_value: float = 0.5
    loss_agg_mode: str = "token-mean"
    #: Constant divisor of seq-mean-token-sum-norm (0: the response width), as for the actor.
    loss_agg_horizon: int = 0
    grad_clip: float = 1.0
