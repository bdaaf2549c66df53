"""``algorithm.*``, ``reward_model.*`` and ``custom_reward_function.*``, with their checks: verl's optional
algorithm sections (``pf_ppo``, ``rollout_correction``, GDPO's reward keys) and DAPO's overlong buffer, each
mistake one ``ConfigError`` line before Ray starts."""

from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.errors import ConfigError
from siirl.params.divergence_bounds import OPTIONS, is_divergence_spec, parse_bounds
from siirl.params.enums import WorkflowType
from siirl.params.environment import EmbodiedConfig
from siirl.params.is_threshold import parse_is_threshold
from siirl.params.model import FSDPModelConfig, strategy_field
from siirl.params.rules import (
    FINITE_POSITIVE,
    NON_NEGATIVE,
    OPTIONAL_POSITIVE,
    POSITIVE,
    checked,
    one_of,
    or_null,
)


@dataclass
class KLControlConfig:
    #: fixed | adaptive
    type: str = "fixed"
    kl_coef: float = 0.001
    horizon: int = 10000
    target_kl: float = 0.1

    def validate(self, cfg: Any, key: str) -> None:
        """The adaptive controller steers towards ``target_kl`` over ``horizon`` steps (it divides by both)."""
        if str(self.type).lower() == "adaptive" and (self.target_kl <= 0 or self.horizon <= 0):
            raise ConfigError(f"bad config: {key}.type=adaptive needs target_kl > 0 and horizon > 0, got "
                              f"{self.target_kl} and {self.horizon}")


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
    weight_pow: float = checked(2.0, NON_NEGATIVE)


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
    rollout_is: Optional[str] = checked(  # noqa: UP045 - OmegaConf reads Optional
        None, or_null(one_of(*ROLLOUT_IS_LEVELS), f"null or one of {', '.join(ROLLOUT_IS_LEVELS)}")
    )
    #: A number: weights truncated at it (TIS); ``'lower_upper'``: weights outside the range set to 0 (IcePop;
    #: AReaL's decoupled PPO cap). ``siirl.params.is_threshold``.
    rollout_is_threshold: Any = checked(
        2.0, (lambda v: parse_is_threshold(v) is not None, "a number > 0 or 'lower_upper' with 0 < lower <= upper")
    )
    #: Rescale the truncated weights to mean 1 over the batch.
    rollout_is_batch_normalize: bool = False
    #: null | token | sequence | geometric: mask out tokens / whole responses whose ratio leaves
    #: ``[rollout_rs_threshold_lower, rollout_rs_threshold]``; or verl's divergence options, comma separated
    #: (``token_k1,seq_max_k2``: ``siirl.algorithms.divergence_rejection``).
    rollout_rs: Optional[str] = checked(None, (  # noqa: UP045
        lambda v: v is None or v in ROLLOUT_RS_LEVELS or is_divergence_spec(v),
        f"null, one of {', '.join(ROLLOUT_RS_LEVELS)}, or verl's options {', '.join(OPTIONS)} (comma separated)",
    ))
    #: Upper ratio bound of rejection (null: ``rollout_is_threshold``); for divergence options their bounds,
    #: e.g. ``'0.6_1.6,2.5'`` (``siirl.params.divergence_bounds``).
    rollout_rs_threshold: Any = checked(
        None, (lambda v: v is None or isinstance(v, str) or v > 0, "null, > 0, or bounds per divergence option")
    )
    #: Lower ratio bound of rejection (null: ``1 / rollout_rs_threshold``).
    rollout_rs_threshold_lower: Optional[float] = checked(None, OPTIONAL_POSITIVE)  # noqa: UP045
    #: Reject a whole response if any token's ratio is below this (null: no veto).
    rollout_token_veto_threshold: Optional[float] = checked(None, OPTIONAL_POSITIVE)  # noqa: UP045
    #: verl's bypass mode: the rollout's log-probs ARE the old log-probs (no actor forward over the responses);
    #: the weights and masks above compare the current policy with the rollout inside the policy loss.
    bypass_mode: bool = False
    #: Bypass mode's loss (``siirl.algorithms.bypass_loss``): ppo_clip (clipped ratio current / rollout; the
    #: rejection mask applies, the weights do not) | reinforce (policy gradient times the IS weights, no clipping).
    loss_type: str = "ppo_clip"

    def validate(self, cfg: Any, key: str) -> None:
        """verl's divergence options carry every bound in ``rollout_rs_threshold``; the ratio levels take one
        upper number and an optional lower one below it. Any use of the rollout's log-probs needs them recorded."""
        if is_divergence_spec(self.rollout_rs):
            if self.rollout_rs_threshold_lower is not None:
                raise ConfigError(
                    f"bad config: {key}.rollout_rs_threshold_lower applies to rollout_rs=token|sequence|geometric; "
                    f"rollout_rs={self.rollout_rs} takes its lower bounds in rollout_rs_threshold ('lower_upper')"
                )
            parse_bounds(self.rollout_rs, self.rollout_rs_threshold)
        elif isinstance(self.rollout_rs_threshold, str):
            raise ConfigError(
                f"bad config: {key}.rollout_rs_threshold={self.rollout_rs_threshold!r} lists bounds of verl's "
                f"divergence options, but rollout_rs={self.rollout_rs} takes one number"
            )
        else:
            upper = self.rollout_rs_threshold
            upper = parse_is_threshold(self.rollout_is_threshold)[0] if upper is None else upper
            lower = self.rollout_rs_threshold_lower
            if self.rollout_rs is not None and lower is not None and lower > upper:
                raise ConfigError(
                    f"bad config: {key}.rollout_rs_threshold_lower={lower} is above the upper bound {upper}; "
                    "every response would be rejected"
                )
        # weights or masks change training; with none of them the correction only reports metrics
        active = any(v is not None for v in (self.rollout_is, self.rollout_rs, self.rollout_token_veto_threshold))
        users = [key] if active else []
        users += [f"{key}.bypass_mode=true"] if self.bypass_mode else []
        users += ["trainer.dump_high_diff_tokens=true"] if cfg.trainer.dump_high_diff_tokens else []
        if users and not cfg.actor_rollout_ref.rollout.calculate_log_probs:
            raise ConfigError(
                f"bad config: {' and '.join(users)} compares the rollout's log-probs with the actor's; set "
                "actor_rollout_ref.rollout.calculate_log_probs=true so the rollout records them (as verl requires)"
            )


