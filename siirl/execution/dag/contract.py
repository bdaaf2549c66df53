"""Node contracts: the batch keys a node reads and writes and the model roles it needs.

A contract lets the planner prove, before any worker starts, that every key a node reads is produced
upstream (or by the dataloader) and that every model it uses exists under the run's config. Declare one
with the ``node_contract`` decorator next to the function, or pass ``reads`` / ``writes`` / ``roles`` to
``Pipeline.add_node`` (or the same keys in a workflow YAML node). Parts of a contract that depend on the
config (the KL-in-reward inputs, the estimator's needs) come from ``when(cfg)``.

``config`` names a dataclass for the node's own section (``Node.config``): the worker hands the node an
instance of it as ``node_config``, and unknown keys are refused at plan time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from siirl.execution.dag.node_types import DAGValidationError

#: Attribute the decorator sets on a node function.
CONTRACT_ATTR = "__siirl_contract__"


@dataclass(frozen=True)
class NodeContract:
    """What one node reads, writes and needs; ``merged`` unions two declarations."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

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

    def resolve(self, cfg: Any) -> NodeContract:
        return self.static.merged(self.when(cfg) if self.when is not None else None)


def node_contract(
    reads: Iterable[str] = (),
    writes: Iterable[str] = (),
    roles: Iterable[str] = (),
    *,
    when: ContractFn | None = None,
    config: type | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator declaring a node function's contract (see the module docstring)."""
    if config is not None and not is_dataclass(config):
        raise TypeError(f"node_contract config must be a dataclass type, got {config!r}")
    declared = DeclaredContract(
        NodeContract(as_keys(reads, "reads"), as_keys(writes, "writes"), as_keys(roles, "roles")), when, config
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
