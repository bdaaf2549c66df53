"""Multi-agent (MARFT-style) pipelines: several LLM agents, each with its own actor, acting in turn.

Agent ``k`` sees the question plus the outputs of agents ``0..k-1`` (its ``prompt_fn`` writes its prompt
from them), so the agents form one sequential team episode as in MARFT's Flex-POMDP. Every agent has its
own weights, optimiser and rollout engine (built from the same base model), its own rows in the batch
(``batch["agents", name]``), its own advantages and its own update; rewards are ``shared`` (every agent
gets the team's final-answer score), ``per_agent`` (each agent's ``reward_fn`` scores its own step) or
``final`` (only the answering agent is scored, as in MARFT workflow files: ``marft_workflow``).

The graph is plain Pipeline code, so a custom team is a call to :func:`multi_agent_pipeline` (or any
Pipeline that uses the node functions of :mod:`siirl.dag_worker.agent_nodes` with ``config={"agent":
name, ...}``). The planner gives every agent its own role keys (``<agent>/rollout``, ``<agent>/actor``)
and, by ``dag.agent_placement`` (see :mod:`siirl.execution.scheduler.placement`), either its own share
of the DAG workers (``own``: agent ``k``'s nodes in placement group ``k``, the team reward on the last
agent's ranks; batches move between the agents' ranks through the data coordinator, and each worker
builds only its own agents' models) or every worker (``shared``: one copy of every agent per worker).
``auto`` picks ``own`` when the workers split equally among the agents. ``--plan`` prints each agent's
ranks.

A team may play several rounds (``rounds``, MARFT's ``multi_turn.max_assistant_turns``): the graph holds
one rollout node per agent and round, so every worker walks the same rounds. Between rounds the last
agent's answer is scored by the data's rule: a right answer ends that episode (later rounds keep its
outputs and do not regenerate it), a wrong one enters the later prompts with :data:`WRONG_ANSWER` appended
(the published MARFT ``MathEnv``). Each agent trains on its last round's turn; the team reward scores the
final round's answer.

After the team reward every agent trains in a branch of its own, so agents on separate workers train at
the same time. The branch is the single-policy training chain (``policy_steps``: advantage,
log-probs, reference, critic, update, as the config asks) with ``config={"agent": name}``: the same
built-in nodes, so KL terms, critics and every estimator reach agents with no extra code. An estimator
that chains the agents (``gae_marft``) starts each earlier agent's branch after the next agent's advantages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from siirl.algorithms import estimator_needs
from siirl.errors import ConfigError
from siirl.execution.dag.builtin_pipelines import STEPS, policy_steps
from siirl.execution.dag.contract import AGENT_KEY, MODEL_AGENT_KEY, ROLLOUT_WRITES, scoped_key
from siirl.execution.dag.node_types import NodeRole, NodeType
from siirl.execution.dag.pipeline import Pipeline
from siirl.execution.dag.task_graph import TaskGraph
from siirl.params.root import SiirlConfig, or_defaults

AGENT_NODES = "siirl.dag_worker.agent_nodes"
#: shared: the final answer's score for every agent; per_agent: each agent's reward_fn; final: only the
#: agent giving the final answer is scored (MARFT: the earlier agents' credit comes through gae_marft)
REWARD_MODES = ("shared", "per_agent", "final")
#: What a wrong answer carries into the next round's prompts (the published MARFT ``MathEnv``'s words).
WRONG_ANSWER = " This answer is wrong."
#: Per-row episode state: every earlier turn's text (JSON list), whether the episode ended, rounds played.
TEAM_HISTORY, TEAM_DONE, TEAM_ROUNDS = "team_history", "team_done", "team_rounds"
EPISODE_STATE = (TEAM_HISTORY, TEAM_DONE, TEAM_ROUNDS)
_CRITIC_STEPS = ("critic_value", "critic_train")


@dataclass(frozen=True)
class AgentSpec:
    """One agent: ``prompt_fn(question, previous_outputs, **prompt_kwargs) -> str`` and, for per-agent
    rewards, ``reward_fn(question, previous_outputs, output, ground_truth) -> float`` (both "module:function");
    ``model_path`` gives the agent its own base model (default: ``actor_rollout_ref.model.path``).
    ``previous_outputs`` is every earlier turn of the episode in order: in round 1 the answers of the agents
    before this one; in a later round also every turn of the earlier rounds (a wrong final answer ends with
    :data:`WRONG_ANSWER`). ``critic_of`` names the agent whose critic this agent's value and critic-update
    nodes use (MARFT's ``share_instance``: one critic trained on both agents' rows)."""

    name: str
    prompt_fn: str
    reward_fn: str = ""
    model_path: str = ""
    prompt_kwargs: dict[str, Any] = field(default_factory=dict)
    critic_of: str = ""


@dataclass
class AgentRolloutConfig:
    """Own section of an agent's rollout node."""

    agent: str
    previous: list[str] = field(default_factory=list)
    prompt_fn: str = ""
    model_path: str = ""
    prompt_kwargs: dict[str, Any] = field(default_factory=dict)
    #: this node's round (0-based) of the team's ``rounds``
    round_index: int = 0
    rounds: int = 1
    #: the team's answering (last) agent: its turn ends the round
    closes_round: bool = False


