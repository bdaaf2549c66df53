"""The original siiRL's MARFT workflow files read as a team (``dag.workflow_path=workflow_marft.yaml``).

Their layout: per-agent rollout settings as YAML anchors (``actor_1_config``, ...), and nodes tagged with
the ``agent_group`` they belong to; each agent's rollout node carries ``agent_options`` (its prompt
templates for their ``process.py``, the environment that rewards it, ``env_path``). Here that file becomes
:func:`siirl.execution.dag.multi_agent.multi_agent_pipeline`, the one code path of every team:

- each rollout node, in ``agent_group`` order, is an agent named after its node (``rollout_reasoner`` ->
  ``reasoner``), prompted by :func:`siirl.user_interface.marft_templates.template_prompt` with the
  team's ``pre_chat_template`` / ``post_chat_template`` (the published ``process.py``);
- the team plays ``multi_turn.max_assistant_turns`` rounds; between rounds the environment of the last
  agent (``env_path`` with ``obs_with_env``) scores its answer: right ends the episode, wrong goes into
  the next round's transcript with ``" This answer is wrong."`` (the published ``MathEnv``);
- the rewarded agent is the one whose node names the environment (``agent.rewards_with_env=true``) or
  the one of the reward node; it must be the last agent, whose answer is the team's, and it gets the
  data's rule score (``reward_mode="final"``; the published ``MathEnv`` scores with the math rule);
- the training nodes (log-probs, reference, critic, advantage, updates) are each agent's built-in chain
  for the run's config, as for every team; ``train_cycle`` on the actor updates makes the agents take
  turns training;
- ``share_instance: j`` on an agent's critic nodes: it uses agent ``j``'s critic (one critic, updated on
  both agents' rows) where both agents run on the same workers (``dag.agent_placement`` shared); with
  each agent on its own workers every agent keeps a critic of its own, and the loader says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from siirl.errors import ConfigError
from siirl.execution.dag.multi_agent import AgentSpec, multi_agent_pipeline, team_rounds
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.dag.workflow_yaml import ENV_REWARDS_NEED_MARFT, is_marft_layout, load_workflow_yaml
from siirl.execution.scheduler.placement import agent_placement_mode
from siirl.params.root import SiirlConfig
from siirl.params.trainer import world_size
from siirl.user_files import load_user_yaml

logger = logging.getLogger(__name__)
TEMPLATE_PROMPT = "siirl.user_interface.marft_templates:template_prompt"
#: Environment classes of the published MARFT examples that this loader knows: each scores the agent's
#: answer against the ground truth with the rule reward.
RULE_ENVS = ("MathEnv",)
_TOP_KEYS = ("dag_id", "pipeline_id", "description", "nodes")
_AGENT_OPTIONS = (
    "obs_with_env", "process_path", "pre_process_kwargs", "post_process_kwargs", "env_path", "train_cycle",
    "share_instance",
)


def _refuse(where: str, what: str) -> None:
    raise ConfigError(f"MARFT workflow {where}: {what}")


def _options(node: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    options = node.get("agent_options") or {}
    unknown = sorted(set(options) - set(_AGENT_OPTIONS))
    if unknown:
        _refuse(where, f"node {node.get('node_id')!r} has unknown agent_options key {unknown[0]!r}; "
                       f"known: {', '.join(_AGENT_OPTIONS)}")
    return options


def _rollout_nodes(nodes: list[Mapping[str, Any]], where: str) -> list[Mapping[str, Any]]:
    rollouts = sorted((n for n in nodes if str(n.get("node_role", "")).upper() == "ROLLOUT"),
                      key=lambda n: int(n.get("agent_group", -1)))
    groups = [n.get("agent_group") for n in rollouts]
    if groups != list(range(len(rollouts))) or not rollouts:
        _refuse(where, f"needs one ROLLOUT node per agent_group 0, 1, ..., got agent_groups {groups}")
    settings = [n.get("config") or {} for n in rollouts]
    if any(s != settings[0] for s in settings):
        _refuse(where, "its agents' rollout settings (actor_N_config) differ; a team here shares "
                       "actor_rollout_ref.rollout.*, so give every agent the same settings")
    return rollouts


def _agent_name(node: Mapping[str, Any]) -> str:
    node_id = str(node.get("node_id"))
    return node_id.removeprefix("rollout_") or node_id


def _check_envs(node: Mapping[str, Any], where: str) -> None:
    for entry in node["agent_options"]["env_path"]:
        if str(entry).rsplit(":", 1)[-1] not in RULE_ENVS:
            _refuse(where, f"env_path {entry!r} is not read: the environments known here are "
                           f"{', '.join(RULE_ENVS)} (the rule score of the answer); use a team in Python code")


def _rewarded_group(nodes: list[Mapping[str, Any]], with_env: bool, where: str) -> int:
    """The agent group the environment (``rewards_with_env``) or the reward node scores."""
    if with_env:
        env_nodes = [n for n in nodes if _options(n, where).get("env_path")]
        if len(env_nodes) != 1:
            _refuse(where, f"agent.rewards_with_env=true needs one agent with an env_path, got {len(env_nodes)}")
        _check_envs(env_nodes[0], where)
        return int(env_nodes[0]["agent_group"])
    rewards = [n for n in nodes if str(n.get("node_role", "")).upper() == "REWARD"]
    if len(rewards) != 1:
        _refuse(where, f"needs one REWARD node (or agent.rewards_with_env=true), got {len(rewards)}")
    return int(rewards[0].get("agent_group", -1))


def _train_cycle(nodes: list[Mapping[str, Any]], where: str) -> int:
    updates = [n for n in nodes if str(n.get("node_role", "")).upper() == "ACTOR" and not n.get("only_forward_compute")]
    cycles = {int(_options(n, where).get("train_cycle") or 0) for n in updates}
    if len(cycles) > 1:
        _refuse(where, f"its actor updates set different train_cycle values {sorted(cycles)}; give them one")
    return cycles.pop() if cycles else 0


def _check_rounds(rollouts: list[Mapping[str, Any]], rounds: int, where: str) -> None:
    """Rounds after the first need the environment's verdict on the last agent's answer between them."""
    options = _options(rollouts[-1], where)
    if rounds == 1:
        return
    if not (options.get("env_path") and options.get("obs_with_env")):
        _refuse(where, f"multi_turn.max_assistant_turns={rounds} repeats the team's rounds with the "
                       f"environment's feedback, but the last agent ({rollouts[-1].get('node_id')!r}) has no "
                       "env_path with obs_with_env: true; give it the environment or set max_assistant_turns=1")
    _check_envs(rollouts[-1], where)


def _critic_owners(nodes: list[Mapping[str, Any]], rollouts: list[Mapping[str, Any]], cfg: SiirlConfig,
                   where: str) -> dict[int, str]:
    """agent_group -> the agent whose critic it uses (``share_instance``), where the placement allows it."""
    names = {int(n["agent_group"]): _agent_name(n) for n in rollouts}
    shares: dict[int, str] = {}
    for node in nodes:
        owner = _options(node, where).get("share_instance")
        if owner is None or str(node.get("node_role", "")).upper() != "CRITIC":
            continue
        group = int(node.get("agent_group", -1))
        if int(owner) not in names or int(owner) == group:
            _refuse(where, f"node {node.get('node_id')!r}: share_instance={owner} must name another "
                           f"agent_group ({', '.join(str(g) for g in names)})")
        shares[group] = names[int(owner)]
    if shares and agent_placement_mode(cfg.dag.agent_placement, len(rollouts), world_size(cfg)) == "own":
        logger.warning("%s: share_instance is not applied: each agent runs on its own workers "
                       "(dag.agent_placement=own), so every agent trains a critic of its own; "
                       "dag.agent_placement=shared shares it", where)
        return {}
    return shares


def marft_team(data: Mapping[str, Any], cfg: SiirlConfig, default_id: str, where: str) -> TaskGraph:
    """The team of a MARFT workflow file (see the module docstring)."""
    unknown = [k for k in data if k not in _TOP_KEYS and not (str(k).startswith("actor_") and str(k).endswith("_config"))]
    if unknown:
        _refuse(where, f"unknown top-level key {unknown[0]!r}")
    nodes = [n for n in data.get("nodes") or [] if isinstance(n, Mapping)]
    rollouts = _rollout_nodes(nodes, where)
    pre, post = [], []
    for node in rollouts:
        options = _options(node, where)
        pre.append(str((options.get("pre_process_kwargs") or {}).get("pre_chat_template", "${prompt}")))
        post.append(str((options.get("post_process_kwargs") or {}).get("post_chat_template", "")))
    owners = _critic_owners(nodes, rollouts, cfg, where)
    agents = [
        AgentSpec(_agent_name(node), TEMPLATE_PROMPT, critic_of=owners.get(k, ""),
                  prompt_kwargs={"pre_templates": pre, "post_templates": post})
        for k, node in enumerate(rollouts)
    ]
    rounds = team_rounds(cfg)
    _check_rounds(rollouts, rounds, where)
    rewarded = _rewarded_group(nodes, cfg.actor_rollout_ref.rollout.agent.rewards_with_env, where)
    if rewarded != len(agents) - 1:
        _refuse(where, f"agent_group {rewarded} is rewarded, but the team's answer is the last agent's "
                       f"(agent_group {len(agents) - 1}); reward the last agent")
    pipeline_id = str(data.get("dag_id") or data.get("pipeline_id") or default_id)
    return multi_agent_pipeline(agents, reward_mode="final", pipeline_id=pipeline_id, cfg=cfg,
                                train_cycle=_train_cycle(nodes, where), rounds=rounds)


def load_run_workflow(path: str, cfg: SiirlConfig) -> TaskGraph:
    """``dag.workflow_path``: a MARFT file becomes its team, any other file is read as a workflow file."""
    data = load_user_yaml(Path(path), "workflow file")
    if is_marft_layout(data):
        return marft_team(data, cfg, Path(path).stem, str(path))
    if cfg.actor_rollout_ref.rollout.agent.rewards_with_env:
        raise ConfigError(ENV_REWARDS_NEED_MARFT)
    return load_workflow_yaml(path)
