"""A user's agent loop, as verl writes one (``verl.experimental.agent_loop``): a class whose ``async run``
drives one trajectory, asking a generation server for tokens and returning them with a mask of the tokens the
policy produced.

The names and signatures are verl's, so a verl loop moves over by its imports alone:
``from verl.experimental.agent_loop import AgentLoopBase, AgentLoopOutput`` becomes
``from siirl.agent_loop import AgentLoopBase, AgentLoopOutput`` (and ``register`` likewise). Each trajectory
gets its own instance, built with the run's config, the generation server and the tokenizer; the rollout
runs every trajectory of a step at once on one event loop and batches their generation requests
(:mod:`siirl.engine.rollout.agent_loop_rollout`).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

from siirl.registry import Registry

#: Loops by the name rows and ``default_agent_loop`` use; ``register`` adds a class, verl's
#: ``agent_loop_config_path`` file adds more when the rollout starts (siirl.agent_loops).
AGENT_LOOPS: Registry[type] = Registry("agent loop")


@dataclass
class TokenOutput:
    """What the server returns for one request: the continuation's tokens (no padding)."""

    token_ids: list[int]
    #: verl's field; siiRL's engines record sampled log-probs apart from this path, so it stays None.
    log_probs: list[float] | None = None
    stop_reason: str | None = None
    num_preempted: int | None = None
    extra_fields: dict[str, Any] = field(default_factory=dict)


class GenerationServer(Protocol):
    """The ``server_manager`` a loop is given (verl's ``LLMServerClient.generate``)."""

    async def generate(
        self, request_id: str | None = None, *, prompt_ids: list[int], sampling_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput: ...


@dataclass
class AgentLoopOutput:
    """One trajectory: its prompt, then the response tokens (the policy's and those the loop inserted,
    e.g. tool replies) with ``response_mask`` 1 on the policy's tokens and 0 on the inserted ones."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None = None
    multi_modal_data: dict[str, Any] | None = None
    #: The trajectory's reward, when the loop judged it itself; None: the run's score function scores the text.
    reward_score: float | None = None
    #: Chat turns (user, assistant and tool), as verl counts them.
    num_turns: int = 0
    metrics: Any = field(default_factory=dict)
    extra_fields: dict[str, Any] = field(default_factory=dict)


class AgentLoopBase(ABC):
    """Base of every agent loop. ``trainer_config`` is the run's typed config (verl's wrapper with a
    ``.config`` is read through), with ``actor_rollout_ref.rollout.prompt_length`` / ``response_length``
    filled in; ``server_manager`` generates (:class:`GenerationServer`); extra keys of the loop's entry in
    the agent-loop file arrive as keyword arguments, as hydra's ``instantiate`` passes them in verl."""

    _class_initialized = False

    def __init__(
        self, trainer_config: Any, server_manager: GenerationServer, tokenizer: Any, processor: Any = None,
        **kwargs: Any,
    ) -> None:
        self.config = getattr(trainer_config, "config", trainer_config)
        self.rollout_config = self.config.actor_rollout_ref.rollout
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.init_class(config=self.config, tokenizer=tokenizer, processor=processor, **kwargs)
        self.loop = asyncio.get_running_loop()

    @classmethod
    def init_class(cls, config: Any, tokenizer: Any, processor: Any = None, **kwargs: Any) -> None:
        """Work shared by every instance of the class (verl's hook), done once per worker process."""
        if cls._class_initialized:
            return
        cls._class_initialized = True

    @abstractmethod
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """One trajectory. ``sampling_params``: the rollout's temperature, top_p, top_k (validation's
        when validating); ``kwargs``: the row's fields (``raw_prompt``, ``data_source``, ``ground_truth`` and
        verl's ``reward_model.ground_truth``, ``extra_info``, ``index``, ``tools_kwargs``,
        ``interaction_kwargs``, ``agent_name``, ``uid``)."""


def register(agent_name: str):
    """Class decorator: rows whose ``agent_name`` (or the run's ``default_agent_loop``) is ``agent_name``
    run this loop. The class's module must be imported in the workers: name it in
    ``actor_rollout_ref.model.external_lib`` (or list the class in the agent-loop file instead)."""
    return AGENT_LOOPS.register(agent_name, replace=True)