@dataclass
class TeamRewardConfig:
    agents: list[str] = field(default_factory=list)
    reward_mode: str = "shared"
    reward_fns: list[str] = field(default_factory=list)


def agent_names(graph: TaskGraph) -> list[str]:
    """The agents of ``graph`` in execution order (empty for single-policy graphs)."""
    names = (graph.nodes[n].config.get(AGENT_KEY) for n in graph.get_execution_order())
    return list(dict.fromkeys(name for name in names if name))


def _training_steps(cfg: SiirlConfig) -> list[str]:
    if cfg.reward_model.enable:
        raise ConfigError(
            "reward_model.enable=true scores single-policy responses; a team is scored by its team reward "
            "(reward_mode=shared|per_agent)"
        )
    steps = policy_steps(cfg)
    if "reward_baseline" in steps:
        raise ConfigError(
            "this advantage estimator scores a greedy baseline response per prompt (ReMax), which a multi-agent "
            "team cannot produce per agent; pick grpo, rloo, reinforce_plus_plus, gae, ... for teams"
        )
    return steps


def team_rounds(cfg: SiirlConfig) -> int:
    """Rounds a team plays: ``multi_turn.max_assistant_turns`` (the original siiRL's key), 1 when unset."""
    return int(cfg.actor_rollout_ref.rollout.multi_turn.max_assistant_turns or 1)


def _check_critic_sharing(agents: Sequence[AgentSpec], names: list[str]) -> None:
    for agent in agents:
        if agent.critic_of and (agent.critic_of not in names or agent.critic_of == agent.name):
            raise ConfigError(f"agent {agent.name!r}: critic_of={agent.critic_of!r} must name another agent "
                              f"of the team ({', '.join(names)})")


def _rollout_nodes(pipeline: Pipeline, agents: Sequence[AgentSpec], rounds: int) -> str:
    """One rollout node per agent and round, chained; returns the last one."""
    names = [agent.name for agent in agents]
    previous = ""
    for round_index in range(rounds):
        for position, agent in enumerate(agents):
            node_id = f"{agent.name}_rollout" + (f"_round{round_index + 1}" if round_index else "")
            earlier = [f"{name}_output" for name in names[:position]]
            first = not (round_index or position)
            pipeline.add_node(
                node_id, f"{AGENT_NODES}:agent_generate", deps=[previous] if previous else [],
                node_type=NodeType.MODEL_INFERENCE, node_role=NodeRole.ROLLOUT,
                config={"agent": agent.name, "previous": names[:position], "prompt_fn": agent.prompt_fn,
                        "model_path": agent.model_path, "prompt_kwargs": dict(agent.prompt_kwargs),
                        "round_index": round_index, "rounds": rounds,
                        "closes_round": position == len(agents) - 1},
                reads=(("input_ids", "attention_mask") if first
                       else ("question", "agents", *EPISODE_STATE, *earlier)),
                writes=(f"{agent.name}_output", "agents", "question", "uid", *EPISODE_STATE,
                        *(scoped_key(agent.name, key) for key in ROLLOUT_WRITES)),
            )
            previous = node_id
    return previous


