"""Environment-driven runs: which rollout wrapper and which reward source the config asks for.

``algorithm.workflow_type=EMBODIED`` -> step-wise rollout (one row per environment step) scored by
SRPO-style progress rewards; ``actor_rollout_ref.rollout.multi_turn.enable=true`` -> multi-turn
conversation rollout scored by the environment's per-turn rewards. Otherwise neither applies and the
worker keeps its plain engine and rule-based reward manager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from siirl.engine.reward.env_rewards import ProgressRewards, TurnRewards
from siirl.engine.rollout.base import RolloutEngine
from siirl.engine.rollout.env_session import EnvSession, single_sample_config
from siirl.engine.rollout.env_steps import EnvStepRollout
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.environment.outputs import env_mode
from siirl.params.model import RolloutConfig
from siirl.params.root import SiirlConfig


def _steps(session: EnvSession, cfg: SiirlConfig) -> RolloutEngine:
    return EnvStepRollout(
        session,
        max_turns=int(cfg.actor_rollout_ref.rollout.multi_turn.max_turns),
        max_prompt_length=int(cfg.data.max_prompt_length),
        max_response_length=int(cfg.data.max_response_length),
    )


def _turns(session: EnvSession, cfg: SiirlConfig) -> RolloutEngine:
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    return MultiTurnRollout(
        session,
        max_turns=int(multi_turn.max_turns),
        max_response_length=int(cfg.data.max_response_length),
        max_observation_length=int(multi_turn.max_observation_length),
    )


def _progress_rewards(cfg: SiirlConfig) -> Any:
    spec = cfg.algorithm.embodied.progress_reward
    return ProgressRewards(float(spec.failure_scale), float(spec.sigma), enable=bool(spec.enable))


WRAPPERS: dict[str, Callable[[EnvSession, SiirlConfig], RolloutEngine]] = {"steps": _steps, "turns": _turns}
REWARDS: dict[str, Callable[[SiirlConfig], Any]] = {"steps": _progress_rewards, "turns": lambda _cfg: TurnRewards()}


def inner_rollout_config(cfg: SiirlConfig) -> RolloutConfig:
    """The rollout section the inner engine is built with (one sample per call in env-driven runs)."""
    rollout = cfg.actor_rollout_ref.rollout
    return single_sample_config(rollout) if env_mode(cfg) else rollout


def wrap_rollout(engine: RolloutEngine, cfg: SiirlConfig, tokenizer: Any) -> RolloutEngine:
    mode = env_mode(cfg)
    if mode is None:
        return engine
    session = EnvSession(engine, tokenizer, cfg.actor_rollout_ref.rollout, cfg.env)
    return WRAPPERS[mode](session, cfg)


def env_reward_manager(cfg: SiirlConfig) -> Any | None:
    mode = env_mode(cfg)
    return None if mode is None else REWARDS[mode](cfg)
