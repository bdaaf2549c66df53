"""The models of each agent of a multi-agent graph: its own actor (weights + optimiser) and rollout engine.

Agents are found by the ``agent`` key in the nodes of this worker's own graph, so a worker builds only
the agents placed on it (with ``dag.agent_placement=own``, one agent per worker group); each gets the
process group of its own role key (``<agent>/actor``), so the planner's placement is what the agent's
FSDP collectives use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from siirl.engine.rollout.base import RolloutEngine
from siirl.engine.rollout.env_session import single_sample_config
from siirl.execution.dag.task_graph import TaskGraph
from siirl.params.model import ModelConfig
from siirl.params.root import SiirlConfig

AGENT_KEY = "agent"


@dataclass
class AgentModels:
    name: str
    actor: Any
    rollout: RolloutEngine
    free_cache: bool
    stale: bool = True

    def refresh(self) -> None:
        """Wake the engine and, after this agent's last update, stream its actor's weights in."""
        self.rollout.wake_up()
        if self.stale:
            self.rollout.sync_weights(self.actor.named_parameters_for_sync())
            self.stale = False

    def done(self) -> None:
        if self.free_cache:
            self.rollout.sleep()


def agent_names(graph: TaskGraph) -> list[str]:
    """The agents of ``graph`` in execution order (empty for single-policy graphs)."""
    names = (graph.nodes[n].config.get(AGENT_KEY) for n in graph.get_execution_order())
    return list(dict.fromkeys(name for name in names if name))


def _model_config(cfg: SiirlConfig, graph: TaskGraph, name: str) -> ModelConfig:
    """The agent's model section: the run's, with the agent's own ``model_path`` when it has one."""
    paths = [n.config.get("model_path") for n in graph if n.config.get(AGENT_KEY) == name]
    path = next((p for p in paths if p), "")
    if not path:
        return cfg.actor_rollout_ref.model
    return dataclasses.replace(cfg.actor_rollout_ref.model, path=path, tokenizer_path="")


def build_agents(cfg: SiirlConfig, graph: TaskGraph, groups: dict, backend: Any, tokenizer: Any, local_rank: int) -> dict:
    """One actor and rollout engine per agent. Agents share the run's tokenizer (their prompts and
    answers are rendered and decoded with it), so an own ``model_path`` must use a compatible one."""
    from siirl.engine.rollout import make_rollout_engine
    from siirl.engine.workers import ActorWorker

    arr = cfg.actor_rollout_ref
    agents = {}
    for name in agent_names(graph):
        model = _model_config(cfg, graph, name)
        actor = ActorWorker(
            model, arr.actor, backend, process_group=groups.get(f"{name}/actor"), rollout_n=arr.rollout.n,
            temperature=arr.rollout.temperature, log_prob_cfg=arr.rollout, init_seed=cfg.trainer.seed,
            local_rank=local_rank,
        )
        rollout = make_rollout_engine(
            arr.rollout.name, model_cfg=model, rollout_cfg=single_sample_config(arr.rollout), backend=backend,
            max_response_length=cfg.data.max_response_length, tokenizer=tokenizer, local_rank=local_rank,
        )
        agents[name] = AgentModels(name, actor, rollout, bool(arr.rollout.free_cache_engine))
    return agents
