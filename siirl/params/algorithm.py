"""``algorithm.*``, ``reward_model.*`` and ``custom_reward_function.*``."""

from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.params.environment import EmbodiedConfig
from siirl.params.model import FSDPModelConfig


@dataclass
class KLControlConfig:
    #: fixed | adaptive
    type: str = "fixed"
    kl_coef: float = 0.001
    horizon: int = 10000
    target_kl: float = 0.1


@dataclass
class FilterGroupsConfig:
    """DAPO dynamic sampling: keep only uid groups whose ``metric`` varies."""

    enable: bool = False
    #: acc | score | seq_reward | seq_final_reward (siirl.algorithms.group_filter_metrics)
    metric: str = "seq_reward"
    #: Chunks of ``data.gen_batch_size`` prompts generated per step at most; <= 0 = no bound (as verl).
    max_num_gen_batches: int = 10


@dataclass
class PfPpoConfig:
    """verl's policy-filtered PPO: how rows are resampled by reward (siirl.algorithms.pf_ppo)."""

    #: pow | max_min | max_random
    reweight_method: str = "pow"
    #: Exponent of ``|score|`` under ``pow``.
    weight_pow: float = 2.0


#: Levels at which a log-ratio is aggregated (``siirl.algorithms.rollout_correction``).
ROLLOUT_IS_LEVELS = ("token", "sequence")
ROLLOUT_RS_LEVELS = ("token", "sequence", "geometric")


@dataclass
class RolloutCorrectionConfig:
    """verl's ``algorithm.rollout_correction``: correct for the rollout engine sampling from a slightly different
    distribution than the actor trains (another dtype, kernels, or stale weights). Needs the log-probs the
    rollout sampled with (``actor_rollout_ref.rollout.calculate_log_probs=true``); with them, the off-policy
    metrics are always reported and the options below act."""

    #: null | token | sequence: importance weights ``pi_train / pi_rollout`` per token or per sequence,
    #: bounded by ``rollout_is_threshold``, multiplied into the policy loss.
    rollout_is: Optional[str] = None  # noqa: UP045 - OmegaConf reads Optional
    #: A number: weights truncated at it (TIS); ``'lower_upper'``: weights outside the range set to 0 (IcePop;
    #: AReaL's decoupled PPO cap). ``siirl.params.is_threshold``.
    rollout_is_threshold: Any = 2.0
    #: Rescale the truncated weights to mean 1 over the batch.
    rollout_is_batch_normalize: bool = False
    #: null | token | sequence | geometric: mask out tokens / whole responses whose ratio leaves
    #: ``[rollout_rs_threshold_lower, rollout_rs_threshold]``; or verl's divergence options, comma separated
    #: (``token_k1,seq_max_k2``: ``siirl.algorithms.divergence_rejection``).
    rollout_rs: Optional[str] = None  # noqa: UP045
    #: Upper ratio bound of rejection (null: ``rollout_is_threshold``); for divergence options their bounds,
    #: e.g. ``'0.6_1.6,2.5'`` (``siirl.params.divergence_bounds``).
    rollout_rs_threshold: Any = None
    #: Lower ratio bound of rejection (null: ``1 / rollout_rs_threshold``).
    rollout_rs_threshold_lower: Optional[float] = None  # noqa: UP045
    #: Reject a whole response if any token's ratio is below this (null: no veto).
    rollout_token_veto_threshold: Optional[float] = None  # noqa: UP045
    #: verl's bypass mode: the rollout's log-probs ARE the old log-probs (no actor forward over the responses);
    #: the weights and masks above compare the current policy with the rollout inside the policy loss.
    bypass_mode: bool = False
    #: Bypass mode's loss (``siirl.algorithms.bypass_loss``): ppo_clip (clipped ratio current / rollout; the
    #: rejection mask applies, the weights do not) | reinforce (policy gradient times the IS weights, no clipping).
    loss_type: str = "ppo_clip"

    @property
    def active(self) -> bool:
        """Whether the correction changes training (weights or masks), not only reports metrics."""
        return any(v is not None for v in (self.rollout_is, self.rollout_rs, self.rollout_token_veto_threshold))


