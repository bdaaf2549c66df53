"""One DAG node, its output record, and the lazy ``"module:attr"`` resolution of its function.

Nodes carry their function as a string so a TaskGraph can be written to YAML, shipped to Ray workers and
planned on the driver without importing the heavy model code; the callable is imported on first use.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from siirl.execution.dag.contract import (
    DeclaredContract,
    NodeContract,
    declared_contract,
    node_agent,
    node_config_instance,
)
from siirl.execution.dag.node_types import DAGValidationError, NodeRole, NodeType, parse_enum

NodeFunction = Callable[..., "NodeOutput"]

#: Key of ``NodeOutput.info``: the worker feeds the next data batch through the graph from its first node
#: before the step continues (DAPO dynamic sampling fills its training batch this way).
NEED_MORE_DATA = "need_more_data"


@dataclass
class NodeOutput:
    """What every node function returns: the (possibly filtered or extended) batch, metrics and side info."""

    batch: Any
    metrics: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # siiRL's published NodeOutput defaulted both to None; treat an explicit None as empty.
        self.metrics = {} if self.metrics is None else self.metrics
        self.info = {} if self.info is None else self.info


def _check_ref_format(ref: str, owner: str) -> tuple[str, list[str]]:
    module_name, sep, attr_path = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    attrs = attr_path.split(".")
    if not sep or not module_name or not all(attrs):
        raise DAGValidationError(
            f"{owner} func {ref!r} must look like 'module:function' or 'module:Class.method'"
        )
    return module_name, attrs


def resolve_callable(ref: str, owner: str = "func") -> NodeFunction:
    """Import ``"module:function"`` / ``"module:Class.method"``; ``owner`` names the culprit in errors.

    ``Class.method`` resolves to the attribute as found on the class (a plain function for an instance
    method), so the DAG worker can bind it to its own instance.
    """
    module_name, attrs = _check_ref_format(ref, owner)
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # a user module may fail at import in any way; report it as one line
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        raise DAGValidationError(
            f"{owner} func {ref!r}: cannot import module {module_name!r} ({reason})"
        ) from exc
    for depth, attr in enumerate(attrs):
        if not hasattr(target, attr):
            parent = ":".join([module_name, ".".join(attrs[:depth])]) if depth else f"module {module_name}"
            raise DAGValidationError(f"{owner} func {ref!r}: {parent} has no attribute {attr!r}")
        target = getattr(target, attr)
    if not callable(target):
        raise DAGValidationError(
            f"{owner} func {ref!r} resolves to a {type(target).__name__}, which is not callable"
        )
    return target


def callable_ref(fn: Callable[..., Any], owner: str = "func") -> str:
    """The ``"module:qualname"`` string of an importable function, checked to resolve back to ``fn``."""
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module_name or not qualname or "<" in qualname:
        raise DAGValidationError(
            f"{owner} func {fn!r} is not importable by name (lambda or local function); "
            "define it at module level or pass 'module:function'"
        )
    ref = f"{module_name}:{qualname}"
    if resolve_callable(ref, owner) is not fn:
        raise DAGValidationError(
            f"{owner} func {ref!r} does not resolve back to {fn!r}; pass the string instead"
        )
    return ref


def _method_owner(ref: str, owner: str) -> tuple[type, str] | None:
    """``(Class, name)`` when ``ref`` names an instance method (a plain function found on a class)."""
    module_name, attrs = _check_ref_format(ref, owner)
    if len(attrs) < 2:
        return None
    parent: Any = importlib.import_module(module_name)
    for attr in attrs[:-1]:
        parent = getattr(parent, attr)
    if isinstance(parent, type) and inspect.isfunction(inspect.getattr_static(parent, attrs[-1], None)):
        return parent, attrs[-1]
    return None


#: One instance per class and process: the methods of one node class share their object (and its state).
_INSTANCES: dict[type, Any] = {}


def _instance_of(cls: type, ref: str, owner: str) -> Any:
    if cls not in _INSTANCES:
        try:
            inspect.signature(cls).bind()
        except (TypeError, ValueError) as exc:
            raise DAGValidationError(
                f"{owner} func {ref!r} is an instance method, but {cls.__name__}() needs arguments; "
                "give the class a no-argument constructor or make the method a staticmethod"
            ) from exc
        _INSTANCES[cls] = cls()
    return _INSTANCES[cls]


def resolve_node_callable(ref: str, owner: str = "func") -> NodeFunction:
    """Like ``resolve_callable``, but an instance method comes back bound to an instance of its class.

    The batch must be the node function's first argument, never ``self``; the instance is created once
    per process with no arguments and shared by every node pointing at a method of that class.
    """
    fn = resolve_callable(ref, owner)
    method = _method_owner(ref, owner)
    if method is None:
        return fn
    cls, name = method
    return getattr(_instance_of(cls, ref, owner), name)


class Node:
    """A unit of work in a TaskGraph.

    ``executable_ref`` is the ``"module:function"`` string (what YAML stores); ``executable`` imports it on
    first access (or is given directly: ``Node(..., executable=fn)`` derives the ref from ``fn``).
    ``config`` is the node's own section, handed to the function as ``node_config`` (a dataclass instance
    when its contract names one). ``contract`` adds reads / writes / roles declared in the pipeline.
    """

    def __init__(
        self,
        node_id: str,
        node_type: NodeType | str,
        node_role: NodeRole | str,
        executable_ref: str | None = None,
        dependencies: list[str] | None = None,
        only_forward_compute: bool = False,
        config: Mapping[str, Any] | None = None,
        executable: NodeFunction | None = None,
        contract: NodeContract | None = None,
    ) -> None:
        if not isinstance(node_id, str) or not node_id.strip():
            raise DAGValidationError(f"node_id must be a non-empty string, got {node_id!r}")
        owner = f"node {node_id!r}"
        self.node_id = node_id
        self.node_type = parse_enum(NodeType, node_type, f"{owner} node_type")
        self.node_role = parse_enum(NodeRole, node_role, f"{owner} node_role")
        if executable_ref is None:
            if executable is None:
                raise DAGValidationError(f"{owner} needs a func ('module:function') or an executable")
            executable_ref = callable_ref(executable, owner)
        _check_ref_format(executable_ref, owner)
        self.executable_ref = executable_ref
        dependencies = [] if dependencies is None else dependencies
        if not isinstance(dependencies, (list, tuple)) or not all(isinstance(d, str) for d in dependencies):
            raise DAGValidationError(f"{owner} dependencies must be a list of node ids, got {dependencies!r}")
        self.dependencies = list(dependencies)
        repeated = sorted({d for d in self.dependencies if self.dependencies.count(d) > 1})
        if repeated:
            raise DAGValidationError(f"{owner} lists dependency {repeated[0]!r} more than once")
        if not isinstance(only_forward_compute, bool):
            raise DAGValidationError(f"{owner} only_forward_compute must be true/false")
        self.only_forward_compute = only_forward_compute
        config = {} if config is None else config
        if not isinstance(config, Mapping):
            raise DAGValidationError(f"{owner} config must be a mapping, got {type(config).__name__}")
        self.config: dict[str, Any] = copy.deepcopy(dict(config))
        if contract is not None and not isinstance(contract, NodeContract):
            raise DAGValidationError(f"{owner} contract must be a NodeContract, got {contract!r}")
        self.contract = contract
        self._executable: NodeFunction | None = None

    @property
    def executable(self) -> NodeFunction:
        """The resolved function (imported once, then cached; instance methods come bound)."""
        if self._executable is None:
            self._executable = resolve_node_callable(self.executable_ref, f"node {self.node_id!r}")
        return self._executable

    def declared(self) -> DeclaredContract | None:
        """The contract declared on the node's function, if any."""
        return declared_contract(self.executable)

    def effective_contract(self, cfg: Any) -> NodeContract | None:
        """Function contract (resolved for ``cfg``) merged with the pipeline's; None when neither exists."""
        declared = self.declared()
        base = declared.resolve(cfg, node_agent(self.config)) if declared is not None else None
        if base is None:
            return self.contract
        return base.merged(self.contract)

    def node_config(self) -> Any:
        """The node's own section: an instance of the contract's config dataclass, else the plain dict."""
        declared = self.declared()
        config_cls = declared.config if declared is not None else None
        return node_config_instance(config_cls, self.config, f"node {self.node_id!r}")

    def copy(self, dependencies: list[str] | None = None) -> Node:
        """An independent copy (config deep-copied), optionally with a different dependency list."""
        deps = list(self.dependencies if dependencies is None else dependencies)
        return Node(
            node_id=self.node_id,
            node_type=self.node_type,
            node_role=self.node_role,
            executable_ref=self.executable_ref,
            dependencies=deps,
            only_forward_compute=self.only_forward_compute,
            config=self.config,
            contract=self.contract,
        )

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.node_id, self.node_type, self.node_role, self.executable_ref, self.dependencies,
            self.only_forward_compute, self.config, self.contract,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"Node(node_id={self.node_id!r}, node_type={self.node_type.name}, node_role={self.node_role.name}, "
            f"executable_ref={self.executable_ref!r}, dependencies={self.dependencies!r})"
        )
