"""The original siiRL's MARFT workflow files read as a team (``dag.workflow_path=workflow_marft.yaml``).

Their layout: per-agent rollout settings as YAML anchors (``actor_1_config``, ...), and nodes tagged with
the ``agent_group`` they belong to; each agent's rollout node carries ``agent_options`` (its prompt
templates for their ``process.py``, the environment that rewards it, ``env_path``). Here that file becomes
:func:`siirl.execution.dag.multi_agent.multi_agent_pipeline`, the one code path of every team:

- each rollout node, in ``agent_group`` order, is an agent named after its node (``rollout_reasoner`` ->
  ``reasoner``), prompted by :func:`siirl.user_interface.marft_templates.template_prompt` with its
  ``pre_chat_template`` / ``post_chat_template`` (the published ``process.py``);
- the rewarded agent is the one whose node names the environment (``agent.rewards_with_env=true``) or
  the one of the reward node; it must be the last agent, whose answer is the team's, and it gets the
  data's rule score (``reward_mode="final"``; the published ``MathEnv`` scores with the math rule);
- the training nodes (log-probs, reference, critic, advantage, updates) are each agent's built-in chain
  for the run's config, as for every team; ``train_cycle`` on the actor updates makes the agents take
  turns training. ``share_instance`` (one agent using another's critic) is not read: every agent trains a
  critic of its own, which agents on their own workers need (the loader says so once).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from siirl.errors import ConfigError
from siirl.execution.dag.multi_agent import AgentSpec, multi_agent_pipeline
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.dag.workflow_yaml import ENV_REWARDS_NEED_MARFT, is_marft_layout, load_workflow_yaml
from siirl.params.root import SiirlConfig
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


def _rewarded_group(nodes: list[Mapping[str, Any]], with_env: bool, where: str) -> int:
    """The agent group the environment (``rewards_with_env``) or the reward node scores."""
    if with_env:
        env_nodes = [n for n in nodes if _options(n, where).get("env_path")]
        if len(env_nodes) != 1:
            _refuse(where, f"agent.rewards_with_env=true needs one agent with an env_path, got {len(env_nodes)}")
        for entry in env_nodes[0]["agent_options"]["env_path"]:
            if str(entry).rsplit(":", 1)[-1] not in RULE_ENVS:
                _refuse(where, f"env_path {entry!r} is not read: the environments known here are "
                               f"{', '.join(RULE_ENVS)} (the rule score of the answer); use a team in Python code")
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
    agents = [
        AgentSpec(_agent_name(node), TEMPLATE_PROMPT,
                  prompt_kwargs={"pre_templates": pre[: k + 1], "post_templates": post[: k + 1]})
        for k, node in enumerate(rollouts)
    ]
    shared = [str(n.get("node_id")) for n in nodes if _options(n, where).get("share_instance") is not None]
    if shared:
        logger.warning("%s: share_instance on %s is not read; every agent trains a critic of its own",
                       where, ", ".join(shared))
    rewarded = _rewarded_group(nodes, cfg.actor_rollout_ref.rollout.agent.rewards_with_env, where)
    if rewarded != len(agents) - 1:
        _refuse(where, f"agent_group {rewarded} is rewarded, but the team's answer is the last agent's "
                       f"(agent_group {len(agents) - 1}); reward the last agent")
    pipeline_id = str(data.get("dag_id") or data.get("pipeline_id") or default_id)
    return multi_agent_pipeline(agents, reward_mode="final", pipeline_id=pipeline_id, cfg=cfg,
                                train_cycle=_train_cycle(nodes, where))


def load_run_workflow(path: str, cfg: SiirlConfig) -> TaskGraph:
    """``dag.workflow_path``: a MARFT file becomes its team, any other file is read as a workflow file."""
    data = load_user_yaml(Path(path), "workflow file")
    if is_marft_layout(data):
        return marft_team(data, cfg, Path(path).stem, str(path))
    if cfg.actor_rollout_ref.rollout.agent.rewards_with_env:
        raise ConfigError(ENV_REWARDS_NEED_MARFT)
    return load_workflow_yaml(path)
