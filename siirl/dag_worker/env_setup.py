"""Environment-driven runs: which rollout wrapper and which reward source the config asks for.

``algorithm.workflow_type=EMBODIED`` -> step-wise rollout (one row per environment step) scored by
SRPO-style progress rewards; ``actor_rollout_ref.rollout.multi_turn.enable=true`` -> multi-turn
conversation rollout scored by the environment's per-turn rewards; with ``multi_turn.tool_config_path``
(and/or ``interaction_config_path``) the environment is the tool set with its interactions (``ToolEnv``)
and the rule score is added to the tools' and interactions' turn rewards; a run of the user's agent loops
(siirl.agent_loops) -> the agent-loop rollout, scored by each loop's own reward or else the rule score.
Otherwise none applies and the worker keeps its plain engine and rule-based reward manager.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from siirl.agent_loops import load_agent_loops
from siirl.dag_worker.reward_setup import make_reward_manager_from_config
from siirl.engine.reward.env_rewards import AgentLoopRewards, ProgressRewards, ToolCallRewards, TurnRewards
from siirl.engine.rollout.action_tokens import ActionTokenizer
from siirl.engine.rollout.agent_loop_rollout import AgentLoopRollout, loop_config
from siirl.engine.rollout.base import RolloutEngine
from siirl.engine.rollout.env_session import EnvSession, single_sample_config
from siirl.engine.rollout.env_steps import EnvStepRollout
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.engine.rollout.vla_prompts import VlaPrompts
from siirl.environment.outputs import env_mode
from siirl.environment.registry import resolve_env_factory
from siirl.environment.tools import load_tool_config
from siirl.params.environment import EnvConfig
from siirl.params.model import RolloutConfig
from siirl.params.root import SiirlConfig


def _steps(session: EnvSession, cfg: SiirlConfig) -> RolloutEngine:
    """Step-wise rollout; with a vision policy, image + instruction prompts, and on an environment with
    continuous actions (``action_dims``, e.g. LIBERO's 7), responses read as action-token chunks."""
    from siirl.engine.workers.vision import load_image_processor

    images = load_image_processor(cfg.actor_rollout_ref.model)
    factory = resolve_env_factory(cfg.env.name)
    dims = getattr(factory, "action_dims", None)
    prompts = None if images is None else VlaPrompts(session.tokenizer, images, int(cfg.data.max_prompt_length))
    actions = None if dims is None else ActionTokenizer(session.tokenizer, int(dims), int(cfg.env.action_chunk))
    return EnvStepRollout(
        session,
        max_turns=int(cfg.actor_rollout_ref.rollout.multi_turn.max_turns),
        max_prompt_length=int(cfg.data.max_prompt_length),
        max_response_length=int(cfg.data.max_response_length),
        vla_prompts=prompts, actions=actions, noop=getattr(factory, "noop_action", None),
    )


def _turns(session: EnvSession, cfg: SiirlConfig, **tool_options) -> RolloutEngine:
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    return MultiTurnRollout(
        session,
        max_turns=int(multi_turn.max_turns),
        max_response_length=int(cfg.data.max_response_length),
        max_observation_length=int(multi_turn.max_observation_length),
        **tool_options,
    )


def _tool_turns(session: EnvSession, cfg: SiirlConfig) -> RolloutEngine:
    """Multi-turn with the tools' schemas (none in an interaction-only run) rendered into the prompt."""
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    path = multi_turn.tool_config_path
    return _turns(
        session, cfg,
        tool_schemas=[spec.schema for spec in load_tool_config(str(path))] if path else [],
        sanity_check=str(multi_turn.tokenization_sanity_check_mode),
        chat_template_kwargs=dict(cfg.data.apply_chat_template_kwargs),
    )


def _agent_loops(session: EnvSession, cfg: SiirlConfig) -> RolloutEngine:
    """The user's agent loops; ``env.timeout_s`` bounds each stretch of their code between generations."""
    agent = cfg.actor_rollout_ref.rollout.agent
    prompt_length, response_length = int(cfg.data.max_prompt_length), int(cfg.data.max_response_length)
    return AgentLoopRollout(
        session, load_agent_loops(agent), default_loop=str(agent.default_agent_loop or "single_turn_agent"),
        loop_config=loop_config(cfg, prompt_length, response_length), max_response_length=response_length,
        timeout_s=float(cfg.env.timeout_s),
    )


def tool_env_config(cfg: SiirlConfig) -> EnvConfig:
    """``env.*`` with the tool set and interactions as the environment (its processes and step bound stay
    the user's)."""
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    kwargs = {
        "tool_config_path": multi_turn.tool_config_path and str(multi_turn.tool_config_path),
        "interaction_config_path": multi_turn.interaction_config_path and str(multi_turn.interaction_config_path),
        "format": str(multi_turn.format),
        "max_parallel_calls": int(multi_turn.max_parallel_calls),
        "max_tool_response_length": int(multi_turn.max_tool_response_length),
        "tool_response_truncate_side": str(multi_turn.tool_response_truncate_side),
        "tool_timeout_s": float(multi_turn.tool_timeout_s),
        "max_user_turns": None if multi_turn.max_user_turns is None else int(multi_turn.max_user_turns),
    }
    return dataclasses.replace(cfg.env, name="tools", kwargs=kwargs)


def _progress_rewards(cfg: SiirlConfig, tokenizer: Any) -> Any:
    spec = cfg.algorithm.embodied.progress_reward
    return ProgressRewards(
        float(spec.failure_scale), float(spec.sigma), enable=bool(spec.enable),
        scale=float(cfg.algorithm.embodied.reward_scale),
    )


def _tool_rewards(cfg: SiirlConfig, tokenizer: Any) -> Any:
    return ToolCallRewards(make_reward_manager_from_config(cfg, tokenizer))


WRAPPERS: dict[str, Callable[[EnvSession, SiirlConfig], RolloutEngine]] = {
    "steps": _steps, "turns": _turns, "tools": _tool_turns, "agents": _agent_loops,
}
REWARDS: dict[str, Callable[[SiirlConfig, Any], Any]] = {
    "steps": _progress_rewards, "turns": lambda _cfg, _tokenizer: TurnRewards(), "tools": _tool_rewards,
    "agents": lambda cfg, tokenizer: AgentLoopRewards(make_reward_manager_from_config(cfg, tokenizer)),
}
ENV_CONFIGS: dict[str, Callable[[SiirlConfig], EnvConfig]] = {"tools": tool_env_config}


def inner_rollout_config(cfg: SiirlConfig) -> RolloutConfig:
    """The rollout section the inner engine is built with (one sample per call in env-driven runs)."""
    rollout = cfg.actor_rollout_ref.rollout
    return single_sample_config(rollout) if env_mode(cfg) else rollout


def wrap_rollout(engine: RolloutEngine, cfg: SiirlConfig, tokenizer: Any) -> RolloutEngine:
    mode = env_mode(cfg)
    if mode is None:
        return engine
    env_cfg = ENV_CONFIGS[mode](cfg) if mode in ENV_CONFIGS else cfg.env
    session = EnvSession(engine, tokenizer, cfg.actor_rollout_ref.rollout, env_cfg)
    return WRAPPERS[mode](session, cfg)


def env_reward_manager(cfg: SiirlConfig, tokenizer: Any) -> Any | None:
    mode = env_mode(cfg)
    return None if mode is None else REWARDS[mode](cfg, tokenizer)