@dataclass
class AlgorithmConfig:
    #: grpo | gae | cpgd | gspo | rloo | reinforce_plus_plus | reinforce_plus_plus_baseline | remax | gpg | optimal_token_baseline
    #: | gdpo | gae_marft (teams only)
    adv_estimator: str = "grpo"
    workflow_type: str = checked("DEFAULT", one_of(*(e.value for e in WorkflowType)))
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

    def validate(self, cfg: Any, key: str) -> None:
        """GDPO normalises the reward components ``gdpo_reward_keys`` names, its weights (if given) pair with
        them; policy-filtered PPO resamples after GAE."""
        keys, weights = self.gdpo_reward_keys, self.gdpo_reward_weights
        if str(self.adv_estimator).lower() == "gdpo" and not keys:  # the registry matches names in any case
            raise ConfigError(
                "bad config: algorithm.adv_estimator=gdpo needs algorithm.gdpo_reward_keys, the keys of the score "
                "function's returned dict to normalise one by one (e.g. '[\"accuracy_reward\",\"format_reward\"]')"
            )
        if keys and weights is not None and len(weights) != len(keys):
            raise ConfigError(
                f"bad config: algorithm.gdpo_reward_weights has {len(weights)} weights for {len(keys)} gdpo_reward_keys"
            )
        if self.use_pf_ppo and str(self.adv_estimator) != "gae":
            raise ConfigError(
                f"bad config: algorithm.use_pf_ppo=True resamples after GAE as in verl, but "
                f"algorithm.adv_estimator={self.adv_estimator}; use gae or drop use_pf_ppo"
            )


@dataclass
class OverlongBufferConfig:
    """DAPO's soft overlong penalty (``reward_model.reward_manager=dapo``)."""

    enable: bool = False
    #: Tokens before ``data.max_response_length`` where the penalty starts.
    len: int = 2
    penalty_factor: float = checked(1.0, NON_NEGATIVE)
    #: Log ``reward/overlong_reward`` and ``reward/overlong`` (share of penalised responses) each step.
    log: bool = False
    #: verl's ``reward_kwargs.max_resp_len``: the length the penalty counts to. Here it is always
    #: ``data.max_response_length``; null or that value is accepted.
    max_resp_len: Optional[int] = None  # noqa: UP045 - OmegaConf reads Optional

    def validate(self, cfg: Any, key: str) -> None:
        """verl's DAPO keys act only together with the feature they tune, so alone they are refused, not ignored."""
        if not self.enable:
            return
        manager, longest = cfg.reward_model.reward_manager, cfg.data.max_response_length
        if manager != "dapo":
            raise ConfigError(
                "bad config: reward_model.overlong_buffer.enable=true is applied by the dapo reward manager; set "
                f"reward_model.reward_manager=dapo (got {manager!r})"
            )
        if self.max_resp_len is not None and self.max_resp_len != longest:
            raise ConfigError(
                f"bad config: reward_model.reward_kwargs.max_resp_len={self.max_resp_len} differs from "
                f"data.max_response_length={longest}; the overlong penalty counts to the latter"
            )
        if not 0 < self.len < longest:
            raise ConfigError(
                f"bad config: reward_model.overlong_buffer.len={self.len} must be in (0, data.max_response_length="
                f"{longest})"
            )


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
    max_concurrent: int = checked(64, POSITIVE)
    memory_limit_mb: int = checked(1024, POSITIVE)


@dataclass
class RewardModelConfig:
    #: Model-based reward (a sequence classifier); rule rewards need none.
    enable: bool = False
    strategy: str = strategy_field("the reward model runs")
    model: RewardModelModelConfig = field(default_factory=RewardModelModelConfig)
    micro_batch_size_per_gpu: int = checked(64, POSITIVE)
    use_dynamic_bsz: bool = True
    forward_max_token_len_per_gpu: int = checked(8192, POSITIVE)
    #: Longest re-rendered input (``model.input_tokenizer`` set), cut from the left so the response stays;
    #: null = no limit.
    max_length: int | None = None
    #: naive | batch | parallel (verl: prime) | dapo
    reward_manager: str = "naive"
    num_workers: int = checked(2, POSITIVE)
    #: Bound of one score-function call in every manager (``batch``: the whole batch call); a late call
    #: scores 0 and is counted in the reward/timeouts metric.
    timeout_s: float = checked(10.0, FINITE_POSITIVE)
    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    sandbox_fusion: SandboxFusionConfig = field(default_factory=SandboxFusionConfig)


@dataclass
class CustomRewardFunctionConfig:
    #: Path of a .py file with the score function; empty = built-in scorers by data_source.
    path: str = ""
    name: str = "compute_score"
    #: Keyword arguments bound to every call of the score function (as in verl).
    reward_kwargs: dict[str, Any] = field(default_factory=dict)