@dataclass
class AlgorithmConfig:
    #: grpo | gae | cpgd | gspo | rloo | reinforce_plus_plus | reinforce_plus_plus_baseline | remax | gpg | optimal_token_baseline
    #: | gdpo | gae_marft (teams only)
    adv_estimator: str = "grpo"
    #: DEFAULT | DAPO | EMBODIED
    workflow_type: str = "DEFAULT"
    gamma: float = 1.0
    lam: float = 1.0
    norm_adv_by_std_in_grpo: bool = True
    use_kl_in_reward: bool = False
    kl_penalty: str = "kl"
    kl_ctrl: KLControlConfig = field(default_factory=KLControlConfig)
    filter_groups: FilterGroupsConfig = field(default_factory=FilterGroupsConfig)
    #: Added to the group std before dividing by it (grpo with norm_adv_by_std_in_grpo, cpgd STD_weight).
    epsilon: float = 1e-6
    #: CPGD advantage weight factor: STD_weight | clip_filter_like_weight | naive
    weight_factor_in_cpgd: str = "STD_weight"
    #: Cap of the clip_filter_like_weight factor (batch size over informative responses).
    cpgd_max_weight: float = 3.0
    embodied: EmbodiedConfig = field(default_factory=EmbodiedConfig)
    #: verl's policy-filtered PPO: after GAE, resample the batch's rows by reward (``pf_ppo``).
    use_pf_ppo: bool = False
    pf_ppo: PfPpoConfig = field(default_factory=PfPpoConfig)
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
    #: GDPO: the keys of the score function's returned dict that are normalised each on its own within the
    #: group (``adv_estimator=gdpo`` needs them), and their weights in the sum (null: 1 each).
    gdpo_reward_keys: Optional[list[str]] = None  # noqa: UP045
    gdpo_reward_weights: Optional[list[float]] = None  # noqa: UP045


@dataclass
class OverlongBufferConfig:
    """DAPO's soft overlong penalty (``reward_model.reward_manager=dapo``)."""

    enable: bool = False
    #: Tokens before ``data.max_response_length`` where the penalty starts.
    len: int = 2
    penalty_factor: float = 1.0
    #: Log ``reward/overlong_reward`` and ``reward/overlong`` (share of penalised responses) each step.
    log: bool = False
    #: verl's ``reward_kwargs.max_resp_len``: the length the penalty counts to. Here it is always
    #: ``data.max_response_length``; null or that value is accepted.
    max_resp_len: Optional[int] = None  # noqa: UP045 - OmegaConf reads Optional


@dataclass
class RewardModelModelConfig(FSDPModelConfig):
    """``reward_model.model``: the sequence classifier (``path``, its own tokenizer and loading options, as
    for the critic) plus verl's ``input_tokenizer``."""

    #: The policy's tokenizer dir when the reward model's tokenizer or chat template differs: responses are
    #: then decoded with it and the chat re-rendered with the reward model's template. Empty = the same
    #: tokenizer, token ids are scored as they are.
    input_tokenizer: str = ""


@dataclass
class SandboxFusionConfig:
    """verl's ``reward_model.sandbox_fusion``: the SandboxFusion server that runs code datasets' responses
    (data_source ``codecontests``, ``apps``, ``codeforces``, ``taco``) on their test cases."""

    #: The server's ``/run_code`` endpoint; null = no sandbox (code datasets cannot be scored).
    url: Optional[str] = None  # noqa: UP045 - OmegaConf reads Optional
    #: Requests in flight at once, per scoring process.
    max_concurrent: int = 64
    memory_limit_mb: int = 1024


@dataclass
class RewardModelConfig:
    #: Model-based reward (a sequence classifier); rule rewards need none.
    enable: bool = False
    #: auto | fsdp (= fsdp2) | replicate, as ``critic.strategy`` (megatron: refused)
    strategy: str = "auto"
    model: RewardModelModelConfig = field(default_factory=RewardModelModelConfig)
    micro_batch_size_per_gpu: int = 64
    use_dynamic_bsz: bool = True
    forward_max_token_len_per_gpu: int = 8192
    #: Longest re-rendered input (``model.input_tokenizer`` set), cut from the left so the response stays;
    #: null = no limit.
    max_length: int | None = None
    #: naive | batch | parallel (verl: prime) | dapo
    reward_manager: str = "naive"
    num_workers: int = 2
    #: Bound of one score-function call in every manager (``batch``: the whole batch call); a late call
    #: scores 0 and is counted in the reward/timeouts metric.
    timeout_s: float = 10.0
    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    sandbox_fusion: SandboxFusionConfig = field(default_factory=SandboxFusionConfig)


@dataclass
class CustomRewardFunctionConfig:
    #: Path of a .py file with the score function; empty = built-in scorers by data_source.
    path: str = ""
    name: str = "compute_score"
    #: Keyword arguments bound to every call of the score function (as in verl).
    reward_kwargs: dict[str, Any] = field(default_factory=dict)
