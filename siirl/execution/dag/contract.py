"""Node contracts: the batch keys a node reads and writes and the model roles it needs.

A contract lets the planner prove, before any worker starts, that every key a node reads is produced
upstream (or by the dataloader) and that every model it uses exists under the run's config. Declare one
with the ``node_contract`` decorator next to the function, or pass ``reads`` / ``writes`` / ``roles`` to
``Pipeline.add_node`` (or the same keys in a workflow YAML node). Parts of a contract that depend on the
config (the KL-in-reward inputs, the estimator's needs) come from ``when(cfg)``.

``config`` names a dataclass for the node's own section (``Node.config``): the worker hands the node an
instance of it as ``node_config``, and unknown keys are refused at plan time.

``per_policy`` marks a node that acts on one policy's rows: in a multi-agent graph a node with
``config={"agent": name}`` reads and writes ``batch["agents", name]``, so its keys are checked as
``agents/<name>/<key>`` (``scoped``), and the same function serves single policies and every agent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from siirl.execution.dag.node_types import DAGValidationError

#: Attribute the decorator sets on a node function.
CONTRACT_ATTR = "__siirl_contract__"
#: What a rollout writes: the sampled sequences and the group id of each sample.
ROLLOUT_WRITES = ("prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids", "uid")
#: Node config key naming the agent a node belongs to (empty or absent: the run's single policy).
AGENT_KEY = "agent"
#: Node config key naming the agent whose model the node uses when it is not its own (MARFT's share_instance:
#: an agent's critic nodes on another agent's critic); its rows stay its own.
MODEL_AGENT_KEY = "model_agent"
#: The batch field holding each agent's own rows (a nested TensorDict per agent name).
AGENTS_FIELD = "agents"


def node_agent(config: Any) -> str:
    """The agent a node's own config section names, or ``""`` for the run's single policy."""
    return str(config.get(AGENT_KEY) or "")


def model_agent(config: Any) -> str:
    """The agent whose models a node uses: ``model_agent`` when set, else its own (:func:`node_agent`)."""
    return str(config.get(MODEL_AGENT_KEY) or node_agent(config))


def scoped_key(agent: str, key: str) -> str:
    """``agents/<agent>/<key>``: where a per-policy key of agent ``agent`` lives in the batch."""
    return f"{AGENTS_FIELD}/{agent}/{key}"


@dataclass(frozen=True)
class NodeContract:
    """What one node reads, writes and needs; ``merged`` unions two declarations."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    def scoped(self, agent: str) -> NodeContract:
        """The same contract on agent ``agent``'s rows (roles are the run's, not scoped)."""
        return NodeContract(
            tuple(scoped_key(agent, k) for k in self.reads), tuple(scoped_key(agent, k) for k in self.writes),
            self.roles,
        )

    def merged(self, other: NodeContract | None) -> NodeContract:
        if other is None:
            return self
        return NodeContract(
            _union(self.reads, other.reads), _union(self.writes, other.writes), _union(self.roles, other.roles)
        )


def _union(a: Iterable[str], b: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*a, *b]))


def as_keys(value: Iterable[str] | str | None, what: str) -> tuple[str, ...]:
    """A tuple of non-empty strings from a list (or one string); ``what`` names the culprit."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(item, str) and item for item in items):
        raise DAGValidationError(f"{what} must be a list of non-empty strings, got {value!r}")
    return tuple(items)


ContractFn = Callable[[Any], NodeContract]


@dataclass(frozen=True)
class DeclaredContract:
    """A contract as declared on a function: a static part, a config-dependent part, a config dataclass."""

    static: NodeContract
    when: ContractFn | None = None
    config: type | None = None
    per_policy: bool = False

    def resolve(self, cfg: Any, agent: str = "") -> NodeContract:
        contract = self.static.merged(self.when(cfg) if self.when is not None else None)
        return contract.scoped(agent) if self.per_policy and agent else contract


def node_contract(
    reads: Iterable[str] = (),
    writes: Iterable[str] = (),
    roles: Iterable[str] = (),
    *,
    when: ContractFn | None = None,
    config: type | None = None,
    per_policy: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator declaring a node function's contract (see the module docstring)."""
    if config is not None and not is_dataclass(config):
        raise TypeError(f"node_contract config must be a dataclass type, got {config!r}")
    declared = DeclaredContract(
        NodeContract(as_keys(reads, "reads"), as_keys(writes, "writes"), as_keys(roles, "roles")), when, config,
        per_policy,
    )

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        target = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
        setattr(target, CONTRACT_ATTR, declared)
        return fn

    return wrap


def declared_contract(fn: Any) -> DeclaredContract | None:
    """The contract a function was decorated with, if any."""
    return getattr(fn, CONTRACT_ATTR, None)


#: Node config keys read by the planner, not by the node (``placement_group``: which ranks run it).
PLANNER_CONFIG_KEYS = ("placement_group",)


def node_config_instance(config_cls: type | None, section: dict[str, Any], owner: str) -> Any:
    """``config_cls(**section)`` with unknown keys refused in one line; the raw dict when no class is set.

    Keys the planner reads (``PLANNER_CONFIG_KEYS``) are not the node's and never reach its dataclass.
    """
    if config_cls is None:
        return section
    section = {key: value for key, value in section.items() if key not in PLANNER_CONFIG_KEYS}
    known = {f.name for f in fields(config_cls)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise DAGValidationError(
            f"{owner} config has unknown key {unknown[0]!r}; {config_cls.__name__} has: {', '.join(sorted(known))}"
        )
    return config_cls(**section)
