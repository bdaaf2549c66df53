"""``env.*``, ``actor_rollout_ref.rollout.multi_turn.*`` and ``algorithm.embodied.*``: agentic rollouts."""

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EnvConfig:
    #: Registered environment (arith_chain | libero | ...) or "module:Class".
    name: str = "arith_chain"
    #: Constructor arguments of the environment, e.g. {steps: 2}.
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Environment processes per DAG worker; 0 = in the worker process (no timeout enforced).
    num_workers: int = 1
    #: Longest a single reset/step may take before its episode ends with reward 0.
    timeout_s: float = 30.0


@dataclass
class MultiTurnConfig:
    """Generation alternates with environment steps; env tokens are kept in context but never trained on."""

    enable: bool = False
    #: Policy turns per trajectory (the episode may end earlier).
    max_turns: int = 2
    #: Tokens one rendered observation may take; a longer one ends the episode (info truncated).
    max_observation_length: int = 32


@dataclass
class EmbodiedSamplingConfig:
    """Which task groups embodied_sampling keeps (a group = the n trajectories of one task)."""

    #: With progress rewards on, an all-failed group still ranks its failures; set true for binary rewards.
    drop_all_failed: bool = False
    drop_all_succeeded: bool = True
    #: Drop trajectories whose environment timed out or crashed.
    drop_env_errors: bool = True


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
