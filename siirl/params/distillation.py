"""``distillation.*``: verl's on-policy distillation from a frozen teacher model (the ``teacher`` role).

The keys and defaults are verl's (``trainer/config/distillation/distillation.yaml``). The student samples as
usual; a teacher forward gives the log-prob of every sampled token (``teacher_log_prob``) and the actor's loss
gains verl's distillation term (``siirl.algorithms.distillation``). The teacher runs on the DAG workers as the
reference policy does (FSDP2-sharded or replicated, ``actor_rollout_ref.ref``'s log-prob micro-batching), so
verl's teacher resource pool and inference-engine options are placement and serving knobs here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.errors import ConfigError
from siirl.params.model import ActorConfig, ModelConfig
from siirl.params.override_screen import override_key

SINGLE_TEACHER = "teacher_model"


@dataclass
class DistillationLossConfig:
    #: A single-sample KL estimator of student vs teacher per token, a ``KL_ESTIMATORS`` name: k1/kl, abs,
    #: k2/mse, k3/low_var_kl (``siirl.algorithms.kl``). verl's ``forward_kl_topk`` (top-k teacher logits) is not
    #: implemented.
    loss_mode: str = "k3"
    #: Top-k width of ``forward_kl_topk`` only.
    topk: Optional[int] = 32  # noqa: UP045 - OmegaConf reads Optional
    #: Keep the task-reward policy loss beside the distillation term (false: distillation alone).
    use_task_rewards: bool = True
    #: Weight of the distillation term when ``use_task_rewards`` (else 1).
    distillation_loss_coef: float = 1.0
    #: Per-token distillation loss clamped to ``[-c, c]``; null: no clamp.
    loss_max_clamp: Optional[float] = None  # noqa: UP045
    #: Floor of log-probs in ``forward_kl_topk`` only.
    log_prob_min_clamp: Optional[float] = None  # noqa: UP045
    #: true: minus the per-token loss is a reward for a clipped policy-gradient update (Thinking Machines'
    #: on-policy distillation); false: the loss itself is backpropagated (supervised, arXiv 2306.13649).
    use_policy_gradient: bool = False
    #: The policy loss of the policy-gradient form (verl implements vanilla only).
    policy_loss_mode: str = "vanilla"
    clip_ratio: float = 0.2
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    #: verl's memory knobs of ``forward_kl_topk`` (not implemented; accepted at any value, not read).
    use_chunked_topk: bool = False
    chunked_topk_chunk_size: int = 4096


    def policy_gradient_config(self, horizon: int = 0) -> ActorConfig:
        """The actor options ``policy_loss_mode`` reads in the policy-gradient form: this section's clip range
        (checked with that loss's own option check, ``siirl.algorithms.policy_loss.check_loss_options``)."""
        return ActorConfig(clip_ratio=self.clip_ratio, clip_ratio_low=self.clip_ratio_low,
                           clip_ratio_high=self.clip_ratio_high, loss_agg_horizon=horizon)

@dataclass
class TeacherInferenceConfig:
    """verl serves the teacher with an inference engine; these are that engine's options. siiRL runs the
    teacher's forward on the DAG workers, so they are accepted and not read, except ``max_model_len``, which
    must hold prompt + response + 1 as verl checks."""

    name: Any = None
    dtype: Any = None
    gpu_memory_utilization: float = 0.5
    enforce_eager: bool = True
    cudagraph_capture_sizes: Any = None
    free_cache_engine: bool = True
    data_parallel_size: int = 1
    expert_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    tensor_model_parallel_size: int = 2
    max_num_batched_tokens: int = 8192
    max_model_len: Optional[int] = None  # noqa: UP045
    max_num_seqs: int = 1024
    load_format: str = "auto"
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    limit_images: Any = None
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    disable_log_stats: bool = True
    skip_tokenizer_init: bool = True
    prompt_length: Any = None
    response_length: Any = None
    temperature: Any = None


@dataclass
class TeacherModelConfig:
    #: Routing key of a teacher among several (multi-teacher distillation: not implemented).
    key: Optional[str] = None  # noqa: UP045
    #: The teacher: a local Hugging Face causal LM sharing the student's tokenizer (vocabulary). Empty next to
    #: the embedded policy: the embedded model (as the reward model); any other policy must name one.
    model_path: Optional[str] = None  # noqa: UP045
    num_replicas: int = 0
    inference: TeacherInferenceConfig = field(default_factory=TeacherInferenceConfig)


@dataclass
class DistillationConfig:
    enabled: bool = False
    distillation_loss: DistillationLossConfig = field(default_factory=DistillationLossConfig)
    #: verl's teacher resource pool. The teacher runs on the DAG workers here, so the pool is not read.
    n_gpus_per_node: int = 8
    nnodes: int = 0
    teacher_models: dict[str, TeacherModelConfig] = field(
        default_factory=lambda: {SINGLE_TEACHER: TeacherModelConfig()}
    )
    #: Where verl routes samples among teachers; with one teacher it is not read (verl routes all to it).
    teacher_key: str = "data_source"

    def validate(self, cfg: Any, key: str) -> None:
        """One ``ConfigError`` line per mistake, before Ray; nothing is read while ``enabled`` is false."""
        if not self.enabled:
            return
        loss = self.distillation_loss
        if loss.loss_mode == "forward_kl_topk":
            raise ConfigError(
                "bad config: distillation.distillation_loss.loss_mode=forward_kl_topk (top-k teacher logits) is not "
                "implemented; use a single-sample estimator (k1, k2, k3, abs, ...)"
            )
        if not loss.use_policy_gradient and loss.loss_mode in ("k1", "kl"):
            raise ConfigError(
                f"bad config: distillation.distillation_loss.loss_mode={loss.loss_mode} with use_policy_gradient=false: "
                "the gradient of k1 does not depend on the teacher (as verl refuses); use k3, or use_policy_gradient=true"
            )
        if loss.policy_loss_mode != "vanilla":
            raise ConfigError(
                f"bad config: distillation.distillation_loss.policy_loss_mode={loss.policy_loss_mode!r}: only vanilla "
                "is supported with use_policy_gradient (as in verl)"
            )
        needed = cfg.data.max_prompt_length + cfg.data.max_response_length + 1
        limit = teacher_of(self).inference.max_model_len
        if limit is not None and needed > limit:
            raise ConfigError(
                f"bad config: distillation.teacher_models.{SINGLE_TEACHER}.inference.max_model_len={limit} is below "
                f"prompt + response + 1 = {needed} (data.max_prompt_length + data.max_response_length + 1)"
            )


def teacher_of(cfg: DistillationConfig) -> TeacherModelConfig:
    """The one teacher (``refuse_other_teachers`` refuses others before Ray)."""
    return next(iter(cfg.teacher_models.values()))


def refuse_other_teachers(overrides: list[str], user_tree: dict[str, Any] | None) -> None:
    """verl's multi-teacher distillation adds teachers beside ``teacher_model``
    (``+distillation.teacher_models.<name>.*``): refused in one line before Hydra composes, naming it."""
    names = [override_key(o).split(".") for o in overrides]
    tree = (user_tree or {}).get("distillation") or {}
    names += [["distillation", "teacher_models", name] for name in tree.get("teacher_models") or {}]
    for parts in names:
        if parts[:2] == ["distillation", "teacher_models"] and len(parts) > 2 and parts[2] != SINGLE_TEACHER:
            raise ConfigError(
                f"bad config: distillation.teacher_models.{parts[2]}: multi-teacher distillation is not implemented; "
                f"configure the one teacher as distillation.teacher_models.{SINGLE_TEACHER}"
            )


def teacher_model_config(policy: ModelConfig, cfg: DistillationConfig) -> ModelConfig:
    """The teacher's model section: its own weights and tokenizer dir, loaded and laid out as the policy's
    (dtype, attention, padding-free layout, kernels); nothing of the policy's LoRA or overrides."""
    shared = ("dtype", "attn_implementation", "use_remove_padding", "remove_padding_layout", "trust_remote_code",
              "use_fused_kernels")
    return ModelConfig(path=str(teacher_of(cfg).model_path), **{name: getattr(policy, name) for name in shared})