def multi_agent_pipeline(
    agents: Sequence[AgentSpec],
    reward_mode: str = "shared",
    pipeline_id: str = "marft",
    cfg: SiirlConfig | None = None,
    train_cycle: int = 0,
    rounds: int = 0,
) -> TaskGraph:
    """rollout(agent 0) -> ... -> rollout(agent K-1) [-> the same for each further round] -> reward, then per
    agent a branch of its own, the single-policy training chain for ``cfg`` (agents on separate workers
    update side by side).

    ``train_cycle > 0``: the agents take turns updating their policy, ``train_cycle`` steps each (MARFT's
    agent-by-agent training: agent ``k`` updates at the steps where ``step // train_cycle % K == k``).
    ``rounds``: rounds of the team per episode (0: :func:`team_rounds` of ``cfg``).
    """
    names = [agent.name for agent in agents]
    if not agents or len(set(names)) != len(names) or any("/" in n or not n for n in names):
        raise ConfigError(f"multi-agent pipeline needs unique, non-empty agent names without '/', got {names}")
    if reward_mode not in REWARD_MODES:
        raise ConfigError(f"reward_mode={reward_mode!r} is not one of {', '.join(REWARD_MODES)}")
    if train_cycle < 0:
        raise ConfigError(f"train_cycle must be >= 0 (0: every agent updates every step), got {train_cycle}")
    if reward_mode == "per_agent" and any(not agent.reward_fn for agent in agents):
        raise ConfigError("reward_mode=per_agent needs a reward_fn for every agent")
    _check_critic_sharing(agents, names)
    cfg = or_defaults(cfg)
    rounds = rounds or team_rounds(cfg)
    if rounds < 1:
        raise ConfigError(f"a team plays at least 1 round, got rounds={rounds}")
    pipeline = Pipeline(pipeline_id, f"{len(agents)}-agent team ({reward_mode} reward, {rounds} round(s))")
    last_rollout = _rollout_nodes(pipeline, agents, rounds)
    team = {"agents": names, "reward_mode": reward_mode, "reward_fns": [a.reward_fn for a in agents]}
    pipeline.add_node("team_reward", f"{AGENT_NODES}:team_reward", deps=[last_rollout],
                      node_type=NodeType.COMPUTE, node_role=NodeRole.REWARD, config=team,
                      reads=(*(f"{name}_output" for name in names), TEAM_ROUNDS),
                      writes=tuple(scoped_key(name, "token_level_scores") for name in names))
    steps = _training_steps(cfg)
    chained = estimator_needs(cfg.algorithm.adv_estimator).agent_chain
    # a chaining estimator (gae_marft) needs the next agent's advantages first: the last agent's branch
    # starts at the team reward, each earlier agent's at the advantage node of the agent after it
    for position in reversed(range(len(names))) if chained else range(len(names)):
        following = names[position + 1] if chained and position + 1 < len(names) else ""
        last = f"{following}_calculate_advantages" if following else "team_reward"
        for step_id in steps:
            step, node_id = STEPS[step_id], f"{names[position]}_{step_id}"
            config = {"agent": names[position]}
            if chained and step_id == "calculate_advantages":
                config["next_agent"] = following
            if train_cycle and step_id == "actor_train":
                config["train_turn"] = [train_cycle, position, len(names)]
            if agents[position].critic_of and step_id in _CRITIC_STEPS:
                config[MODEL_AGENT_KEY] = agents[position].critic_of
            pipeline.add_node(node_id, step.func, deps=[last], node_type=step.node_type, node_role=step.node_role,
                              only_forward_compute=step.only_forward_compute, config=config)
            last = node_id
    return pipeline.build()
