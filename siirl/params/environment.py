"""``env.*``, ``actor_rollout_ref.rollout.multi_turn.*`` and ``algorithm.embodied.*``: agentic rollouts."""

from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.params.rules import FINITE_POSITIVE, NON_NEGATIVE, POSITIVE, checked, one_of, or_null, refused


@dataclass
class EnvConfig:
    #: Registered environment (arith_chain | libero | ...) or "module:Class".
    name: str = "arith_chain"
    #: Constructor arguments of the environment, e.g. {steps: 2}.
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Environment processes per DAG worker; 0 = in the worker process (no timeout enforced).
    num_workers: int = checked(1, NON_NEGATIVE)
    #: Longest one reset/step of all the worker's episodes (they run at once) may take; an episode still
    #: running then ends with reward 0.
    timeout_s: float = checked(30.0, FINITE_POSITIVE)
    #: Environments alive at once per DAG worker: a batch with more episodes runs them in waves of this many.
    #: null: the environment's own bound (LIBERO: 4, at ~2.2 GB per simulator), else every episode at once;
    #: 0: every episode at once.
    max_envs: Optional[int] = None  # noqa: UP045 - OmegaConf reads Optional
    #: Actions per policy call of a vision-language-action policy on an environment with continuous actions
    #: (LIBERO): the response is ``chunk x action dims`` action tokens, executed whole (OpenVLA-OFT: 8).
    action_chunk: int = 1


@dataclass
class MultiTurnConfig:
    """Generation alternates with environment steps; env tokens are kept in context but never trained on."""

    enable: bool = False
    #: Policy turns per trajectory (the episode may end earlier).
    max_turns: int = checked(2, POSITIVE)
    #: Tokens one rendered observation may take; a longer one ends the episode (info truncated).
    max_observation_length: int = checked(32, POSITIVE)
    #: verl's name for ``max_turns`` (null: keep ``max_turns``).
    max_assistant_turns: int | None = checked(None, or_null(POSITIVE, ">= 1 (or null)"))
    #: Tool / user turns after which the episode ends at the next policy turn (null: no limit but max_turns).
    max_user_turns: int | None = checked(None, or_null(NON_NEGATIVE, "null or >= 0"))
    #: Tool YAML (verl format: ``tools: [{class_name, config, tool_schema}]``); set = tool-calling rollouts.
    tool_config_path: str | None = None
    #: How tool calls are written in the policy's output (a registered parser, e.g. hermes).
    format: str = "hermes"
    #: Tool calls executed per policy turn; later ones in the same turn are dropped.
    max_parallel_calls: int = checked(1, POSITIVE)
    #: Characters of one tool response kept (verl counts characters, not tokens).
    max_tool_response_length: int = checked(256, POSITIVE)
    #: Which part of an over-long tool response is kept: left (its start) | right (its end) | middle (both ends).
    tool_response_truncate_side: str = checked("middle", one_of("left", "middle", "right"))
    #: Longest one tool call (create / execute / calc_reward / release) may take; the calls of a turn run at
    #: once, and a late one ends its trajectory (scored 0) and the turn's later calls in it are not made.
    #: ``env.timeout_s`` bounds the whole step, ``env.num_workers`` isolates it.
    tool_timeout_s: float = checked(10.0, POSITIVE)
    #: Interaction YAML (verl format: ``interaction: [{name?, class_name, config}]``); set = a simulated user
    #: answers the policy's turns without tool calls (each row's ``extra_info.interaction_kwargs`` picks one).
    #: Its calls are bounded by ``tool_timeout_s``.
    interaction_config_path: str | None = None
    #: verl: re-render earlier turns with the chat template. Only false (keep the policy's tokens) exists here.
    use_inference_chat_template: bool = refused(
        False, bool, "is not implemented; earlier turns keep the policy's own tokens (verl's false)"
    )
    #: Turn-by-turn rendering must match rendering the conversation at once: strict | ignore_strippable | disable.
    tokenization_sanity_check_mode: str = checked("strict", one_of("strict", "ignore_strippable", "disable"))


@dataclass
class EmbodiedSamplingConfig:
    """Which task groups embodied_sampling keeps (a group = the n trajectories of one task)."""

    #: With progress rewards on, an all-failed group still ranks its failures; set true for binary rewards.
    drop_all_failed: bool = False
    drop_all_succeeded: bool = True
    #: Drop trajectories whose environment timed out or crashed.
    drop_env_errors: bool = True
    #: Keep only task groups whose success rate lies in [min_success_rate, max_success_rate] (the original
    #: siiRL's ``embodied_sampling.accuracy_lower_bound`` / ``accuracy_upper_bound``); 0 and 1 bound nothing.
    min_success_rate: float = 0.0
    max_success_rate: float = 1.0


@dataclass
class ProgressRewardConfig:
    """SRPO-style reward of failed trajectories (see siirl/engine/reward/progress.py for the formula)."""

    enable: bool = True
    #: Reward of a failed trajectory as close as can be to a success (successes get 1).
    failure_scale: float = 0.6
    #: Width of the Gaussian kernel on the distance to the nearest successful trajectory.
    sigma: float = 1.0


@dataclass
class EmbodiedConfig:
    sampling: EmbodiedSamplingConfig = field(default_factory=EmbodiedSamplingConfig)
    progress_reward: ProgressRewardConfig = field(default_factory=ProgressRewardConfig)
    #: Every trajectory reward times this (the original siiRL's ``reward_model.reward_kwargs.reward_coef``).
    reward_scale: float = 1.0
